//! The journal against real Optuna and Rustuna (tests/journal_optuna.py):
//! Optuna and Rustuna load what we write, we replay what Optuna and Rustuna
//! write (Rustuna's DISCARD_TRIALS records too), Optuna and we write one
//! file at once, a torn tail is cut, NaN is refused. Needs the project's
//! Python with optuna and rustuna (`just setup`); without them these tests
//! fail rather than skip. Python runs with TZ=UTC: Optuna and Rustuna show
//! naive local times, ours are naive UTC.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};
use sweep::journal::{Journal, Outcome, Study, TrialRecord, TrialRef};
use sweep::trial::{Choice, Direction, Distribution, ParamValue, TrialState};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/journal_optuna.py");

fn optuna(args: &[&str]) -> Value {
    let out = Command::new(testkit::python())
        .arg(SCRIPT)
        .args(args)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "optuna {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn optuna_load(path: &Path, study: &str) -> Value {
    optuna(&["load", path.to_str().unwrap(), study])
}

fn rustuna_load(path: &Path, study: &str) -> Value {
    optuna(&["rustuna-load", path.to_str().unwrap(), study])
}

/// Our replay in the shape journal_optuna.py prints Optuna's.
fn as_optuna_prints(s: &Study) -> Value {
    let choice = |c: &Choice| serde_json::to_value(c).unwrap();
    let param = |p: &ParamValue| match p {
        ParamValue::Float(f) => json!(f),
        ParamValue::Int(i) => json!(i),
        ParamValue::Choice(c) => choice(c),
    };
    let dist = |d: &Distribution| match d {
        Distribution::Float {
            low,
            high,
            log,
            step,
        } => json!({"name": "FloatDistribution",
                    "attributes": {"step": step, "low": low, "high": high, "log": log}}),
        Distribution::Int {
            low,
            high,
            log,
            step,
        } => json!({"name": "IntDistribution",
                    "attributes": {"log": log, "step": step, "low": low, "high": high}}),
        Distribution::Categorical { choices } => json!({"name": "CategoricalDistribution",
            "attributes": {"choices": choices.iter().map(choice).collect::<Vec<_>>()}}),
    };
    let when = |t: &Option<String>| t.as_ref().map(|t| json!(["datetime", t]));
    let trials: Vec<Value> = s
        .trials
        .iter()
        .map(|t| {
            json!({
                "number": t.number,
                "state": t.state.as_str(),
                "params": t.params.iter().map(|(k, v)| (k.clone(), param(v))).collect::<serde_json::Map<_, _>>(),
                "distributions": t.distributions.iter().map(|(k, d)| (k.clone(), dist(d))).collect::<serde_json::Map<_, _>>(),
                "value": t.value,
                "intermediate_values": t.intermediate.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
                "user_attrs": t.user_attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<serde_json::Map<_, _>>(),
                "datetime_start": when(&t.datetime_start),
                "datetime_complete": when(&t.datetime_complete),
            })
        })
        .collect();
    json!({
        "direction": match s.direction { Direction::Minimize => "MINIMIZE", Direction::Maximize => "MAXIMIZE" },
        "user_attrs": s.user_attrs,
        "trials": trials,
    })
}

fn space() -> BTreeMap<String, Distribution> {
    [
        (
            "lr",
            Distribution::Float {
                low: 1e-5,
                high: 1e-1,
                log: true,
                step: None,
            },
        ),
        (
            "dropout",
            Distribution::Float {
                low: 0.0,
                high: 0.5,
                log: false,
                step: Some(0.1),
            },
        ),
        (
            "layers",
            Distribution::Int {
                low: 1,
                high: 4,
                log: false,
                step: 1,
            },
        ),
        (
            "batch",
            Distribution::Int {
                low: 16,
                high: 128,
                log: true,
                step: 1,
            },
        ),
        (
            "use_bn",
            Distribution::Categorical {
                choices: vec![Choice::Bool(true), Choice::Bool(false)],
            },
        ),
        (
            "opt",
            Distribution::Categorical {
                choices: vec![
                    Choice::Str("adam".into()),
                    Choice::Str("sgd".into()),
                    Choice::Null,
                    Choice::Int(3),
                    Choice::Float(0.5),
                ],
            },
        ),
    ]
    .into_iter()
    .map(|(k, d)| (k.to_owned(), d))
    .collect()
}

