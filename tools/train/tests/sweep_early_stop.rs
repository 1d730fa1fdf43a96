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
