//! `train run --auto-fix` on real programs: the repo's Hugging Face Trainer
//! script (examples/hf_trainer/train.py) running out of memory for real
//! under its address-space budget, by its flags and by a TrainingArguments
//! YAML; a project's own nested YAML with its knobs named by --knob; the
//! CUDA-graph class from its recorded message (a CPU cannot produce it);
//! a program with no knob, where no fix is possible; and plain argparse
//! scripts (tests/programs/): one whose accumulation is left at its default
//! and whose `--checkpointing` switch has no help, one whose model alone
//! does not fit (the same allocation at every batch: the halving stops),
//! and one whose optimizer state fails at the same size until the batch
//! is small enough.

use std::path::Path;
use testkit::{ucmd, write, CmdResult};

use testkit::python_arg as py;

fn hf_script() -> String {
    testkit::repo_path("examples/hf_trainer/train.py")
        .display()
        .to_string()
}

fn summary(dir: &Path) -> serde_yaml::Value {
    testkit::yaml(&std::fs::read(dir.join("summary.yaml")).unwrap())
}

fn train_run(cwd: &Path, args: &[&str]) -> CmdResult {
    ucmd("train").arg("run").args(args).current_dir(cwd).run()
}

/// `train run --auto-fix --quiet --out r -- COMMAND` in `cwd`.
fn auto_fix(cwd: &Path, command: &[&str]) -> CmdResult {
    let mut args = vec!["--auto-fix", "--quiet", "--out", "r", "--"];
    args.extend_from_slice(command);
    train_run(cwd, &args)
}

/// The Trainer's flags that keep a run short and on the CPU.
const HF_FLAGS: [&str; 10] = [
    "--num_train_epochs",
    "2",
    "--disable_tqdm",
    "true",
    "--report_to",
    "none",
    "--save_strategy",
    "no",
    "--use_cpu",
    "true",
];

/// An address-space budget (`--memory_budget_mib`) that holds a batch of
/// 32 x 2 with gradient checkpointing and not one of 64 with or without
/// it, measured here (testkit::budget), or None when the test is skipped.
fn hf_budget(d: &Path) -> Option<String> {
    let size = |extra: &[&str]| {
        let mut v = vec![py(), hf_script(), "--output_dir".into(), "probe".into()];
        v.extend(
            HF_FLAGS
                .iter()
                .chain(["--memory_budget_mib", "1"].iter())
                .map(|w| w.to_string()),
        );
        v.extend(extra.iter().map(|w| w.to_string()));
        v
    };
    let gc = ["--gradient_checkpointing", "true"];
    let b64 = ["--per_device_train_batch_size", "64"];
    let fit = [size(
        &[
            &gc[..],
            &[
                "--per_device_train_batch_size",
                "32",
                "--gradient_accumulation_steps",
                "2",
            ],
        ]
        .concat(),
    )];
    let fail = [size(&b64), size(&[&b64[..], &gc].concat())];
    testkit::budget::budget_or_skip(d, &fit, &fail)
}

fn final_loss(s: &serde_yaml::Value) -> f64 {
    assert_eq!(s["last"]["metric"], "final_loss", "{s:?}");
    s["last"]["value"].as_f64().unwrap()
}

