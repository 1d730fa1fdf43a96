//! `train sweep` on a journal in which Rustuna (the Optuna team's Rust port,
//! installed by `just setup`) discarded trials: a DISCARD_TRIALS record
//! (op_code 10), which Optuna 5 skips. --status and --report read it, the
//! report flags the trials and agrees with Optuna 5, and --resume and
//! --worker go on as Optuna would, as if the record were not there: a
//! discarded trial still counts for the grid.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use testkit::write;

const BIN: &str = env!("CARGO_BIN_EXE_train");

const BASE: &str = "\
batch_size: 32
temporal_frames: 2
epochs: 6
learning_rate: 0.003
image_size: 8
scalar_features: 2
data: {synthetic_train_examples: 64, synthetic_val_examples: 32}
architecture: {channels: [4], embed_dim: 8, attention_heads: 2}
";

/// Rustuna on a sweep's journal: `discard PATH STUDY N...` discards trials
/// (by number); `write PATH STUDY` adds a COMPLETE trial and a RUNNING one
/// of the sweep's grid (no worker recorded) and discards both.
const RUSTUNA: &str = r#"
import sys
try:
    import rustuna
    from rustuna.storages import JournalFileStorage
except ImportError:
    sys.exit("rustuna is not installed: run `just setup`")
cmd, path, name, *numbers = sys.argv[1:]
journal = JournalFileStorage(path)
study = rustuna.load_study(study_name=name, storage=journal)
tid = lambda n: journal.get_trial_id_from_study_id_trial_number(study._study_id, n)
if cmd == "write":
    done = study.ask()
    done.suggest_categorical("learning_rate", [0.001, 0.002, 0.003])
    journal.set_trial_intermediate_value(tid(done.number), 1, 2.5)
    study.tell(done.number, 2.5)
    running = study.ask()
    running.suggest_categorical("learning_rate", [0.001, 0.002, 0.003])
    numbers = [done.number, running.number]
journal.discard_trials([tid(int(n)) for n in numbers])
"#;

/// Every trial as Optuna loads it.
const OPTUNA_TRIALS: &str = r#"
import json, sys
try:
    import optuna
except ImportError:
    sys.exit("optuna is not installed: run `just setup`")
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(sys.argv[1]))
s = optuna.load_study(study_name=sys.argv[2], storage=storage)
print(json.dumps([{"number": t.number, "state": t.state.name, "params": t.params,
    "value": t.value, "intermediate": {str(k): v for k, v in t.intermediate_values.items()}}
    for t in s.trials]))
"#;

fn sweep(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("sweep")
        .args(args)
        .env_remove("TRAINGUARD_FAULT")
        .output()
        .unwrap()
}

fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new(testkit::python())
        .args(["-c", script])
        .args(args)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn report(dir: &Path, format: &str) -> String {
    let out = sweep(&["--report", dir.to_str().unwrap(), "--format", format]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `--report --format json`, checked against Optuna 5 trial for trial.
fn report_agreeing_with_optuna(dir: &Path) -> Value {
    let report: Value = serde_json::from_str(&report(dir, "json")).unwrap();
    let journal = dir.join("journal.log");
    let optuna: Value = serde_json::from_str(&python(
        OPTUNA_TRIALS,
        &[journal.to_str().unwrap(), "sweep"],
    ))
    .unwrap();
    let (ours, theirs) = (
        report["trials"].as_array().unwrap(),
        optuna.as_array().unwrap(),
    );
    assert_eq!(ours.len(), theirs.len(), "{report}\n{optuna}");
    for (a, b) in ours.iter().zip(theirs) {
        for k in ["number", "state", "params", "value", "intermediate"] {
            assert_eq!(a[k], b[k], "trial {}: {k}", a["number"]);
        }
    }
    report
}

fn discarded(report: &Value) -> Vec<u64> {
    report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            let flag = &t["discarded"];
            assert!(
                flag.is_null() || *flag == true,
                "present only when true: {t}"
            );
            *flag == true
        })
        .map(|t| t["number"].as_u64().unwrap())
        .collect()
}

