//! A program sweep whose program cannot start (argparse refuses the flags
//! the sweep gives it) stops after its first trials, not after every point
//! of the grid has failed the same way.

use std::process::Command;
use testkit::write;

#[test]
fn a_program_that_cannot_start_stops_the_sweep_after_three_trials() {
    let p = tempfile::tempdir().unwrap();
    write(
        p.path(),
        "main.py",
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--learning-rate')\np.parse_args()\n",
    );
    write(
        p.path(),
        "space.yaml",
        "program: main.py\nmethod: grid\nmetric: {name: val_loss}\n\
         parameters:\n  lr: {values: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]}\n",
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_train"));
    cmd.args([
        "sweep",
        "--space",
        "space.yaml",
        "--out",
        "s",
        "--parallel",
        "1",
    ])
    .args(["--interpreter", &testkit::python().display().to_string()])
    .current_dir(p.path());
    for k in testkit::CALLER_ENV {
        cmd.env_remove(k);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "the first 3 trials failed before reporting anything, so the program cannot start"
        ) && err.contains("unrecognized arguments: --lr="),
        "{err}"
    );
    let trials = testkit::optuna_trials(&p.path().join("s"), "s");
    assert_eq!(trials.as_array().unwrap().len(), 3, "{trials}");
}

/// Hyperband through the driver (the pruner's kept bands across looks):
/// trials run one at a time, each worse than the last, so from the third
/// on each is outside the best half of the runs at band 1 and stopped
/// there, as W&B's `hyperband_stop_runs` would stop it.
#[test]
fn hyperband_stops_the_trailing_trials_at_their_first_band() {
    let p = tempfile::tempdir().unwrap();
    write(
        p.path(),
        "main.py",
        "import argparse, json, time\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float)\n\
         a = p.parse_args()\nfor e in range(1, 5):\n    \
         print(json.dumps({'epoch': e, 'val_loss': a.lr * 10 + 1 / e}), flush=True)\n    time.sleep(1)\n",
    );
    write(
        p.path(),
        "space.yaml",
        "program: main.py\nmethod: grid\nmetric: {name: val_loss, goal: minimize}\n\
         early_terminate: {type: hyperband, min_iter: 1, eta: 2}\n\
         parameters:\n  lr: {values: [0.1, 0.2, 0.3, 0.4, 0.5]}\n",
    );
    let python = testkit::python_arg();
    let args = [
        "--space",
        "space.yaml",
        "--out",
        "s",
        "--parallel",
        "1",
        "--interpreter",
        &python,
    ];
    let (err, trials) = testkit::train_sweep_ok(p.path(), &args, "s");
    assert!(
        err.contains("train sweep: trial 2 pruned: hyperband band 1: value at iteration 1 4 is outside the best 1/2 (2 of 3 runs; threshold 3)"),
        "{err}"
    );
    let states: Vec<&str> = trials
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["COMPLETE", "COMPLETE", "PRUNED", "PRUNED", "PRUNED"],
        "{trials}"
    );
}
