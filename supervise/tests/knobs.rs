//! The fix's knobs in the flags of real programs: an argparse script and
//! Hugging Face's `HfArgumentParser(TrainingArguments)` (tests/programs/),
//! their `--help` read by `read_help`, and each turned command run for
//! real, its values as argparse read them printed by the program.

use diagnose::keys::Scalar;
use diagnose::knobs::{Knob, Turn};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use supervise::knobs::{self, Defined, Form, ReadFrom, Source};

fn program(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(name)
}

/// The venv's python; the HF program needs transformers (`just setup`).
fn python_with(module: &str) -> String {
    let py = testkit::python();
    let ok = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import {module}: run `just setup`",
        py.display()
    );
    py.display().to_string()
}

fn argv(py: &str, script: &str, args: &[&str]) -> Vec<String> {
    [py, &program(script).display().to_string()]
        .into_iter()
        .map(String::from)
        .chain(args.iter().map(|a| a.to_string()))
        .collect()
}

/// Runs `argv`; what the program read, as JSON.
fn read(argv: &[String]) -> serde_json::Value {
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn turn(knob: Knob, value: Scalar) -> Turn {
    Turn {
        knob,
        value,
        why: "test".into(),
    }
}

fn ladder() -> Vec<Turn> {
    vec![
        turn(Knob::Batch, Scalar::Int(32)),
        turn(Knob::Accumulation, Scalar::Int(2)),
        turn(Knob::Checkpointing, Scalar::Bool(true)),
        turn(Knob::CompileMode, Scalar::Str("default".into())),
        turn(Knob::Precision, Scalar::Str("bf16".into())),
    ]
}

/// Each flag's names, form and default (its help text wraps differently
/// at other widths).
fn entries(d: &Defined) -> Vec<(Vec<String>, Form, Option<String>)> {
    d.flags
        .iter()
        .map(|f| (f.names.clone(), f.form.clone(), f.default.clone()))
        .collect()
}

/// The help at 80 columns, as a terminal-less run prints it: wrapped.
fn wrapped_help(argv: &[String]) -> String {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn hugging_faces_training_arguments() {
    let py = python_with("transformers");
    let cmd = argv(
        &py,
        "hf_train.py",
        &[
            "--per_device_train_batch_size",
            "64",
            "--fp16",
            "--output_dir",
            "out",
        ],
    );
    let help = knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).expect("its help");
    let d = Defined::parse(&help);
    let bs = d.get("--per_device_train_batch_size").unwrap();
    assert_eq!(bs.names[1], "--per-device-train-batch-size");
    assert_eq!(bs.form, Form::Value { choices: vec![] });
    assert_eq!(bs.default.as_deref(), Some("8"));
    let gc = d.get("--gradient_checkpointing").unwrap();
    assert_eq!(gc.form, Form::OptionalBool);
    assert_eq!(d.get("--bf16").unwrap().form, Form::OptionalBool);
    assert_eq!(d.get("--bf16").unwrap().default.as_deref(), Some("False"));
    assert!(matches!(
        d.get("--torch_compile_mode").unwrap().form,
        Form::Value { .. }
    ));
    assert!(d.flags.len() > 100, "{} flags", d.flags.len());
    // The same entries from the help wrapped at 80 columns.
    assert_eq!(entries(&Defined::parse(&wrapped_help(&cmd))), entries(&d));

    let found = knobs::found(&d, &cmd, &[]);
    let places: Vec<_> = found.iter().map(|f| f.found.place.as_str()).collect();
    assert_eq!(
        places,
        [
            "--per_device_train_batch_size",
            "--gradient_accumulation_steps",
            "--gradient_checkpointing",
            "--torch_compile_mode",
            "--bf16/--fp16"
        ]
    );
    assert_eq!(found[0].found.value, Some(Scalar::Int(64)));
    assert_eq!(
        (found[1].found.value.clone(), found[1].source),
        (Some(Scalar::Int(1)), Source::Default)
    );
    assert_eq!(found[4].found.value, Some(Scalar::Str("fp16".into())));

    let fixed = knobs::turn(&cmd, &d, &ladder(), &[]).unwrap();
    let fixed =
        knobs::with_flag(&fixed, &d, "resume_from_checkpoint", "out/checkpoint-10").unwrap();
    let got = read(&fixed);
    let want = serde_json::json!({
        "per_device_train_batch_size": 32, "gradient_accumulation_steps": 2,
        "gradient_checkpointing": true, "torch_compile_mode": "default",
        "bf16": true, "fp16": false, "output_dir": "out",
        "resume_from_checkpoint": "out/checkpoint-10"
    });
    assert_eq!(got, want, "{fixed:?}");
    assert_eq!(
        knobs::value_of(&fixed, &["--output_dir", "--output-dir"]).as_deref(),
        Some("out")
    );
}

#[test]
fn an_argparse_script() {
    let py = python_with("json");
    let cmd = argv(
        &py,
        "argparse_train.py",
        &[
            "data.txt",
            "-b",
            "64",
            "--lr",
            "-0.5",
            "--mixed_precision=fp16",
        ],
    );
    let help = knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).expect("its help");
    let d = Defined::parse(&help);
    assert_eq!(entries(&Defined::parse(&wrapped_help(&cmd))), entries(&d));
    assert_eq!(d.get("-b").unwrap().default.as_deref(), Some("64"));
    assert_eq!(
        d.get("--compile").unwrap().form,
        Form::Switch {
            off: Some("--no-compile".into())
        }
    );
    assert_eq!(
        d.get("--compile_mode").unwrap().default.as_deref(),
        Some("max-autotune")
    );

    let found = knobs::found(&d, &cmd, &[]);
    let values: Vec<_> = found.iter().map(|f| f.found.value.clone()).collect();
    assert_eq!(
        values,
        [
            Some(Scalar::Int(64)),
            Some(Scalar::Int(1)),
            Some(Scalar::Bool(false)),
            Some(Scalar::Str("max-autotune".into())),
            Some(Scalar::Str("fp16".into())),
        ]
    );
    let fixed = knobs::turn(&cmd, &d, &ladder(), &[]).unwrap();
    let got = read(&fixed);
    assert_eq!(
        got,
        serde_json::json!({
            "data": "data.txt", "batch_size": 32, "grad_accum": 2,
            "gradient_checkpointing": true, "mixed_precision": "bf16",
            "compile": true, "compile_mode": "default", "output_dir": null, "lr": -0.5
        }),
        "{fixed:?}"
    );
    // Compile off through the user's name for a knob: BooleanOptionalAction's --no-compile.
    let user = [(Knob::Checkpointing, "compile".to_string())];
    let off = knobs::turn(
        &cmd,
        &d,
        &[turn(Knob::Checkpointing, Scalar::Bool(false))],
        &user,
    )
    .unwrap();
    assert_eq!(read(&off)["compile"], false, "{off:?}");
    // Never a flag it does not define.
    assert_eq!(
        knobs::with_flag(&cmd, &d, "resume_from_checkpoint", "x"),
        None
    );
}

