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

const TRIAL: &str = r#"import json, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
print(json.dumps({"epoch": 1, "val_loss": float(args["lr"]) * 10}), flush=True)
"#;

const SPACE: &str = "program: trial.py
method: bayes
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {distribution: log_uniform_values, min: 1.0e-5, max: 0.1}
  batch_size: {distribution: int_uniform, min: 1, max: 64}
  width: {values: [64, 128, 256, 512, 1024]}
";

/// A sweep resumed on top of 20,000 finished trials (issue 44's scale):
/// it reads the study, draws by TPE past its start-up (the worse side
/// capped), runs its new trials and ends; `--status` and `--report` read
/// all of them. What each step costs at this scale is bench/sweep_scale.py's
/// and bench/report_scale.py's (timings are not tested).
#[test]
fn a_sweep_resumed_on_20000_trials_runs_its_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("trial.py"), TRIAL).unwrap();
    std::fs::write(d.join("space.yaml"), SPACE).unwrap();
    let sweep = |extra: &[&str]| {
        ucmd("train")
            .current_dir(d)
            .args(["sweep", "--interpreter"])
            .arg(python())
            .args(["--parallel", "2"])
            .args(extra)
            .run()
    };
    sweep(&["--space", "space.yaml", "--out", "s", "--trials", "1"]).code_is(0);
    let journal = d.join("s/journal.log");
    let run = Command::new(python())
        .arg(repo_path("bench/gen_study.py"))
        .args(["--trials", "20000", "--interrupted", "0", "--out"])
        .arg(&journal)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let settings = d.join("s/sweep.yaml");
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(text.contains("\ntrials: 1\n"), "{text}");
    std::fs::write(
        &settings,
        text.replace("\ntrials: 1\n", "\ntrials: 20004\n"),
    )
    .unwrap();
    let resumed = sweep(&["--resume", "s"]);
    resumed.code_is(0);
    let report = || {
        let r = ucmd("train")
            .args(["sweep", "--report"])
            .arg(d.join("s"))
            .args(["--format", "json"])
            .run();
        r.code_is(0);
        r.stdout_str().to_string()
    };
    let r: Value = serde_json::from_str(&report()).unwrap();
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 20004, "{}", resumed.stderr_str());
    for t in &trials[20000..] {
        assert_eq!(t["state"], "COMPLETE", "{t}");
    }
    let status = ucmd("train")
        .args(["sweep", "--status"])
        .arg(d.join("s"))
        .run();
    status.code_is(0);
    assert!(
        status.stdout_str().contains("20004 trials"),
        "{}",
        status.stdout_str()
    );

    // The driver left its replay's checkpoint beside the journal, for all
    // of it; the readers read from it what they read without it, and a
    // checkpoint that does not match the journal is passed over.
    let checkpoint = d.join("s/journal.log.checkpoint");
    let text = std::fs::read_to_string(&checkpoint).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let bytes = std::fs::metadata(&journal).unwrap().len();
    assert_eq!(header["journal_bytes"], bytes, "{header}");
    let trial_records = text
        .lines()
        .filter(|l| l.starts_with("{\"op_code\":4,"))
        .count();
    assert_eq!(trial_records, 20004, "one record a trial");
    let from_checkpoint = report();
    // It is what was read: a value changed in it (and only there) shows.
    let trial_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("{\"op_code\":4,"))
        .collect();
    let n = trial_lines
        .iter()
        .position(|l| l.contains("\"state\":1,"))
        .unwrap();
    let line = trial_lines[n];
    let at = line.find("\"values\":[").unwrap() + "\"values\":[".len();
    let end = at + line[at..].find(']').unwrap();
    let marked = text.replacen(line, &format!("{}42.5{}", &line[..at], &line[end..]), 1);
    std::fs::write(&checkpoint, marked).unwrap();
    let r: Value = serde_json::from_str(&report()).unwrap();
    assert_eq!(r["trials"][n]["value"], 42.5, "read from the checkpoint");
    std::fs::write(&checkpoint, &text).unwrap();
    std::fs::rename(&checkpoint, d.join("kept")).unwrap();
    assert_eq!(report(), from_checkpoint);
    std::fs::write(
        &checkpoint,
        text.replacen("\"journal_crc32\":", "\"journal_crc32\":1", 1),
    )
    .unwrap();
    assert_eq!(report(), from_checkpoint);
    // A driver goes on from it: the next trials are numbered after all.
    std::fs::rename(d.join("kept"), &checkpoint).unwrap();
    let settings_text = std::fs::read_to_string(&settings).unwrap();
    std::fs::write(
        &settings,
        settings_text.replace("\ntrials: 20004\n", "\ntrials: 20006\n"),
    )
    .unwrap();
    sweep(&["--resume", "s"]).code_is(0);
    let r: Value = serde_json::from_str(&report()).unwrap();
    let numbers: Vec<&Value> = r["trials"].as_array().unwrap()[20004..]
        .iter()
        .map(|t| &t["number"])
        .collect();
    assert_eq!(numbers, [20004, 20005]);
}
