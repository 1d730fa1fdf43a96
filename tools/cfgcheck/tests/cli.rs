//! cfgcheck as a user runs it: the seed configs against the shipped GPU
//! profiles, the CUDA-graph hazard, --fix and --fit, and bad input.

use assert_cmd::Command;
use predicates::prelude::*;
use testkit::{repo_path as repo, yaml, CALLER_ENV};

fn cfgcheck() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cfgcheck"));
    // Results must not depend on the caller's shell.
    for v in CALLER_ENV {
        c.env_remove(v);
    }
    c.current_dir(testkit::repo());
    c
}

const SEEDS: [&str; 3] = [
    "configs/colab_optimized_full.yaml",
    "configs/colab_full_stable.yaml",
    "configs/colab_optimized.yaml",
];

#[test]
fn seed_configs_run_on_every_profile() {
    // The seeds ran all three on a T4: no errors anywhere; 50 epochs without
    // expandable segments is the one warning they share. The profiles by
    // name (built in).
    for gpu in ["t4", "a100-40gb", "h100-80gb"] {
        let out = cfgcheck()
            .args(SEEDS)
            .args(["--gpu", gpu, "--format", "yaml", "--host-ram-gib", "12.7"])
            .assert()
            .success();
        let v = yaml(&out.get_output().stdout);
        assert_eq!(v["schema"].as_str(), Some("cfgcheck/v2"));
        for r in v["results"].as_sequence().unwrap() {
            assert_eq!(r["verdict"].as_str(), Some("warnings"), "{gpu}: {r:?}");
            let ids: Vec<&str> = r["findings"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|f| f["id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, ["allocator-fragmentation"], "{gpu}");
            assert!(r["estimate"]["peak_mib"].as_u64().unwrap() < 15360);
        }
        // --strict makes that warning a failure.
        cfgcheck()
            .args(SEEDS)
            .args(["--gpu", &format!("configs/gpus/{gpu}.yaml"), "--strict"])
            .assert()
            .code(1);
    }
}

/// The GPU profiles ship inside cfgcheck: `--gpu t4` works from a directory
/// that has no configs/ (as the pip wheel's user has none); an unknown name
/// is bad input that lists the names.
#[test]
fn gpu_profiles_by_name_from_outside_the_repository() {
    let away = tempfile::tempdir().unwrap();
    let cfg = repo(SEEDS[0]);
    for (name, total) in [("t4", 15360), ("a100", 40960), ("h100-80gb", 81559)] {
        let out = cfgcheck()
            .current_dir(away.path())
            .args(["--gpu", name, "--format", "json"])
            .arg(&cfg)
            .assert()
            .success();
        let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(v["results"][0]["target"]["total_mib"], total, "{name}: {v}");
    }
    cfgcheck()
        .current_dir(away.path())
        .args(["--gpu", "v100"])
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "no GPU profile named \"v100\": the built-in ones are a100-40gb (a100), h100-80gb (h100), t4",
        ));
    // A value that looks like a file is one: not there, it cannot be opened.
    cfgcheck()
        .current_dir(away.path())
        .args(["--gpu", "t4.yaml"])
        .arg(&cfg)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("t4.yaml: cannot open"));
}

#[test]
fn reduce_overhead_with_checkpointing_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("a.yaml");
    let text = std::fs::read_to_string(repo(SEEDS[0])).unwrap();
    let written = text.replace(
        "torch_compile_mode: \"default\"",
        "torch_compile_mode: \"reduce-overhead\"",
    );
    assert_ne!(written, text);
    std::fs::write(&cfg, &written).unwrap();
    cfgcheck()
        .arg(&cfg)
        .args(["--gpu", "configs/gpus/t4.yaml", "--format", "csv"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "cuda-graphs-checkpointing,error,torch_compile_mode,10,",
        ))
        .stdout(predicate::str::contains(
            "static input data pointer changed",
        ));

    // --fix: the mode goes back to default, comments and order stay.
    let out = cfgcheck()
        .arg(&cfg)
        .args(["--gpu", "configs/gpus/t4.yaml", "--fix"])
        .assert()
        .success();
    let fixed = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let changed: Vec<(&str, &str)> = written
        .lines()
        .zip(fixed.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(
        changed[0].1,
        "torch_compile_mode: \"default\"        # Compatible with gradient checkpointing"
    );
    assert!(
        fixed.starts_with(&text),
        "everything but the mode is as written"
    );
    assert!(
        fixed.ends_with("environment:\n  PYTORCH_ALLOC_CONF: expandable_segments:True\n"),
        "{fixed}"
    );
    assert!(String::from_utf8_lossy(&out.get_output().stderr)
        .contains("\"default\" keeps most of the speed-up"));
}

