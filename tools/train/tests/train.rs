//! Training runs on CPU as a user starts them: the run directory, exact
//! resume after a real SIGKILL, refusing damaged checkpoints, data checks.
//! Recovery from failures mid-run is in train_recovery.rs.

mod run_support;

use predicates::prelude::*;
use run_support::*;
use std::path::Path;
use testkit::write;

#[test]
fn a_run_writes_its_directory_and_seed_style_lines() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "tiny.yaml", TINY);
    let out = dir.path().join("run");
    let done = chain(&[&cfg], &out).assert().success();
    let stderr = String::from_utf8_lossy(&done.get_output().stderr).to_string();
    assert!(
        stderr.contains("parameters (cfgcheck's estimate: "),
        "{stderr}"
    );
    let line = regex_like(&stderr, "Epoch 4/4 | Train Loss: ");
    assert!(
        line.contains(" | Val Loss: ") && line.contains(" | LR: ") && line.contains("s"),
        "{line}"
    );
    assert!(stderr.contains("New best model saved! (val_loss: "));
    let png = std::fs::read(out.join("curves.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "curves.png is a PNG");
    for f in [
        "config.yaml",
        "metrics.csv",
        "best.safetensors",
        "checkpoint.safetensors",
        "summary.yaml",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(metrics.lines().count(), 5, "{metrics}");
    assert!(metrics.starts_with("epoch,train_loss,val_loss,lr,seconds,samples_per_s,"));
    let summary: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(out.join("summary.yaml")).unwrap()).unwrap();
    assert_eq!(summary["schema"].as_str(), Some("train-summary/v1"));
    assert_eq!(summary["status"].as_str(), Some("finished"));
    assert_eq!(summary["epochs_completed"].as_u64(), Some(4));
    assert!(summary["last"]["r2"].as_f64().is_some());
    // The resolved config reads back as a config.
    assert_cmd::Command::new(BIN)
        .arg("--config")
        .arg(out.join("config.yaml"))
        .arg("--out")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already holds a run"));
    // best.safetensors holds exactly the model's tensors, loadable elsewhere.
    let names: Vec<String> = tensors(&out.join("best.safetensors"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(
        names.contains(&"encoder.block0.conv.weight".to_string())
            && names.contains(&"head.bias".to_string())
    );
    assert!(!names.iter().any(|n| n.starts_with("optim.")));
}

fn regex_like(text: &str, start: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in {text}"))
        .to_string()
}

#[test]
fn kill_9_mid_epoch_then_resume_ends_with_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "tiny.yaml", TINY);
    let straight = dir.path().join("straight");
    chain(&[&cfg], &straight).assert().success();

    let killed = dir.path().join("killed");
    let status = std::process::Command::new(BIN)
        .args(["--threads", "1", "--device", "cpu", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(&killed)
        .env("TRAINGUARD_FAULT", "sigkill@3:2")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL in epoch 3");
    let metrics = std::fs::read_to_string(killed.join("metrics.csv")).unwrap();
    assert_eq!(
        metrics.lines().count(),
        3,
        "two epochs done before the kill: {metrics}"
    );
    assert!(!killed.join("summary.yaml").exists());

    let resumed = train().arg("--resume").arg(&killed).assert().success();
    assert!(String::from_utf8_lossy(&resumed.get_output().stderr).contains("resuming"));
    let a = tensors(&straight.join("checkpoint.safetensors"));
    let b = tensors(&killed.join("checkpoint.safetensors"));
    assert_eq!(a.len(), b.len());
    for ((n, x), (m, y)) in a.iter().zip(&b) {
        assert_eq!(n, m);
        assert!(x == y, "{n} differs after resume");
    }
    let metrics = std::fs::read_to_string(killed.join("metrics.csv")).unwrap();
    assert_eq!(metrics.lines().count(), 5, "{metrics}");
    let epochs: Vec<&str> = metrics
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(epochs, ["1", "2", "3", "4"]);
}

/// A run killed after its last checkpoint, while summary.yaml was being
/// written (found by scripts/reliability/kill_train.py --aim-at-writes):
/// `--resume` writes the summary it never wrote instead of exiting 0 with
/// none.
#[test]
fn a_run_killed_writing_its_summary_gets_one_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "tiny.yaml", TINY);
    let run = dir.path().join("run");
    chain(&[&cfg], &run).assert().success();
    let written = summary_of(&run);
    // As a kill inside write_atomic leaves it: the temp file, no summary.
    std::fs::rename(run.join("summary.yaml"), run.join(".summary.yaml.tmp.yaml")).unwrap();
    let resumed = train().arg("--resume").arg(&run).assert().success();
    assert!(String::from_utf8_lossy(&resumed.get_output().stderr).contains("already finished"));
    let s = summary_of(&run);
    assert_eq!(s.status, common::wire::train::RunStatus::Finished);
    assert_eq!(s.epochs_completed, written.epochs_completed);
    assert_eq!(s.best, written.best);
    assert_eq!(s.last, written.last);
    assert!(!run.join(".summary.yaml.tmp.yaml").exists());
}

#[test]
fn a_damaged_checkpoint_is_refused_not_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "tiny.yaml", &tiny(1));
    let out = dir.path().join("run");
    chain(&[&cfg], &out).assert().success();
    let ck = out.join("checkpoint.safetensors");
    let bytes = std::fs::read(&ck).unwrap();
    std::fs::write(&ck, &bytes[..bytes.len() / 2]).unwrap();
    train().arg("--resume").arg(&out).assert().code(2).stderr(
        predicate::str::contains("checkpoint.safetensors: not a complete safetensors file")
            .and(predicate::str::contains("truncated")),
    );
    train()
        .arg("--resume")
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nothing to resume"));
}

