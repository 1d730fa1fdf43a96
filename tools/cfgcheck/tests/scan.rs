//! `cfgcheck --scan` as a user runs it, on the small trees of Python files
//! in tests/fixtures/scan: the pair in two files, one half alone, the mode
//! as a variable, Hugging Face's TrainingArguments, a syntax error, and
//! what the walk leaves out.

use assert_cmd::Command;
use predicates::prelude::*;
use testkit::{json, CALLER_ENV};

fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scan")
}

/// cfgcheck run in the fixtures' directory, so paths read `pair/train.py`.
fn cfgcheck() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cfgcheck"));
    for v in CALLER_ENV {
        c.env_remove(v);
    }
    c.current_dir(fixtures());
    c
}

fn scan(args: &[&str], code: i32) -> serde_json::Value {
    let out = cfgcheck()
        .arg("--scan")
        .args(args)
        .args(["--format", "json"])
        .assert()
        .code(code);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["schema"], "scan/v2");
    v
}

/// Each finding as (id, severity, [file:line of each half]).
fn findings(v: &serde_json::Value) -> Vec<(String, String, Vec<String>)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let places = f["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| format!("{}:{}", e["file"].as_str().unwrap(), e["line"]))
                .collect();
            (
                f["id"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
                places,
            )
        })
        .collect()
}

fn finding(id: &str, severity: &str, places: &[&str]) -> (String, String, Vec<String>) {
    (
        id.into(),
        severity.into(),
        places.iter().map(|p| p.to_string()).collect(),
    )
}

#[test]
fn the_pair_in_two_files_is_one_error_with_both_places() {
    let v = scan(&["pair", "--host-ram-gib", "12"], 1);
    assert_eq!(v["verdict"], "errors");
    assert_eq!(
        findings(&v),
        [
            finding(
                "cuda-graphs-checkpointing",
                "error",
                &["pair/train.py:17", "pair/model.py:13"]
            ),
            finding("workers-small-host", "warning", &["pair/train.py:19"]),
            // env.py:9 sets it under `if "--debug"`: not every run.
            finding("launch-blocking", "info", &["pair/env.py:5"]),
        ]
    );
    let f = &v["findings"][0];
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("static input data pointer changed"));
    assert!(f["fix"].as_str().unwrap().contains("mode=\"default\""));
    assert_eq!(
        f["evidence"][1]["code"],
        "x = ckpt(block, x, use_reentrant=False)"
    );
    // The file with a syntax error is said, and the others still scanned.
    assert_eq!(v["files"]["scanned"], 4);
    assert_eq!(v["files"]["parsed"], 3);
    assert_eq!(v["not_parsed"][0]["file"], "pair/broken.py");
    assert_eq!(v["not_parsed"][0]["line"], 4);
    // A warning alone passes, unless --strict.
    let v = scan(&["pair/train.py", "--host-ram-gib", "12"], 0);
    assert_eq!(v["verdict"], "warnings");
    cfgcheck()
        .args([
            "--scan",
            "pair/train.py",
            "--host-ram-gib",
            "12",
            "--strict",
        ])
        .assert()
        .code(1);
    // A big host: no workers finding, the crash pair still fails.
    let v = scan(&["pair", "--host-ram-gib", "64"], 1);
    let ids: Vec<String> = findings(&v).into_iter().map(|f| f.0).collect();
    assert_eq!(ids, ["cuda-graphs-checkpointing", "launch-blocking"]);
}

#[test]
fn one_half_alone_is_no_finding() {
    let v = scan(&["one_half", "--host-ram-gib", "12"], 0);
    assert_eq!(v["verdict"], "ok");
    assert_eq!(v["findings"], serde_json::json!([]));
    assert_eq!(v["cannot_tell"], serde_json::json!([]));
    // The checkpointing half alone, from the pair's tree, is nothing either.
    let v = scan(&["pair/model.py", "one_half/eval.py"], 0);
    assert_eq!(v["findings"], serde_json::json!([]));
}

