//! verify-fixes as a user runs it before a long run, against the real rules
//! and the real train binary (built beside it by `cargo test --workspace`;
//! verify-fixes finds it next to itself). On a machine without a GPU the GPU
//! checks are skipped with their reason.

use std::path::Path;
use std::process::Output;
use testkit::{repo_path as repo, ucmd};

/// verify-fixes with JSON output, the caller's allocator and debug variables
/// removed so results do not depend on the shell.
fn verify(args: &[&str], env: &[(&str, &str)], out_dir: &Path) -> (Output, serde_json::Value) {
    let mut c = ucmd("verify-fixes")
        .args(args)
        .args(["--format", "json", "--out"])
        .arg(out_dir);
    for (k, v) in env {
        c = c.env(k, v);
    }
    let r = c.run();
    let json = r.stdout_json_or_null();
    (r.output, json)
}

fn status<'a>(v: &'a serde_json::Value, id: &str) -> (&'a str, &'a str) {
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap();
    (c["status"].as_str().unwrap(), c["saw"].as_str().unwrap())
}

#[test]
fn the_demo_config_passes_and_gpu_checks_say_why_they_were_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (out, v) = verify(&["--config", "configs/demo_cpu.yaml"], &[], dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["schema"], "verify-fixes/v1");
    assert_eq!(v["checks"].as_array().unwrap().len(), 8);
    assert_eq!(status(&v, "smoke").0, "pass", "{v}");
    assert_eq!(status(&v, "data").0, "pass");
    assert_eq!(status(&v, "allocator").0, "pass");
    assert_eq!(status(&v, "disk").0, "pass");
    // No report piped in here: memory is skipped, and says how to give one.
    let (s, saw) = status(&v, "memory");
    assert_eq!(s, "skip");
    assert!(saw.contains("pipe memdiag's report in"), "{saw}");
    // --require-gpu turns the skips into failures.
    let (out, v) = verify(
        &[
            "--config",
            "configs/demo_cpu.yaml",
            "--skip",
            "smoke",
            "--require-gpu",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(status(&v, "memory").0, "fail");
    assert_eq!(status(&v, "smoke"), ("skip", "skipped on purpose (--skip)"));
}

#[test]
fn a_cuda_graph_hazard_fails_the_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("a.yaml");
    let text = std::fs::read_to_string(repo("configs/colab_optimized_full.yaml")).unwrap();
    std::fs::write(&cfg, text.replace("\"default\"", "\"reduce-overhead\"")).unwrap();
    let (out, v) = verify(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let (s, saw) = status(&v, "config");
    assert_eq!(s, "fail");
    assert!(saw.contains("cuda-graphs-checkpointing (line 10)"), "{saw}");
}

#[test]
fn memory_overflow_against_the_t4_profile_and_a_search_space() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("big.yaml");
    std::fs::write(&cfg, "batch_size: 64\nimage_size: 256\nepochs: 5\n").unwrap();
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "--gpu",
        "configs/gpus/t4.yaml",
        "--skip",
        "smoke",
        "--skip",
        "data",
    ];
    let (out, v) = verify(&args, &[], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(status(&v, "memory").0, "fail");
    // A space whose worst case does not fit, although its first one does.
    let small = dir.path().join("small.yaml");
    std::fs::write(&small, "batch_size: 8\nimage_size: 128\nepochs: 5\n").unwrap();
    let space = dir.path().join("space.yaml");
    std::fs::write(&space, "schema: space/v1\nparameters:\n  batch_size: [8, 16, 1024]\n  memory_optimized: [true, false]\n").unwrap();
    let (_, v) = verify(
        &[
            "--config",
            small.to_str().unwrap(),
            "--gpu",
            "configs/gpus/t4.yaml",
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(status(&v, "memory").0, "pass");
    let (out, v) = verify(
        &[
            "--config",
            small.to_str().unwrap(),
            "--gpu",
            "configs/gpus/t4.yaml",
            "--space",
            space.to_str().unwrap(),
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let (s, saw) = status(&v, "memory");
    assert_eq!(s, "fail");
    assert!(
        saw.contains("worst case: batch_size=1024, memory_optimized=false"),
        "{saw}"
    );
    // Four parallel trials of the small config on a T4 fit; 40 do not.
    let (_, v) = verify(
        &[
            "--config",
            small.to_str().unwrap(),
            "--gpu",
            "configs/gpus/t4.yaml",
            "--parallel",
            "40",
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(status(&v, "memory").0, "fail");
}

#[test]
fn an_allocator_setting_without_expandable_segments_fails_and_print_env_fixes_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("PYTORCH_ALLOC_CONF", "max_split_size_mb:128")];
    let (out, v) = verify(
        &[
            "--config",
            "configs/demo_cpu.yaml",
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &env,
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "allocator")
        .unwrap();
    assert_eq!(c["status"], "fail");
    assert_eq!(
        c["fix"],
        "set PYTORCH_ALLOC_CONF=max_split_size_mb:128,expandable_segments:True"
    );
    let printed = ucmd("verify-fixes")
        .args(["--print-env"])
        .env("PYTORCH_ALLOC_CONF", "max_split_size_mb:128")
        .env("CUDA_LAUNCH_BLOCKING", "1")
        .run();
    let text = String::from_utf8(printed.output.stdout).unwrap();
    assert!(
        text.contains("export PYTORCH_ALLOC_CONF='max_split_size_mb:128,expandable_segments:True'"),
        "{text}"
    );
    assert!(text.contains("unset CUDA_LAUNCH_BLOCKING"), "{text}");
    // A debugging variable left set is a warning, not a failure.
    let (out, v) = verify(
        &[
            "--config",
            "configs/demo_cpu.yaml",
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[("CUDA_LAUNCH_BLOCKING", "1")],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0));
    let (s, saw) = status(&v, "gpu-state");
    assert_eq!(s, "warn");
    assert!(saw.contains("CUDA_LAUNCH_BLOCKING=1"), "{saw}");
}

#[test]
fn a_bad_label_and_an_unwritable_output_fail_their_checks() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let n = 8;
    let frames = vec![0u8; n * 3 * 3 * 16 * 16 * 4];
    let scalars = vec![0u8; n * 4 * 4];
    let labels: Vec<u8> = [0i64, 1, 1, 0, 9, 1, 0, 1]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    for file in ["train", "val"] {
        let views = vec![
            (
                "frames",
                TensorView::new(Dtype::F32, vec![n, 3, 3, 16, 16], &frames).unwrap(),
            ),
            (
                "scalars",
                TensorView::new(Dtype::F32, vec![n, 4], &scalars).unwrap(),
            ),
            (
                "target",
                TensorView::new(Dtype::I64, vec![n], &labels).unwrap(),
            ),
        ];
        std::fs::write(
            d.join(format!("{file}.safetensors")),
            safetensors::tensor::serialize(views, None).unwrap(),
        )
        .unwrap();
    }
    let cfg = d.join("cls.yaml");
    std::fs::write(
        &cfg,
        format!(
            "task: classification\nnum_labels: 2\nbatch_size: 4\ntemporal_frames: 3\nimage_size: 16\nscalar_features: 4\nepochs: 2\ndata: {{path: {}, val_path: {}}}\narchitecture: {{channels: [4, 8], embed_dim: 16, attention_heads: 2}}\n",
            d.join("train.safetensors").display(),
            d.join("val.safetensors").display()
        ),
    )
    .unwrap();
    let (out, v) = verify(
        &["--config", cfg.to_str().unwrap(), "--skip", "smoke"],
        &[],
        d,
    );
    assert_eq!(out.status.code(), Some(1));
    let (s, saw) = status(&v, "data");
    assert_eq!(s, "fail");
    assert!(
        saw.contains("label 9 in example 4 is outside [0, 2)"),
        "{saw}"
    );

    let file = d.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (out, v) = verify(
        &[
            "--config",
            "configs/demo_cpu.yaml",
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[],
        &file.join("runs"),
    );
    assert_eq!(out.status.code(), Some(1));
    let (s, saw) = status(&v, "disk");
    assert_eq!(s, "fail");
    assert!(saw.contains("not writable"), "{saw}");
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = verify(&["--config", "/nonexistent.yaml"], &[], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let (out, _) = verify(
        &["--config", "configs/demo_cpu.yaml", "--skip", "everything"],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let space = dir.path().join("space.yaml");
    std::fs::write(&space, "schema: space/v1\nparameters:\n  batchsize: [1]\n").unwrap();
    let (out, _) = verify(
        &[
            "--config",
            "configs/demo_cpu.yaml",
            "--space",
            space.to_str().unwrap(),
        ],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`parameters.batchsize`: not a config key")
    );
}

#[test]
fn a_sweep_space_is_sized_at_its_worst_corner() {
    // The toolkit's one space format (train sweep's W&B YAML): the memory
    // check takes the worst of the space's corners.
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.yaml");
    std::fs::write(&small, "batch_size: 8\nimage_size: 128\nepochs: 5\n").unwrap();
    let space = dir.path().join("space.yaml");
    std::fs::write(
        &space,
        "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 10\nparameters:\n  \
         batch_size: {min: 8, max: 1024}\n  learning_rate: {distribution: log_uniform_values, min: 0.0001, max: 0.01}\n",
    )
    .unwrap();
    let (out, v) = verify(
        &[
            "--config",
            small.to_str().unwrap(),
            "--gpu",
            "configs/gpus/t4.yaml",
            "--space",
            space.to_str().unwrap(),
            "--skip",
            "smoke",
            "--skip",
            "data",
        ],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let (s, saw) = status(&v, "memory");
    assert_eq!(s, "fail");
    assert!(saw.contains("worst case: batch_size=1024"), "{saw}");
}