/// An executable shell script in `dir` running `body`.
fn script(dir: &Path, name: &str, body: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    vec![path.display().to_string()]
}

#[test]
fn no_help_from_a_program_that_cannot_give_one() {
    let py = python_with("json");
    let dir = tempfile::tempdir().unwrap();
    let none = |argv: &[String]| knobs::read_help(argv, None, knobs::HELP_TIMEOUT);
    assert_eq!(none(&["/nonexistent/python".into()]), None);
    let fails = vec![py.clone(), "-c".into(), "import no_such_module_here".into()];
    assert_eq!(none(&fails), None);
    assert_eq!(
        none(&script(dir.path(), "plain", "echo no options here")),
        None
    );
    // Past the timeout: killed with what it started, not waited for.
    let t = Instant::now();
    let slow = script(
        dir.path(),
        "slow",
        "sleep 60 & echo 'options:'; echo '  --bs BS'; sleep 60",
    );
    assert_eq!(
        knobs::read_help(&slow, None, Duration::from_millis(500)),
        None
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // Help on stderr, in the working directory given, `--help` first.
    std::fs::write(dir.path().join("help.txt"), "options:\n  --bs BS\n").unwrap();
    let mut cmd = script(dir.path(), "err", "[ \"$1\" = --help ] && cat help.txt >&2");
    cmd.push("--bs=3".into());
    let help = knobs::read_help(&cmd, Some(dir.path()), knobs::HELP_TIMEOUT).unwrap();
    assert_eq!(Defined::parse(&help).flags[0].names, ["--bs"]);
}

#[test]
fn argparse_itself_gives_the_flags_its_help_shows() {
    let py = python_with("transformers");
    let cmd = argv(&py, "hf_train.py", &["--per_device_train_batch_size", "64"]);
    let help = Defined::parse(&knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).unwrap());
    let read = knobs::read_flags(&cmd, None, knobs::HELP_TIMEOUT).expect("its flags");
    assert_eq!(read.from, ReadFrom::Argparse);
    assert_eq!(entries(&read.defined), entries(&help));
    let cmd = argv(&py, "argparse_train.py", &["data.txt"]);
    let help = Defined::parse(&knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).unwrap());
    let read = knobs::read_flags(&cmd, None, knobs::HELP_TIMEOUT).unwrap();
    assert_eq!(read.from, ReadFrom::Argparse);
    for f in &help.flags {
        let a = read.defined.get(f.name()).unwrap();
        assert_eq!((&a.names, &a.form), (&f.names, &f.form), "{}", f.name());
        if f.default.is_some() {
            assert_eq!(a.default, f.default, "{}", f.name());
        }
    }
    // A default its help does not print (no help string): argparse's.
    assert_eq!(help.get("--lr").unwrap().default, None);
    assert_eq!(
        read.defined.get("--lr").unwrap().default.as_deref(),
        Some("None")
    );
}

