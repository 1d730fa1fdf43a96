//! Questions the driver asks of the study as the journal holds it: a
//! trial's recorded failure class, whether it is ours, a re-run's root, a
//! run of failures; the study-wide counts (how many trials the sampler has
//! drawn, which were interrupted in every run) come from a `Digest`
//! (digest.rs), folded a finished trial at a time. Pure.

use crate::journal::Study;
use crate::trial::{Trial, TrialState};
use common::wire::failure::Class;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

mod digest;
pub use digest::Digest;

pub fn attr_str<'a>(t: &'a Trial, key: &str) -> Option<&'a str> {
    t.user_attrs.get(key).and_then(Value::as_str)
}

/// Whether a train sweep worker made the trial: in a database another
/// client (an Optuna worker) may add trials of its own, which are not the
/// sweep's to count, settle or run again.
pub fn ours(study: &Study, t: &Trial) -> bool {
    !study.shared || t.system_attrs.contains_key(crate::rdb::CLAIM_ATTR)
}

/// The trial a re-run runs again (its root's number), if it is one.
pub fn retried_from(t: &Trial) -> Option<u64> {
    t.user_attrs.get("retried_from").and_then(Value::as_u64)
}

/// Whether a failed trial's end was not its parameters' fault: interrupted
/// (its worker died or was stopped), or marked `rerun` by the driver (out
/// of memory while crowded, a device-side assert to run again with
/// CUDA_LAUNCH_BLOCKING=1).
pub fn not_its_fault(t: &Trial) -> bool {
    t.state == TrialState::Fail
        && (error_class(t) == Some(Class::Interrupted) || t.user_attrs.contains_key("rerun"))
}

/// A point the memory model refused (`predicted-out-of-memory`): a point
/// of the search, not a failure of a run, so it neither counts toward
/// `--max-consecutive-failures` nor breaks a run of failures.
pub fn refused(t: &Trial) -> bool {
    t.state == TrialState::Fail && error_class(t) == Some(Class::PredictedOutOfMemory)
}

/// The `rerun` reason of the latest run of `root` (itself or a re-run).
pub fn rerun_reason(study: &Study, root: u64) -> Option<&str> {
    study
        .trials
        .iter()
        .rev()
        .find(|t| t.number == root || retried_from(t) == Some(root))
        .and_then(|t| attr_str(t, "rerun"))
}

/// A trial's recorded failure class, when it is one of `Class`'s (a config
/// the schema refused is recorded as "config", which is not).
pub fn error_class(t: &Trial) -> Option<Class> {
    serde_json::from_value(t.user_attrs.get("error_class")?.clone()).ok()
}

/// Seed 004's lesson (and W&B's after an agent failed 470 of 500 runs):
/// a sweep that only fails stops, saying which classes it saw: the message
/// when the last `limit` finished trials (interrupted ones aside) failed.
pub fn too_many_failures(
    study: &Study,
    digest: &mut Digest,
    limit: u32,
    dir: &Path,
) -> Option<String> {
    if limit == 0 {
        return None;
    }
    let tail: Vec<&Trial> = digest
        .latest_ended(study)
        .take_while(|t| t.state == TrialState::Fail)
        .collect();
    if (tail.len() as u32) < limit {
        return None;
    }
    let mut classes: BTreeMap<&str, u32> = BTreeMap::new();
    for t in &tail {
        *classes
            .entry(attr_str(t, "error_class").unwrap_or(Class::Other.as_str()))
            .or_default() += 1;
    }
    let seen: Vec<String> = classes.iter().map(|(c, n)| format!("{c} × {n}")).collect();
    Some(format!(
        "stopped: the last {} trials failed ({}); see `train sweep --report {}`",
        tail.len(),
        seen.join(", "),
        dir.display()
    ))
}

/// How many first trials failing before they report anything stop a
/// sweep: the program cannot start (not found, an import error, argparse
/// refusing its flags). W&B's agent stops after 3 failures in 60 s.
pub const FAILED_AT_START: usize = 3;

