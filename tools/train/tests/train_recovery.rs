//! A training run recovering from what fails mid-run, on CPU: an
//! out-of-memory step (the micro-batch halved), the fallback chain of
//! settings, in this process or a fresh one, non-finite losses, and
//! SIGTERM between steps.

mod run_support;

use predicates::prelude::*;
use run_support::*;
use std::path::{Path, PathBuf};
use testkit::write;

/// A run directory's metrics.csv rows, typed (train-metrics/v1).
fn rows_of(run: &Path) -> Vec<common::wire::train::EpochRow> {
    let path = run.join("metrics.csv");
    common::wire::train::EpochRow::read_all(
        &path.display().to_string(),
        &std::fs::read_to_string(&path).unwrap(),
    )
    .unwrap()
}

fn max_abs_diff(a: &Path, b: &Path, prefix: &str) -> f32 {
    let (a, b) = (tensors(a), tensors(b));
    assert_eq!(a.len(), b.len());
    let mut worst = 0.0f32;
    for ((n, x), (m, y)) in a.iter().zip(&b) {
        assert_eq!(n, m);
        if !n.starts_with(prefix) {
            continue;
        }
        for (p, q) in x.chunks_exact(4).zip(y.chunks_exact(4)) {
            let (p, q) = (
                f32::from_le_bytes(p.try_into().unwrap()),
                f32::from_le_bytes(q.try_into().unwrap()),
            );
            worst = worst.max((p - q).abs());
        }
    }
    worst
}

#[test]
fn out_of_memory_is_recovered_by_halving_the_micro_batch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = tiny(2);
    let cfg = write(d, "tiny.yaml", &text);
    // A run that meets the fault at epoch 1 step 1 and recovers; its summary.
    let recover_from = |fault: &str, out: &Path| -> serde_yaml::Value {
        let run = chain(&[&cfg], out)
            .env("TRAINGUARD_FAULT", fault)
            .assert()
            .success();
        let stderr = String::from_utf8_lossy(&run.get_output().stderr).to_string();
        assert!(
            stderr
                .contains("out of memory at epoch 1 step 1: micro-batch 32 -> 16, same step again"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        serde_yaml::from_str(&std::fs::read_to_string(out.join("summary.yaml")).unwrap()).unwrap()
    };
    let recovered = d.join("recovered");
    let summary = recover_from("oom@1:1", &recovered);
    assert_eq!(summary["micro_batch_size"].as_u64(), Some(16));
    let event = &summary["oom_events"][0];
    assert_eq!(
        (event["epoch"].as_u64(), event["step"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        (
            event["old_micro_batch"].as_u64(),
            event["new_micro_batch"].as_u64()
        ),
        (Some(32), Some(16))
    );
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .contains("CUDA out of memory. Tried to allocate"),
        "{event:?}"
    );
    let metrics = std::fs::read_to_string(recovered.join("metrics.csv")).unwrap();
    assert!(
        metrics.lines().nth(1).unwrap().contains(",1,16,"),
        "{metrics}"
    );

    // The same run with micro-batches of 16 from the start.
    let planned = d.join("planned");
    let cfg16 = write(d, "micro.yaml", &(text + "micro_batch_size: 16\n"));
    chain(&[&cfg16], &planned).assert().success();
    // fp32 on CPU, the same operations in the same order: equal to the bit
    // in practice; the bound allows for nothing more than rounding.
    let diff = max_abs_diff(
        &recovered.join("checkpoint.safetensors"),
        &planned.join("checkpoint.safetensors"),
        "",
    );
    assert!(diff <= 1e-6, "max abs diff {diff}");

    // A real libtorch allocation failure inside the step, which tch raises as
    // a panic (as it does for an out-of-memory error in a layer's forward):
    // recovered the same way, without a panic on stderr.
    let real = d.join("real");
    let summary = recover_from("alloc@1:1", &real);
    let message = summary["oom_events"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("DefaultCPUAllocator: can't allocate memory: you tried to allocate"),
        "{message}"
    );
    let diff = max_abs_diff(
        &real.join("checkpoint.safetensors"),
        &planned.join("checkpoint.safetensors"),
        "",
    );
    assert!(diff <= 1e-6, "max abs diff {diff}");
}

/// A config of a fallback chain: `base` with the fault `fault` in its
/// environment ("none": no fault).
fn faulted(d: &Path, name: &str, base: &str, fault: &str) -> PathBuf {
    let env = format!("environment: {{TRAINGUARD_FAULT: \"{fault}\"}}\n");
    write(d, name, &(base.to_string() + &env))
}

/// `base` with the smaller model (narrower encoder blocks).
fn smaller(base: &str) -> String {
    base.replace("channels: [8, 16]", "channels: [4, 8]")
}

#[test]
fn the_fallback_chain_goes_a_b_c_as_the_seeds_did_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = tiny(3);
    // A: CUDA graphs break in epoch 2 (seed 001).
    let a = faulted(d, "a.yaml", &base, "cuda-graph@2:1");
    // B: runs out of memory at every micro-batch from epoch 2 on.
    let b = faulted(d, "b.yaml", &base, "oom-always@2:1");
    // C: the smaller model (different encoder widths), no fault.
    let c = faulted(d, "c.yaml", &smaller(&base), "none");
    let out = d.join("run");
    let done = chain(&[&a, &b, &c], &out).assert().success();
    let stderr = String::from_utf8_lossy(&done.get_output().stderr).to_string();
    assert!(
        stderr.contains("falling back to the next config"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(the others start fresh: their shapes differ)"),
        "{stderr}"
    );
    let summary: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(out.join("summary.yaml")).unwrap()).unwrap();
    let legs = summary["configs"].as_sequence().unwrap();
    assert_eq!(legs.len(), 3, "{summary:?}");
    let class = |i: usize| legs[i]["error_class"].as_str().map(String::from);
    assert_eq!(class(0).as_deref(), Some("cuda-graph-pointer"));
    assert_eq!(class(1).as_deref(), Some("out-of-memory"));
    assert_eq!(legs[2]["status"].as_str(), Some("finished"));
    assert_eq!(
        legs[1]["first_epoch"].as_u64(),
        Some(2),
        "B continues after A's last good epoch"
    );
    assert_eq!(legs[2]["first_epoch"].as_u64(), Some(2));
    assert_eq!(summary["status"].as_str(), Some("finished"));
    assert!(legs[1]["stop_reason"]
        .as_str()
        .unwrap()
        .contains("even with micro-batches of 1"));
    // --resume continues with the config in use last.
    assert!(std::fs::read_to_string(out.join("config.yaml"))
        .unwrap()
        .contains("- 4"));
}

#[test]
fn a_single_non_finite_loss_is_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "t.yaml", &tiny(1));
    let out = dir.path().join("run");
    chain(&[&cfg], &out)
        .env("TRAINGUARD_FAULT", "nan@1:2")
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "loss is NaN at epoch 1 step 2: update skipped",
        ));
    let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    let column = metrics
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|c| c == "skipped_steps")
        .unwrap();
    assert_eq!(
        metrics.lines().nth(1).unwrap().split(',').nth(column),
        Some("1")
    );
}

