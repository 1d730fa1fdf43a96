//! The formats of a linter's findings, as a user and a code-scanning
//! service read them: concise (`path:line:col: severity[rule-id] message`)
//! for the scan and for configs, SARIF 2.1.0 for the scan (valid against
//! the schema in tests/fixtures/sarif: `sarif-2.1.0-rtm.5.json`, SARIF
//! 2.1.0's final schema as the npm package `@microsoft/jest-sarif`
//! 1.0.0-beta.0 ships it, MIT), and the usage error for a mode that does
//! not take them.

use assert_cmd::Command;
use predicates::prelude::*;
use testkit::{json, yaml, CALLER_ENV};

fn cfgcheck(dir: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cfgcheck"));
    for v in CALLER_ENV {
        c.env_remove(v);
    }
    c.current_dir(dir);
    c
}

fn scan_fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scan")
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn concise_is_one_line_a_finding_where_an_editor_jumps() {
    let args = ["--scan", "pair", "variable", "--host-ram-gib", "12"];
    let out = cfgcheck(&scan_fixtures())
        .args(args)
        .args(["--format", "concise"])
        .assert()
        .code(1);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let starts = [
        "pair/train.py:17:5: error[cuda-graphs-checkpointing] torch.compile mode \"reduce-overhead\" records CUDA graphs",
        "pair/train.py:19:56: warning[workers-small-host] 2 DataLoader workers",
        "pair/env.py:5:1: info[launch-blocking] CUDA_LAUNCH_BLOCKING=1",
        "variable/train.py:11:32: info[cuda-graphs-checkpointing] cannot tell: the torch.compile mode is args.compile_mode",
        "pair/broken.py:4: not parsed: syntax error",
        "verdict: errors (1 error(s), 1 warning(s), 1 info; 1 cannot tell; 6 file(s) scanned)",
    ];
    assert_eq!(lines.len(), starts.len(), "{text}");
    for (line, start) in lines.iter().zip(starts) {
        assert!(line.starts_with(start), "{line:?} should start {start:?}");
    }
    // The other half of the pair is on the finding's own line.
    assert!(
        lines[0].contains("(with pair/model.py:13:17: activation checkpointing"),
        "{}",
        lines[0]
    );
    // In a pipe, without --format, the scan stays YAML (scan/v2).
    let out = cfgcheck(&scan_fixtures()).args(args).assert().code(1);
    assert_eq!(yaml(&out.get_output().stdout)["schema"], "scan/v2");
}

#[test]
fn config_findings_in_concise_are_at_their_key() {
    let out = cfgcheck(&testkit::repo())
        .args([
            "configs/foreign/hf_training_args.json",
            "configs/foreign/project_nested.yaml",
            "configs/colab_full_stable.yaml",
            "--gpu",
            "configs/gpus/t4.yaml",
            "--host-ram-gib",
            "12.7",
            "--format",
            "concise",
        ])
        .assert()
        .code(1);
    let text = stdout(&out);
    for start in [
        // JSON: the key's quote, two spaces in.
        "configs/foreign/hf_training_args.json:25:3: error[cuda-graphs-checkpointing] ",
        "configs/foreign/hf_training_args.json:26:3: warning[workers-small-host] ",
        // A nested YAML key, four spaces in.
        "configs/foreign/project_nested.yaml:24:5: error[cuda-graphs-checkpointing] ",
        "configs/colab_full_stable.yaml:13:1: warning[allocator-fragmentation] 50 epochs",
        "verdict for configs/colab_full_stable.yaml: warnings (0 error(s), 1 warning(s), 0 info)",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(start)),
            "no line starts {start:?} in\n{text}"
        );
    }
    // The same column in cfgcheck/v2.
    let out = cfgcheck(&testkit::repo())
        .args(["configs/foreign/project_nested.yaml", "--format", "json"])
        .args(["--host-ram-gib", "12.7"])
        .assert()
        .code(1);
    let v = json(&out.get_output().stdout);
    let f = &v["results"][0]["findings"][0];
    assert_eq!((&f["line"], &f["col"]), (&24.into(), &5.into()), "{f}");
}

