//! cfgcheck on configs it did not define, as a user runs it: the shipped
//! Hugging Face (JSON and YAML), Axolotl and nested project configs in
//! configs/foreign/, the seed-001 hazard found in each with each key's path
//! and line, `--fix` in place (YAML comments kept, JSON byte for byte but
//! the values changed), `--as`, and trainguard's own schema staying strict.

use assert_cmd::Command;
use predicates::prelude::*;
use testkit::{repo_path as repo, yaml, CALLER_ENV};

fn cfgcheck() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cfgcheck"));
    for v in CALLER_ENV {
        c.env_remove(v);
    }
    c.current_dir(testkit::repo());
    c
}

/// Against a T4 on Colab's 12.7 GiB host (seed 002's).
const ON_COLAB: [&str; 4] = ["--gpu", "configs/gpus/t4.yaml", "--host-ram-gib", "12.7"];

fn check(args: &[&str]) -> (i32, serde_yaml::Value) {
    let out = cfgcheck()
        .args(args)
        .args(ON_COLAB)
        .args(["--format", "yaml"])
        .output()
        .unwrap();
    (out.status.code().unwrap(), yaml(&out.stdout))
}

fn finding<'a>(result: &'a serde_yaml::Value, id: &str) -> &'a serde_yaml::Value {
    result["findings"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|f| f["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no {id} in {result:?}"))
}

fn evidence(f: &serde_yaml::Value) -> Vec<(String, u64)> {
    f["evidence"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["key"].as_str().unwrap().to_string(),
                k["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn fix(path: &str, args: &[&str]) -> (i32, String, String) {
    let out = cfgcheck()
        .arg(path)
        .args(args)
        .args(ON_COLAB)
        .arg("--fix")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The lines `--fix` changed, as (before, after).
fn changed(before: &str, after: &str) -> Vec<(String, String)> {
    assert_eq!(before.lines().count(), after.lines().count());
    before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn the_three_formats_each_have_the_hazard_and_fix_it_in_place() {
    // (file, format, mode key and line, checkpointing key and line)
    let cases = [
        ("configs/foreign/hf_training_args.json", "hf", 25, 21),
        ("configs/foreign/hf_sft.yaml", "hf", 28, 25),
        ("configs/foreign/axolotl_lora.yaml", "axolotl", 40, 38),
    ];
    for (file, format, mode_line, ckpt_line) in cases {
        let (code, v) = check(&[file]);
        assert_eq!(code, 1, "{file}: {v:?}");
        let r = &v["results"][0];
        assert_eq!(r["format"].as_str(), Some(format), "{file}");
        assert!(r["estimate"].is_null() && r["resolved"].is_null(), "{file}");
        let f = finding(r, "cuda-graphs-checkpointing");
        assert_eq!(f["severity"].as_str(), Some("error"));
        assert_eq!(f["key"].as_str(), Some("torch_compile_mode"));
        assert_eq!(f["line"].as_u64(), Some(mode_line));
        let ev = evidence(f);
        assert!(
            ev.contains(&("gradient_checkpointing".into(), ckpt_line)),
            "{file}: {ev:?}"
        );
        assert!(f["message"]
            .as_str()
            .unwrap()
            .contains("static input data pointer changed"));
        let w = finding(r, "workers-small-host");
        assert_eq!(w["key"].as_str(), Some("dataloader_num_workers"));
        let read: Vec<&str> = r["read_keys"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|k| k["key"].as_str().unwrap())
            .collect();
        assert!(
            read.contains(&"torch_compile_mode") && read.contains(&"dataloader_num_workers"),
            "{read:?}"
        );
        // Keys no rule reads are not listed (they are ignored, not read).
        assert!(!read.contains(&"learning_rate"), "{read:?}");

        let before = std::fs::read_to_string(repo(file)).unwrap();
        let (code, after, stderr) = fix(file, &[]);
        assert_eq!(code, 0, "{file}: {stderr}");
        assert!(
            stderr.contains("without them compile keeps most of the speed-up"),
            "{stderr}"
        );
        let lines = changed(&before, &after);
        assert_eq!(lines.len(), 2, "{file}: {lines:?}");
        if file.ends_with(".json") {
            // Every byte but the two values is as it was.
            let expected = before
                .replace("\"reduce-overhead\"", "\"default\"")
                .replace(
                    "\"dataloader_num_workers\": 4",
                    "\"dataloader_num_workers\": 0",
                );
            assert_eq!(after, expected);
        } else {
            // Each changed line keeps its comment; no other line moves.
            for (old, new) in &lines {
                let comment = |l: &str| l.split_once(" #").map(|(_, c)| c.to_string());
                assert_eq!(comment(old), comment(new), "{new}");
            }
            assert!(
                lines[0].1.starts_with("torch_compile_mode: default"),
                "{lines:?}"
            );
            assert_eq!(lines[1].1, "dataloader_num_workers: 0");
        }
        // The fixed file passes its own check.
        let dir = tempfile::tempdir().unwrap();
        let name = std::path::Path::new(file).file_name().unwrap();
        let fixed = testkit::write(dir.path(), name.to_str().unwrap(), &after);
        let (code, v) = check(&[fixed.to_str().unwrap()]);
        assert_eq!(code, 0, "{v:?}");
        assert_eq!(v["results"][0]["format"].as_str(), Some(format));
    }
}

#[test]
fn nested_keys_and_halves_in_different_sections() {
    let file = "configs/foreign/project_nested.yaml";
    let (code, v) = check(&[file]);
    assert_eq!(code, 1);
    let r = &v["results"][0];
    assert_eq!(r["format"].as_str(), Some("generic"));
    let f = finding(r, "cuda-graphs-checkpointing");
    assert_eq!(
        f["key"].as_str(),
        Some("trainer.compile.torch_compile_mode")
    );
    assert_eq!(
        evidence(f),
        [
            ("trainer.compile.torch_compile_mode".to_string(), 24),
            ("model.gradient_checkpointing".to_string(), 11)
        ]
    );
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("(model.gradient_checkpointing, line 11)"));
    assert_eq!(
        finding(r, "workers-small-host")["key"].as_str(),
        Some("data.loader.num_workers")
    );

    let before = std::fs::read_to_string(repo(file)).unwrap();
    let (code, after, _) = fix(file, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        changed(&before, &after),
        [
            (
                "    num_workers: 4".to_string(),
                "    num_workers: 0".to_string()
            ),
            (
                "    torch_compile_mode: max-autotune   # inductor with CUDA graphs".to_string(),
                "    torch_compile_mode: default   # inductor with CUDA graphs".to_string()
            )
        ]
    );
}

/// A project's own config that shares a key name or two with trainguard's
/// (`learning_rate`, `epochs`) is not read as trainguard's and refused for
/// its other keys: it is a config of no known schema, and since no rule
/// reads its keys, refused with every `--as` offered.
#[test]
fn a_config_sharing_one_key_name_with_ours_is_not_ours() {
    let dir = tempfile::tempdir().unwrap();
    let own = testkit::write(
        dir.path(),
        "mine.yaml",
        "learning_rate: 0.1\nhidden: 64\nepochs: 3\ndropout_p: 0.2\n",
    );
    let out = cfgcheck().arg(&own).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr);
    assert!(!stderr.contains("unknown key"), "{stderr}");
    assert!(stderr.contains("not a config cfgcheck knows"), "{stderr}");
    for named in ["--as hf ", "--as axolotl", "--as trainguard ", "--as any "] {
        assert!(stderr.contains(named), "{named}: {stderr}");
    }
    let (code, v) = check(&[own.to_str().unwrap(), "--as", "any"]);
    assert_eq!(code, 0, "{v:?}");
    assert_eq!(v["results"][0]["format"].as_str(), Some("generic"));
}

#[test]
fn trainguard_configs_with_a_typo_stay_strict() {
    let dir = tempfile::tempdir().unwrap();
    let typo = testkit::write(
        dir.path(),
        "typo.yaml",
        "# ours, one key misspelt\nbatchsize: 8\nepochs: 3\ntorch_compile: true\ntorch_compile_mode: reduce-overhead\ngradient_checkpointing: true\n",
    );
    cfgcheck()
        .arg(&typo)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "line 2: unknown key `batchsize`; did you mean `batch_size`?",
        ))
        .stderr(predicate::str::contains(
            "5 of its 5 top-level keys are trainguard's or a typo of one; if it is another format, tell cfgcheck which: --as hf",
        ))
        .stderr(predicate::str::contains("--as any (every format's keys"));
    // Spelt right, it is read as trainguard's, with its estimate.
    let good = testkit::write(
        dir.path(),
        "good.yaml",
        &std::fs::read_to_string(&typo)
            .unwrap()
            .replace("batchsize", "batch_size"),
    );
    let (code, v) = check(&[good.to_str().unwrap()]);
    assert_eq!(code, 1);
    let r = &v["results"][0];
    assert_eq!(r["format"].as_str(), Some("trainguard"));
    assert!(r["estimate"]["peak_mib"].as_u64().is_some());
    assert_eq!(
        finding(r, "cuda-graphs-checkpointing")["line"].as_u64(),
        Some(5)
    );
}

