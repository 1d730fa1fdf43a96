use super::super::tests::{journal_with, record, STUDY};
use super::*;
use crate::journal::{Outcome, StudyId};
use crate::trial::Direction;
use std::io::Write;

fn full_replay(path: &Path) -> Cache {
    let mut c = Cache::default();
    let bytes = std::fs::read(path).unwrap();
    c.extend(&bytes, path, true).unwrap();
    c
}

fn from_checkpoint(path: &Path) -> Option<Cache> {
    let f = File::open(path).unwrap();
    load(path, &f, f.metadata().unwrap().len())
}

/// Lines as Optuna, Rustuna and other workers write them, beside ours.
fn others(path: &Path) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    for l in [
        r#"{"op_code":0,"worker_id":"p","study_name":"other","directions":[2]}"#,
        r#"{"op_code":2,"worker_id":"p","study_id":1,"user_attr":{"note":"x"}}"#,
        r#"{"op_code":3,"worker_id":"p","study_id":0,"system_attr":{"sys":[1,2]}}"#,
        r#"{"op_code":4,"worker_id":"p","study_id":1,"datetime_start":"2024-01-01T00:00:00.5+02:00"}"#,
        r#"{"op_code":5,"worker_id":"p","trial_id":3,"param_name":"c","param_value_internal":1.0,"distribution":"{\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": [null, true, \"a\", 1.5]}}"}"#,
        r#"{"op_code":5,"worker_id":"p","trial_id":3,"param_name":"n","param_value_internal":4.0,"distribution":"{\"name\": \"IntDistribution\", \"attributes\": {\"log\": false, \"step\": 2, \"low\": 0, \"high\": 9}}"}"#,
        r#"{"op_code":7,"worker_id":"p","trial_id":3,"step":1,"intermediate_value":NaN}"#,
        r#"{"op_code":9,"worker_id":"p","trial_id":3,"system_attr":{"s":{"deep":[-Infinity]}}}"#,
        r#"{"op_code":8,"worker_id":"p","trial_id":3,"user_attr":{"b":1}}"#,
        r#"{"op_code":8,"worker_id":"p","trial_id":3,"user_attr":{"a":"NaN in a string"}}"#,
        r#"{"op_code":6,"worker_id":"p","trial_id":3,"state":1,"values":[Infinity],"datetime_complete":"2024-01-01T00:00:01Z"}"#,
        r#"{"op_code":4,"worker_id":"p","study_id":1,"datetime_start":null,"state":4}"#,
        r#"{"op_code":10,"worker_id":"r","trial_ids":[0,3]}"#,
    ] {
        writeln!(f, "{l}").unwrap();
    }
}

/// A journal of every kind of record and trial: finished (each outcome),
/// running, waiting, discarded, non-finite numbers, two studies.
fn varied() -> (tempfile::TempDir, Journal) {
    let (d, j) = journal_with(&[STUDY]);
    let s = StudyId(0);
    let mut r = record(0.01);
    r.user_attrs
        .insert("peak_mib".into(), serde_json::json!(812.5));
    r.intermediate.insert(1, 0.5);
    j.create_finished_trial(s, &r, Outcome::Pruned).unwrap();
    let t = j.create_running_trial(s, &record(0.02)).unwrap();
    j.set_intermediates(t.id, &[(1, 0.4), (2, 0.3)]).unwrap();
    j.finish_with(
        t.id,
        &[("k".into(), serde_json::json!({"a": [1]}))],
        Outcome::Complete(0.3),
    )
    .unwrap();
    j.create_finished_trial(s, &record(0.03), Outcome::Fail)
        .unwrap();
    others(j.path());
    j.create_running_trial(s, &record(0.04)).unwrap();
    (d, j)
}