/// pytorch#193193: a compiled tower that runs its checkpointed blocks twice
/// (through a helper, as CoCa's text tower does) needs 2.3-3.5x eager's
/// memory; the compile in another file is the other half. A warning: the
/// scan passes unless --strict.
#[test]
fn a_compiled_tower_that_checkpoints_its_blocks_twice_is_a_warning() {
    let v = scan(&["twice"], 0);
    assert_eq!(v["verdict"], "warnings");
    assert_eq!(
        findings(&v),
        [finding(
            "compiled-checkpoint-twice",
            "warning",
            &["twice/tower.py:19", "twice/train.py:7"]
        )]
    );
    let f = &v["findings"][0];
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("self.blocks") && message.contains("pytorch#193193"),
        "{message}"
    );
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .contains("torch._dynamo.graph_break()"));
    cfgcheck()
        .args(["--scan", "twice", "--strict"])
        .assert()
        .code(1);
    // The tower alone (no compile), and pair/'s one traversal under a
    // compile, are no finding.
    assert_eq!(
        scan(&["twice/tower.py"], 0)["findings"],
        serde_json::json!([])
    );
    let v = scan(&["pair", "--host-ram-gib", "64"], 1);
    assert!(findings(&v)
        .iter()
        .all(|f| f.0 != "compiled-checkpoint-twice"));
}

#[test]
fn a_mode_in_a_variable_cannot_be_told() {
    let v = scan(&["variable"], 0);
    assert_eq!(v["findings"], serde_json::json!([]));
    let c = &v["cannot_tell"][0];
    assert_eq!(c["id"], "cuda-graphs-checkpointing");
    assert_eq!(c["severity"], "info");
    assert_eq!(
        (c["file"].as_str().unwrap(), &c["line"]),
        ("variable/train.py", &serde_json::json!(11))
    );
    let why = c["why"].as_str().unwrap();
    assert!(
        why.contains("args.compile_mode") && why.contains("variable/blocks.py:11"),
        "{why}"
    );
}

#[test]
fn hugging_face_training_arguments_are_the_same_hazard() {
    let v = scan(&["hf", "--host-ram-gib", "12.7"], 1);
    assert_eq!(
        findings(&v),
        [
            finding(
                "cuda-graphs-checkpointing",
                "error",
                &["hf/finetune.py:8", "hf/finetune.py:9"]
            ),
            finding("workers-small-host", "warning", &["hf/finetune.py:10"]),
        ]
    );
    assert!(v["findings"][0]["fix"]
        .as_str()
        .unwrap()
        .contains("torch_compile_mode=\"default\""));
}

#[test]
fn csv_and_table_say_the_same() {
    let out = cfgcheck()
        .args([
            "--scan",
            "pair",
            "variable",
            "--host-ram-gib",
            "12",
            "--format",
            "csv",
        ])
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = rows.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        ["kind", "id", "severity", "file", "line", "col", "evidence", "message", "fix"]
    );
    let kinds: Vec<[String; 4]> = rows
        .records()
        .map(|r| {
            let r = r.unwrap();
            [0, 3, 4, 5].map(|i| r[i].to_string())
        })
        .collect();
    // The column: the mode= argument, the num_workers= argument, the
    // statement, the compile call; none for a file not parsed.
    let want = [
        ["finding", "pair/train.py", "17", "5"],
        ["finding", "pair/train.py", "19", "56"],
        ["finding", "pair/env.py", "5", "1"],
        ["cannot-tell", "variable/train.py", "11", "32"],
        ["not-parsed", "pair/broken.py", "4", ""],
    ];
    let want: Vec<[String; 4]> = want.iter().map(|r| r.map(String::from)).collect();
    assert_eq!(kinds, want);
    cfgcheck()
        .args([
            "--scan",
            "pair",
            "--host-ram-gib",
            "12",
            "--format",
            "table",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("pair/model.py:13:17"))
        .stdout(predicate::str::contains(
            "not parsed: pair/broken.py:4: syntax error",
        ))
        .stdout(predicate::str::contains(
            "verdict: errors (1 error(s), 1 warning(s), 1 info",
        ));
}