#[test]
fn memory_overflow_against_the_t4_and_fit_on_the_a100() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("big.yaml");
    std::fs::write(
        &cfg,
        "batch_size: 64   # too big\nimage_size: 256\nepochs: 5\n",
    )
    .unwrap();
    let out = cfgcheck()
        .arg(&cfg)
        .args(["--gpu", "configs/gpus/t4.yaml", "--format", "json"])
        .assert()
        .code(1);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let f = &v["results"][0]["findings"][0];
    assert_eq!(f["id"], "memory-exceeds-free");
    assert_eq!(f["line"], 1);
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.contains("largest batch_size that fits")
            && fix.contains("gradient_checkpointing: true saves"),
        "{fix}"
    );

    let out = cfgcheck()
        .arg(&cfg)
        .args(["--gpu", "configs/gpus/t4.yaml", "--fix"])
        .assert()
        .success();
    let fixed = dir.path().join("fixed.yaml");
    std::fs::write(&fixed, &out.get_output().stdout).unwrap();
    cfgcheck()
        .arg(&fixed)
        .args(["--gpu", "configs/gpus/t4.yaml"])
        .assert()
        .success();

    let out = cfgcheck()
        .arg(&cfg)
        .args(["--gpu", "configs/gpus/a100-40gb.yaml", "--fit"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.starts_with("batch_size: ") && text.contains("# too big"),
        "{text}"
    );
    assert_ne!(text.lines().next(), Some("batch_size: 64   # too big"));
    cfgcheck()
        .arg(&cfg)
        .arg("--fit")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--fit needs a target GPU"));
}

#[test]
fn without_a_target_memory_rules_are_skipped_and_said() {
    let out = cfgcheck()
        .arg(SEEDS[1])
        .args(["--format", "yaml"])
        .assert()
        .success();
    let v = yaml(&out.get_output().stdout);
    let skipped = &v["results"][0]["skipped"][0];
    assert!(
        skipped["reason"]
            .as_str()
            .unwrap()
            .contains("no target GPU"),
        "{skipped:?}"
    );
    assert_eq!(v["results"][0]["target"], serde_yaml::Value::Null);
}

#[test]
fn bad_inputs_exit_2_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for i in 0..9 {
        let prev = if i == 0 {
            "a".to_string()
        } else {
            format!("b{}", i - 1)
        };
        bomb += &format!("b{i}: &b{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n");
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.yaml", vec![], "empty"),
        (
            "garbage.yaml",
            vec![0x00, 0xff, 0x13, 0x37, 0xc3, 0x28],
            "not text",
        ),
        ("bomb.yaml", bomb.into_bytes(), "repetition limit exceeded"),
        (
            "huge.yaml",
            format!("# {}\n", "x".repeat(10 * 1024 * 1024)).into_bytes(),
            "larger than 4 MiB",
        ),
        (
            "types.yaml",
            b"epochs: 5\nbatch_size: [1, 2]\n".to_vec(),
            "batch_size: invalid type: sequence",
        ),
        (
            "zero.yaml",
            b"batch_size: 0\n".to_vec(),
            "line 1: `batch_size`: expected a positive integer, found 0",
        ),
        (
            "unknown.yaml",
            b"epochs: 5\ngradient_checkpoint: true\n".to_vec(),
            "line 2: unknown key `gradient_checkpoint`; did you mean `gradient_checkpointing`?",
        ),
        (
            "channels.yaml",
            b"architecture:\n  channels: [64, -1]\n".to_vec(),
            "architecture.channels[1]",
        ),
    ];
    for (file, bytes, expected) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, bytes).unwrap();
        cfgcheck()
            .arg(&path)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(file).and(predicate::str::contains(expected)));
    }
    cfgcheck()
        .arg("/nonexistent.yaml")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent.yaml: cannot open"));
    // A report of another schema on stdin.
    cfgcheck()
        .arg(SEEDS[0])
        .write_stdin("schema: memdiag/v2\nsource: nvml\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "<stdin>: field `schema`: expected memdiag/v1, found memdiag/v2",
        ));
    // One bad config does not hide the verdicts of the others.
    let bad = dir.path().join("zero.yaml");
    cfgcheck()
        .arg(&bad)
        .arg(SEEDS[0])
        .args(["--format", "csv"])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("colab_optimized_full.yaml"));
}