/// Writes frames [n, ..frames_shape] (f32), scalars [n, scalars] (f32) and
/// target [n] (f32, or i64 labels) to a safetensors data file.
fn write_data(
    path: &Path,
    frames: &[f32],
    frames_shape: &[usize],
    scalars: &[f32],
    target: Result<&[f32], &[i64]>,
) {
    use safetensors::tensor::{Dtype, TensorView};
    let n = match target {
        Ok(t) => t.len(),
        Err(l) => l.len(),
    };
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let (f, s) = (bytes(frames), bytes(scalars));
    let (tdtype, t): (Dtype, Vec<u8>) = match target {
        Ok(t) => (Dtype::F32, bytes(t)),
        Err(l) => (Dtype::I64, l.iter().flat_map(|x| x.to_le_bytes()).collect()),
    };
    let mut fshape = vec![n];
    fshape.extend_from_slice(frames_shape);
    let views = vec![
        ("frames", TensorView::new(Dtype::F32, fshape, &f).unwrap()),
        (
            "scalars",
            TensorView::new(Dtype::F32, vec![n, scalars.len() / n.max(1)], &s).unwrap(),
        ),
        ("target", TensorView::new(tdtype, vec![n], &t).unwrap()),
    ];
    std::fs::write(path, safetensors::tensor::serialize(views, None).unwrap()).unwrap();
}

/// A data file of n examples with a simple pattern (f32 targets unless
/// `labels`).
fn data_file(
    path: &Path,
    n: usize,
    frames_shape: &[usize],
    scalars: usize,
    labels: Option<Vec<i64>>,
) {
    let frame_len: usize = frames_shape.iter().product();
    let frames: Vec<f32> = (0..n * frame_len).map(|i| (i % 7) as f32 * 0.1).collect();
    let sc: Vec<f32> = (0..n * scalars).map(|i| (i % 3) as f32).collect();
    let target: Vec<f32> = (0..n).map(|i| i as f32 / n as f32).collect();
    match labels {
        Some(l) => write_data(path, &frames, frames_shape, &sc, Err(&l)),
        None => write_data(path, &frames, frames_shape, &sc, Ok(&target)),
    }
}