/// The schema as shipped, but for one pattern: `language`'s (of a run and
/// of a tool component) has a stray `]`, a literal in ECMAScript's regexes
/// that Rust's refuse; it is escaped, which means the same (cfgcheck writes
/// no `language`).
fn schema() -> jsonschema::Validator {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sarif/sarif-2.1.0-rtm.5.json");
    let text = std::fs::read_to_string(path).unwrap();
    let stray = r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$""#;
    assert_eq!(text.matches(stray).count(), 2);
    let text = text.replace(stray, r#""^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\\]?$""#);
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::draft4::new(&schema).expect("the SARIF schema compiles")
}

fn errors(validator: &jsonschema::Validator, log: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn sarif_is_valid_2_1_0_with_paths_under_srcroot() {
    let dir = scan_fixtures();
    let out = cfgcheck(&dir)
        .args(["--scan", "pair", "variable", "./hf", "--format", "sarif"])
        .args(["--host-ram-gib", "12"])
        .assert()
        .code(1);
    let log = json(&out.get_output().stdout);
    let validator = schema();
    assert_eq!(errors(&validator, &log), Vec::<String>::new());
    let run = &log["runs"][0];
    let root = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert!(root.starts_with("file:///") && root.ends_with("/tests/fixtures/scan/"));
    let uri = |r: &serde_json::Value| {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let results = run["results"].as_array().unwrap();
    let result = results
        .iter()
        .find(|r| uri(r) == "pair/train.py")
        .expect("pair/train.py's finding");
    assert_eq!(result["ruleId"], "cuda-graphs-checkpointing");
    assert_eq!(result["level"], "error");
    let place = &result["locations"][0]["physicalLocation"];
    assert_eq!(place["artifactLocation"]["uri"], "pair/train.py");
    assert_eq!(place["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(
        (
            &place["region"]["startLine"],
            &place["region"]["startColumn"]
        ),
        (&17.into(), &5.into())
    );
    let other = &result["relatedLocations"][0]["physicalLocation"];
    assert_eq!(other["artifactLocation"]["uri"], "pair/model.py");
    // `./hf` is named as hf/ relative to the root.
    let uris: Vec<String> = results.iter().map(uri).collect();
    assert!(uris.contains(&"hf/finetune.py".to_string()), "{uris:?}");
    // Each rule used: its id, its summary, its fix as help.
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "cuda-graphs-checkpointing",
            "launch-blocking",
            "workers-small-host"
        ]
    );
    for r in rules {
        assert!(!r["shortDescription"]["text"].as_str().unwrap().is_empty());
        assert!(!r["help"]["text"].as_str().unwrap().is_empty());
    }
    let index = result["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[index]["id"], result["ruleId"]);
    let note = &run["invocations"][0]["toolExecutionNotifications"][0];
    assert!(note["message"]["text"]
        .as_str()
        .unwrap()
        .starts_with("not parsed: syntax error"));
    // The validator does fail a log that is not SARIF.
    let mut bad = log.clone();
    bad["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(!errors(&validator, &bad).is_empty());
}

#[test]
fn a_clean_tree_is_an_empty_sarif_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.py"),
        "import torch\nx = torch.zeros(3)\n",
    )
    .unwrap();
    let out = cfgcheck(dir.path())
        .args(["--scan", ".", "--format", "sarif"])
        .assert()
        .success();
    let log = json(&out.get_output().stdout);
    assert_eq!(errors(&schema(), &log), Vec::<String>::new());
    assert_eq!(log["runs"][0]["results"], serde_json::json!([]));
}

#[test]
fn modes_that_do_not_take_a_format_say_so_with_exit_2() {
    let repo = testkit::repo();
    cfgcheck(&repo)
        .args(["configs/demo_cpu.yaml", "--format", "sarif"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--format sarif is for --scan (findings in code)",
        ))
        .stdout(predicate::str::is_empty());
    let log = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        log.path(),
        "RuntimeError: static input data pointer changed\n",
    )
    .unwrap();
    cfgcheck(&repo)
        .args(["--explain"])
        .arg(log.path())
        .args(["--format", "concise"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--format concise is for --scan and configs' findings; --explain writes table, yaml, json or csv",
        ));
}