fn record(i: u64) -> TrialRecord {
    let opt = [
        Choice::Str("adam".into()),
        Choice::Str("sgd".into()),
        Choice::Null,
        Choice::Int(3),
        Choice::Float(0.5),
    ][i as usize % 5]
        .clone();
    TrialRecord {
        params: [
            ("lr", ParamValue::Float(1e-4 * (i + 1) as f64)),
            ("dropout", ParamValue::Float(0.1 * (i % 6) as f64)),
            ("layers", ParamValue::Int(1 + (i % 4) as i64)),
            ("batch", ParamValue::Int(16 << (i % 3))),
            ("use_bn", ParamValue::Choice(Choice::Bool(i % 2 == 0))),
            ("opt", ParamValue::Choice(opt)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
        distributions: space(),
        intermediate: BTreeMap::new(),
        user_attrs: [
            ("run_dir".to_owned(), json!(format!("runs/{i}"))),
            ("epochs".to_owned(), json!(3)),
            ("peak_mem_gb".to_owned(), json!(3.25)),
            ("note".to_owned(), Value::Null),
        ]
        .into(),
        started: Some(SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_001 + i)),
    }
}

/// Writes study "sweep-a" with every state, every kind of parameter,
/// intermediate values and user attributes, and checks our replay of it.
fn write_every_kind(path: &Path) -> Study {
    let j = Journal::open(path).unwrap();
    let s = j.create_study("sweep-a", Direction::Minimize).unwrap();
    j.set_study_user_attr(s, "config", &json!("configs/base.yaml"))
        .unwrap();

    let mut done = record(0);
    done.intermediate = [(0, 1.5), (1, 1.25)].into();
    j.create_finished_trial(s, &done, Outcome::Complete(0.75))
        .unwrap();

    let pruned = j.create_running_trial(s, &record(1)).unwrap();
    j.set_intermediate(pruned.id, 0, 2.5).unwrap();
    j.set_intermediate(pruned.id, 1, 2.25).unwrap();
    j.set_user_attr(pruned.id, "pruned_at", &json!(1)).unwrap();
    j.finish_trial(pruned.id, Outcome::Pruned).unwrap();

    let mut failed = record(2);
    failed
        .user_attrs
        .insert("error".into(), json!("CUDA out of memory"));
    j.create_finished_trial(s, &failed, Outcome::Fail).unwrap();

    let running = j.create_running_trial(s, &record(3)).unwrap();
    j.set_intermediate(running.id, 0, 4.0).unwrap();

    let mut early = record(4);
    early.intermediate = [(0, 9.0)].into();
    j.create_finished_trial(s, &early, Outcome::Pruned).unwrap();

    let later = j.create_running_trial(s, &record(5)).unwrap();
    j.finish_trial(later.id, Outcome::Complete(0.5)).unwrap();

    let ours = j.load("sweep-a").unwrap().unwrap();
    let states: Vec<_> = ours.trials.iter().map(|t| t.state).collect();
    use TrialState::*;
    assert_eq!(states, [Complete, Pruned, Fail, Running, Pruned, Complete]);
    let values: Vec<_> = ours.trials.iter().map(|t| t.value).collect();
    assert_eq!(
        values,
        [Some(0.75), Some(2.25), None, None, Some(9.0), Some(0.5)]
    );
    for (i, t) in ours.trials.iter().enumerate() {
        assert_eq!(t.params, record(i as u64).params, "trial {i}");
        assert_eq!(t.number, i as u64);
    }
    assert_eq!(ours.trials[1].user_attrs.get("pruned_at"), Some(&json!(1)));
    assert_eq!(
        ours.trials[0].datetime_start.as_deref(),
        Some("2023-11-14T22:13:20.000001")
    );
    ours
}

/// (a) Optuna loads what we wrote: every state, every kind of parameter,
/// intermediate values, user attributes, timestamps.
#[test]
fn optuna_loads_what_we_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let ours = write_every_kind(&path);
    assert_eq!(optuna_load(&path, "sweep-a"), as_optuna_prints(&ours));
}

/// (a') So does Rustuna: trials, states, parameters, values, intermediate
/// values, user attributes, timestamps. Rustuna gives a PRUNED trial no
/// value (on Optuna's own journals too), where Optuna gives it its last
/// intermediate value.
#[test]
fn rustuna_loads_what_we_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let ours = write_every_kind(&path);
    let mut want = as_optuna_prints(&ours);
    for t in want["trials"].as_array_mut().unwrap() {
        if t["state"] == "PRUNED" {
            assert!(t["value"].is_number(), "{t}");
            t["value"] = Value::Null;
        }
    }
    assert_eq!(rustuna_load(&path, "sweep-a"), want);
}

