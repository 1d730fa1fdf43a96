//! Questions the driver asks of the study as the journal holds it: how many
//! trials the sampler has drawn, which were interrupted in every run, a
//! trial's recorded failure class. Pure.

use crate::journal::Study;
use crate::trial::{Trial, TrialState};
use common::wire::failure::Class;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

pub fn attr_str<'a>(t: &'a Trial, key: &str) -> Option<&'a str> {
    t.user_attrs.get(key).and_then(Value::as_str)
}

/// Trials drawn by the sampler (not re-runs of interrupted ones): the grid
/// index and the random stream of the next new trial.
pub fn drawn(study: &Study) -> u64 {
    study
        .trials
        .iter()
        .filter(|t| !t.user_attrs.contains_key("retried_from"))
        .count() as u64
}

/// Whether a failed trial's end was not its parameters' fault: interrupted
/// (its worker died or was stopped), or marked `rerun` by the driver (out
/// of memory while crowded, a device-side assert to run again with
/// CUDA_LAUNCH_BLOCKING=1).
pub fn not_its_fault(t: &Trial) -> bool {
    t.state == TrialState::Fail
        && (error_class(t) == Some(Class::Interrupted) || t.user_attrs.contains_key("rerun"))
}

/// The first numbers of trials whose every run was interrupted or marked
/// to run again (a trial and its re-runs share that root); a re-run RUNNING
/// or finished otherwise takes its root off the list.
pub fn interrupted_roots(study: &Study) -> Vec<u64> {
    let root = |t: &Trial| {
        t.user_attrs
            .get("retried_from")
            .and_then(Value::as_u64)
            .unwrap_or(t.number)
    };
    let interrupted = not_its_fault;
    let mut settled: BTreeMap<u64, bool> = BTreeMap::new();
    for t in &study.trials {
        let all = settled.entry(root(t)).or_insert(true);
        *all &= interrupted(t);
    }
    settled
        .into_iter()
        .filter(|(_, all)| *all)
        .map(|(r, _)| r)
        .collect()
}

/// The `rerun` reason of the latest run of `root` (itself or a re-run).
pub fn rerun_reason(study: &Study, root: u64) -> Option<&str> {
    study
        .trials
        .iter()
        .rev()
        .find(|t| {
            t.number == root
                || t.user_attrs.get("retried_from").and_then(Value::as_u64) == Some(root)
        })
        .and_then(|t| attr_str(t, "rerun"))
}

/// How many runs of `number`'s trial (its root and the root's re-runs)
/// were marked to run again for `why` (a `rerun` prefix): what bounds a
/// re-run that the same cause could ask for forever.
pub fn reruns_for(study: &Study, number: u64, why: &str) -> usize {
    let root_of = |t: &Trial| {
        t.user_attrs
            .get("retried_from")
            .and_then(Value::as_u64)
            .unwrap_or(t.number)
    };
    let Some(root) = study
        .trials
        .iter()
        .find(|t| t.number == number)
        .map(root_of)
    else {
        return 0;
    };
    study
        .trials
        .iter()
        .filter(|t| root_of(t) == root)
        .filter(|t| attr_str(t, "rerun").is_some_and(|r| r.starts_with(why)))
        .count()
}

/// A trial's recorded failure class, when it is one of `Class`'s (a config
/// the schema refused is recorded as "config", which is not).
pub fn error_class(t: &Trial) -> Option<Class> {
    serde_json::from_value(t.user_attrs.get("error_class")?.clone()).ok()
}

/// Seed 004's lesson (and W&B's after an agent failed 470 of 500 runs):
/// a sweep that only fails stops, saying which classes it saw: the message
/// when the last `limit` finished trials (interrupted ones aside) failed.
pub fn too_many_failures(study: &Study, limit: u32, dir: &Path) -> Option<String> {
    if limit == 0 {
        return None;
    }
    let mut finished: Vec<&Trial> = study
        .trials
        .iter()
        .filter(|t| t.state.is_finished() && !not_its_fault(t))
        .collect();
    finished.sort_by(|a, b| a.datetime_complete.cmp(&b.datetime_complete));
    let tail: Vec<&Trial> = finished
        .iter()
        .rev()
        .take_while(|t| t.state == TrialState::Fail)
        .copied()
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