/// A program sweep whose first `FAILED_AT_START` finished trials (in the
/// order they ended, interrupted ones aside) all failed with the program's
/// own error before reporting a single value: the program cannot start,
/// and every later trial would fail the same way. The message, with the
/// last one's error.
pub fn fails_at_start(study: &Study, digest: &mut Digest, dir: &Path) -> Option<String> {
    let first: Vec<&Trial> = digest.first_ended(study).take(FAILED_AT_START).collect();
    if first.len() < FAILED_AT_START {
        return None;
    }
    let at_start = |t: &&Trial| {
        t.state == TrialState::Fail
            && error_class(t) == Some(Class::Other)
            && t.intermediate.is_empty()
            && t.user_attrs.get("reports").and_then(Value::as_u64) == Some(0)
    };
    if !first.iter().all(at_start) {
        return None;
    }
    let last = first[FAILED_AT_START - 1];
    let why = attr_str(last, "error_message").unwrap_or("no message");
    Some(format!(
        "stopped: the first {FAILED_AT_START} trials failed before reporting anything, so the program cannot start; trial {}: {why}; fix the command (or the program), then start the sweep again in a new directory; the trials are in `train sweep --report {}`",
        last.number,
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn failed(number: u64, class: &str, reports: u64) -> Trial {
        let mut user_attrs = crate::trial::Attrs::new();
        user_attrs.insert("error_class".into(), Value::from(class));
        user_attrs.insert("reports".into(), Value::from(reports));
        user_attrs.insert(
            "error_message".into(),
            Value::from("main.py: error: unrecognized arguments: --lr=0.1"),
        );
        Trial {
            number,
            state: TrialState::Fail,
            params: BTreeMap::new(),
            distributions: Default::default(),
            value: None,
            intermediate: BTreeMap::new(),
            user_attrs,
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: Some(format!("2026-11-25T18:00:0{number}")),
            discarded: false,
        }
    }

    fn study(trials: Vec<Trial>) -> Study {
        Study {
            id: crate::journal::StudyId(0),
            name: "s".into(),
            direction: crate::trial::Direction::Minimize,
            trial_ids: Arc::default(),
            trials: Arc::new(trials.into_iter().map(Arc::new).collect()),
            user_attrs: Default::default(),
            system_attrs: Default::default(),
            shared: false,
        }
    }

    #[test]
    fn three_first_trials_failing_before_any_report_stop_the_sweep() {
        let dir = Path::new("s");
        let three = study((0..3).map(|n| failed(n, "other", 0)).collect());
        let why = fails_at_start(&three, &mut Digest::default(), dir).unwrap();
        assert!(
            why.contains("trial 2: main.py: error: unrecognized arguments"),
            "{why}"
        );
        // Two are not enough; a trial that reported, or failed in another
        // class (out of memory: its parameters may be why), is not a start.
        let two = study((0..2).map(|n| failed(n, "other", 0)).collect());
        assert_eq!(fails_at_start(&two, &mut Digest::default(), dir), None);
        let mut reported: Vec<Trial> = three.trials.iter().map(|t| (**t).clone()).collect();
        reported[1] = failed(1, "other", 4);
        assert_eq!(
            fails_at_start(&study(reported), &mut Digest::default(), dir),
            None
        );
        let mut oom: Vec<Trial> = three.trials.iter().map(|t| (**t).clone()).collect();
        oom[0] = failed(0, "out-of-memory", 0);
        assert_eq!(
            fails_at_start(&study(oom), &mut Digest::default(), dir),
            None
        );
        // Later failures do not count once the first trials did not all fail.
        let mut later = vec![failed(0, "other", 3)];
        later.extend((1..5).map(|n| failed(n, "other", 0)));
        assert_eq!(
            fails_at_start(&study(later), &mut Digest::default(), dir),
            None
        );
        // Points the memory model refused ran nothing: they are not starts.
        let mut refused = vec![failed(0, "predicted-out-of-memory", 0)];
        refused.extend((1..4).map(|n| failed(n, "other", 0)));
        assert!(fails_at_start(&study(refused), &mut Digest::default(), dir).is_some());
    }

    #[test]
    fn refused_points_neither_count_nor_break_a_run_of_failures() {
        let dir = Path::new("s");
        let refusals = study(
            (0..9)
                .map(|n| failed(n, "predicted-out-of-memory", 0))
                .collect(),
        );
        assert_eq!(
            too_many_failures(&refusals, &mut Digest::default(), 3, dir),
            None,
            "refusals alone never stop it"
        );
        let mut between = vec![
            failed(0, "out-of-memory", 2),
            failed(1, "predicted-out-of-memory", 0),
        ];
        between.extend([
            failed(2, "out-of-memory", 2),
            failed(3, "predicted-out-of-memory", 0),
            failed(4, "other", 2),
        ]);
        let why = too_many_failures(&study(between), &mut Digest::default(), 3, dir).unwrap();
        assert!(
            why.contains("the last 3 trials failed (other × 1, out-of-memory × 2)"),
            "{why}"
        );
    }
}