#[test]
fn summary_counts_the_skipped_steps_metrics_csv_counts() {
    // A non-finite loss is a skipped step in metrics.csv and in summary.yaml
    // alike (summary.yaml once counted fp16 skips only).
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "t.yaml", &tiny(2));
    let out = dir.path().join("run");
    chain(&[&cfg], &out)
        .env("TRAINGUARD_FAULT", "nan@1:2,nan@2:1")
        .assert()
        .success();
    let rows = rows_of(&out);
    let in_csv: u64 = rows.iter().map(|r| r.skipped_steps).sum();
    assert_eq!(in_csv, 2);
    let summary = summary_of(&out);
    assert_eq!(summary.skipped_steps, in_csv);
}

#[test]
fn a_fallback_with_another_environment_runs_in_a_fresh_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = tiny(3);
    // A and B share an environment, so B runs in A's process, where A's
    // fault (read once, at the start) fires again; C's environment differs:
    // a fresh process reads it, and C's `none` really disables the fault.
    let a = faulted(d, "a.yaml", &base, "cuda-graph@2:1");
    let narrower = base.replace("channels: [8, 16]", "channels: [8, 12]");
    let b = faulted(d, "b.yaml", &narrower, "cuda-graph@2:1");
    let c = faulted(d, "c.yaml", &smaller(&base), "none");
    let out = d.join("run");
    let done = chain(&[&a, &b, &c], &out).assert().success();
    let stderr = String::from_utf8_lossy(&done.get_output().stderr).to_string();
    let fresh: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("runs in a fresh train process"))
        .collect();
    assert_eq!(fresh.len(), 1, "{stderr}");
    assert!(fresh[0].contains("c.yaml"), "{stderr}");
    let summary = summary_of(&out);
    let classes: Vec<Option<&str>> = summary
        .configs
        .iter()
        .map(|l| l.error_class.map(|c| c.as_str()))
        .collect();
    assert_eq!(
        classes,
        [Some("cuda-graph-pointer"), Some("cuda-graph-pointer"), None]
    );
    assert_eq!(summary.config, c.display().to_string());
}

