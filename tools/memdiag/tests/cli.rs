//! memdiag as a user runs it. NVML is not mocked: on this machine the live path
//! is whatever the driver gives (nothing, on CI); the formats, replay, watch
//! and bad input are exercised through `--from`.

use assert_cmd::Command;
use common::input::Input;
use common::report::Report;
use predicates::prelude::*;
use std::path::Path;

fn memdiag() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memdiag"))
}

use testkit::repo_path as repo;

fn parse(stdout: &[u8]) -> Report {
    Report::parse(&Input {
        name: "stdout".into(),
        text: String::from_utf8(stdout.to_vec()).unwrap(),
    })
    .unwrap()
}

#[test]
fn live_report_is_valid_and_says_why_when_there_is_no_gpu() {
    let out = memdiag().assert().success().get_output().stdout.clone();
    // Not a terminal here, so the default is YAML, readable by the parser.
    let report = parse(&out);
    if report.gpus.is_empty() {
        assert!(!report.notes.is_empty(), "a report with no GPU says why");
        memdiag()
            .arg("--require-gpu")
            .assert()
            .code(3)
            .stdout("")
            .stderr(predicate::str::contains("no GPU could be read"));
    } else {
        assert!(report
            .gpus
            .iter()
            .all(|g| g.memory.is_some() || g.unavailable.contains_key("memory")));
        memdiag().arg("--require-gpu").assert().success();
    }
}

#[test]
fn profiles_round_trip_through_every_format() {
    for profile in ["t4", "a100-40gb", "h100-80gb"] {
        let path = repo(&format!("configs/gpus/{profile}.yaml"));
        let reference = memdiag()
            .arg("--from")
            .arg(&path)
            .arg("--format=yaml")
            .assert()
            .success();
        let reference = parse(&reference.get_output().stdout);
        assert!(reference.gpus[0].recommendation.is_some());
        for format in ["yaml", "json", "csv"] {
            let text = memdiag()
                .arg("--from")
                .arg(&path)
                .arg(format!("--format={format}"))
                .assert()
                .success();
            let again = memdiag()
                .args(["--from", "-", "--format=yaml"])
                .write_stdin(text.get_output().stdout.clone())
                .assert()
                .success();
            assert_eq!(
                parse(&again.get_output().stdout),
                reference,
                "{profile} through {format}"
            );
        }
    }
}

#[test]
fn tiers_file_replaces_the_default_table() {
    let t4 = repo("configs/gpus/t4.yaml");
    let default = memdiag().arg("--from").arg(&t4).assert().success();
    let rec = parse(&default.get_output().stdout).gpus[0]
        .recommendation
        .clone()
        .unwrap();
    assert_eq!((rec.model_size.as_str(), rec.batch_size), ("small", 6));

    let dir = tempfile::tempdir().unwrap();
    let tiers = dir.path().join("tiers.yaml");
    std::fs::write(&tiers, "schema: tiers/v1\ntiers:\n- {min_total_gib: 0, model_size: xl, batch_size: 64, max_train_examples: 1}\n").unwrap();
    let custom = memdiag()
        .arg("--from")
        .arg(&t4)
        .arg("--tiers")
        .arg(&tiers)
        .assert()
        .success();
    let rec = parse(&custom.get_output().stdout).gpus[0]
        .recommendation
        .clone()
        .unwrap();
    assert_eq!((rec.model_size.as_str(), rec.batch_size), ("xl", 64));

    std::fs::write(&tiers, "schema: tiers/v1\ntiers: 3\n").unwrap();
    memdiag()
        .arg("--tiers")
        .arg(&tiers)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("tiers.yaml").and(predicate::str::contains("tiers")));
}