/// The plain script's knobs as `read_flags` reads them from `argv` in `cwd`:
/// where from, and each knob's place, value and source.
fn plain_knobs(argv: &[String], cwd: &Path) -> (ReadFrom, Vec<(String, Option<Scalar>, Source)>) {
    let read = knobs::read_flags(argv, Some(cwd), knobs::HELP_TIMEOUT).expect("its flags");
    let found = knobs::found(&read.defined, argv, &[])
        .into_iter()
        .map(|f| (f.found.place, f.found.value, f.source))
        .collect();
    (read.from, found)
}

#[test]
fn a_plain_script_without_help_strings_has_its_defaults_known() {
    let py = python_with("json");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = std::fs::read_to_string(program("plain_train.py")).unwrap();
    std::fs::create_dir(d.join("pkg")).unwrap();
    std::fs::write(d.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(d.join("pkg/train.py"), &text).unwrap();
    let want = vec![
        (
            "--batch-size".to_string(),
            Some(Scalar::Int(8)),
            Source::Command,
        ),
        (
            "--grad-accum".to_string(),
            Some(Scalar::Int(1)),
            Source::Default,
        ),
        (
            "--checkpointing".to_string(),
            Some(Scalar::Bool(false)),
            Source::Default,
        ),
    ];
    // Its --help shows no default: the accumulation is not known there.
    let cmd = argv(&py, "plain_train.py", &["--batch-size", "8"]);
    let help = Defined::parse(&knobs::read_help(&cmd, None, knobs::HELP_TIMEOUT).unwrap());
    assert_eq!(help.get("--grad-accum").unwrap().default, None);
    // A script, `-m MODULE`, and an executable file whose #! names python.
    let module: Vec<String> = [py.as_str(), "-m", "pkg.train", "--batch-size", "8"]
        .map(String::from)
        .to_vec();
    assert_eq!(plain_knobs(&cmd, d), (ReadFrom::Argparse, want.clone()));
    assert_eq!(plain_knobs(&module, d), (ReadFrom::Argparse, want.clone()));
    use std::os::unix::fs::PermissionsExt;
    let entry = d.join("bin/plain-train");
    std::fs::create_dir(d.join("bin")).unwrap();
    std::fs::write(
        &entry,
        format!("#!{py}\nimport sys\nsys.path.insert(0, {:?})\nfrom pkg.train import main\nif __name__ == '__main__':\n    sys.exit(main())\n", d.display().to_string()),
    )
    .unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    let console: Vec<String> = ["bin/plain-train", "--batch-size", "8"]
        .map(String::from)
        .to_vec();
    // Its own file has no torch.utils.checkpoint: the bare switch is not
    // taken as checkpointing there.
    let (from, found) = plain_knobs(&console, d);
    assert_eq!((from, found), (ReadFrom::Argparse, want[..2].to_vec()));
    // The turned command runs as argparse reads it.
    let flags = knobs::read_flags(&cmd, None, knobs::HELP_TIMEOUT).unwrap();
    let fixed = knobs::turn(&cmd, &flags.defined, &ladder()[..3], &[]).unwrap();
    assert_eq!(
        read(&fixed),
        serde_json::json!({"batch_size": 32, "grad_accum": 2, "checkpointing": true}),
        "{fixed:?}"
    );
}

#[test]
fn a_bare_checkpointing_switch_is_the_knob_only_about_gradients() {
    let py = python_with("json");
    let dir = tempfile::tempdir().unwrap();
    let knob = |help: &str, code: &str| {
        let body = format!(
            "import argparse\n{code}\np = argparse.ArgumentParser()\np.add_argument('--grad_ckpt', action='store_true'{help})\np.add_argument('--checkpointing', action='store_true')\np.add_argument('--resume', default='')\np.parse_args()\n"
        );
        std::fs::write(dir.path().join("t.py"), body).unwrap();
        let cmd = vec![py.clone(), "t.py".into()];
        let read = knobs::read_flags(&cmd, Some(dir.path()), knobs::HELP_TIMEOUT).unwrap();
        knobs::found(&read.defined, &cmd, &[])
            .into_iter()
            .find(|f| f.found.knob == Knob::Checkpointing)
            .map(|f| f.found.place)
    };
    // Saving checkpoints, not recomputing activations.
    assert_eq!(knob("", "import torch"), None);
    assert_eq!(knob(", help='save a checkpoint each epoch'", ""), None);
    // Its help speaks of activations or memory; or the code checkpoints.
    assert_eq!(
        knob(", help='recompute activations to save memory'", "").as_deref(),
        Some("--grad_ckpt")
    );
    assert_eq!(
        knob("", "from torch.utils import checkpoint").as_deref(),
        Some("--checkpointing")
    );
}

#[test]
fn a_program_that_never_parses_with_argparse_is_read_from_its_help() {
    let py = python_with("json");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("own.py"),
        "import sys\nif '--help' in sys.argv:\n    print('usage: own.py [--bs BS]\\n\\noptions:\\n  --bs BS  examples per step (default: 4)')\n    sys.exit(0)\n",
    )
    .unwrap();
    let cmd = vec![py.clone(), "own.py".into(), "--bs".into(), "2".into()];
    let read = knobs::read_flags(&cmd, Some(dir.path()), knobs::HELP_TIMEOUT).unwrap();
    match &read.from {
        ReadFrom::Help(why) => assert!(why.contains("never called argparse"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        read.defined.get("--bs").unwrap().default.as_deref(),
        Some("4")
    );
    assert!(
        read.from.words().starts_with("--help: "),
        "{}",
        read.from.words()
    );
    // A program past the timeout before it parses: killed, nothing read.
    std::fs::write(dir.path().join("slow.py"), "import time\ntime.sleep(60)\n").unwrap();
    let t = Instant::now();
    let slow = vec![py, "slow.py".into()];
    assert_eq!(
        knobs::read_flags(&slow, Some(dir.path()), Duration::from_millis(500)),
        None
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

/// timm's train.py reads `--config` with a parser of its own first
/// (`add_help=False`, `parse_known_args`), then its main parser parses what
/// is left: both parsers' options are read.
#[test]
fn a_config_pre_parser_and_then_the_main_one() {
    let py = python_with("json");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("timm_like.py"),
        "import argparse, json\n\
config_parser = argparse.ArgumentParser(add_help=False)\n\
config_parser.add_argument('-c', '--config', default='')\n\
parser = argparse.ArgumentParser()\n\
parser.add_argument('-b', '--batch-size', type=int, default=128)\n\
parser.add_argument('--grad-accum-steps', type=int, default=1)\n\
parser.add_argument('-c', '--config', default='')\n\
args_config, remaining = config_parser.parse_known_args()\n\
print(json.dumps(vars(parser.parse_args(remaining))))\n",
    )
    .unwrap();
    let cmd: Vec<String> = [py.as_str(), "timm_like.py", "-c", "a.yaml", "-b", "64"]
        .map(String::from)
        .to_vec();
    let (from, found) = plain_knobs(&cmd, dir.path());
    assert_eq!(from, ReadFrom::Argparse);
    assert_eq!(
        found,
        [
            ("-b".to_string(), Some(Scalar::Int(64)), Source::Command),
            (
                "--grad-accum-steps".to_string(),
                Some(Scalar::Int(1)),
                Source::Default
            ),
        ]
    );
    let read = knobs::read_flags(&cmd, Some(dir.path()), knobs::HELP_TIMEOUT).unwrap();
    let config = "--config".to_string();
    let configs = read
        .defined
        .flags
        .iter()
        .filter(|f| f.names.contains(&config));
    assert_eq!(configs.count(), 1);
}