#[test]
fn usage_errors_exit_2() {
    cfgcheck().assert().code(2);
    cfgcheck()
        .args([SEEDS[0], SEEDS[1], "--fix"])
        .assert()
        .code(2);
    cfgcheck()
        .args([SEEDS[0], "--margin", "150"])
        .assert()
        .code(2);
    cfgcheck()
        .args([SEEDS[0], "--gpu", "configs/gpus/t4.yaml", "--device", "3"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no GPU 3"));
}

#[test]
fn list_rules_names_every_rule() {
    let out = cfgcheck().arg("--list-rules").assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), diagnose::rules::RULES.len());
    assert!(text.contains("cuda-graphs-checkpointing"));
}

fn explain(log: &[u8], extra: &[&str]) -> assert_cmd::assert::Assert {
    cfgcheck()
        .args(["--explain", "-", "--format", "json"])
        .args(extra)
        .write_stdin(log.to_vec())
        .assert()
}

/// A Hugging Face Trainer's log gets the Trainer's words: `num_labels`,
/// its batch flags; never train's `num_classes` or `train check-data`.
#[test]
fn explain_of_a_trainer_log_speaks_the_trainers_words() {
    let log = "***** Running training *****\n\
               {'loss': 2.3026, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.5}\n\
               IndexError: Target 7 is out of bounds.\n";
    let out = explain(log.as_bytes(), &[]).success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let fix = v["found"][0]["fix"].as_str().unwrap();
    assert!(fix.contains("num_labels"), "{fix}");
    assert!(
        !fix.contains("num_classes") && !fix.contains("check-data"),
        "{fix}"
    );
}

#[test]
fn explain_names_cause_evidence_and_fix_from_real_messages() {
    // Seed 001's lines, and a real PyTorch OOM whose reserved-but-unallocated
    // memory exceeds the request (fragmentation).
    let log = "Epoch 1/50 | Train Loss: 4.1156 | Val Loss: 1.3616 | LR: 0.000001 | Time: 140.54s\n\
               New best model saved! (val_loss: 1.3616)\n\
               RuntimeError: static input data pointer changed.\n\
               input name: primals_1. data pointer changed from 12919305216 to 12919242752.\n\
               torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 364.31 MiB is free. Process 175356 has 77.26 GiB memory in use. Of the allocated memory 72.12 GiB is allocated by PyTorch, and 3.78 GiB is reserved by PyTorch but unallocated.\n";
    let out = explain(log.as_bytes(), &[]).success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["schema"], "cfgcheck-explain/v1");
    let found = v["found"].as_array().unwrap();
    assert_eq!(found[0]["id"], "cuda-graphs-checkpointing");
    assert_eq!(found[0]["evidence"][0]["line"], 3);
    assert!(found[0]["cause"].as_str().unwrap().contains("CUDA graphs"));
    assert_eq!(found[1]["id"], "allocator-fragmentation");
    assert_eq!(found[1]["evidence"][0]["line"], 5);
    assert!(found[1]["fix"]
        .as_str()
        .unwrap()
        .contains("expandable_segments:True"));
}

#[test]
fn explain_knows_the_deallocation_face_of_the_cuda_graph_crash() {
    // pytorch#154306: torch 2.11's cudagraph_trees.py raises this instead of
    // "static input data pointer changed" (two spaces before "recording").
    let log = "Epoch 1/50 | Train Loss: 4.1156 | Val Loss: 1.3616 | LR: 0.000001 | Time: 140.54s\n\
               RuntimeError: TODO: graph recording observed an input tensor deallocate during graph  recording that did not occur during replay. Please file an issue.\n";
    let out = explain(log.as_bytes(), &[]).success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let found = v["found"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0]["id"], "cuda-graphs-checkpointing");
    assert_eq!(found[0]["evidence"][0]["line"], 2);
}

