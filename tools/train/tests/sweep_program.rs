//! `train sweep` whose trials are the user's program (the space names
//! `program`): the repo's real PyTorch script examples/own_script/main.py,
//! with failures that happen for real (a host out-of-memory under
//! RLIMIT_AS, a NaN, a label out of range, a SIGKILL, a hang), read back
//! by a real Optuna from the journal.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use testkit::{optuna_trials, write};

const BIN: &str = env!("CARGO_BIN_EXE_train");

use testkit::train_sweep as sweep;

/// A directory holding the script as `main.py`, as a user's project does.
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        testkit::repo_path("examples/own_script/main.py"),
        tmp.path().join("main.py"),
    )
    .unwrap();
    tmp
}

use testkit::python_arg as py;

fn report(cwd: &Path, dir: &str) -> Value {
    let out = sweep(cwd, &["--report", dir, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

use testkit::user_attr as attr;

/// One trial per fault, each in its class; the journal as Optuna reads it
/// agrees with --report.
#[test]
fn each_real_failure_of_a_program_is_named_by_its_class() {
    let p = project();
    write(
        p.path(),
        "space.yaml",
        "program: main.py
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  fault: {values: [none, nan, label, oom, sigkill, hang]}
  memory_limit_mib: {value: 1500}
  epochs: {value: 3}
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
            "2",
            // Room for `import torch` and 3 epochs when 8 tests share 2 cores;
            // only the hanging trial waits for it.
            "--trial-timeout",
            "45",
            "--interpreter",
            &py(),
            "--max-consecutive-failures",
            "0",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("TRIAL 0 - Configuration:") && err.contains("  fault: none"),
        "{err}"
    );
    let trials = optuna_trials(&p.path().join("s"), "s");
    let trials = trials.as_array().unwrap();
    let got: Vec<(String, &str, &str)> = trials
        .iter()
        .map(|t| {
            (
                t["params"]["fault"].as_str().unwrap().to_string(),
                t["state"].as_str().unwrap(),
                attr(t, "error_class"),
            )
        })
        .collect();
    let want = [
        ("none", "COMPLETE", "-"),
        ("nan", "FAIL", "non-finite-loss"),
        ("label", "FAIL", "label-out-of-range"),
        ("oom", "FAIL", "out-of-memory"),
        ("sigkill", "FAIL", "killed"),
        ("hang", "FAIL", "timeout"),
    ];
    for (fault, state, class) in want {
        assert!(
            got.iter()
                .any(|(f, s, c)| f == fault && *s == state && *c == class),
            "{fault}: want {state} {class}, got {got:?}\n{err}"
        );
    }
    let t = |fault: &str| {
        trials
            .iter()
            .find(|t| t["params"]["fault"] == fault)
            .unwrap()
    };
    assert!(attr(t("label"), "error_message").contains("Target 5 is out of bounds"));
    assert!(attr(t("oom"), "error_message").contains("can't allocate memory"));
    // A sweep's advice adds what a sweep can change: trials at once.
    let advice = attr(t("oom"), "advice");
    assert!(
        advice.contains("a smaller model")
            && advice.ends_with("or fewer trials at once (--parallel)"),
        "{advice}"
    );
    assert!(attr(t("sigkill"), "error_message").contains("OOM killer"));
    // Intermediates from the seeds' epoch lines: val_loss per epoch.
    let done = t("none");
    assert_eq!(done["intermediate"].as_object().unwrap().len(), 3, "{done}");
    assert!(
        done["user_attrs"]["peak_host_pss_mib"].as_f64().unwrap() > 50.0,
        "{done}"
    );
    // --report says the same as Optuna.
    let r = report(p.path(), "s");
    let rows = r["trials"].as_array().unwrap();
    assert_eq!(rows.len(), trials.len());
    for (row, t) in rows.iter().zip(trials) {
        assert_eq!(row["number"], t["number"]);
        assert_eq!(row["value"], t["value"]);
        assert_eq!(row["state"], t["state"]);
    }
    // A program trial's row has its host peak, said as such.
    let row0 = &rows[0];
    assert_eq!(
        row0["peak_memory_mib"].as_f64(),
        done["user_attrs"]["peak_host_pss_mib"].as_f64(),
        "{row0}"
    );
    assert_eq!(row0["peak_memory_of"], "host-pss", "{row0}");
    assert_eq!(r["points"], 6, "{r}");
    let csv = sweep(p.path(), &["--report", "s", "--format", "csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(csv.lines().nth(1).unwrap().contains(",host-pss,"), "{csv}");
    // A failure class of one trial: that trial's values, not "all had".
    let table = sweep(p.path(), &["--report", "s", "--format", "table"]);
    let table = String::from_utf8_lossy(&table.stdout);
    // (The out-of-memory one may run again alone, as crowded: two trials.)
    let label = t("label")["number"].as_u64().unwrap();
    assert!(
        table.contains(&format!(
            "failed, label-out-of-range: trial {label}, which had fault=\"label\"\n"
        )),
        "{table}"
    );
    assert!(!table.contains(" 1 trial(s) "), "{table}");
    // Its files: parameters, W&B's param file, the supervisor's records.
    let t0 = p.path().join("s/trials/0000");
    let params: Value =
        serde_json::from_slice(&std::fs::read(t0.join("params.json")).unwrap()).unwrap();
    assert_eq!(params["fault"], "none");
    let wandb = std::fs::read_to_string(t0.join("wandb-config.yaml")).unwrap();
    assert!(
        wandb.starts_with("wandb_version: 1\n") && wandb.contains("fault:\n  value: none"),
        "{wandb}"
    );
    for f in [
        "run/summary.yaml",
        "run/metrics.csv",
        "run/memory.csv",
        "train.log",
    ] {
        assert!(t0.join(f).exists(), "{f}");
    }
}

/// The metric read from JSON lines, from a regex, and with `${config}`:
/// the base config with the trial's values at their dotted keys.
#[test]
fn metrics_come_from_json_lines_a_regex_and_config_files() {
    let p = project();
    write(
        p.path(),
        "base.yaml",
        "# the base config\nepochs: 2  # short\nlr: 0.01\n",
    );
    write(
        p.path(),
        "json.yaml",
        "program: main.py
method: random
run_cap: 1
metric: {name: val_accuracy, goal: maximize}
command:
  - ${interpreter}
  - ${program}
  - --config
  - ${config}
parameters:
  lr: {min: 0.01, max: 0.1}
",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "json.yaml",
            "--config",
            "base.yaml",
            "--out",
            "j",
            "--interpreter",
            &py(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = &optuna_trials(&p.path().join("j"), "j")[0];
    assert_eq!(t["state"], "COMPLETE", "{t}");
    assert_eq!(t["intermediate"].as_object().unwrap().len(), 2, "{t}");
    let cfg = std::fs::read_to_string(p.path().join("j/trials/0000/config.yaml")).unwrap();
    assert!(
        cfg.contains("# the base config") && cfg.contains("epochs: 2  # short"),
        "{cfg}"
    );
    let lr = t["params"]["lr"].as_f64().unwrap();
    assert!(cfg.contains(&format!("lr: {lr}")), "{cfg} {lr}");

    write(
        p.path(),
        "regex.yaml",
        "program: main.py
method: grid
metric: {name: valid_loss, goal: minimize, regex: 'valid loss\\s+([0-9.]+)'}
parameters:
  epochs: {value: 2}
",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "regex.yaml",
            "--out",
            "r",
            "--interpreter",
            &py(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = &optuna_trials(&p.path().join("r"), "r")[0];
    assert_eq!(t["state"], "COMPLETE", "{t}");
    assert_eq!(t["intermediate"].as_object().unwrap().len(), 2, "{t}");
}

#[test]
fn a_bad_program_space_exits_2_before_any_trial() {
    let p = project();
    let cases = [
        ("program: nope.py\nmethod: grid\nmetric: {name: val_loss}\nparameters: {lr: {value: 1}}\n", "nope.py"),
        ("program: main.py\nmethod: grid\nmetric: {name: val_loss}\ncommand: [\"${interpreter}\", \"${program}\", \"${argz}\"]\nparameters: {lr: {value: 1}}\n", "${argz}"),
        ("program: main.py\nmethod: grid\nmetric: {name: val_loss, regex: 'loss ([0-9.]+) (x)'}\nparameters: {lr: {value: 1}}\n", "capture group"),
    ];
    for (i, (space, needle)) in cases.iter().enumerate() {
        let name = format!("bad{i}.yaml");
        write(p.path(), &name, space);
        let out = sweep(
            p.path(),
            &[
                "--space",
                &name,
                "--out",
                &format!("o{i}"),
                "--interpreter",
                &py(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{space}\n{err}");
        assert!(err.contains(needle), "{needle}: {err}");
        assert!(!p.path().join(format!("o{i}/trials/0000")).exists());
    }
}

/// `train sweep --space space.yaml --out s --parallel 2` started in `cwd`
/// and left running, once its first two trials have started; and `cwd/s`.
fn driver_with_two_trials(cwd: &Path) -> (std::process::Child, std::path::PathBuf) {
    let driver = Command::new(BIN)
        .args([
            "sweep",
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "2",
            "--interpreter",
            &py(),
        ])
        .current_dir(cwd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let s = cwd.join("s");
    testkit::wait_until("two trials running", 60, || {
        s.join("trials/0001/pid").exists()
    });
    (driver, s)
}

/// The pid in trial `n`'s pid file.
fn trial_pid(sweep: &Path, n: &str) -> i32 {
    std::fs::read_to_string(sweep.join("trials").join(n).join("pid"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z")
}

/// The driver of a program sweep killed -9 while two trials run: its
/// trials' processes end with it (each trial's keeper ends its group, so
/// none is left reparented to init), the interrupted trials run again on
/// `--resume`, and every trial number ends exactly once.
#[test]
fn a_program_sweep_killed_minus_nine_resumes_with_each_trial_once() {
    let p = project();
    write(
        p.path(),
        "space.yaml",
        "program: main.py
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {values: [0.01, 0.02, 0.03, 0.04]}
  epochs: {value: 3}
  epoch_seconds: {value: 1.0}
",
    );
    let (mut driver, s) = driver_with_two_trials(p.path());
    // Both trials run (3 epochs of a second each, after their imports)
    // when the driver is killed: each is interrupted.
    let orphans = [trial_pid(&s, "0000"), trial_pid(&s, "0001")];
    assert!(
        orphans.iter().all(|&pid| !gone(pid)),
        "a trial ended before the kill"
    );
    driver.kill().unwrap();
    driver.wait().unwrap();
    // Before any --resume: the keepers end both trials (SIGTERM at once).
    testkit::wait_until("the killed driver's trials to end", 30, || {
        orphans.iter().all(|&pid| gone(pid))
    });
    let out = sweep(p.path(), &["--resume", "s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("ending its process group"), "{err}");
    let trials = optuna_trials(&s, "s");
    let trials = trials.as_array().unwrap();
    let numbers: Vec<u64> = trials
        .iter()
        .map(|t| t["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    assert!(trials.iter().all(|t| t["state"] != "RUNNING"));
    // Each grid point finished once; the two interrupted ones ran again.
    let mut done: Vec<f64> = trials
        .iter()
        .filter(|t| t["state"] == "COMPLETE")
        .map(|t| t["params"]["lr"].as_f64().unwrap())
        .collect();
    done.sort_by(f64::total_cmp);
    assert_eq!(done, [0.01, 0.02, 0.03, 0.04], "{trials:?}");
    let interrupted = trials
        .iter()
        .filter(|t| attr(t, "error_class") == "interrupted")
        .count();
    assert_eq!(interrupted, 2, "{trials:?}");
    // The report tells the points of the space from the trials run.
    let table = sweep(p.path(), &["--report", "s", "--format", "table"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&format!(
            "4 points, {} trials ({} re-run(s)): ",
            trials.len(),
            trials.len() - 4
        )),
        "{table}"
    );
    assert_eq!(report(p.path(), "s")["points"], 4);
}

/// Silent trials (no output to fail on once the driver's pipes close)
/// outlive a driver killed -9 unless something ends them: each trial's
/// keeper does, at once, with no `--resume` needed.
#[test]
fn silent_trials_end_with_a_driver_killed_minus_nine() {
    let p = project();
    write(p.path(), "quiet.py", "import time\ntime.sleep(120)\n");
    write(
        p.path(),
        "space.yaml",
        "program: quiet.py
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {values: [0.01, 0.02]}
",
    );
    let (mut driver, s) = driver_with_two_trials(p.path());
    let pids = [trial_pid(&s, "0000"), trial_pid(&s, "0001")];
    driver.kill().unwrap();
    driver.wait().unwrap();
    testkit::wait_until(
        "the silent trials to end after the driver's kill",
        10,
        || pids.iter().all(|&pid| gone(pid)),
    );
}

/// A script written for a W&B sweep, run by wandb 0.31.0's own
/// `wandb.init` (offline, no server): its parameters arrive as W&B's agent
/// hands them (WANDB_SWEEP_PARAM_PATH), and the run summary wandb prints at
/// its end is the trial's objective.
#[test]
fn a_wandb_script_gets_its_parameters_and_its_summary_is_read() {
    let p = project();
    write(
        p.path(),
        "wb.py",
        "import wandb\nrun = wandb.init(project='p')\nprint('lr', run.config.lr, 'opt', run.config.opt, flush=True)\n\
wandb.log({'val_loss': 1.0 / run.config.lr})\nrun.summary['val_loss'] = 0.5 / run.config.lr\nrun.finish()\n",
    );
    write(
        p.path(),
        "space.yaml",
        "program: wb.py\nmethod: grid\nmetric: {name: val_loss}\nparameters:\n  lr: {values: [2.0]}\n  opt: {value: adam}\n",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "w",
            "--interpreter",
            &py(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let log = std::fs::read_to_string(p.path().join("w/trials/0000/train.log")).unwrap();
    assert!(log.contains("lr 2.0 opt adam"), "{log}");
    assert!(
        p.path().join("w/trials/0000/wandb").is_dir(),
        "the offline run lands in the trial"
    );
    let t = &optuna_trials(&p.path().join("w"), "w")[0];
    assert_eq!(t["state"], "COMPLETE", "{t}\n{log}");
    assert_eq!(t["value"].as_f64(), Some(0.25));
}

/// The median pruner stops a program trial from the values read from its
/// lines: SIGTERM to its process group, the trial PRUNED.
#[test]
fn a_program_trial_is_pruned_from_its_reported_values() {
    let p = project();
    write(
        p.path(),
        "curve.py",
        "import sys, time\nlr = float(sys.argv[1].split('=')[1])\n\
for e in (1, 2, 3, 4):\n    print(f'Epoch {e}/4 | Train Loss: {lr} | Val Loss: {lr} | LR: 0.1 | Time: 0.3s', flush=True)\n    time.sleep(0.3)\n",
    );
    write(
        p.path(),
        "space.yaml",
        "program: curve.py\nmethod: grid\nmetric: {name: val_loss}\nparameters:\n  lr: {values: [1.0, 1.1, 1.2, 1.3, 1.4, 9.0]}\n",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "p",
            "--parallel",
            "1",
            "--pruner",
            "median",
            "--interpreter",
            &py(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let trials = optuna_trials(&p.path().join("p"), "p");
    let states: Vec<&str> = trials
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["COMPLETE", "COMPLETE", "COMPLETE", "COMPLETE", "COMPLETE", "PRUNED"],
        "{err}"
    );
    let last = &trials[5];
    assert!(
        last["intermediate"].as_object().unwrap().len() < 4,
        "stopped before its end: {last}"
    );
}

/// `bayes` runs Optuna 5's default TPE, recorded in sweep.yaml at the start
/// and read back by `--resume`; `bayes:` on another method is refused with
/// its line.
#[test]
fn a_bayes_sweep_records_its_tpe_variant_and_resume_reads_it() {
    let p = project();
    write(
        p.path(),
        "fast.py",
        "import sys\nx = float([a for a in sys.argv if a.startswith('--x=')][0][4:])\nprint(f'loss {(x - 0.3) ** 2:.6f}')\n",
    );
    let space = "program: fast.py
method: bayes
run_cap: 3
metric: {name: loss, goal: minimize, regex: 'loss ([0-9.]+)'}
parameters:
  x: {min: 0.0, max: 1.0}
";
    write(p.path(), "space.yaml", space);
    let args = [
        "--space",
        "space.yaml",
        "--out",
        "s",
        "--interpreter",
        &py(),
    ];
    let out = sweep(p.path(), &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let settings = p.path().join("s/sweep.yaml");
    let text = std::fs::read_to_string(&settings).unwrap();
    assert!(text.contains("bayes_variant: multivariate"), "{text}");
    // Optuna's 10 random start-up trials would take all 3: said, and scaled.
    assert!(
        stderr.contains(
            "WARNING: space.yaml: method: bayes with 3 trials: the first is drawn at random"
        ) && stderr.contains("then 2 by TPE"),
        "{stderr}"
    );
    let trials = optuna_trials(&p.path().join("s"), "s");
    assert_eq!(trials.as_array().map(Vec::len), Some(3), "{trials}");

    // The record is what a resume goes by: a bad one is named, and without
    // one (a sweep from before) it resumes.
    std::fs::write(&settings, text.replace("multivariate", "both")).unwrap();
    let out = sweep(p.path(), &["--resume", "s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`bayes_variant`: expected multivariate or univariate, found \"both\""),
        "{stderr}"
    );
    std::fs::write(&settings, text.replace("bayes_variant: multivariate\n", "")).unwrap();
    let out = sweep(p.path(), &["--resume", "s"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    write(
        p.path(),
        "random.yaml",
        &space.replace(
            "method: bayes\n",
            "method: random\nbayes: {variant: univariate}\n",
        ),
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "random.yaml",
            "--out",
            "r",
            "--interpreter",
            &py(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("random.yaml: line 3: `bayes`: applies to `method: bayes` only"),
        "{stderr}"
    );
    assert!(!p.path().join("r/journal.log").exists());
}
