use super::super::tests::*;
use super::super::{StudyId, TrialId};
use crate::trial::{Choice, Direction, ParamValue, TrialState};

#[test]
fn updates_to_finished_trials_are_ignored() {
    let t = trial(0);
    let (_d, j) = journal_with(&[
        STUDY,
        &t,
        r#"{"op_code":6,"worker_id":"w","trial_id":0,"state":1,"values":[0.5],"datetime_complete":"2024-01-01T00:00:01.000000"}"#,
        r#"{"op_code":6,"worker_id":"w","trial_id":0,"state":3,"values":null,"datetime_complete":"2024-01-01T00:00:02.000000"}"#,
        r#"{"op_code":7,"worker_id":"w","trial_id":0,"step":3,"intermediate_value":1.0}"#,
        r#"{"op_code":8,"worker_id":"w","trial_id":0,"user_attr":{"k":1}}"#,
        r#"{"op_code":7,"worker_id":"w","trial_id":9,"step":3,"intermediate_value":1.0}"#,
    ]);
    let s = j.load("s").unwrap().unwrap();
    assert_eq!(s.trials.len(), 1);
    let t = &s.trials[0];
    assert_eq!((t.state, t.value), (TrialState::Complete, Some(0.5)));
    assert!(t.intermediate.is_empty() && t.user_attrs.is_empty());
    assert_eq!(
        t.datetime_complete.as_deref(),
        Some("2024-01-01T00:00:01.000000")
    );
    // Our own writer refuses what replay would ignore.
    let e = j.set_intermediate(TrialId(0), 1, 1.0).unwrap_err();
    assert!(format!("{e:#}").contains("already finished"), "{e:#}");
}