#[test]
fn a_checkpoint_replays_to_what_the_journal_replays_to() {
    let (_d, j) = varied();
    let full = full_replay(j.path());
    assert_eq!(full.state.trials.len(), 6);
    assert!(write(j.path(), &full).unwrap());
    let back = from_checkpoint(j.path()).expect("the checkpoint matches");
    assert_eq!(seen(&back.state), seen(&full.state));
    assert_eq!((back.offset, back.lines), (full.offset, full.lines));
    assert_eq!(back.crc.finalize(), full.crc.clone().finalize());
    let text = std::fs::read_to_string(path_of(j.path())).unwrap();
    assert_eq!(text.lines().count(), 1 + 2 + 2 + 6 + 1, "{text}");
}

#[test]
fn rustunas_journal_checkpoints_the_same() {
    let (_d, j) = journal_with(&[]);
    let bytes = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/journal/testdata/rustuna-0.2.0.log"),
    )
    .unwrap();
    std::fs::write(j.path(), bytes).unwrap();
    let full = full_replay(j.path());
    assert!(write(j.path(), &full).unwrap());
    assert_eq!(
        seen(&from_checkpoint(j.path()).unwrap().state),
        seen(&full.state)
    );
}

/// A reader from a checkpoint goes on with the journal's later lines, and
/// a writer from one numbers and appends as one that replayed it all.
#[test]
fn the_journal_after_the_checkpoint_is_replayed_from_it() {
    let (d, j) = varied();
    let at = full_replay(j.path());
    assert!(write(j.path(), &at).unwrap());
    j.create_finished_trial(StudyId(0), &record(0.05), Outcome::Complete(0.2))
        .unwrap();
    others(j.path());
    let joined = Journal::open(d.path().join("journal.log")).unwrap();
    let t = joined
        .create_running_trial(StudyId(0), &record(0.06))
        .unwrap();
    assert_eq!(t.number, 5);
    assert_eq!(
        joined.checkpointed.load(Relaxed),
        at.offset,
        "it started from the checkpoint"
    );
    let full = full_replay(j.path());
    {
        let guard = joined.cache.lock().unwrap();
        let cached = guard.as_ref().unwrap();
        assert_eq!(seen(&cached.state), seen(&full.state));
        assert_eq!((cached.offset, cached.lines), (full.offset, full.lines));
        assert_eq!(cached.crc.clone().finalize(), full.crc.clone().finalize());
    }
    // Errors name the journal's own line numbers.
    writeln!(
        std::fs::OpenOptions::new()
            .append(true)
            .open(j.path())
            .unwrap(),
        r#"{{"op_code":99}}"#
    )
    .unwrap();
    let e = format!("{:#}", joined.load("s").unwrap_err());
    assert!(
        e.contains(&format!(
            "journal.log:{}: unknown op_code 99",
            full.lines + 1
        )),
        "{e}"
    );
}

#[test]
fn a_checkpoint_that_does_not_match_the_journal_is_ignored() {
    let (d, j) = varied();
    let full = full_replay(j.path());
    assert!(write(j.path(), &full).unwrap());
    let cp = path_of(j.path());
    let good = std::fs::read(&cp).unwrap();
    // The journal's first bytes changed (a file put in its place).
    let mut text = std::fs::read(j.path()).unwrap();
    text[40] ^= 1;
    std::fs::write(j.path(), &text).unwrap();
    assert!(from_checkpoint(j.path()).is_none());
    text[40] ^= 1;
    std::fs::write(j.path(), &text).unwrap();
    assert!(from_checkpoint(j.path()).is_some());
    // Shorter than the checkpoint says.
    std::fs::write(j.path(), &text[..text.len() - 5]).unwrap();
    assert!(from_checkpoint(j.path()).is_none());
    std::fs::write(j.path(), &text).unwrap();
    // A torn checkpoint, a bad record in it, another version, no header.
    let header_end = good.iter().position(|b| *b == b'\n').unwrap() + 1;
    let bad_record = [&good[..header_end], b"{\"op_code\":42}\n"].concat();
    let newer = String::from_utf8(good.clone()).unwrap().replacen(
        "\"checkpoint\":1",
        "\"checkpoint\":2",
        1,
    );
    for bad in [
        &good[..good.len() - 3],
        &bad_record[..],
        newer.as_bytes(),
        &good[header_end..],
    ] {
        std::fs::write(&cp, bad).unwrap();
        assert!(from_checkpoint(j.path()).is_none());
        // The journal is replayed whole then, as if there were none.
        let fresh = Journal::open(d.path().join("journal.log")).unwrap();
        assert_eq!(fresh.load("s").unwrap().unwrap().trials.len(), 4);
    }
}