#[test]
fn bad_from_files_exit_2_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let t4 = std::fs::read_to_string(repo("configs/gpus/t4.yaml")).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.yaml", vec![], "empty"),
        (
            "garbage.bin",
            vec![0xff, 0xfe, 0x00, 0x81, 0x92],
            "not text",
        ),
        (
            "other.yaml",
            t4.replace("memdiag/v1", "memdiag/v9").into_bytes(),
            "expected memdiag/v1, found memdiag/v9",
        ),
        (
            "config.yaml",
            b"batch_size: 16\nepochs: 50\n".to_vec(),
            "field `schema` missing",
        ),
        (
            "truncated.yaml",
            t4.as_bytes()[..t4.len() - 20].to_vec(),
            "at line 11",
        ),
        (
            "wrong-type.yaml",
            t4.replace("total_mib: 15360", "total_mib: lots")
                .into_bytes(),
            "gpus[0].memory.total_mib",
        ),
        (
            "bad.csv",
            b"schema,source\nmemdiag/v1,nvml,extra\n".to_vec(),
            "line 2",
        ),
    ];
    for (file, bytes, expected) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, bytes).unwrap();
        memdiag()
            .arg("--from")
            .arg(&path)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(file).and(predicate::str::contains(expected)));
    }
    memdiag()
        .args(["--from", "/nonexistent/report.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "/nonexistent/report.yaml: cannot open",
        ));
}

#[test]
fn usage_errors_exit_2() {
    memdiag().args(["--count", "3"]).assert().code(2);
    memdiag().args(["--watch", "0"]).assert().code(2);
    memdiag().args(["--watch", "abc"]).assert().code(2);
    memdiag().args(["--format", "xml"]).assert().code(2);
    // A linter's formats are cfgcheck's findings' alone (docs/FORMATS.md).
    for f in ["concise", "sarif"] {
        memdiag()
            .args(["--format", f])
            .assert()
            .code(2)
            .stderr(predicates::str::contains(format!(
                "invalid value '{f}' for '--format <FORMAT>'"
            )))
            .stderr(predicates::str::contains(
                "[possible values: table, yaml, json, csv]",
            ));
    }
}

fn rows(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn watch_appends_whole_rows_and_repairs_a_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("watch.csv");
    let t4 = repo("configs/gpus/t4.yaml");
    let watch = |count: &str| {
        memdiag()
            .arg("--from")
            .arg(&t4)
            .args(["--watch", "0.01", "--count", count, "--csv"])
            .arg(&log)
            .assert()
            .success()
    };
    watch("3").stdout("");
    let lines = rows(&log);
    assert_eq!(lines[0], "time,index,used_mib,free_mib,utilization_gpu_pct");
    assert_eq!(lines.len(), 4);
    assert!(lines[1].ends_with(",0,0,15360,"), "{}", lines[1]);

    // A writer killed mid-row leaves a torn line; the next run cuts it.
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("2026-11-22T10:00:00.000Z,0,12");
    std::fs::write(&log, text).unwrap();
    watch("2").stderr(predicate::str::contains("cut a torn last line"));
    let lines = rows(&log);
    assert_eq!(lines.len(), 6);
    assert!(lines.iter().all(|l| l.split(',').count() == 5), "{lines:?}");

    std::fs::write(&log, "not,a,watch,log\n").unwrap();
    memdiag()
        .arg("--from")
        .arg(&t4)
        .args(["--watch", "0.01", "--count", "1", "--csv"])
        .arg(&log)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 1"));
}

#[test]
fn ctrl_c_ends_watch_cleanly_with_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("watch.csv");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memdiag"))
        .arg("--from")
        .arg(repo("configs/gpus/t4.yaml"))
        .args(["--watch", "0.005", "--csv"])
        .arg(&log)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "Ctrl-C is a normal end of --watch: {status:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'));
    assert!(text.lines().count() > 2, "some samples were taken: {text}");
    assert!(text.lines().all(|l| l.split(',').count() == 5));
}

#[test]
fn closed_pipe_is_not_an_error() {
    let bin = env!("CARGO_BIN_EXE_memdiag");
    let t4 = repo("configs/gpus/t4.yaml");
    // --watch keeps writing after head has gone: the write fails with EPIPE.
    let out = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c"])
        .arg(format!(
            "'{bin}' --from '{}' --watch 0.001 | head -n 3",
            t4.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
}