#[test]
fn data_files_are_checked_and_capped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    data_file(&d.join("train.safetensors"), 100, &[3, 3, 16, 16], 4, None);
    data_file(&d.join("val.safetensors"), 20, &[3, 3, 16, 16], 4, None);
    let base = TINY
        .replace(
            "data: {synthetic_train_examples: 192, synthetic_val_examples: 64}",
            &format!(
                "data: {{path: {}, val_path: {}}}\nmax_train_examples: 40",
                d.join("train.safetensors").display(),
                d.join("val.safetensors").display()
            ),
        )
        .replace("epochs: 4", "epochs: 1");
    let cfg = write(d, "file.yaml", &base);
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run"))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "40 training / 20 validation examples",
        ));

    data_file(&d.join("wrong.safetensors"), 10, &[3, 3, 8, 8], 4, None);
    let cfg = write(
        d,
        "wrong.yaml",
        &base.replace("train.safetensors", "wrong.safetensors"),
    );
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run2"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "wrong.safetensors: tensor `frames`: expected shape [N, 3, 3, 16, 16]",
        ));

    // Classification with a label out of range: refused before training,
    // naming the first offending example.
    data_file(
        &d.join("labels.safetensors"),
        10,
        &[3, 3, 16, 16],
        4,
        Some(vec![0, 1, 2, 1, 0, 7, 1, 0, 2, 1]),
    );
    data_file(
        &d.join("vlabels.safetensors"),
        10,
        &[3, 3, 16, 16],
        4,
        Some(vec![0; 10]),
    );
    let cls = base
        .replace("train.safetensors", "labels.safetensors")
        .replace("val.safetensors", "vlabels.safetensors")
        + "task: classification\nnum_labels: 3\n";
    let cfg = write(d, "cls.yaml", &cls);
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run3"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "tensor `target`: label 7 in example 5 is outside [0, 3)",
        ));
    // NaN in an input: refused with the example's index.
    let mut frames = vec![0.5f32; 6 * 3 * 3 * 16 * 16];
    frames[4 * 3 * 3 * 16 * 16 + 7] = f32::NAN;
    write_data(
        &d.join("nan.safetensors"),
        &frames,
        &[3, 3, 16, 16],
        &[0.0; 6 * 4],
        Ok(&[0.0; 6]),
    );
    let cfg = write(
        d,
        "nan.yaml",
        &base.replace("train.safetensors", "nan.safetensors"),
    );
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run5"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "training data: tensor `frames`: NaN or inf in example 4",
        ));
    // A float target for classification is the wrong dtype.
    let cfg = write(
        d,
        "cls2.yaml",
        &(base.clone() + "task: classification\nnum_labels: 3\n"),
    );
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run4"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "tensor `target`: expected dtype I64",
        ));
}

#[test]
fn classification_and_settings_train_does_not_apply() {
    let dir = tempfile::tempdir().unwrap();
    let text = tiny(2) + "task: classification\nnum_labels: 3\ntorch_compile: true\n";
    let cfg = write(dir.path(), "cls.yaml", &text);
    let out = dir.path().join("run");
    chain(&[&cfg], &out).assert().success().stderr(
        predicate::str::contains("not applied: torch_compile")
            .and(predicate::str::contains("train: training labels: 0: ")),
    );
    let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    let column = metrics
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|c| c == "accuracy")
        .unwrap();
    let row: Vec<&str> = metrics.lines().nth(2).unwrap().split(',').collect();
    let accuracy: f64 = row[column].parse().unwrap();
    assert!((0.0..=1.0).contains(&accuracy));
    let summary = std::fs::read_to_string(out.join("summary.yaml")).unwrap();
    assert!(
        summary.contains("torch_compile (mode default): libtorch has no torch.compile"),
        "{summary}"
    );
    assert!(summary.contains("note: not available on CPU"), "{summary}");
}

#[test]
fn fp16_steps_with_overflowing_gradients_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "fp16.yaml",
        &(tiny(2) + "mixed_precision: fp16\n"),
    );
    let out = dir.path().join("run");
    chain(&[&cfg], &out).assert().success();
    let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    let column = metrics
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|c| c == "skipped_steps")
        .unwrap();
    let skipped: u64 = metrics
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(column).unwrap().parse::<u64>().unwrap())
        .sum();
    // The scale starts at 2^16 and halves on each overflow, as GradScaler's.
    assert!(skipped > 0, "{metrics}");
    let summary: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(out.join("summary.yaml")).unwrap()).unwrap();
    assert_eq!(summary["skipped_steps"].as_u64(), Some(skipped));
    assert_eq!(summary["status"].as_str(), Some("finished"));
}

