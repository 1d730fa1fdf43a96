//! `--report` and `--status` of journals `train sweep` did not write: one
//! Optuna 5 wrote (two studies, a pruned and a failed trial, an
//! intermediate value) and one Rustuna wrote. The trials are read as Optuna
//! reads them, what only our sweeps record is said to be absent, and
//! nothing is written beside the journal.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_train");

/// Optuna 5 writes the journal (`write PATH`) or lists a study's trials
/// (`read PATH STUDY`).
const OPTUNA: &str = r#"
import json, sys
try:
    import optuna
except ImportError:
    sys.exit("optuna is not installed: run `just setup`")
optuna.logging.set_verbosity(optuna.logging.WARNING)
cmd, path = sys.argv[1:3]
storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
if cmd == "write":
    def objective(t):
        x = t.suggest_float("x", -2, 2)
        t.report(x * x, 1)
        if t.number == 2:
            raise optuna.TrialPruned()
        if t.number == 3:
            raise ValueError("on purpose")
        return x * x
    a = optuna.create_study(study_name="alpha", storage=storage, sampler=optuna.samplers.RandomSampler(seed=1))
    a.optimize(objective, n_trials=5, catch=(ValueError,))
    b = optuna.create_study(study_name="beta", storage=storage, direction="maximize")
    b.optimize(lambda t: t.suggest_int("n", 0, 9), n_trials=2)
else:
    s = optuna.load_study(study_name=sys.argv[3], storage=storage)
    print(json.dumps([[t.number, t.state.name, t.value] for t in s.trials]))
"#;

fn python(args: &[&str]) -> String {
    let out = Command::new(testkit::python())
        .arg("-c")
        .arg(OPTUNA)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn sweep(args: &[&str]) -> Output {
    Command::new(BIN).arg("sweep").args(args).output().unwrap()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_optuna_journal_is_reported_as_optuna_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("theirs.log");
    let path = journal.to_str().unwrap();
    python(&["write", path]);
    let before = listing(tmp.path());

    // Two studies: which one must be said.
    let out = sweep(&["--report", path]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("holds 2 studies: name one with --study (alpha, beta)"),
        "{err}"
    );

    let out = sweep(&["--report", path, "--study", "alpha", "--format", "json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("was not run by `train sweep`") && err.contains("trial folders are not in it"),
        "{err}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let theirs: Vec<(u64, String, Option<f64>)> =
        serde_json::from_str(&python(&["read", path, "alpha"])).unwrap();
    let ours: Vec<(u64, String, Option<f64>)> = report["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["number"].as_u64().unwrap(),
                t["state"].as_str().unwrap().to_string(),
                t["value"].as_f64(),
            )
        })
        .collect();
    assert_eq!(ours, theirs);
    assert_eq!(report["metric"], "value");
    assert_eq!(report["counts"]["PRUNED"], 1);
    assert_eq!(report["counts"]["FAIL"], 1);

    let out = sweep(&["--status", path, "--study", "beta"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("an Optuna study · value maximize · 2 trials"),
        "{text}"
    );
    assert_eq!(
        listing(tmp.path()),
        before,
        "nothing written beside the journal"
    );
}

#[test]
fn a_rustuna_journal_is_reported() {
    let journal = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sweep/src/journal/testdata/rustuna-0.2.0.log");
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("rustuna.log");
    std::fs::copy(&journal, &copy).unwrap();
    let out = sweep(&[
        "--report",
        copy.to_str().unwrap(),
        "--study",
        "s",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!report["trials"].as_array().unwrap().is_empty(), "{report}");
    assert_eq!(listing(tmp.path()), ["rustuna.log"]);
}