#[test]
fn explain_knows_a_broken_allocator_and_says_restart() {
    // pytorch#188008 (torch 2.14.0, expandable segments): after a mapping
    // failed part-way, every allocation fails this assert.
    let log = "epoch 3 step 120\n\
               Traceback (most recent call last):\n\
               RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\":487, please report a bug to PyTorch.\n";
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("a.yaml");
    std::fs::write(&cfg, "batch_size: 64\n").unwrap();
    let out = explain(log.as_bytes(), &["--config", cfg.to_str().unwrap()]).success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let found = v["found"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(found[0]["id"], "allocator-broken");
    assert_eq!(found[0]["class"], "allocator-broken");
    assert_eq!(found[0]["evidence"][0]["line"], 3);
    let fix = found[0]["fix"].as_str().unwrap();
    assert!(fix.starts_with("restart the run in a new process"), "{fix}");
    assert!(fix.contains("a smaller batch_size will not help"), "{fix}");
    // No config change fixes it: no diff that shrinks the batch.
    let diff = found[0]["config_diff"].as_str().unwrap();
    assert!(!diff.contains("+batch_size"), "{diff}");
}

#[test]
fn explain_with_a_config_gives_the_fix_as_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("a.yaml");
    let text = std::fs::read_to_string(repo(SEEDS[0])).unwrap();
    std::fs::write(
        &cfg,
        text.replace(
            "torch_compile_mode: \"default\"",
            "torch_compile_mode: \"reduce-overhead\"",
        ),
    )
    .unwrap();
    let out = explain(
        b"RuntimeError: static input data pointer changed.\n",
        &["--config", cfg.to_str().unwrap()],
    )
    .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let diff = v["found"][0]["config_diff"].as_str().unwrap();
    assert!(
        diff.contains("-torch_compile_mode: \"reduce-overhead\"")
            && diff.contains("+torch_compile_mode: \"default\""),
        "{diff}"
    );
    // An OOM against a config too big for the card the message names: the
    // largest batch that fits that capacity.
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, "batch_size: 512\nimage_size: 256\n").unwrap();
    let oom = "CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 14.75 GiB of which 1.02 GiB is free. Of the allocated memory 12.21 GiB is allocated by PyTorch, and 33.46 MiB is reserved by PyTorch but unallocated.\n";
    let out = explain(oom.as_bytes(), &["--config", big.to_str().unwrap()]).success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["found"][0]["id"], "memory-exceeds-free");
    let diff = v["found"][0]["config_diff"].as_str().unwrap();
    assert!(
        diff.contains("-batch_size: 512") && diff.contains("+batch_size: "),
        "{diff}"
    );
}

#[test]
fn explain_exit_codes() {
    // Nothing known: exit 1, and the last error-looking line on stderr.
    explain(b"step 1\nValueError: shapes differ\nstep 2\n", &[])
        .code(1)
        .stderr(predicate::str::contains(
            "no known failure in 3 lines; last error-looking line 2: ValueError: shapes differ",
        ));
    explain(b"", &[])
        .code(2)
        .stderr(predicate::str::contains("empty"));
    explain(&[0x7f, b'E', b'L', b'F', 0, 1, 2, 3], &[])
        .code(2)
        .stderr(predicate::str::contains("binary data"));
    cfgcheck()
        .args(["--explain", "/nonexistent.log"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent.log: cannot open"));
    cfgcheck()
        .args(["--explain", "-", SEEDS[0]])
        .assert()
        .code(2);
}

/// A full disk under stderr (/dev/full answers every write with ENOSPC):
/// the documented code still comes out, not Rust's 101 from a panicking
/// `eprintln!` (found by the reliability disk-full test).
#[test]
fn a_full_disk_under_stderr_keeps_the_exit_code() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cfgcheck"))
        .arg("no-such-config.yaml")
        .stderr(
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .current_dir(testkit::repo())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