#[test]
fn bad_input_and_usage_exit_2() {
    train().assert().code(2);
    train()
        .args(["--config", "/nonexistent.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent.yaml: cannot open"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "bad.yaml", "batch_size: 0\n");
    train()
        .arg("--config")
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("`batch_size`"));
    // The encoder layout key: its name, the line and the values it takes.
    let cfg = write(
        dir.path(),
        "layout.yaml",
        "epochs: 1\nchannels_last: nhwc\n",
    );
    train().arg("--config").arg(&cfg).assert().code(2).stderr(
        predicate::str::contains("layout.yaml")
            .and(predicate::str::contains(
                "channels_last: unknown variant `nhwc`",
            ))
            .and(predicate::str::contains("`auto`, `on`, `off`"))
            .and(predicate::str::contains("line 2")),
    );
    let cfg = write(dir.path(), "t.yaml", TINY);
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(dir.path().join("r"))
        .env("TRAINGUARD_FAULT", "boom")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "TRAINGUARD_FAULT=boom: expected KIND@EPOCH:STEP",
        ));
}

/// An .npy array: magic, version 1.0, the header dict padded to 64 bytes.
fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn npz(path: &Path, n: usize, compressed: bool, target_descr: &str) {
    use std::io::Write;
    let frames: Vec<u8> = (0..n * 3 * 3 * 16 * 16)
        .flat_map(|i| ((i % 5) as f32 * 0.2).to_le_bytes())
        .collect();
    let scalars: Vec<u8> = (0..n * 4)
        .flat_map(|i| ((i % 3) as f32).to_le_bytes())
        .collect();
    let target: Vec<u8> = (0..n)
        .flat_map(|i| (i as f32 / n as f32).to_le_bytes())
        .collect();
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let method = if compressed {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, descr, shape, data) in [
        ("frames.npy", "<f4", vec![n, 3, 3, 16, 16], frames),
        ("scalars.npy", "<f4", vec![n, 4], scalars),
        ("target.npy", target_descr, vec![n], target),
    ] {
        z.start_file(name, opts).unwrap();
        z.write_all(&npy(descr, &shape, &data)).unwrap();
    }
    z.finish().unwrap();
}

#[test]
fn npz_files_from_numpy_savez_and_savez_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    npz(&d.join("train.npz"), 80, true, "<f4");
    npz(&d.join("val.npz"), 16, false, "<f4");
    let text = tiny(1).replace(
        "data: {synthetic_train_examples: 192, synthetic_val_examples: 64}",
        &format!(
            "data: {{path: {}, val_path: {}}}\nmax_train_examples: 50",
            d.join("train.npz").display(),
            d.join("val.npz").display()
        ),
    );
    let cfg = write(d, "npz.yaml", &text);
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run"))
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "50 training / 16 validation examples",
        ));
    // float64 targets are named with numpy's dtype.
    npz(&d.join("f64.npz"), 16, false, "<f8");
    let cfg = write(d, "f64.yaml", &text.replace("val.npz", "f64.npz"));
    train()
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.join("run2"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "f64.npz: tensor `target`: expected dtype F32 for task Regression, found numpy <f8",
        ));
}

#[test]
fn a_non_finite_loss_fails_the_run_with_exit_1_and_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Finite targets whose squared error overflows float32.
    let n = 32;
    write_data(
        &d.join("huge.safetensors"),
        &vec![0.0; n * 3 * 3 * 16 * 16],
        &[3, 3, 16, 16],
        &vec![0.0; n * 4],
        Ok(&vec![3.0e30; n]),
    );
    let text = TINY.replace(
        "data: {synthetic_train_examples: 192, synthetic_val_examples: 64}",
        &format!(
            "data: {{path: {0}, val_path: {0}}}",
            d.join("huge.safetensors").display()
        ),
    );
    let cfg = write(d, "huge.yaml", &text);
    let out = d.join("run");
    chain(&[&cfg], &out)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "train: failed: loss is inf for 3 steps in a row",
        ));
    let summary: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(out.join("summary.yaml")).unwrap()).unwrap();
    assert_eq!(summary["status"].as_str(), Some("failed"));
    assert_eq!(summary["error_class"].as_str(), Some("non-finite-loss"));
}