/// Each leg's class (or `-`) and its changes.
fn legs(s: &serde_yaml::Value) -> Vec<(String, Vec<String>)> {
    s["legs"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|l| {
            let changed = l["changed"]
                .as_sequence()
                .map(|c| c.iter().map(|w| w.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            (l["class"].as_str().unwrap_or("-").to_string(), changed)
        })
        .collect()
}

#[test]
fn a_trainer_run_out_of_memory_ends_at_a_smaller_batch_with_the_same_effective_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (py, script) = (py(), hf_script());
    let Some(budget) = hf_budget(d) else { return };
    let mut args = vec![
        "--auto-fix",
        "--quiet",
        "--out",
        "r",
        "--metric",
        "final_loss",
        "--",
        &py,
        &script,
        "--output_dir",
        "o",
        "--per_device_train_batch_size",
        "64",
    ];
    args.extend(HF_FLAGS);
    args.extend(["--memory_budget_mib", &budget]);
    let r = train_run(d, &args);
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    let got = legs(&s);
    let classes: Vec<&str> = got.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(classes, ["out-of-memory", "out-of-memory", "-"], "{err}");
    assert!(got[1].1[0].contains("checkpointing"), "{got:?}");
    let last = got[2].1.join(" | ");
    assert!(
        last.contains("--per_device_train_batch_size: 64 -> 32")
            && last.contains("--gradient_accumulation_steps: not given (default 1) -> 2")
            && last.contains("stays 64"),
        "{last}"
    );
    assert!(s["legs"][0]["evidence"]
        .as_str()
        .unwrap()
        .contains("can't allocate memory"));
    assert_eq!(s["auto_fix"]["attempts"].as_u64(), Some(3));
    assert!(s["auto_fix"]["knobs"]["batch"]
        .as_str()
        .unwrap()
        .starts_with("32 "));
    assert!(
        err.contains("leg 3 tries again with the fix applied"),
        "{err}"
    );
    // The same run started at that batch and accumulation, unsupervised.
    let mut reference = vec![
        script.as_str(),
        "--output_dir",
        "o2",
        "--per_device_train_batch_size",
        "32",
        "--gradient_accumulation_steps",
        "2",
    ];
    reference.extend(HF_FLAGS);
    reference.extend(["--memory_budget_mib", &budget]);
    let out = std::process::Command::new(&py)
        .args(&reference)
        .current_dir(d)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("final_loss")).unwrap();
    let want = testkit::json(line.as_bytes())["final_loss"]
        .as_f64()
        .unwrap();
    assert!(
        (final_loss(&s) - want).abs() < 1e-6,
        "{} vs {want}",
        final_loss(&s)
    );
}

#[test]
fn a_trainer_yaml_is_fixed_in_a_copy_and_the_users_file_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let Some(budget) = hf_budget(d) else { return };
    let original = format!("# my run\noutput_dir: o\nper_device_train_batch_size: 64\nnum_train_epochs: 2\ndisable_tqdm: true\nreport_to: none\nsave_strategy: 'no'\nuse_cpu: true\nmemory_budget_mib: {budget}\n");
    write(d, "args.yaml", &original);
    let (py, script) = (py(), hf_script());
    let r = train_run(
        d,
        &[
            "--auto-fix",
            "--quiet",
            "--out",
            "r",
            "--metric",
            "final_loss",
            "--config",
            "args.yaml",
            "--",
            &py,
            &script,
            "{config}",
        ],
    );
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    let n = s["legs"].as_sequence().unwrap().len();
    let last = &s["legs"][n - 1];
    assert_eq!(last["status"], "finished", "{err}");
    let config = last["config"].as_str().unwrap();
    assert_eq!(config, format!("r/config-{n}.yaml"));
    let text = std::fs::read_to_string(d.join(config)).unwrap();
    let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(
        y["per_device_train_batch_size"].as_i64(),
        Some(32),
        "{text}"
    );
    assert_eq!(y["gradient_accumulation_steps"].as_i64(), Some(2), "{text}");
    assert!(text.starts_with("# my run\n"), "{text}");
    assert_eq!(
        std::fs::read_to_string(d.join("args.yaml")).unwrap(),
        original
    );
    assert!(
        legs(&s)[n - 1].1.iter().any(|c| c
            .starts_with("args.yaml: per_device_train_batch_size: 64 -> 32")
            || c.contains("per_device_train_batch_size: 64 -> 32")),
        "{:?}",
        legs(&s)
    );
}

