//! Cross-tool pipelines, run as a user types them in a shell. The binaries are
//! the ones `cargo test --workspace` builds beside this test.

use common::input::Input;
use common::report::Report;
use std::process::{Command, Output};

use testkit::bin;

/// Runs a bash pipeline with pipefail from the repository root, with the
/// tools' directory first on PATH.
fn sh(script: &str) -> Output {
    let dir = bin("memdiag").parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .args(["-o", "pipefail", "-c", script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", path)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap()
}

fn report(out: &Output) -> Report {
    assert!(out.status.success(), "{out:?}");
    Report::parse(&Input {
        name: "pipeline".into(),
        text: String::from_utf8(out.stdout.clone()).unwrap(),
    })
    .unwrap()
}

#[test]
fn live_report_replays_through_a_pipe() {
    let direct = report(&sh("memdiag --format json"));
    let replayed = report(&sh(
        "memdiag --format json | memdiag --from - --format yaml",
    ));
    assert_eq!(replayed.gpus.len(), direct.gpus.len());
    assert_eq!(replayed.notes, direct.notes);
}

#[test]
fn csv_report_survives_a_round_trip_in_a_pipeline() {
    let yaml = report(&sh("memdiag --from configs/gpus/h100-80gb.yaml"));
    let via_csv = report(&sh(
        "memdiag --from configs/gpus/h100-80gb.yaml --format csv | memdiag --from -",
    ));
    assert_eq!(via_csv, yaml);
}

#[test]
fn train_and_memdiag_agree_on_the_gpus_they_see() {
    let info = sh("train info --format yaml");
    assert!(info.status.success(), "{info:?}");
    let info: serde_yaml::Value = serde_yaml::from_slice(&info.stdout).unwrap();
    let cuda_devices = info["device_count"].as_i64().unwrap() as usize;
    let nvml = report(&sh("memdiag"));
    // CUDA_VISIBLE_DEVICES can hide GPUs from libtorch, never add them.
    assert!(
        cuda_devices <= nvml.gpus.len(),
        "libtorch sees {cuda_devices} GPU(s), NVML {}",
        nvml.gpus.len()
    );
}

#[test]
fn memdiag_profile_pipes_into_cfgcheck() {
    let out =
        sh("memdiag --from configs/gpus/t4.yaml | cfgcheck configs/colab_optimized_full.yaml");
    assert!(out.status.success(), "{out:?}");
    let v: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let r = &v["results"][0];
    assert_eq!(r["target"]["name"].as_str(), Some("Tesla T4"));
    assert_eq!(r["target"]["source"].as_str(), Some("profile"));
    assert_ne!(r["verdict"].as_str(), Some("errors"));
}

#[test]
fn live_memdiag_pipes_into_cfgcheck() {
    let report = report(&sh("memdiag"));
    let out = sh("memdiag | cfgcheck configs/colab_optimized_full.yaml --format json");
    let v: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = v["results"][0]["findings"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    if report.gpus.is_empty() {
        // compile and fp16 on a machine that has no GPU.
        assert!(ids.contains(&"gpu-features-without-gpu"), "{ids:?}");
        assert_eq!(v["results"][0]["target"], serde_yaml::Value::Null);
    } else {
        assert!(!ids.contains(&"gpu-features-without-gpu"), "{ids:?}");
        assert!(v["results"][0]["target"]["name"].is_string());
    }
}

/// train classifies its own failures with the table cfgcheck --explain
/// uses: the class in summary.yaml is the class the explanation gives.
#[test]
fn train_failures_and_cfgcheck_explain_agree() {
    let dir = tempfile::tempdir().unwrap();
    for (fault, class) in [
        ("cuda-graph@1:1", "cuda-graph-pointer"),
        ("oom-always@1:1", "out-of-memory"),
        ("nan@1:1,nan@1:2,nan@1:3", "non-finite-loss"),
    ] {
        let cfg = dir.path().join("c.yaml");
        std::fs::write(
            &cfg,
            "batch_size: 8\ntemporal_frames: 2\nepochs: 1\nimage_size: 8\nscalar_features: 2\n\
             data: {synthetic_train_examples: 32, synthetic_val_examples: 8}\n\
             architecture: {channels: [4], embed_dim: 8, attention_heads: 2}\n",
        )
        .unwrap();
        let out_dir = dir.path().join(fault.replace([',', ':', '@'], "_"));
        let run = Command::new(bin("train"))
            .args(["--device", "cpu", "--threads", "1", "--config"])
            .arg(&cfg)
            .arg("--out")
            .arg(&out_dir)
            .env("TRAINGUARD_FAULT", fault)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert_eq!(
            run.status.code(),
            Some(1),
            "{fault}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let summary: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(out_dir.join("summary.yaml")).unwrap())
                .unwrap();
        assert_eq!(summary["error_class"].as_str(), Some(class), "{fault}");
        let mut explain = Command::new(bin("cfgcheck"))
            .args(["--explain", "-", "--format", "json"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        explain
            .stdin
            .take()
            .unwrap()
            .write_all(&run.stderr)
            .unwrap();
        let explained = explain.wait_with_output().unwrap();
        assert!(
            explained.status.success(),
            "{fault}: nothing explained in {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&explained.stdout).unwrap();
        let classes: Vec<&str> = v["found"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["class"].as_str().unwrap())
            .collect();
        assert!(classes.contains(&class), "{fault}: {classes:?}");
    }
}
