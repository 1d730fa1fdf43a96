//! The `Journal` API's tests, and the helpers the tests of its parts share.

use super::*;
use crate::trial::Choice;
use std::io::Write;

pub(super) fn journal_with(lines: &[&str]) -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.log");
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    let j = Journal::open(&path).unwrap();
    (dir, j)
}

pub(super) const STUDY: &str = r#"{"op_code":0,"worker_id":"w","study_name":"s","directions":[1]}"#;

pub(super) fn trial(study: u64) -> String {
    format!(
        r#"{{"op_code":4,"worker_id":"w","study_id":{study},"datetime_start":"2024-01-01T00:00:00.000000"}}"#
    )
}

pub(super) fn record(lr: f64) -> TrialRecord {
    TrialRecord {
        params: [("lr".to_owned(), ParamValue::Float(lr))].into(),
        distributions: [(
            "lr".to_owned(),
            Distribution::Float {
                low: 1e-5,
                high: 1e-1,
                log: true,
                step: None,
            },
        )]
        .into(),
        ..TrialRecord::default()
    }
}

/// Four writers (each its own `Journal`, as separate worker processes
/// are) claim "the next unclaimed index" at once: each index once.
#[test]
fn claims_by_racing_writers_never_take_an_index_twice() {
    let (dir, j) = journal_with(&[]);
    let study = j.create_study("s", Direction::Minimize).unwrap();
    let path = dir.path().join("journal.log");
    let claimed: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                scope.spawn(move || {
                    let j = Journal::open(&path).unwrap();
                    let mut mine = Vec::new();
                    while let Some(t) = j
                        .claim_trial(study, |s| {
                            let next = s.trials.len() as u64;
                            Ok((next < 40).then(|| {
                                let mut r = record(1e-3);
                                r.user_attrs.insert("index".into(), Value::from(next));
                                r
                            }))
                        })
                        .unwrap()
                    {
                        mine.push(t.number);
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut all: Vec<u64> = claimed.concat();
    all.sort_unstable();
    assert_eq!(all, (0..40).collect::<Vec<_>>());
    let s = j.load("s").unwrap().unwrap();
    for t in s.trials.iter() {
        assert_eq!(t.user_attrs.get("index"), Some(&Value::from(t.number)));
        assert_eq!(t.state, TrialState::Running);
    }
    // Nothing to claim: nothing written.
    assert_eq!(j.claim_trial(study, |_| Ok(None)).unwrap(), None);
    assert_eq!(j.load("s").unwrap().unwrap().trials.len(), 40);
}

#[test]
fn ids_count_across_studies_numbers_within() {
    let (_d, j) = journal_with(&[]);
    let a = j.create_study("a", Direction::Minimize).unwrap();
    let b = j.create_study("b", Direction::Minimize).unwrap();
    let r0 = j
        .create_finished_trial(a, &record(0.01), Outcome::Complete(1.0))
        .unwrap();
    let r1 = j.create_running_trial(b, &record(0.02)).unwrap();
    let r2 = j
        .create_finished_trial(a, &record(0.03), Outcome::Fail)
        .unwrap();
    assert_eq!(
        [r0, r1, r2],
        [
            TrialRef {
                id: TrialId(0),
                number: 0
            },
            TrialRef {
                id: TrialId(1),
                number: 0
            },
            TrialRef {
                id: TrialId(2),
                number: 1
            },
        ]
    );
    j.set_intermediate(r1.id, 0, 3.0).unwrap();
    j.set_intermediate(r1.id, 1, 2.0).unwrap();
    j.finish_trial(r1.id, Outcome::Pruned).unwrap();
    let b = j.load("b").unwrap().unwrap();
    assert_eq!(b.trials[0].state, TrialState::Pruned);
    assert_eq!(
        b.trials[0].value,
        Some(2.0),
        "a pruned trial's value is its last report"
    );
    assert!(j.finish_trial(r1.id, Outcome::Fail).is_err());
}

#[test]
fn non_finite_numbers_are_refused_but_read() {
    let (_d, j) = journal_with(&[STUDY]);
    let s = StudyId(0);
    for bad in [f64::NAN, f64::INFINITY] {
        assert!(j
            .create_finished_trial(s, &record(0.01), Outcome::Complete(bad))
            .is_err());
        let mut r = record(0.01);
        r.intermediate.insert(0, bad);
        assert!(j.create_running_trial(s, &r).is_err());
        assert!(j.create_running_trial(s, &record(bad)).is_err());
    }
    let t = j.create_running_trial(s, &record(0.01)).unwrap();
    assert!(j.set_intermediate(t.id, 0, f64::NAN).is_err());
    assert!(j
        .finish_trial(t.id, Outcome::Complete(f64::NEG_INFINITY))
        .is_err());
    let text = std::fs::read_to_string(j.path()).unwrap();
    assert_eq!(text.lines().count(), 2, "nothing refused was written");

    // What Python writes for them is read.
    let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
    writeln!(
        f,
        r#"{{"op_code":7,"worker_id":"p","trial_id":0,"step":1,"intermediate_value":NaN}}"#
    )
    .unwrap();
    writeln!(f, r#"{{"op_code":8,"worker_id":"p","trial_id":0,"user_attr":{{"x":[-Infinity,"NaN in a string"]}}}}"#).unwrap();
    writeln!(f, r#"{{"op_code":6,"worker_id":"p","trial_id":0,"state":1,"values":[Infinity],"datetime_complete":"2024-01-01T00:00:00"}}"#).unwrap();
    let t = &j.load("s").unwrap().unwrap().trials[0];
    assert!(t.intermediate[&1].is_nan());
    assert_eq!(t.value, Some(f64::INFINITY));
    assert_eq!(
        t.user_attrs.get("x"),
        Some(&serde_json::json!(["-Infinity", "NaN in a string"]))
    );
}

#[test]
fn params_are_checked_as_optuna_checks_them() {
    let (_d, j) = journal_with(&[STUDY]);
    let s = StudyId(0);
    let mut r = record(0.01);
    r.params.insert("extra".into(), ParamValue::Int(1));
    assert!(j.create_running_trial(s, &r).is_err(), "no distribution");
    let mut r = record(0.01);
    r.distributions.insert(
        "lr".into(),
        Distribution::Float {
            low: 0.1,
            high: 0.01,
            log: false,
            step: None,
        },
    );
    assert!(j.create_running_trial(s, &r).is_err(), "low > high");
    assert!(
        j.create_running_trial(s, &record(-1.0)).is_err(),
        "log and <= 0"
    );
    let cat = |choices: Vec<Choice>, v: Choice| TrialRecord {
        params: [("opt".to_owned(), ParamValue::Choice(v))].into(),
        distributions: [("opt".to_owned(), Distribution::Categorical { choices })].into(),
        ..TrialRecord::default()
    };
    let ab = vec![Choice::Str("a".into()), Choice::Str("b".into())];
    assert!(j
        .create_running_trial(s, &cat(ab.clone(), Choice::Str("c".into())))
        .is_err());
    j.create_running_trial(s, &cat(ab, Choice::Str("b".into())))
        .unwrap();
    // Another study-wide space for the same name is refused.
    let other = vec![Choice::Str("a".into())];
    let e = j
        .create_running_trial(s, &cat(other, Choice::Str("a".into())))
        .unwrap_err();
    assert!(format!("{e:#}").contains("dynamic value space"), "{e:#}");
    let t = &j.load("s").unwrap().unwrap().trials[0];
    assert_eq!(t.params["opt"], ParamValue::Choice(Choice::Str("b".into())));
}

#[test]
fn worker_ids_look_like_optunas() {
    let (a, b) = (uuid4(), uuid4());
    assert_ne!(a, b);
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
}

/// A load hands out the study's list of trials kept since the last load,
/// brought up to date with what changed: each load equals a fresh replay
/// of the file, a study held from before keeps what it saw, and where
/// none is held nothing unchanged is copied.
#[test]
fn loads_share_what_did_not_change_and_equal_a_fresh_replay() {
    let (dir, j) = journal_with(&[]);
    let path = dir.path().join("journal.log");
    let study = j.create_study("s", Direction::Minimize).unwrap();
    let other = j.create_study("o", Direction::Maximize).unwrap();
    // Another worker's writes, seen by `j` only when it reads the file.
    let w = Journal::open(&path).unwrap();
    let fresh = || Journal::open(&path).unwrap().load("s").unwrap().unwrap();
    let mut held = Vec::new();
    for i in 0..40u64 {
        let writer = if i % 3 == 0 { &w } else { &j };
        let t = writer.create_running_trial(study, &record(1e-3)).unwrap();
        writer.create_running_trial(other, &record(1e-3)).unwrap();
        writer.set_intermediate(t.id, 1, i as f64).unwrap();
        if i % 2 == 0 {
            writer
                .finish_trial(t.id, Outcome::Complete(i as f64))
                .unwrap();
        }
        let before = j.load("s").unwrap().unwrap();
        let again = j.load("s").unwrap().unwrap();
        // Nothing changed between the two: the same list, not a copy.
        assert!(Arc::ptr_eq(&before.trials, &again.trials));
        assert_eq!(before, fresh());
        if i % 5 == 0 {
            held.push(before.clone());
        }
        drop((before, again));
        // Each held study still shows the trial it ended on as it was then.
        for h in &held {
            let last = h.trials.last().unwrap();
            assert_eq!(last.intermediate[&1], last.number as f64);
            assert!(h.trials.iter().all(|t| t.state != TrialState::Waiting));
        }
    }
    let first = j.load("s").unwrap().unwrap();
    let kept: Vec<Arc<Trial>> = first.trials.iter().cloned().collect();
    drop(first);
    held.clear();
    // An update to trial 1 (running) with no older study held: the other
    // trials are the same allocations as before, not copies.
    let t1 = j.load("s").unwrap().unwrap().trial_ids[1];
    j.set_user_attr(t1, "k", &serde_json::json!(1)).unwrap();
    let after = j.load("s").unwrap().unwrap();
    assert_eq!(after, fresh());
    assert_eq!(after.trials[1].user_attrs.get("k"), Some(&Value::from(1)));
    for (n, t) in after.trials.iter().enumerate().filter(|(n, _)| *n != 1) {
        assert!(Arc::ptr_eq(t, &kept[n]), "trial {n} was copied");
    }
    assert_eq!(j.load("o").unwrap().unwrap().trials.len(), 40);
}