/// (b') We replay what Rustuna wrote, DISCARD_TRIALS records and all, as
/// Optuna 5 loads it (which skips them) and as Rustuna does (which keeps
/// the trials unless told to apply the discards): the trials stay, flagged
/// `discarded` exactly where Rustuna, applying them, leaves trials out.
#[test]
fn we_replay_what_rustuna_writes_with_its_discards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let told = optuna(&["rustuna-write", path.to_str().unwrap(), "main"]);
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains(r#""op_code":10,"#),
        "rustuna wrote no DISCARD_TRIALS record"
    );
    let j = Journal::open(&path).unwrap();
    assert_eq!(j.study_names().unwrap(), ["other", "main"]);
    let ours = j.load("main").unwrap().unwrap();
    let printed = as_optuna_prints(&ours);
    assert_eq!(printed, optuna_load(&path, "main"));
    assert_eq!(printed, rustuna_load(&path, "main"));
    let states: Vec<_> = ours.trials.iter().map(|t| t.state.as_str()).collect();
    assert_eq!(
        states,
        ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE", "RUNNING", "COMPLETE", "WAITING"]
    );
    let flagged: Vec<u64> = ours
        .trials
        .iter()
        .filter(|t| t.discarded)
        .map(|t| t.number)
        .collect();
    assert_eq!(json!(flagged), told["discarded"]);
    let kept: Vec<u64> = ours
        .trials
        .iter()
        .filter(|t| !t.discarded)
        .map(|t| t.number)
        .collect();
    assert_eq!(json!(kept), told["applied"]);
    // We go on with Rustuna's study; Optuna and Rustuna read it.
    let t = j
        .create_running_trial(ours.id, &TrialRecord::default())
        .unwrap();
    assert_eq!(t.number, 8);
    j.finish_trial(t.id, Outcome::Complete(0.1)).unwrap();
    let after = as_optuna_prints(&j.load("main").unwrap().unwrap());
    assert_eq!(after, optuna_load(&path, "main"));
    assert_eq!(after, rustuna_load(&path, "main"));
    assert_eq!(after["trials"][8]["value"], json!(0.1));
}

/// (b) We replay what Optuna wrote (two studies, enqueued and waiting
/// trials, pruned and failed ones) exactly as Optuna loads it.
#[test]
fn we_replay_what_optuna_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let printed = optuna(&["write", path.to_str().unwrap(), "main"]);
    let j = Journal::open(&path).unwrap();
    let ours = j.load("main").unwrap().unwrap();
    assert_eq!(as_optuna_prints(&ours), printed);
    assert_eq!(j.study_names().unwrap(), ["other", "main"]);
    let states: Vec<_> = ours.trials.iter().map(|t| t.state.as_str()).collect();
    assert_eq!(
        states,
        ["COMPLETE", "COMPLETE", "PRUNED", "FAIL", "COMPLETE", "COMPLETE", "WAITING"]
    );
    // Ids count the other study's two trials.
    assert_eq!(ours.trial_ids[0].0, 2);
    // And we can go on with Optuna's study.
    let t = j
        .create_running_trial(ours.id, &TrialRecord::default())
        .unwrap();
    assert_eq!(t.number, 7);
    j.finish_trial(t.id, Outcome::Complete(0.1)).unwrap();
    let loaded = optuna_load(&path, "main");
    assert_eq!(loaded["trials"][7]["value"], json!(0.1));
}

