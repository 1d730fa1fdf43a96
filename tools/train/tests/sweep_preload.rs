//! Program sweeps whose Python trials are forked from a preload server
//! (`preload: [torch]`): the repo's real PyTorch script and crashes that
//! happen for real, each failing alone in its class while the next trial
//! runs on the same server; a driver killed -9 leaves no forked trial and
//! no server behind.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use testkit::{optuna_trials, write};

const BIN: &str = env!("CARGO_BIN_EXE_train");

use testkit::train_sweep as sweep;

use testkit::python_arg as py;

/// Each trial's (a parameter, state, error class), by trial number.
fn outcomes(dir: &Path, study: &str, param: &str) -> Vec<(String, String, String)> {
    let trials = optuna_trials(dir, study);
    let trials = trials.as_array().unwrap();
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..trials.len() as u64).collect::<Vec<_>>());
    trials
        .iter()
        .map(|t: &Value| {
            (
                t["params"][param].as_str().unwrap().to_string(),
                t["state"].as_str().unwrap().to_string(),
                t["user_attrs"]["error_class"]
                    .as_str()
                    .unwrap_or("-")
                    .to_string(),
            )
        })
        .collect()
}

/// The real script's faults (a NaN loss, a label out of range, a real
/// out-of-memory under RLIMIT_AS, a SIGKILL) and a segfault and an
/// `os._exit`, forked from one server in turn: each fails in its class,
/// the trials after it complete.
#[test]
fn a_preloaded_trial_fails_alone_in_its_class_and_the_next_one_runs() {
    let p = tempfile::tempdir().unwrap();
    std::fs::copy(
        testkit::repo_path("examples/own_script/main.py"),
        p.path().join("main.py"),
    )
    .unwrap();
    write(
        p.path(),
        "space.yaml",
        "program: main.py
method: grid
metric: {name: val_loss, goal: minimize}
preload: [torch]
parameters:
  fault: {values: [none, nan, label, oom, sigkill, none]}
  memory_limit_mib: {value: 1500}
  epochs: {value: 2}
  lr: {value: 0.05}
",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "1",
            "--interpreter",
            &py(),
            "--max-consecutive-failures",
            "0",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("preload: torch imported once"), "{err}");
    assert_eq!(
        err.matches("forked from the preload server").count(),
        6,
        "{err}"
    );
    let got = outcomes(&p.path().join("s"), "s", "fault");
    let want = [
        ("none", "COMPLETE", "-"),
        ("nan", "FAIL", "non-finite-loss"),
        ("label", "FAIL", "label-out-of-range"),
        ("oom", "FAIL", "out-of-memory"),
        ("sigkill", "FAIL", "killed"),
        ("none", "COMPLETE", "-"),
    ];
    let got: Vec<(&str, &str, &str)> = got
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    assert_eq!(got, want, "{err}");

    // A segfault and os._exit take only their own trial.
    write(
        p.path(),
        "crash.py",
        "import argparse, ctypes, json, os, torch\n\
         p = argparse.ArgumentParser(); p.add_argument('--how'); a = p.parse_args()\n\
         if a.how == 'segv':\n    ctypes.string_at(0)\n\
         if a.how == 'exit3':\n    os._exit(3)\n\
         print(json.dumps({'val_loss': float(torch.ones(2).sum())}))\n",
    );
    write(
        p.path(),
        "crash.yaml",
        "program: crash.py\nmethod: grid\nmetric: {name: val_loss}\npreload: [torch]\n\
         parameters:\n  how: {values: [segv, none, exit3, none]}\n",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "crash.yaml",
            "--out",
            "c",
            "--interpreter",
            &py(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let got = outcomes(&p.path().join("c"), "c", "how");
    let states: Vec<(&str, &str)> = got
        .iter()
        .map(|(a, b, _)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("segv", "FAIL"),
            ("none", "COMPLETE"),
            ("exit3", "FAIL"),
            ("none", "COMPLETE")
        ],
        "{err}"
    );
    let segv = std::fs::read_to_string(p.path().join("c/trials/0000/run/summary.yaml")).unwrap();
    assert!(segv.contains("signal: 11"), "{segv}");
    let exit3 = std::fs::read_to_string(p.path().join("c/trials/0002/run/summary.yaml")).unwrap();
    assert!(exit3.contains("exit_code: 3"), "{exit3}");
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z")
}

/// A driver killed -9 while two forked trials sleep: their keepers end
/// them, and the server, whose socket closed, ends too.
#[test]
fn a_killed_driver_leaves_no_forked_trial_and_no_server() {
    let p = tempfile::tempdir().unwrap();
    write(p.path(), "quiet.py", "import time\ntime.sleep(120)\n");
    write(
        p.path(),
        "space.yaml",
        "program: quiet.py\nmethod: grid\nmetric: {name: val_loss}\npreload: [json]\n\
         parameters:\n  lr: {values: [0.01, 0.02]}\n",
    );
    let mut driver = Command::new(BIN)
        .args([
            "sweep",
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "2",
        ])
        .args(["--interpreter", &py()])
        .current_dir(p.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let s = p.path().join("s");
    let pid_of = |n: &str| -> Option<u32> {
        let text = std::fs::read_to_string(s.join("trials").join(n).join("pid")).ok()?;
        text.split_whitespace().next()?.parse().ok()
    };
    testkit::wait_until("two forked trials running", 60, || pid_of("0001").is_some());
    let trials = [pid_of("0000").unwrap(), pid_of("0001").unwrap()];
    // The server is the forked trials' parent.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", trials[0])).unwrap();
    let server: u32 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(server, driver.id(), "the trial was not forked");
    driver.kill().unwrap();
    driver.wait().unwrap();
    testkit::wait_until("the forked trials and the server to end", 10, || {
        trials.iter().chain([&server]).all(|&pid| gone(pid))
    });
}