#[test]
fn a_replay_with_a_deleted_study_is_not_checkpointed() {
    let (_d, j) = journal_with(&[STUDY]);
    j.create_study("gone", Direction::Minimize).unwrap();
    j.create_finished_trial(StudyId(1), &record(0.01), Outcome::Fail)
        .unwrap();
    writeln!(
        std::fs::OpenOptions::new()
            .append(true)
            .open(j.path())
            .unwrap(),
        r#"{{"op_code":1,"worker_id":"p","study_id":1}}"#
    )
    .unwrap();
    j.create_finished_trial(StudyId(0), &record(0.01), Outcome::Fail)
        .unwrap();
    assert!(!write(j.path(), &full_replay(j.path())).unwrap());
    j.keep_checkpoint(true);
    assert!(!path_of(j.path()).exists());
}

/// The driver asks after every turn: a checkpoint is written once the
/// journal has grown by a quarter since the newest one (also one another
/// worker wrote), and at the end for anything new.
#[test]
fn a_checkpoint_is_kept_as_the_journal_grows_by_a_quarter() {
    let (d, j) = journal_with(&[STUDY]);
    let add = |j: &Journal, n: usize| {
        for _ in 0..n {
            j.create_finished_trial(StudyId(0), &record(0.01), Outcome::Fail)
                .unwrap();
        }
    };
    let bytes = || std::fs::metadata(j.path()).unwrap().len();
    let written = || header(j.path()).map(|(h, _)| h.journal_bytes);
    add(&j, 1);
    j.keep_checkpoint(false);
    assert_eq!(written(), None, "under FROM_BYTES");
    add(&j, 10);
    assert!(bytes() >= FROM_BYTES);
    j.keep_checkpoint(false);
    let first = written().unwrap();
    assert_eq!(first, bytes());
    add(&j, 1);
    j.keep_checkpoint(false);
    assert_eq!(written(), Some(first), "grown by less than a quarter");
    while bytes() < first + first / 4 {
        add(&j, 1);
    }
    j.keep_checkpoint(false);
    assert_eq!(written(), Some(bytes()));
    // Another worker's newer checkpoint counts as ours.
    let other = Journal::open(d.path().join("journal.log")).unwrap();
    add(&other, 3);
    other.load("s").unwrap();
    other.keep_checkpoint(true);
    let theirs = written().unwrap();
    add(&j, 1);
    let before = std::fs::read(path_of(j.path())).unwrap();
    j.keep_checkpoint(false);
    assert_eq!(std::fs::read(path_of(j.path())).unwrap(), before);
    j.keep_checkpoint(true);
    assert!(written().unwrap() > theirs);
    assert_eq!(
        seen(&from_checkpoint(j.path()).unwrap().state),
        seen(&full_replay(j.path()).state)
    );
}

/// Workers sharing a folder write through temp files of their own; one a
/// killed writer left is removed once it is an hour old.
#[test]
fn a_writer_uses_its_own_temp_file_and_removes_old_ones_left() {
    let (d, j) = varied();
    let left = |name: &str, age_s: u64| {
        let p = d.path().join(name);
        let f = File::create(&p).unwrap();
        f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(age_s))
            .unwrap();
        p
    };
    let (stale, fresh) = (
        left(".journal.log.checkpoint.1.tmp", 7200),
        left(".journal.log.checkpoint.2.tmp", 60),
    );
    assert!(write(j.path(), &full_replay(j.path())).unwrap());
    assert!(!stale.exists());
    assert!(fresh.exists());
    let mine = d.path().join(format!(
        ".journal.log.checkpoint.{}.tmp",
        std::process::id()
    ));
    assert!(!mine.exists(), "renamed into place");
    assert!(from_checkpoint(j.path()).is_some());
}