/// (c) Optuna and our writer add 50 trials each to one file at once: 100
/// distinct numbers, each of our trials where we were told it is.
#[test]
fn optuna_and_we_write_one_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let j = Journal::open(&path).unwrap();
    let s = j.create_study("race", Direction::Minimize).unwrap();
    let py = Command::new(testkit::python())
        .arg(SCRIPT)
        .args(["append", path.to_str().unwrap(), "race", "50", "0.02"])
        .env("TZ", "UTC")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Start once Optuna is writing, and pace ourselves like it, so that
    // the two writers' records interleave.
    let t0 = Instant::now();
    while j.load("race").unwrap().unwrap().trials.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(60), "optuna never wrote");
        std::thread::sleep(Duration::from_millis(20));
    }
    let lr = |i: u64| TrialRecord {
        params: [("lr".to_owned(), ParamValue::Float(1e-4 * (i + 1) as f64))].into(),
        distributions: [("lr".to_owned(), space()["lr"].clone())].into(),
        user_attrs: [("writer".to_owned(), json!("rust"))].into(),
        ..TrialRecord::default()
    };
    let mut ours: Vec<(u64, TrialRef)> = Vec::new();
    for i in 0..50 {
        let t = if i % 2 == 0 {
            let t = j.create_running_trial(s, &lr(i)).unwrap();
            j.set_intermediate(t.id, 0, i as f64).unwrap();
            j.finish_trial(t.id, Outcome::Complete(i as f64)).unwrap();
            t
        } else {
            let mut r = lr(i);
            r.intermediate.insert(0, i as f64);
            j.create_finished_trial(s, &r, Outcome::Complete(i as f64))
                .unwrap()
        };
        ours.push((i, t));
        std::thread::sleep(Duration::from_millis(15));
    }
    let out = py.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "optuna's writer failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let study = j.load("race").unwrap().unwrap();
    assert_eq!(study.trials.len(), 100);
    let numbers: std::collections::BTreeSet<u64> = study.trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..100).collect());
    assert!(study.trials.iter().all(|t| t.state == TrialState::Complete));
    for (i, r) in &ours {
        let t = &study.trials[r.number as usize];
        assert_eq!(study.trial_ids[r.number as usize], r.id);
        assert_eq!(t.user_attrs.get("writer"), Some(&json!("rust")));
        assert_eq!(t.value, Some(*i as f64));
        assert_eq!(t.intermediate[&0], *i as f64);
    }
    let writers: Vec<_> = study
        .trials
        .iter()
        .map(|t| t.user_attrs.get("writer").and_then(|w| w.as_str()).unwrap())
        .collect();
    assert_eq!(writers.iter().filter(|w| **w == "optuna").count(), 50);
    let turns = writers.windows(2).filter(|w| w[0] != w[1]).count();
    eprintln!("writers took turns {turns} times");
    assert!(turns >= 10, "the two writers did not overlap: {writers:?}");
    assert_eq!(optuna_load(&path, "race"), as_optuna_prints(&study));
    assert!(!dir.path().join("journal.log.lock").exists());
}

/// (d) A torn last line (a writer killed mid-line) is ignored, then cut by
/// our next append; Optuna loads every whole trial before and after.
#[test]
fn a_torn_tail_is_cut_and_optuna_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let j = Journal::open(&path).unwrap();
    let s = j.create_study("torn", Direction::Maximize).unwrap();
    for i in 0..3 {
        j.create_finished_trial(s, &record(i), Outcome::Complete(i as f64))
            .unwrap();
    }
    let whole = std::fs::read(&path).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(br#"{"op_code":4,"worker_id":"killed","study_id":0,"datetime_st"#)
        .unwrap();
    drop(f);
    assert_eq!(j.load("torn").unwrap().unwrap().trials.len(), 3);
    assert_eq!(
        optuna_load(&path, "torn")["trials"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let t = j
        .create_finished_trial(s, &record(3), Outcome::Complete(3.0))
        .unwrap();
    assert_eq!(t.number, 3);
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&whole) && after.ends_with(b"\n"));
    assert_eq!(after.split(|b| *b == b'\n').count() - 1, 5);
    let loaded = optuna_load(&path, "torn");
    assert_eq!(loaded, as_optuna_prints(&j.load("torn").unwrap().unwrap()));
    assert_eq!(loaded["trials"].as_array().unwrap().len(), 4);
    assert_eq!(loaded["direction"], "MAXIMIZE");
}

/// (e) A non-finite objective is refused (nothing written); the caller
/// records the trial as FAIL, which Optuna loads.
#[test]
fn nan_is_refused_and_recorded_as_fail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let j = Journal::open(&path).unwrap();
    let s = j.create_study("nan", Direction::Minimize).unwrap();
    let before = std::fs::read(&path).unwrap();
    let e = j
        .create_finished_trial(s, &record(0), Outcome::Complete(f64::NAN))
        .unwrap_err();
    assert!(format!("{e:#}").contains("FAIL"), "{e:#}");
    let t = j.create_running_trial(s, &record(0)).unwrap();
    let mid = std::fs::read(&path).unwrap();
    assert!(j.set_intermediate(t.id, 0, f64::INFINITY).is_err());
    assert!(j.finish_trial(t.id, Outcome::Complete(f64::NAN)).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), mid);
    assert!(mid.len() > before.len());
    j.finish_trial(t.id, Outcome::Fail).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("NaN") && !text.contains("Infinity"));
    let loaded = optuna_load(&path, "nan");
    assert_eq!(loaded["trials"][0]["state"], "FAIL");
    assert_eq!(loaded["trials"][0]["value"], Value::Null);
}