/// A torch program reading a project's own nested YAML (`--config`), whose
/// batch is `training.bsz` and accumulation `training.accum`: a batch's
/// activations of 64 MiB per example (mapped, never touched: they cost no
/// memory), under an address space of what it maps plus 768 MiB. Batch 8
/// fits with 256 MiB to spare and 16 fails by 256: no machine's noise
/// decides it.
const NESTED: &str = "import resource, sys, torch, yaml\n\
c = yaml.safe_load(open(sys.argv[sys.argv.index('--config') + 1]))['training']\n\
pages = int(open('/proc/self/statm').read().split()[0])\n\
limit = pages * resource.getpagesize() + (768 << 20)\n\
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n\
for _ in range(c['accum']):\n    torch.empty(c['bsz'], 16 << 20)\n\
print('valid loss', 1.0 / (c['bsz'] * c['accum']), flush=True)\n";

#[test]
fn a_projects_own_yaml_is_turned_by_the_names_given() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "nested.py", NESTED);
    let original = "training:\n  bsz: 64  # per step\n  accum: 1\n  lr: 0.1\n";
    write(d, "cfg.yaml", original);
    let py = py();
    let base = [
        "--quiet",
        "--out",
        "r",
        "--metric",
        "loss",
        "--metric-regex",
        r"valid loss\s+([0-9.e-]+)",
        "--config",
        "cfg.yaml",
    ];
    let tail = ["--", py.as_str(), "nested.py", "--config", "{config}"];
    // Without the names, no knob is found: nothing is guessed.
    let mut args: Vec<&str> = vec!["--auto-fix"];
    args.extend(base);
    args.extend(tail);
    let r = train_run(d, &args);
    assert_eq!(r.code(), Some(1), "{}", r.stderr_str());
    let s = summary(&d.join("r"));
    assert_eq!(s["legs"].as_sequence().unwrap().len(), 1);
    let why = format!("{:?}", s["auto_fix"]["not_possible"]);
    assert!(why.contains("--knob batch=NAME"), "{why}");
    assert_eq!(s["auto_fix"]["stopped"], "no fix left to try");
    std::fs::remove_dir_all(d.join("r")).unwrap();
    // With them: 64 -> 32 -> 16 -> 8, accumulation 1 -> 8.
    let mut args: Vec<&str> = vec![
        "--auto-fix",
        "--knob",
        "batch=bsz",
        "--knob",
        "accumulation=training.accum",
    ];
    args.extend(base);
    args.extend(tail);
    let r = train_run(d, &args);
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    assert_eq!(s["legs"].as_sequence().unwrap().len(), 4, "{err}");
    let text = std::fs::read_to_string(d.join("r/config-4.yaml")).unwrap();
    assert_eq!(
        text,
        "training:\n  bsz: 8  # per step\n  accum: 8\n  lr: 0.1\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("cfg.yaml")).unwrap(),
        original
    );
    assert_eq!(s["best"]["value"].as_f64(), Some(1.0 / 64.0));
}

/// A program with a torch.compile mode flag that fails as CUDA graphs
/// replayed over moved tensors do (their recorded message) unless its
/// mode records none.
const GRAPHS: &str = "import argparse, sys\n\
p = argparse.ArgumentParser()\n\
p.add_argument('--torch_compile_mode', default='reduce-overhead')\n\
p.add_argument('--gradient_checkpointing', action='store_true')\n\
a = p.parse_args()\n\
if a.torch_compile_mode in ('reduce-overhead', 'max-autotune'):\n    \
print('RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run.', file=sys.stderr)\n    \
sys.exit(1)\n\
print('valid loss 0.5 checkpointing', a.gradient_checkpointing)\n";

#[test]
fn cuda_graphs_get_compile_mode_default_and_keep_checkpointing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "graphs.py", GRAPHS);
    let r = auto_fix(d, &["python3", "graphs.py", "--gradient_checkpointing"]);
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    let got = legs(&s);
    assert_eq!(got[0].0, "cuda-graph-pointer");
    assert!(
        got[1].1[0]
            .starts_with("--torch_compile_mode: not given (default reduce-overhead) -> default"),
        "{got:?}"
    );
    let cmd: Vec<&str> = s["legs"][1]["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        cmd,
        [
            "python3",
            "graphs.py",
            "--gradient_checkpointing",
            "--torch_compile_mode",
            "default"
        ]
    );
    let log = std::fs::read_to_string(d.join("r/output.log")).unwrap();
    assert!(log.contains("checkpointing True"), "{log}");
}