#[test]
fn trials_rustuna_discarded_are_reported_and_the_sweep_goes_on_as_optuna_would() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", BASE);
    let space = write(
        d,
        "space.yaml",
        "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  \
         learning_rate: {values: [0.001, 0.002, 0.003]}\n",
    );
    let out = d.join("sweep");
    let o = out.to_str().unwrap();
    let mut driver = Command::new(BIN)
        .args(["sweep", "--config"])
        .arg(&base)
        .arg("--space")
        .arg(&space)
        .args(["--out", o, "--parallel", "1"])
        .env_remove("TRAINGUARD_FAULT")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill -9 the driver while trial 1 runs (trial 0 is COMPLETE).
    testkit::wait_until("trial 1 starting", 300, || {
        assert!(
            driver.try_wait().unwrap().is_none(),
            "the sweep ended early"
        );
        out.join("trials/0001/pid").exists()
    });
    driver.kill().unwrap();
    driver.wait().unwrap();

    let journal = out.join("journal.log");
    python(
        RUSTUNA,
        &["discard", journal.to_str().unwrap(), "sweep", "0", "1"],
    );
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains(r#""op_code":10,"#), "{text}");

    let status = sweep(&["--status", o]);
    let said = String::from_utf8_lossy(&status.stdout).to_string();
    assert_eq!(
        status.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        said.contains("trial 1 is RUNNING in the journal but its worker (pid "),
        "{said}"
    );
    assert!(
        said.contains("best so far: trial 0 with val_loss"),
        "{said}"
    );

    let before = report_agreeing_with_optuna(&out);
    assert_eq!(discarded(&before), [0, 1], "{before}");
    assert_eq!(before["best"]["number"], 0, "Optuna's best trial: {before}");
    assert_eq!(before["best"]["discarded"], true, "{before}");
    let csv = report(&out, "csv");
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",discarded"), "{csv}");
    let flags: Vec<&str> = lines.map(|l| l.rsplit(',').next().unwrap()).collect();
    assert_eq!(flags, ["true", "true"], "{csv}");
    let table = report(&out, "table");
    assert!(table.contains("COMPLETE (discarded)"), "{table}");
    assert!(
        table.contains("discarded by Rustuna: trial(s) [0, 1]"),
        "{table}"
    );

    // --resume: trial 1 (its driver gone) is interrupted and runs again;
    // the grid's third point runs; trial 0, discarded or not, is done.
    let resumed = sweep(&["--resume", o, "--parallel", "1"]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let after = report_agreeing_with_optuna(&out);
    assert_eq!(discarded(&after), [0, 1], "{after}");
    let trials = after["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4, "{after}");
    assert_eq!(trials[1]["state"], "FAIL", "{after}");
    assert_eq!(trials[1]["error_class"], "interrupted", "{after}");
    let mut points: Vec<String> = trials
        .iter()
        .filter(|t| t["state"] == "COMPLETE")
        .map(|t| t["params"]["learning_rate"].to_string())
        .collect();
    points.sort();
    assert_eq!(points, ["0.001", "0.002", "0.003"], "{after}");
    assert!(
        trials.iter().any(|t| t["retried_from"] == 1),
        "trial 1 ran again: {after}"
    );

    // A worker joining now finds nothing left: the grid is done.
    let worker = sweep(&["--worker", o, "--parallel", "1"]);
    assert_eq!(
        worker.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&worker.stderr)
    );
    let last: Value = serde_json::from_str(&report(&out, "json")).unwrap();
    assert_eq!(last["trials"].as_array().unwrap().len(), 4, "{last}");
}

/// The sweep's first trials are Rustuna's own (a COMPLETE one, and a
/// RUNNING one no worker of ours runs), both discarded: the sweep reads
/// them, --resume runs the RUNNING one again with its parameters, and the
/// grid goes on from its third point, as it would without the record.
#[test]
fn a_sweep_whose_first_trials_rustuna_wrote_and_discarded_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", &BASE.replace("epochs: 6", "epochs: 2"));
    let space = write(
        d,
        "space.yaml",
        "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  \
         learning_rate: {values: [0.001, 0.002, 0.003]}\n",
    );
    let out = d.join("sweep");
    let o = out.to_str().unwrap();
    // --slurm --dry-run sets the sweep up (settings, study) and runs nothing.
    let init = Command::new(BIN)
        .args(["sweep", "--config"])
        .arg(&base)
        .arg("--space")
        .arg(&space)
        .args(["--out", o, "--slurm", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(
        init.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let journal = out.join("journal.log");
    python(RUSTUNA, &["write", journal.to_str().unwrap(), "sweep"]);

    let status = sweep(&["--status", o]);
    let said = String::from_utf8_lossy(&status.stdout).to_string();
    assert_eq!(status.status.code(), Some(0), "{said}");
    assert!(
        said.contains("trial 1 is RUNNING in the journal but no worker recorded"),
        "{said}"
    );
    let before = report_agreeing_with_optuna(&out);
    assert_eq!(discarded(&before), [0, 1], "{before}");
    assert_eq!(before["best"]["value"], 2.5, "{before}");

    let resumed = sweep(&["--resume", o, "--parallel", "1"]);
    let stderr = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("trial 1 was RUNNING"), "{stderr}");
    let after = report_agreeing_with_optuna(&out);
    assert_eq!(discarded(&after), [0, 1], "{after}");
    let trials = after["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4, "{after}");
    assert_eq!(trials[1]["error_class"], "interrupted", "{after}");
    assert_eq!(trials[2]["retried_from"], 1, "{after}");
    assert_eq!(trials[2]["params"], trials[1]["params"], "{after}");
    assert_eq!(trials[2]["state"], "COMPLETE", "{after}");
    assert_eq!(trials[3]["params"]["learning_rate"], 0.003, "{after}");
    assert_eq!(trials[3]["state"], "COMPLETE", "{after}");
    let worker = sweep(&["--worker", o, "--parallel", "1"]);
    assert_eq!(worker.status.code(), Some(0));
    let last: Value = serde_json::from_str(&report(&out, "json")).unwrap();
    assert_eq!(last["trials"].as_array().unwrap().len(), 4, "{last}");
}
