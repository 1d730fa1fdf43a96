//! The GPU recipe's device script, run here in its CPU-fallback mode against
//! the debug binaries, so the recipe is exercised on every test run.

use std::path::Path;
use std::process::Command;

mod support;
use support::bin;

#[test]
fn device_script_runs_end_to_end_in_cpu_fallback_mode() {
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = bin("train").parent().unwrap().to_path_buf();
    // The script needs a python3 with torch: the one the build used.
    let python = std::env::var("VIRTUAL_ENV")
        .map(|v| Path::new(&v).join("bin/python3"))
        .unwrap_or_else(|_| "python3".into());
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gpu/run.sh"))
        .arg(dir.path())
        .env("BIN", &bin_dir)
        .env("PYTHON", &python)
        .env("QUICK", "1")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = std::fs::read_to_string(dir.path().join("steps.csv")).unwrap();
    let status = |name: &str| {
        steps
            .lines()
            .find(|l| l.starts_with(&format!("{name},")))
            .unwrap_or_else(|| panic!("no step {name} in {steps}"))
            .split(',')
            .nth(1)
            .unwrap()
            .to_string()
    };
    for ok in [
        "train-info",
        "memdiag",
        "memdiag-oneshot",
        "cfgcheck-seeds",
        "verify-fixes",
        "train-demo",
        "train-vs-pytorch-cpu",
    ] {
        assert_eq!(status(ok), "ok", "{ok}: {steps}");
    }
    let gpu = std::fs::read_to_string(dir.path().join("train-info.out"))
        .unwrap()
        .contains("cuda_available: true");
    let expected = if gpu { "ok" } else { "skipped" };
    assert_eq!(status("oom-recovery"), expected, "{steps}");
    assert_eq!(status("cudagraph-crash"), expected, "{steps}");
    assert_eq!(status("train-vs-pytorch-gpu-bf16"), expected, "{steps}");
    assert_eq!(status("estimate-matrix"), expected, "{steps}");
    // Its outputs are the real files: a report, a run, the benchmark tables.
    assert!(dir.path().join("demo-run/summary.yaml").exists());
    assert!(dir.path().join("train_vs_pytorch.md").exists());
    assert!(
        std::fs::read_to_string(dir.path().join("cfgcheck-seeds.out"))
            .unwrap()
            .contains("cuda-graphs-checkpointing")
    );
}