#[test]
fn no_knob_no_fix_and_the_summary_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "oom.py",
        "import argparse, sys\nargparse.ArgumentParser().parse_args()\nprint(\"RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes.\", file=sys.stderr)\nsys.exit(1)\n",
    );
    let r = auto_fix(d, &["python3", "oom.py"]);
    assert_eq!(r.code(), Some(1));
    let err = r.stderr_str();
    assert!(
        err.contains("train run: not possible: gradient checkpointing"),
        "{err}"
    );
    let s = summary(&d.join("r"));
    assert_eq!(s["auto_fix"]["attempts"].as_u64(), Some(1));
    assert_eq!(s["auto_fix"]["stopped"], "no fix left to try");
    let why = format!("{:?}", s["auto_fix"]["not_possible"]);
    assert!(why.contains("a smaller batch"), "{why}");
    // --max-attempts 1: the first attempt only, said so.
    std::fs::remove_dir_all(d.join("r")).unwrap();
    let r = train_run(
        d,
        &[
            "--auto-fix",
            "--max-attempts",
            "1",
            "--quiet",
            "--out",
            "r",
            "--",
            "python3",
            "oom.py",
        ],
    );
    assert_eq!(r.code(), Some(1));
    assert_eq!(
        summary(&d.join("r"))["auto_fix"]["stopped"],
        "--max-attempts 1 reached"
    );
    // Said on the terminal too, as its last word before the summary's place.
    let err = r.stderr_str();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[lines.len() - 2],
        "train run: stopped: --max-attempts 1 reached",
        "{err}"
    );
    // --knob without --auto-fix is bad usage.
    let r = train_run(d, &["--knob", "batch=bsz", "--", "true"]);
    assert_eq!(r.code(), Some(2));
}

fn program(name: &str) -> String {
    testkit::repo_path("tools/train/tests/programs")
        .join(name)
        .display()
        .to_string()
}

fn stderr_lines(r: &CmdResult) -> Vec<String> {
    r.stderr_str().lines().map(String::from).collect()
}

#[test]
fn a_plain_argparse_script_gets_checkpointing_then_a_smaller_batch_from_its_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (py, script) = (py(), program("argparse_mlp.py"));
    let size = |extra: &[&str]| {
        let mut v = [&py, &script, "--memory-budget-mib", "1"]
            .map(String::from)
            .to_vec();
        v.extend(extra.iter().map(|w| w.to_string()));
        v
    };
    let fit = [size(&[
        "--batch-size",
        "32",
        "--grad-accum",
        "2",
        "--checkpointing",
    ])];
    let fail = [
        size(&["--batch-size", "64"]),
        size(&["--batch-size", "64", "--checkpointing"]),
    ];
    let Some(budget) = testkit::budget::budget_or_skip(d, &fit, &fail) else {
        return;
    };
    let r = train_run(
        d,
        &[
            "--auto-fix",
            "--quiet",
            "--out",
            "r",
            "--metric",
            "final_loss",
            "--",
            &py,
            &script,
            "--batch-size",
            "64",
            "--memory-budget-mib",
            &budget,
        ],
    );
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    let got = legs(&s);
    let classes: Vec<&str> = got.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(classes, ["out-of-memory", "out-of-memory", "-"], "{err}");
    // Its bare switch, no help, in a script that imports torch.utils.checkpoint.
    assert!(
        got[1].1[0].starts_with("--checkpointing: not given -> on (out of memory"),
        "{got:?}"
    );
    // --grad-accum is not on the command line, and its --help prints no
    // default: argparse's own default, 1.
    let last = got[2].1.join(" | ");
    assert!(
        last.contains("--batch-size: 64 -> 32")
            && last.contains("--grad-accum: not given (default 1) -> 2"),
        "{last}"
    );
    let from = s["auto_fix"]["flags_from"].as_str().unwrap();
    assert!(from.starts_with("argparse: "), "{from}");
    // Every leg's output under its marker, the first's too.
    let log = std::fs::read_to_string(d.join("r/output.log")).unwrap();
    assert!(log.starts_with("==> train run: leg 1: "), "{log}");
    assert!(log.contains("\n\n==> train run: leg 3: "), "{log}");
    // The run that finished is the one asked for, at 32 x 2.
    let out = std::process::Command::new(&py)
        .args([
            &script,
            "--batch-size",
            "32",
            "--grad-accum",
            "2",
            "--checkpointing",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("final_loss")).unwrap();
    let want = testkit::json(line.as_bytes())["final_loss"]
        .as_f64()
        .unwrap();
    assert!(
        (final_loss(&s) - want).abs() < 1e-6,
        "{} vs {want}",
        final_loss(&s)
    );
}