#[test]
fn as_names_the_format() {
    // Read as Axolotl's, a mode without torch_compile compiles nothing.
    let (code, v) = check(&["configs/foreign/hf_sft.yaml", "--as", "axolotl"]);
    let r = &v["results"][0];
    assert_eq!(r["format"].as_str(), Some("axolotl"));
    assert!(r["findings"]
        .as_sequence()
        .unwrap()
        .iter()
        .all(|f| f["id"].as_str() != Some("cuda-graphs-checkpointing")));
    assert_eq!(code, 0, "a warning only: {r:?}");
    // A project's nesting read as Hugging Face's: the mode turns compile on.
    let (code, v) = check(&["configs/foreign/project_nested.yaml", "--as", "hf"]);
    assert_eq!((code, v["results"][0]["format"].as_str()), (1, Some("hf")));
    // Read as trainguard's, a foreign file is refused key by key.
    cfgcheck()
        .args(["configs/foreign/hf_sft.yaml", "--as", "trainguard"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown key `output_dir`"));
    // A trainguard config read as `any`: its keys at any depth.
    let (_, v) = check(&["configs/colab_optimized.yaml", "--as", "any"]);
    assert_eq!(v["results"][0]["format"].as_str(), Some("generic"));
}

#[test]
fn a_bad_as_value_is_a_usage_error() {
    cfgcheck()
        .args(["configs/foreign/hf_sft.yaml", "--as", "huggingface"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "invalid value 'huggingface' for '--as <FORMAT>': expected hf, axolotl, trainguard or any",
        ));
}

#[test]
fn fit_is_for_trainguard_configs_only() {
    cfgcheck()
        .args(["configs/foreign/axolotl_lora.yaml", "--fit", "--gpu", "configs/gpus/t4.yaml"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("--fit sizes trainguard's own model, and this file is not a trainguard config (read as axolotl"));
}