#[test]
fn a_first_config_that_fails_before_its_first_checkpoint_hands_over_to_a_fresh_process() {
    // Found by scripts/corpus: A fails in epoch 1 (no checkpoint yet) and C's
    // environment differs, so C runs in a fresh process, which must start C
    // afresh rather than say there is nothing to resume.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = tiny(2);
    let a = faulted(d, "a.yaml", &base, "cuda-graph@1:1");
    let c = faulted(d, "c.yaml", &smaller(&base), "none");
    let out = d.join("run");
    chain(&[&a, &c], &out).assert().success();
    let summary = summary_of(&out);
    let classes: Vec<Option<&str>> = summary
        .configs
        .iter()
        .map(|l| l.error_class.map(|c| c.as_str()))
        .collect();
    assert_eq!(classes, [Some("cuda-graph-pointer"), None]);
    assert_eq!(summary.config, c.display().to_string());
    assert_eq!(rows_of(&out).len(), 2);
    let in_use = std::fs::read_to_string(out.join("config.yaml")).unwrap();
    assert!(
        in_use.contains("- 4"),
        "config.yaml names C's channels: {in_use}"
    );
}

#[test]
fn a_chain_killed_in_its_second_config_resumes_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = tiny(40);
    let a = faulted(d, "a.yaml", &base, "cuda-graph@2:1");
    let b = faulted(d, "b.yaml", &smaller(&base), "none");
    let out = d.join("run");
    let mut child = std::process::Command::new(BIN)
        .args(["--threads", "1", "--device", "cpu", "--config"])
        .arg(&a)
        .arg("--fallback")
        .arg(&b)
        .arg("--out")
        .arg(&out)
        .env_remove("TRAINGUARD_FAULT")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill -9 once B (the fresh process, same pid) has finished epoch 3.
    testkit::wait_until("B reaching epoch 3", 300, || {
        assert!(child.try_wait().unwrap().is_none(), "train ended early");
        std::fs::read_to_string(out.join("metrics.csv"))
            .is_ok_and(|t| t.lines().any(|l| l.starts_with("3,")))
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.join("summary.yaml").exists());
    let resumed = train().arg("--resume").arg(&out).assert().success();
    let stderr = String::from_utf8_lossy(&resumed.get_output().stderr).to_string();
    assert!(stderr.contains("train: resuming"), "{stderr}");
    assert!(
        !stderr.contains("carried over"),
        "B resumes its own checkpoint: {stderr}"
    );
    let summary = summary_of(&out);
    assert_eq!(summary.configs.len(), 2, "{summary:?}");
    assert_eq!(
        summary.configs[0].error_class.map(|c| c.as_str()),
        Some("cuda-graph-pointer")
    );
    assert_eq!(summary.epochs_completed, 40);
    // Epoch 3's row is written before its checkpoint: a kill in between
    // resumes at 3 and writes that row again.
    assert!(
        summary.resumed_at_epoch.is_some_and(|e| e >= 3),
        "{summary:?}"
    );
    // Every epoch once in metrics.csv, A's epoch 1 included.
    let rows = rows_of(&out);
    let epochs: Vec<u32> = rows.iter().map(|r| r.epoch).collect();
    assert_eq!(epochs, (1..=40).collect::<Vec<_>>());
}

#[test]
fn sigterm_stops_between_steps_with_a_summary_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "t.yaml", &tiny(60));
    let out = dir.path().join("run");
    let child = std::process::Command::new(BIN)
        .args(["--threads", "1", "--device", "cpu", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(&out)
        .env_remove("TRAINGUARD_FAULT")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    testkit::wait_until("a checkpoint", 120, || {
        out.join("checkpoint.safetensors").exists()
    });
    // SAFETY: kill(2) with the pid of a child we own.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let done = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr).to_string();
    assert_eq!(done.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped on request"), "{stderr}");
    let summary = summary_of(&out);
    assert_eq!(summary.status, common::wire::train::RunStatus::Stopped);
    assert!(summary.epochs_completed < 60, "{summary:?}");
    train().arg("--resume").arg(&out).assert().success();
    let summary = summary_of(&out);
    assert_eq!(summary.status, common::wire::train::RunStatus::Finished);
    assert_eq!(summary.epochs_completed, 60);
}
