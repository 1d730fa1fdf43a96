//! `train sweep` as a user runs it, with real trials (tiny CPU configs),
//! failures injected through TRAINGUARD_FAULT in the space itself, and the
//! journal read back by a real Optuna (installed by `just setup`).

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use testkit::{optuna_trials, write};

const BIN: &str = env!("CARGO_BIN_EXE_train");

const BASE: &str = "\
batch_size: 32
temporal_frames: 2
epochs: 2
learning_rate: 0.003
image_size: 8
scalar_features: 2
data: {synthetic_train_examples: 64, synthetic_val_examples: 32}
architecture: {channels: [4], embed_dim: 8, attention_heads: 2}
";

fn sweep(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("sweep")
        .args(args)
        .env_remove("TRAINGUARD_FAULT")
        .output()
        .unwrap()
}

/// What optuna-dashboard's own API serves for the journal (its WSGI app,
/// called in-process: the same code `optuna-dashboard DIR/journal.log`
/// serves): the study's trial states and best trial numbers.
fn dashboard_sees(dir: &Path) -> Value {
    let script = r#"
import io, json, sys
try:
    from optuna_dashboard._app import create_app
    from optuna_dashboard._storage_url import get_storage
except ImportError:
    sys.exit("optuna-dashboard is not installed: run `just setup`")
app = create_app(get_storage(sys.argv[1]))
def get(path):
    seen = {}
    def start(status, headers, exc_info=None):
        seen["status"] = status
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "localhost",
           "SERVER_PORT": "80", "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr}
    body = b"".join(app(env, start))
    assert seen["status"].startswith("200"), (path, seen["status"], body[:500])
    return json.loads(body)
studies = get("/api/studies")["study_summaries"]
study = get(f"/api/studies/{studies[0]['study_id']}")
print(json.dumps({"name": studies[0]["study_name"], "states": [t["state"] for t in study["trials"]],
                  "best": [t["number"] for t in study["best_trials"]]}))
"#;
    let out = Command::new(testkit::python())
        .args(["-c", script])
        .arg(dir.join("journal.log"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "optuna-dashboard could not read the journal: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn report_json(dir: &Path) -> Value {
    let out = sweep(&["--report", dir.to_str().unwrap(), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Optuna and `--report --format json` agree on every trial.
fn assert_optuna_agrees(dir: &Path, study: &str) -> Value {
    let optuna = optuna_trials(dir, study);
    let report = report_json(dir);
    let ours = report["trials"].as_array().unwrap();
    let theirs = optuna.as_array().unwrap();
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(theirs) {
        assert_eq!(a["number"], b["number"]);
        assert_eq!(a["state"], b["state"], "trial {}", a["number"]);
        assert_eq!(a["params"], b["params"], "trial {}", a["number"]);
        assert_eq!(a["value"], b["value"], "trial {}", a["number"]);
        assert_eq!(
            a["intermediate"], b["intermediate"],
            "trial {}",
            a["number"]
        );
        assert_eq!(
            a["error_class"],
            b["user_attrs"]
                .get("error_class")
                .cloned()
                .unwrap_or(Value::Null),
            "trial {}",
            a["number"]
        );
    }
    report
}

#[test]
fn twenty_trials_with_crashes_end_in_their_states_and_optuna_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", BASE);
    // Per learning rate: a good trial, SIGABRT, an OOM at every
    // micro-batch, a loss non-finite 3 steps in a row, and a hang.
    let space = write(
        d,
        "space.yaml",
        "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  \
         learning_rate: {values: [0.001, 0.002, 0.003, 0.004]}\n  \
         environment.TRAINGUARD_FAULT:\n    values: [none, \"abort@1:1\", \"oom-always@1:1\", \
         \"nan@1:1,nan@1:2,nan@2:1\", \"hang@1:1\"]\n",
    );
    let out = d.join("sweep");
    let run = sweep(&[
        "--config",
        base.to_str().unwrap(),
        "--space",
        space.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--parallel",
        "2",
        "--trial-timeout",
        "6",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("TRIAL 19 - Configuration:"), "{stderr}");
    let report = assert_optuna_agrees(&out, "sweep");
    let trials = report["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 20);
    for t in trials {
        let fault = t["params"]["environment.TRAINGUARD_FAULT"]
            .as_str()
            .unwrap();
        let (state, class) = match fault {
            "none" => ("COMPLETE", Value::Null),
            "abort@1:1" => ("FAIL", Value::from("killed")),
            "oom-always@1:1" => ("FAIL", Value::from("out-of-memory")),
            "hang@1:1" => ("FAIL", Value::from("timeout")),
            _ => ("FAIL", Value::from("non-finite-loss")),
        };
        assert_eq!(t["state"], state, "{t}");
        assert_eq!(t["error_class"], class, "{t}");
        if state == "COMPLETE" {
            // The objective is the best epoch's metric, reported per epoch.
            let inter = t["intermediate"].as_object().unwrap();
            assert_eq!(inter.len(), 2, "{t}");
            let best = inter
                .values()
                .map(|v| v.as_f64().unwrap())
                .fold(f64::INFINITY, f64::min);
            assert_eq!(t["value"].as_f64(), Some(best));
        } else {
            assert!(t["error_message"]
                .as_str()
                .is_some_and(|m| !m.is_empty() && m.chars().count() <= 500));
        }
    }
    // optuna-dashboard serves the same study.
    let dash = dashboard_sees(&out);
    assert_eq!(dash["name"], "sweep");
    let states: Vec<&str> = dash["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let ours: Vec<String> = trials
        .iter()
        .map(|t| {
            let s = t["state"].as_str().unwrap().to_lowercase();
            s[..1].to_uppercase() + &s[1..]
        })
        .collect();
    assert_eq!(states, ours);
    assert_eq!(dash["best"][0], report["best"]["number"]);
    let failures = report["failures"].as_array().unwrap();
    let killed = failures.iter().find(|g| g["class"] == "killed").unwrap();
    assert_eq!(killed["count"], 4);
    assert_eq!(
        killed["shared"]["environment.TRAINGUARD_FAULT"],
        "abort@1:1"
    );
    assert!(out.join("best_config.yaml").exists());
    assert!(std::fs::read(out.join("objective.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
}

#[test]
fn a_driver_killed_mid_sweep_resumes_and_every_trial_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", &BASE.replace("epochs: 2", "epochs: 6"));
    let space = write(
        d,
        "space.yaml",
        "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 6\nparameters:\n  \
         learning_rate: {distribution: log_uniform_values, min: 0.0001, max: 0.01}\n",
    );
    let out = d.join("sweep");
    let mut driver = Command::new(BIN)
        .args(["sweep", "--config"])
        .arg(&base)
        .arg("--space")
        .arg(&space)
        .arg("--out")
        .arg(&out)
        .args(["--parallel", "2", "--seed", "7"])
        .env_remove("TRAINGUARD_FAULT")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill -9 the driver while trials 2 and 3 run.
    testkit::wait_until("trial 3 starting", 300, || {
        assert!(
            driver.try_wait().unwrap().is_none(),
            "the sweep ended early"
        );
        out.join("trials/0003/pid").exists()
    });
    let trial_pid = |n: &str| -> u32 {
        let text = std::fs::read_to_string(out.join("trials").join(n).join("pid")).unwrap();
        text.split_whitespace().next().unwrap().parse().unwrap()
    };
    let pids = [trial_pid("0002"), trial_pid("0003")];
    let killed_at = std::time::SystemTime::now();
    driver.kill().unwrap();
    driver.wait().unwrap();
    // No trial outlives its driver: each trial's keeper sends its group
    // SIGTERM at once, and train stops between two steps, saying so (the
    // keeper's SIGKILL would come after its 20 s grace).
    testkit::wait_until("the trials to end after the driver's kill", 30, || {
        pids.iter().all(|p| {
            // Gone, or a zombie whose new parent has not reaped it yet.
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z")
        })
    });
    // Ended, not finished: stopped between two steps, or before train's
    // handler was set (no summary then); finished only before the kill.
    for n in ["0002", "0003"] {
        let summary = out.join("trials").join(n).join("run/summary.yaml");
        if let Ok(text) = std::fs::read_to_string(&summary) {
            let before = std::fs::metadata(&summary)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < killed_at);
            assert!(
                text.contains("status: stopped") || (before && text.contains("status: finished")),
                "{text}"
            );
        }
    }
    // --status says what still runs, or that nothing does any more.
    let status = sweep(&["--status", out.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(
        said.contains("trial 3 is RUNNING in the journal but its worker (pid "),
        "{said}"
    );
    // A writer killed mid-line: a torn last record.
    let mut journal = std::fs::OpenOptions::new()
        .append(true)
        .open(out.join("journal.log"))
        .unwrap();
    std::io::Write::write_all(
        &mut journal,
        b"{\"op_code\": 7, \"worker_id\": \"x\", \"tri",
    )
    .unwrap();
    drop(journal);
    let resumed = sweep(&["--resume", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    let report = assert_optuna_agrees(&out, "sweep");
    let trials = report["trials"].as_array().unwrap();
    // Numbers 0..n, each once; nothing left running.
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t["number"].as_u64(), Some(i as u64));
        assert_ne!(t["state"], "RUNNING", "{t}");
    }
    let interrupted: Vec<&Value> = trials
        .iter()
        .filter(|t| t["error_class"] == "interrupted")
        .collect();
    assert!(!interrupted.is_empty(), "{report}");
    for t in &interrupted {
        let retry = trials
            .iter()
            .find(|r| r["retried_from"] == t["number"])
            .unwrap_or_else(|| panic!("no retry of {t}"));
        assert_eq!(retry["params"], t["params"]);
        assert_eq!(retry["state"], "COMPLETE");
    }
    // The sweep's 6 trials, each finished once, besides the interrupted.
    assert_eq!(trials.len() - interrupted.len(), 6);
    assert!(trials
        .iter()
        .filter(|t| t["error_class"] != "interrupted")
        .all(|t| t["state"] == "COMPLETE"));
}

#[test]
fn bad_spaces_are_refused_before_any_trial_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", BASE);
    for (text, says) in [
        (
            "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 2\nparameters:\n  learnig_rate: {values: [0.1]}\n",
            "learning_rate",
        ),
        (
            "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 2\nparameters:\n  learning_rate: {distribution: log_uniform, min: -9, max: -2}\n",
            "log_uniform_values",
        ),
        (
            "method: random\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  learning_rate: {min: 0.001, max: 0.01}\n",
            "run_cap",
        ),
    ] {
        let space = write(d, "space.yaml", text);
        let out = d.join("never");
        let run = sweep(&[
            "--config",
            base.to_str().unwrap(),
            "--space",
            space.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&run.stderr).to_string();
        assert_eq!(run.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains("space.yaml") && stderr.contains(says), "{stderr}");
        assert!(!out.exists(), "nothing is written for a refused space: {stderr}");
    }
}

#[test]
fn the_median_pruner_stops_a_trial_worse_than_the_completed_ones() {
    // Five good learning rates complete; the sixth barely learns, so at its
    // first epochs it is worse than their median: SIGTERM, train stops
    // before its next step, and the trial is PRUNED with its curve.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", &BASE.replace("epochs: 2", "epochs: 12"));
    let space = write(
        d,
        "space.yaml",
        "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  \
         learning_rate: {values: [0.003, 0.0031, 0.0032, 0.0033, 0.0034, 0.0000001]}\n",
    );
    let out = d.join("sweep");
    let run = sweep(&[
        "--config",
        base.to_str().unwrap(),
        "--space",
        space.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--parallel",
        "1",
        "--pruner",
        "median",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let report = assert_optuna_agrees(&out, "sweep");
    let trials = report["trials"].as_array().unwrap();
    assert!(
        trials[..5].iter().all(|t| t["state"] == "COMPLETE"),
        "{report}"
    );
    let last = &trials[5];
    assert_eq!(last["state"], "PRUNED", "{stderr}");
    let epochs = last["intermediate"].as_object().unwrap().len();
    assert!((1..12).contains(&epochs), "{last}");
    let summary = std::fs::read_to_string(out.join("trials/0005/run/summary.yaml")).unwrap();
    assert!(summary.contains("status: stopped"), "{summary}");
}

#[test]
fn ctrl_c_stops_the_sweep_and_resume_runs_the_interrupted_trials_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", BASE);
    // A fixed value too: a re-run must get it as the first run did.
    let space = write(
        d,
        "space.yaml",
        "method: random\nmetric: {name: val_loss, goal: minimize}\nrun_cap: 3\nparameters:\n  \
         epochs: {value: 8}\n  learning_rate: {distribution: log_uniform_values, min: 0.0001, max: 0.01}\n",
    );
    let out = d.join("sweep");
    let driver = Command::new(BIN)
        .args(["sweep", "--config"])
        .arg(&base)
        .arg("--space")
        .arg(&space)
        .arg("--out")
        .arg(&out)
        .args(["--parallel", "1"])
        .env_remove("TRAINGUARD_FAULT")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    testkit::wait_until("trial 0 starting", 120, || {
        out.join("trials/0000/run/metrics.csv").exists()
    });
    // SAFETY: kill(2) with the pid of a child we own.
    unsafe {
        libc::kill(driver.id() as i32, libc::SIGINT);
    }
    let stopped = driver.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr).to_string();
    assert_eq!(stopped.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let report = report_json(&out);
    let first = &report["trials"][0];
    assert_eq!(first["state"], "FAIL", "{report}");
    assert_eq!(first["error_class"], "interrupted", "{report}");
    let resumed = sweep(&["--resume", out.to_str().unwrap()]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let report = assert_optuna_agrees(&out, "sweep");
    let trials = report["trials"].as_array().unwrap();
    let again = trials
        .iter()
        .find(|t| t["retried_from"] == 0)
        .unwrap_or_else(|| panic!("trial 0 was not run again: {report}"));
    assert_eq!(again["params"], first["params"]);
    assert_eq!(again["state"], "COMPLETE");
    assert_eq!(again["epochs"], 8, "the fixed value came back: {again}");
    let complete = trials.iter().filter(|t| t["state"] == "COMPLETE").count();
    assert_eq!(complete, 3, "{report}");
}

/// The parent pid of process `pid` (field 4 of /proc/PID/stat).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Two workers started by hand race for a 12-point grid; one is killed -9
/// mid-trial; `--resume` while the other still runs ends the orphaned
/// train, leaves the live worker's trial alone, and runs the interrupted
/// trial again. Every grid point completes exactly once.
#[test]
fn two_workers_share_a_sweep_and_resume_reruns_only_the_dead_workers_trial() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = write(d, "base.yaml", &BASE.replace("epochs: 2", "epochs: 5"));
    let space = write(
        d,
        "space.yaml",
        "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  \
         learning_rate: {values: [0.001, 0.002, 0.003, 0.004]}\n  dropout: {values: [0.0, 0.1, 0.2]}\n",
    );
    let out = d.join("sweep");
    let o = out.to_str().unwrap();
    // --slurm --dry-run sets the sweep up and writes the workers' script
    // without Slurm.
    let init = Command::new(BIN)
        .args(["sweep", "--config"])
        .arg(&base)
        .arg("--space")
        .arg(&space)
        .args(["--out", o, "--slurm", "--dry-run", "--time", "10"])
        .output()
        .unwrap();
    let script = String::from_utf8_lossy(&init.stdout).to_string();
    assert_eq!(
        init.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    for line in ["#SBATCH --array=0-11", "#SBATCH --time=10"] {
        assert!(script.lines().any(|l| l == line), "{line}: {script}");
    }
    assert!(script.contains("sweep --worker '"), "{script}");
    assert!(out.join("slurm/workers-1.sbatch").exists());
    let worker = || {
        Command::new(BIN)
            .args(["sweep", "--worker", o, "--parallel", "1"])
            .env_remove("TRAINGUARD_FAULT")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (worker(), worker());
    // Kill -9 worker A while one of its trials runs (the train whose parent
    // it is), and one of B's runs too (the resume tells B's apart).
    let running = |w: u32| {
        (0..12).any(|n| {
            std::fs::read_to_string(out.join(format!("trials/{n:04}/pid")))
                .ok()
                .and_then(|p| p.split_whitespace().next()?.parse().ok())
                .and_then(parent_of)
                == Some(w)
        })
    };
    testkit::wait_until("workers A and B each running a trial", 300, || {
        assert!(a.try_wait().unwrap().is_none(), "worker A ended early");
        running(a.id()) && running(b.id())
    });
    a.kill().unwrap();
    a.wait().unwrap();
    let resumed = sweep(&["--resume", o, "--parallel", "1"]);
    let stderr = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("its worker (pid {}) has ended", a.id())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("still runs (worker pid {} ", b.id())),
        "worker B's trial should be left to it: {stderr}"
    );
    assert!(b.wait().unwrap().success());
    let optuna = optuna_trials(&out, "sweep");
    let trials = optuna.as_array().unwrap();
    let pid_of = |t: &Value| t["user_attrs"]["worker"]["pid"].as_u64().unwrap();
    let interrupted: Vec<&Value> = trials
        .iter()
        .filter(|t| t["user_attrs"]["error_class"] == "interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1, "{optuna}");
    assert_eq!(pid_of(interrupted[0]), u64::from(a.id()));
    let mut points: Vec<String> = Vec::new();
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t["number"].as_u64(), Some(i as u64));
        if t["user_attrs"]["error_class"] == "interrupted" {
            continue;
        }
        assert_eq!(t["state"], "COMPLETE", "{t}");
        points.push(t["params"].to_string());
    }
    points.sort();
    let n = points.len();
    points.dedup();
    assert_eq!(
        (n, points.len()),
        (12, 12),
        "each grid point once: {optuna}"
    );
    let by_b = trials
        .iter()
        .filter(|t| pid_of(t) == u64::from(b.id()))
        .count();
    assert!(by_b >= 1, "{optuna}");
    let retry = trials
        .iter()
        .find(|t| t["user_attrs"]["retried_from"] == interrupted[0]["number"])
        .expect("the interrupted trial ran again");
    assert_eq!(retry["params"], interrupted[0]["params"]);
    assert!(out.join("slurm.yaml").exists());
}
