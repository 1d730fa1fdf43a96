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

/// steps.csv's rows as (step, status, note).
fn steps(dir: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("steps.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, ',').collect();
            (f[0].into(), f[1].into(), f[3].trim_matches('"').into())
        })
        .collect()
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = steps(dir.path());
    let status = |name: &str| {
        steps
            .iter()
            .find(|r| r.0 == name)
            .unwrap_or_else(|| panic!("no step {name} in {steps:?}"))
            .1
            .clone()
    };
    for ok in [
        "train-info",
        "memdiag",
        "memdiag-oneshot",
        "cfgcheck-seeds",
        "verify-fixes",
        "train-demo",
        "train-vs-pytorch-cpu",
        "trial-overhead",
        "preload-device",
    ] {
        assert_eq!(status(ok), "ok", "{ok}: {steps:?}");
    }
    let gpu = std::fs::read_to_string(dir.path().join("train-info.out"))
        .unwrap()
        .contains("cuda_available: true");
    let expected = if gpu { "ok" } else { "skipped" };
    assert_eq!(status("oom-recovery"), expected, "{steps:?}");
    assert_eq!(status("cudagraph-crash"), expected, "{steps:?}");
    for p in ["off", "fp16", "bf16"] {
        assert_eq!(
            status(&format!("train-vs-pytorch-gpu-{p}")),
            expected,
            "{steps:?}"
        );
    }
    assert_eq!(status("estimate-matrix"), expected, "{steps:?}");
    if !gpu {
        // The matrix's configs and the estimate lines its fit reads.
        assert_eq!(status("estimate-matrix-check"), "ok", "{steps:?}");
        // Checkpointing's trade-off in host memory, train and PyTorch.
        assert_eq!(status("checkpointing-memory-cpu"), "ok", "{steps:?}");
        assert!(dir.path().join("checkpointing_memory.md").exists());
    }
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

/// A lent GPU machine runs the recipe in parts, each within a fixed time, and
/// returns few files: --only picks steps, a step past its limit is recorded
/// as timed out (the run goes on), a spent budget skips what is left, and
/// --tar packs the results into one file.
#[test]
fn parts_time_limits_and_one_tarball() {
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

    // A budget too small for anything: every chosen step says so.
    let results = dir.path().join("b");
    let out = run_sh(
        &[
            "--only",
            "basics",
            "--budget",
            "30",
            results.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = steps(&results);
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r.1 == "skipped" && r.2.contains("budget of 30s spent")),
        "{rows:?}"
    );

    // Bad arguments: exit 2 with the reason.
    let out = run_sh(&["--only", "nonsense"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown part 'nonsense'"));
    let out = run_sh(&["--budget", "soon"], &[]);
    assert_eq!(out.status.code(), Some(2));
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