#[test]
fn bad_paths_are_bad_usage_and_bad_files_are_reported() {
    cfgcheck()
        .args(["--scan", "pair", "no/such/dir"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("no/such/dir"));
    cfgcheck()
        .args(["--scan", "pair", "cfg.yaml"])
        .assert()
        .code(2);
    // --scan does not take a config's flags.
    cfgcheck()
        .args(["--fix", "--scan", "pair"])
        .assert()
        .code(2);

    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &[u8]| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        "train.py",
        b"import torch\nm = torch.compile(m, mode='max-autotune')\n",
    );
    w("latin1.py", b"# caf\xe9\nx = 1\n");
    // Other people's code, left out below a named directory: its own
    // checkpointing must not pair with the user's compile.
    let ckpt = b"import torch.utils.checkpoint as cp\ncp.checkpoint(f, x)\n";
    w(".venv/lib/python3.11/site-packages/lib/a.py", ckpt);
    w("venv/pyvenv.cfg", b"home = /usr/bin\n");
    w("venv/lib/b.py", ckpt);
    w("__pycache__/c.py", ckpt);
    w("vendor/site-packages/d.py", ckpt);
    w("notes.txt", ckpt);
    let out = Command::new(env!("CARGO_BIN_EXE_cfgcheck"))
        .arg("--scan")
        .arg(dir.path())
        .args(["--format", "json"])
        .assert()
        .code(0);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["files"]["scanned"], 2, "{v}");
    assert_eq!(v["findings"], serde_json::json!([]));
    let reason = v["not_parsed"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("not UTF-8"), "{reason}");
    // Named, a left-out directory is scanned: now the pair is there.
    let out = Command::new(env!("CARGO_BIN_EXE_cfgcheck"))
        .arg("--scan")
        .arg(dir.path().join("train.py"))
        .arg(dir.path().join("venv"))
        .args(["--format", "json"])
        .assert()
        .code(1);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["findings"][0]["evidence"][1]["line"], 2);
    // A file named is read as Python whatever its name.
    let out = Command::new(env!("CARGO_BIN_EXE_cfgcheck"))
        .arg("--scan")
        .arg(dir.path().join("notes.txt"))
        .args(["--format", "json"])
        .assert()
        .code(0);
    let v = json(&out.get_output().stdout);
    assert_eq!(
        (&v["files"]["scanned"], &v["files"]["parsed"]),
        (&serde_json::json!(1), &serde_json::json!(1))
    );
}

#[test]
fn the_repos_own_seed_001_reproducer_is_found() {
    // bench/gpu/cudagraph_crash.py is the script the GPU recipe runs to
    // crash the way seed 001 did: torch.compile(mode="reduce-overhead") on
    // a model whose checkpointing goes through torch.utils.checkpoint.
    let out = Command::new(env!("CARGO_BIN_EXE_cfgcheck"))
        .current_dir(testkit::repo())
        .args(["--scan", "bench/gpu/cudagraph_crash.py", "--format", "json"])
        .assert()
        .code(1);
    let v = json(&out.get_output().stdout);
    let f = &v["findings"][0];
    assert_eq!(f["id"], "cuda-graphs-checkpointing");
    let e = f["evidence"].as_array().unwrap();
    assert!(
        e[0]["code"]
            .as_str()
            .unwrap()
            .contains("mode=\"reduce-overhead\""),
        "{f}"
    );
    assert!(
        e[1]["what"]
            .as_str()
            .unwrap()
            .contains("torch.utils.checkpoint.checkpoint"),
        "{f}"
    );
}
