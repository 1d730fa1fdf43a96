//! The GPU recipe's device script, run here in its CPU-fallback mode against
//! the debug binaries, so the recipe is exercised on every test run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use testkit::bin;

/// bench/gpu/run.sh with these arguments, against the debug binaries and the
/// python3 whose torch the build used.
fn run_sh(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let bin_dir = bin("train").parent().unwrap().to_path_buf();
    let python = std::env::var("VIRTUAL_ENV")
        .map(|v| Path::new(&v).join("bin/python3"))
        .unwrap_or_else(|_| PathBuf::from("python3"));
    Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gpu/run.sh"))
        .args(args)
        .env("BIN", &bin_dir)
        .env("PYTHON", &python)
        .envs(envs.iter().copied())
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap()
}

/// steps.csv's rows as (step, status, note), the `machine` row left out.
fn steps(dir: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("steps.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("step,status,seconds,cap,note"), "{text}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, ',').collect();
            (f[0].into(), f[1].into(), f[4].trim_matches('"').into())
        })
        .filter(|r| r.0 != "machine")
        .collect()
}

fn status_of<'a>(
    steps: &'a [(String, String, String)],
    name: &str,
) -> &'a (String, String, String) {
    steps
        .iter()
        .find(|r| r.0 == name)
        .unwrap_or_else(|| panic!("no step {name} in {steps:?}"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn device_script_runs_end_to_end_in_cpu_fallback_mode() {
    let dir = tempfile::tempdir().unwrap();
    let tarball = tempfile::NamedTempFile::new().unwrap();
    let out = run_sh(
        &[
            "--tar",
            tarball.path().to_str().unwrap(),
            dir.path().to_str().unwrap(),
        ],
        &[("QUICK", "1")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let steps = steps(dir.path());
    let status = |name: &str| status_of(&steps, name).1.clone();
    // The basics, the preload check (on the CPU here) and, with the source
    // build's train-model and its torch, our trainer's CPU steps.
    for ok in [
        "memdiag",
        "memdiag-oneshot",
        "cfgcheck-seeds",
        "preload-device",
        "train-info",
        "verify-fixes",
        "train-demo",
        "train-vs-pytorch-cpu",
        "trial-overhead",
    ] {
        assert_eq!(status(ok), "ok", "{ok}: {steps:?}");
    }
    let gpu = std::fs::read_to_string(dir.path().join("train-info.out"))
        .unwrap()
        .contains("cuda_available: true");
    let expected = if gpu { "ok" } else { "skipped" };
    for name in [
        "gpu-peak",
        "hf-oom",
        "cudagraph",
        "sweep-pack",
        "estimate-matrix",
        "oom-recovery",
        "train-vs-pytorch-gpu-off",
        "train-vs-pytorch-gpu-fp16",
        "train-vs-pytorch-gpu-bf16",
    ] {
        assert_eq!(status(name), expected, "{name}: {steps:?}");
    }
    // The study of seed 001's crash and the memory model's sweeps run
    // only when asked for.
    assert!(
        steps
            .iter()
            .all(|r| r.0 != "cudagraph-variants" && r.0 != "sweep-model"),
        "{steps:?}"
    );
    if !gpu {
        assert!(
            status_of(&steps, "hf-oom").2.contains("no CUDA device"),
            "{steps:?}"
        );
        // The matrix's configs and the estimate lines its fit reads.
        assert_eq!(status("estimate-matrix-check"), "ok", "{steps:?}");
        // Checkpointing's trade-off in host memory, train and PyTorch.
        assert_eq!(status("checkpointing-memory-cpu"), "ok", "{steps:?}");
        assert!(dir.path().join("checkpointing_memory.md").exists());
    }
    // The machine row names what ran it.
    let csv = std::fs::read_to_string(dir.path().join("steps.csv")).unwrap();
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("machine,info,0,0,\"GPU: "),
        "{csv}"
    );
    assert!(csv.contains("C compiler: "), "{csv}");
    // Its outputs are the real files: a report, a run, the benchmark tables.
    assert!(dir.path().join("demo-run/summary.yaml").exists());
    // The tarball holds them, less the checkpoints.
    assert!(dir.path().join("demo-run/checkpoint.safetensors").exists());
    let listing = Command::new("tar")
        .arg("tzf")
        .arg(tarball.path())
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("/demo-run/summary.yaml"), "{listing}");
    assert!(!listing.contains(".safetensors"), "{listing}");
    assert!(dir.path().join("train_vs_pytorch.md").exists());
    assert!(dir.path().join("trial_overhead.md").exists());
    assert!(dir.path().join("preload_cuda.json").exists());
    assert!(
        std::fs::read_to_string(dir.path().join("cfgcheck-seeds.out"))
            .unwrap()
            .contains("cuda-graphs-checkpointing")
    );
}

/// A lent GPU machine runs the recipe within a fixed time and returns few
/// files: --only picks steps, a step past its limit is recorded as timed
/// out (the run goes on), a spent budget skips what is left, --again runs
/// what a previous run did not finish, and --tar packs the results into
/// one file.
#[test]
fn parts_time_limits_again_and_one_tarball() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r");
    let tarball = dir.path().join("r.tar.gz");
    // The full demo trains for most of a minute: one second stops it.
    let out = run_sh(
        &[
            "--only",
            "memdiag,train-demo",
            "--tar",
            tarball.to_str().unwrap(),
            results.to_str().unwrap(),
        ],
        &[("STEP_TIMEOUT", "1")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = steps(&results);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["memdiag", "train-demo"], "{rows:?}");
    assert_eq!(rows[0].1, "ok", "{rows:?}");
    assert_eq!(rows[1].1, "timed out", "{rows:?}");
    assert!(rows[1].2.contains("stopped after 1s"), "{rows:?}");
    let listing = Command::new("tar")
        .arg("tzf")
        .arg(&tarball)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    for file in ["r/steps.csv", "r/memdiag.out", "r/machine.txt"] {
        assert!(
            listing.lines().any(|l| l == file),
            "{file} not in {listing}"
        );
    }

    // --again: only what the last run did not finish (the timed-out demo).
    let again = dir.path().join("again");
    let out = run_sh(
        &[
            "--again",
            results.join("steps.csv").to_str().unwrap(),
            again.to_str().unwrap(),
        ],
        &[("STEP_TIMEOUT", "1")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = steps(&again);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].0.as_str(), rows[0].1.as_str()),
        ("train-demo", "timed out")
    );

    // A budget too small for anything: every chosen step says so.
    let results = dir.path().join("b");
    let out = run_sh(
        &[
            "--only",
            "basics",
            "--budget",
            "25",
            results.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = steps(&results);
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r.1 == "skipped" && r.2.contains("budget of 25s spent")),
        "{rows:?}"
    );

    // Bad arguments and injected faults: exit 2 with the reason.
    let out = run_sh(&["--only", "nonsense"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown part 'nonsense'"));
    let out = run_sh(&["--budget", "soon"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_sh(&["--only", "memdiag"], &[("TRAINGUARD_FAULT", "oom@1:1")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("measures real failures, never injected ones"),
        "{}",
        stderr(&out)
    );
}

/// A python that reports a torch of VERSION to run.sh's probe (and runs
/// everything else with the real one).
fn fake_python(dir: &Path, version: &str) -> PathBuf {
    let real = std::env::var("VIRTUAL_ENV")
        .map(|v| Path::new(&v).join("bin/python3"))
        .unwrap_or_else(|_| PathBuf::from("python3"));
    let path = dir.join("python3");
    std::fs::write(
        &path,
        format!(
            "#!/bin/bash\nif [[ \"$1\" == *probe_torch.py ]]; then\n  \"{real}\" \"$@\" | sed 's/^torch=.*/torch={version}/'\n  exit ${{PIPESTATUS[0]}}\nfi\nexec \"{real}\" \"$@\"\n",
            real = real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The machine's own python decides: a torch other than the one our
/// trainer is built for skips the trainer's steps with both versions said
/// (the rest run), and one older than 2.9 skips every step that needs torch.
#[test]
fn the_machines_torch_decides_what_runs() {
    let dir = tempfile::tempdir().unwrap();
    let py = fake_python(dir.path(), "2.11.0+cu130");
    let results = dir.path().join("r");
    let out = run_sh(
        &[
            "--only",
            "memdiag,memdiag-oneshot,train-info,train-demo",
            results.to_str().unwrap(),
        ],
        &[("PYTHON", py.to_str().unwrap()), ("QUICK", "1")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = steps(&results);
    assert_eq!(status_of(&rows, "memdiag").1, "ok", "{rows:?}");
    assert_eq!(status_of(&rows, "memdiag-oneshot").1, "ok", "{rows:?}");
    let want = format!(
        "torch 2.11.0+cu130 here; our trainer (train-model) is built for torch {}",
        common::torch_for_train!()
    );
    for name in ["train-info", "train-demo"] {
        let r = status_of(&rows, name);
        assert_eq!(
            (r.1.as_str(), r.2.as_str()),
            ("skipped", want.as_str()),
            "{rows:?}"
        );
    }

    let py = fake_python(dir.path(), "2.8.1");
    let results = dir.path().join("old");
    let out = run_sh(
        &[
            "--only",
            "memdiag,memdiag-oneshot,train-info",
            results.to_str().unwrap(),
        ],
        &[("PYTHON", py.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = steps(&results);
    assert_eq!(status_of(&rows, "memdiag").1, "ok", "{rows:?}");
    for name in ["memdiag-oneshot", "train-info"] {
        let r = status_of(&rows, name);
        assert_eq!(r.1, "skipped", "{rows:?}");
        assert!(r.2.contains("torch 2.8.1 is older than 2.9"), "{rows:?}");
    }
}

/// The justfile's `torch_version` (what `just setup` installs and the GPU
/// recipe packs against) is the one `train` is built for.
#[test]
fn the_justfile_installs_the_torch_train_is_built_for() {
    let justfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("justfile")).unwrap();
    let line = justfile
        .lines()
        .find(|l| l.starts_with("torch_version := "))
        .expect("justfile sets torch_version");
    assert_eq!(
        line.trim_start_matches("torch_version := ")
            .trim_matches('"'),
        common::torch_for_train!()
    );
}
