//! bench/gen_study.py, the large studies of the scale benchmarks (issue
//! 44), writes what `train sweep` and Optuna both read: its own records
//! (as `train sweep` writes them) and, through Optuna itself, the same
//! trials, reported alike and loaded by Optuna 5 alike.

use serde_json::Value;
use std::process::Command;
use testkit::{python, repo_path, ucmd};

fn generate(dir: &std::path::Path, name: &str, optuna: bool) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    let out = dir.join(name).join("journal.log");
    let mut cmd = Command::new(python());
    cmd.arg(repo_path("bench/gen_study.py"))
        .args(["--trials", "1500", "--seed", "3", "--out"])
        .arg(&out);
    if optuna {
        cmd.arg("--optuna");
    }
    let run = cmd.output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    out
}

/// Each state's count and the failure classes, as `--report` gives them.
fn summary(journal: &std::path::Path) -> (Vec<(String, usize)>, usize) {
    let r = ucmd("train")
        .args(["sweep", "--report"])
        .arg(journal)
        .args(["--format", "json"])
        .run();
    r.code_is(0);
    let report: Value = r.stdout_json();
    let trials = report["trials"].as_array().unwrap();
    let mut states: Vec<(String, usize)> = Vec::new();
    for t in trials {
        let s = t["state"].as_str().unwrap().to_string();
        match states.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => states.push((s, 1)),
        }
    }
    states.sort();
    let refused = trials
        .iter()
        .filter(|t| t["error_class"] == "predicted-out-of-memory")
        .count();
    (states, refused)
}

#[test]
fn a_generated_study_reads_the_same_written_by_us_and_by_optuna() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = generate(tmp.path(), "ours", false);
    let theirs = generate(tmp.path(), "optuna", true);
    let (a, b) = (summary(&ours), summary(&theirs));
    assert_eq!(a, b);
    let total: usize = a.0.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 1500, "{a:?}");
    // Every state and the refused points are there.
    assert_eq!(a.0.len(), 3, "{a:?}");
    assert!(a.1 > 0, "{a:?}");
    // Optuna 5 loads ours as it loads its own.
    for f in [&ours, &theirs] {
        let t = testkit::optuna_trials(f.parent().unwrap(), "s");
        assert_eq!(t.as_array().unwrap().len(), 1500);
    }
}