#[test]
fn unknown_op_code_and_bad_lines_name_the_line() {
    let (_d, j) = journal_with(&[STUDY, r#"{"op_code":12,"worker_id":"w"}"#]);
    let e = format!("{:#}", j.load("s").unwrap_err());
    assert!(e.contains("journal.log:2: unknown op_code 12"), "{e}");

    let t = trial(0);
    let (_d, j) = journal_with(&[STUDY, "{not json", &t]);
    let e = format!("{:#}", j.load("s").unwrap_err());
    assert!(e.contains("journal.log:2: not a JSON record"), "{e}");
    // An append refuses a file with a bad line inside, too.
    assert!(j.create_study("s", Direction::Minimize).is_err());

    let (_d, j) = journal_with(&[STUDY, r#"{"op_code":4,"worker_id":"w"}"#]);
    let e = format!("{:#}", j.load("s").unwrap_err());
    assert!(e.contains("journal.log:2: no field \"study_id\""), "{e}");
}

/// A journal of several read blocks: every line is replayed once, in
/// order, whatever block it falls in; a torn last line (no newline, or not
/// JSON) is ignored; a bad line inside is an error wherever it falls, even
/// as the last line of a block.
#[test]
fn a_journal_is_read_a_block_at_a_time() {
    let t = trial(0);
    let step = |n: u64| {
        format!(
            r#"{{"op_code":7,"worker_id":"w","trial_id":0,"step":{n},"intermediate_value":{n}.5}}"#
        )
    };
    let mut lines = vec![STUDY.to_owned(), t];
    lines.extend((0..30_000).map(step)); // ~2.6 MB: three blocks.
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    for torn in [
        "",
        "{\"op_code\":7,\"wor",
        "{\"op_code\":7,\"worker_id\":\n",
    ] {
        let (d, j) = journal_with(&refs);
        let path = d.path().join("journal.log");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, torn.as_bytes()).unwrap();
        let s = j.load("s").unwrap().unwrap();
        let iv = &s.trials[0].intermediate;
        assert_eq!(iv.len(), 30_000, "torn tail {torn:?}");
        assert!(iv.iter().all(|(k, v)| *v == *k as f64 + 0.5));
    }
    // A bad line at each place around the first block's end (1 MiB).
    let before: usize = refs
        .iter()
        .map(|l| l.len() + 1)
        .scan(0, |a, n| {
            *a += n;
            Some(*a)
        })
        .take_while(|end| *end <= 1 << 20)
        .count();
    for at in [before - 1, before, before + 1] {
        let mut bad = refs.clone();
        bad[at] = "{not json";
        let (_d, j) = journal_with(&bad);
        let e = format!("{:#}", j.load("s").unwrap_err());
        assert!(
            e.contains(&format!("journal.log:{}: not a JSON record", at + 1)),
            "{e}"
        );
    }
}

#[test]
fn study_names_are_reused_only_after_a_delete() {
    let (t0, t1) = (trial(0), trial(1));
    let (_d, j) = journal_with(&[
        STUDY,
        &t0,
        // Same name again: ignored (Optuna's DuplicatedStudyError for its writer).
        r#"{"op_code":0,"worker_id":"x","study_name":"s","directions":[2]}"#,
        r#"{"op_code":1,"worker_id":"w","study_id":0}"#,
        // A trial of the deleted study is ignored and takes no id.
        &t0,
        r#"{"op_code":0,"worker_id":"w","study_name":"s","directions":[2]}"#,
        &t1,
    ]);
    let s = j.load("s").unwrap().unwrap();
    assert_eq!((s.id, s.direction), (StudyId(1), Direction::Maximize));
    assert_eq!(*s.trial_ids, [TrialId(1)]);
    assert_eq!(s.trials[0].number, 0);
    assert_eq!(j.study_names().unwrap(), ["s"]);
    assert_eq!(
        j.create_study("s", Direction::Maximize).unwrap(),
        StudyId(1)
    );
    assert!(j.create_study("s", Direction::Minimize).is_err());
    assert_eq!(
        j.create_study("t", Direction::Minimize).unwrap(),
        StudyId(2)
    );
}

/// Recorded from rustuna 0.2.0 (JournalFileStorage, ask/tell,
/// enqueue_trial, then discard_trials([1, 3, 0])): study "other" with one
/// trial (id 0), study "s" with COMPLETE, PRUNED, RUNNING, COMPLETE and
/// WAITING trials (ids 1-5). Timestamps are UTC with "+00:00".
const RUSTUNA: &str = include_str!("../testdata/rustuna-0.2.0.log");

fn replay_text(text: &str) -> Result<Vec<crate::journal::Study>, String> {
    crate::journal::replay(text.as_bytes(), std::path::Path::new("journal.log"))
        .map_err(|e| format!("{e:#}"))
}

#[test]
fn a_journal_rustuna_wrote_replays_with_its_discards_flagged() {
    let studies = replay_text(RUSTUNA).unwrap();
    let names: Vec<&str> = studies.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["other", "s"]);
    assert!(studies[0].trials[0].discarded, "a trial of another study");
    let s = &studies[1];
    assert_eq!(s.direction, Direction::Minimize);
    assert_eq!(*s.trial_ids, [1, 2, 3, 4, 5].map(TrialId));
    use TrialState::*;
    let seen: Vec<_> = s.trials.iter().map(|t| (t.state, t.discarded)).collect();
    assert_eq!(
        seen,
        [
            (Complete, true),
            (Pruned, false),
            (Running, true),
            (Complete, false),
            (Waiting, false)
        ]
    );
    let t = &s.trials[0];
    assert_eq!(t.value, Some(0.0084033734350019));
    assert_eq!(t.intermediate[&0], 0.0084033734350019);
    assert_eq!(
        t.params["opt"],
        ParamValue::Choice(Choice::Str("adam".into()))
    );
    assert_eq!(s.trials[2].params["opt"], ParamValue::Choice(Choice::Null));
    assert_eq!(
        t.datetime_start.as_deref(),
        Some("2026-11-23T21:50:55.925359"),
        "UTC with its offset becomes naive UTC"
    );
    assert_eq!(
        t.datetime_complete.as_deref(),
        Some("2026-11-23T21:50:55.927026")
    );
}

/// Optuna 5 skips DISCARD_TRIALS: without the record, the same studies
/// but for the flag (so the samplers, the grid's count and --resume,
/// which read everything but the flag, see what Optuna sees).
#[test]
fn a_discard_changes_nothing_but_the_flag() {
    let without: String = RUSTUNA
        .lines()
        .filter(|l| !l.starts_with(r#"{"op_code":10,"#))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(without.lines().count() + 1, RUSTUNA.lines().count());
    let mut flagged = replay_text(RUSTUNA).unwrap();
    for s in &mut flagged {
        for t in std::sync::Arc::make_mut(&mut s.trials) {
            std::sync::Arc::make_mut(t).discarded = false;
        }
    }
    assert_eq!(flagged, replay_text(&without).unwrap());
}

#[test]
fn discards_go_by_trial_id_and_leave_the_trial_going() {
    let (t0, t1) = (trial(0), trial(0));
    let (_d, j) = journal_with(&[
        STUDY,
        // Ids of no trial yet, and an empty list: nothing to flag.
        r#"{"op_code":10,"worker_id":"r","trial_ids":[0,7]}"#,
        r#"{"op_code":10,"worker_id":"r","trial_ids":[]}"#,
        &t0,
        &t1,
        r#"{"op_code":10,"worker_id":"r","trial_ids":[1,1]}"#,
        // A discarded trial still takes updates, as in Optuna 5.
        r#"{"op_code":7,"worker_id":"w","trial_id":1,"step":0,"intermediate_value":2.0}"#,
        r#"{"op_code":6,"worker_id":"w","trial_id":1,"state":1,"values":[0.5],"datetime_complete":"2024-01-01T00:00:01.000000"}"#,
    ]);
    let s = j.load("s").unwrap().unwrap();
    let flags: Vec<bool> = s.trials.iter().map(|t| t.discarded).collect();
    assert_eq!(flags, [false, true]);
    let t = &s.trials[1];
    assert_eq!((t.state, t.value), (TrialState::Complete, Some(0.5)));
    assert_eq!(t.intermediate[&0], 2.0);
    // Our writer goes on with a study Rustuna discarded trials of.
    let r = j.create_running_trial(StudyId(0), &record(0.01)).unwrap();
    assert_eq!(r.number, 2);
    j.finish_trial(TrialId(0), crate::journal::Outcome::Fail)
        .unwrap();
}

#[test]
fn a_malformed_discard_names_its_line() {
    let t = trial(0);
    for (record, says) in [
        (
            r#"{"op_code":10,"worker_id":"r"}"#,
            r#"no field "trial_ids""#,
        ),
        (
            r#"{"op_code":10,"worker_id":"r","trial_ids":0}"#,
            "trial_ids is not a list",
        ),
        (
            r#"{"op_code":10,"worker_id":"r","trial_ids":[0,-1]}"#,
            "trial_ids: -1 is not an integer >= 0",
        ),
        (
            r#"{"op_code":10,"worker_id":"r","trial_ids":["0"]}"#,
            r#"trial_ids: "0" is not an integer >= 0"#,
        ),
        (
            r#"{"op_code":10,"worker_id":"r","trial_ids":[0.5]}"#,
            "trial_ids: 0.5 is not an integer >= 0",
        ),
        (
            r#"{"op_code":11,"worker_id":"r","trial_ids":[0]}"#,
            "unknown op_code 11 (Optuna 5's are 0-10)",
        ),
    ] {
        let (_d, j) = journal_with(&[STUDY, &t, record, &t]);
        let e = format!("{:#}", j.load("s").unwrap_err());
        assert!(e.contains(&format!("journal.log:3: {says}")), "{e}");
    }
}

#[test]
fn integer_fields_are_whole_numbers_from_zero_as_json_writes_them() {
    let t = trial(0);
    let step = |op: &str, step: &str| {
        format!(
            r#"{{"op_code":{op},"worker_id":"w","trial_id":0,"step":{step},"intermediate_value":1.0}}"#
        )
    };
    for (record, ok) in [
        (step("7", "12345"), true),
        (step("7", "0"), true),
        (step("7", "18446744073709551615"), true),
        (step("7", "18446744073709551616"), false),
        (step("7", "-1"), false),
        (step("7", "1.5"), false),
        (step("7", r#""3""#), false),
        (step("07", "3"), false),
    ] {
        let record = record.as_str();
        let (_d, j) = journal_with(&[STUDY, &t, record, &t]);
        match (j.load("s"), ok) {
            (Ok(Some(s)), true) => assert_eq!(s.trials[0].intermediate.len(), 1, "{record}"),
            (Err(e), false) => assert!(format!("{e:#}").contains("journal.log:3:"), "{e:#}"),
            (r, _) => panic!("{record}: {:?}", r.map(|s| s.map(|s| s.trials.len()))),
        }
    }
}