#[test]
fn a_model_that_does_not_fit_stops_the_halving_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (py, script) = (py(), program("argparse_mlp.py"));
    // 40 MiB past the start: its 64 MiB weight never fits.
    let r = auto_fix(
        d,
        &[
            &py,
            &script,
            "--batch-size",
            "64",
            "--memory-budget-mib",
            "40",
        ],
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr_str());
    let s = summary(&d.join("r"));
    let legs = s["legs"].as_sequence().unwrap();
    assert_eq!(legs.len(), 3, "{s:?}");
    for l in legs {
        let e = l["evidence"].as_str().unwrap();
        assert!(e.contains("you tried to allocate 67108864 bytes"), "{e}");
        assert_eq!(l["reports"].as_u64(), Some(0));
    }
    let want = "the same 64 MiB allocation failed at batch 64 and 32 (before any step): the batch is not what runs out";
    let stopped = s["auto_fix"]["stopped"].as_str().unwrap();
    assert!(stopped.starts_with(want), "{stopped}");
    let lines = stderr_lines(&r);
    let n = lines.len();
    assert!(
        lines[n - 2].starts_with(&format!("train run: stopped: {want}")),
        "{lines:#?}"
    );
    assert!(
        lines[n - 1].starts_with("train run: summary in "),
        "{lines:#?}"
    );
    // Not said over the stop: a failed run's missing metric.
    assert!(!r.stderr_str().contains("has no best"), "{lines:#?}");
}

#[test]
fn the_same_allocation_after_steps_keeps_halving_until_it_fits() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (py, script) = (py(), program("optimizer_state.py"));
    let size = |b: &str, k: &str| {
        [
            &py,
            &script,
            "--batch-size",
            b,
            "--grad-accum",
            k,
            "--memory-budget-mib",
            "1",
        ]
        .map(String::from)
        .to_vec()
    };
    let fit = [size("16", "4")];
    let fail = [size("64", "1"), size("32", "2")];
    let Some(budget) = testkit::budget::budget_or_skip(d, &fit, &fail) else {
        return;
    };
    let r = auto_fix(
        d,
        &[
            &py,
            &script,
            "--batch-size",
            "64",
            "--memory-budget-mib",
            &budget,
        ],
    );
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    let got = legs(&s);
    let classes: Vec<&str> = got.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(classes, ["out-of-memory", "out-of-memory", "-"], "{err}");
    // The same 64 MiB moment at 64 and at 32 x 2, each after a step line.
    for l in &s["legs"].as_sequence().unwrap()[..2] {
        let e = l["evidence"].as_str().unwrap();
        assert!(e.contains("you tried to allocate 67108864 bytes"), "{e}");
        assert!(l["reports"].as_u64().unwrap() >= 1, "{l:?}");
    }
    assert!(got[1].1[0].starts_with("--batch-size: 64 -> 32"), "{got:?}");
    assert!(got[2].1[0].starts_with("--batch-size: 32 -> 16"), "{got:?}");
    assert!(s["auto_fix"]["stopped"].is_null(), "{s:?}");
}
