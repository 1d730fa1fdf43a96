//! A study's history folded in a trial at a time: what `history`'s
//! questions need of the finished trials, kept as they finish. A finished
//! trial never changes (the journal ignores updates to one, Optuna's
//! tables refuse them), so the trials up to the first unfinished one are
//! folded in once, and a question looks only at the ones after: a driver's
//! turn in a study of 50,000 trials costs what its newest trials cost.

use super::{not_its_fault, ours, refused, retried_from};
use crate::journal::Study;
use crate::trial::Trial;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// When a trial ended (its completion time, then its number): the order
/// `--max-consecutive-failures` and the failures at start read.
type Ended = (Option<String>, u64);

#[derive(Debug, Default)]
pub struct Digest {
    /// The trials before this one are finished and folded in.
    settled: usize,
    /// Of those, drawn by the sampler (not re-runs) and ours.
    drawn: u64,
    /// Roots with a run that was not interrupted (its fault, or running).
    not_all_interrupted: HashSet<u64>,
    /// Roots whose every folded run was interrupted.
    interrupted: BTreeSet<u64>,
    /// Root -> the `rerun` reasons of its folded runs (roots with one).
    reruns: HashMap<u64, Vec<String>>,
    /// The folded trials that ended by their parameters' doing (finished,
    /// neither interrupted nor refused), in the order they ended.
    ended: BTreeSet<Ended>,
}

impl Digest {
    /// The digest of `study` from scratch (a one-time question).
    pub fn of(study: &Study) -> Digest {
        let mut d = Digest::default();
        d.update(study);
        d
    }

    /// Folds in the trials finished since the last update (in number
    /// order, up to the first one still going). A shorter study than the
    /// one folded is another study: it starts over.
    pub fn update(&mut self, study: &Study) {
        if study.trials.len() < self.settled {
            *self = Digest::default();
        }
        while let Some(t) = study.trials.get(self.settled) {
            if !t.state.is_finished() {
                break;
            }
            self.fold(study, t);
            self.settled += 1;
        }
    }

    fn fold(&mut self, study: &Study, t: &Trial) {
        let root = root(t);
        if retried_from(t).is_none() && ours(study, t) {
            self.drawn += 1;
        }
        if not_its_fault(t) {
            if !self.not_all_interrupted.contains(&root) {
                self.interrupted.insert(root);
            }
        } else {
            self.not_all_interrupted.insert(root);
            self.interrupted.remove(&root);
        }
        if let Some(why) = super::attr_str(t, "rerun") {
            self.reruns.entry(root).or_default().push(why.to_owned());
        }
        if counts_as_ended(t) {
            self.ended.insert(ended(t));
        }
    }

    /// The trials not folded in yet.
    fn tail<'s>(&self, study: &'s Study) -> &'s [Arc<Trial>] {
        &study.trials[self.settled.min(study.trials.len())..]
    }

    /// Trials drawn by the sampler (not re-runs of interrupted ones): the
    /// grid index and the random stream of the next new trial.
    pub fn drawn(&mut self, study: &Study) -> u64 {
        self.update(study);
        let tail = self.tail(study).iter();
        self.drawn
            + tail
                .filter(|t| retried_from(t).is_none() && ours(study, t))
                .count() as u64
    }

    /// The first numbers of trials whose every run was interrupted or
    /// marked to run again (a trial and its re-runs share that root); a
    /// re-run RUNNING or finished otherwise takes its root off the list.
    pub fn interrupted_roots(&mut self, study: &Study) -> Vec<u64> {
        self.update(study);
        let mut out = self.interrupted.clone();
        let mut not_all: HashSet<u64> = HashSet::new();
        for t in self.tail(study) {
            let r = root(t);
            if not_its_fault(t) {
                if !self.not_all_interrupted.contains(&r) && !not_all.contains(&r) {
                    out.insert(r);
                }
            } else {
                not_all.insert(r);
                out.remove(&r);
            }
        }
        out.into_iter().collect()
    }

    /// How many runs of `number`'s trial (its root and the root's re-runs)
    /// were marked to run again for `why` (a `rerun` prefix): what bounds a
    /// re-run that the same cause could ask for forever.
    pub fn reruns_for(&mut self, study: &Study, number: u64, why: &str) -> usize {
        self.update(study);
        let Some(root) = by_number(study, number).map(root) else {
            return 0;
        };
        let folded = self.reruns.get(&root).map_or(0, |reasons| {
            reasons.iter().filter(|r| r.starts_with(why)).count()
        });
        folded
            + self
                .tail(study)
                .iter()
                .filter(|t| self::root(t) == root)
                .filter(|t| super::attr_str(t, "rerun").is_some_and(|r| r.starts_with(why)))
                .count()
    }

    /// The trials that ended by their parameters' doing, latest first
    /// (read lazily: a run of failures is read back only as far as it goes).
    pub fn latest_ended<'s>(&'s mut self, study: &'s Study) -> impl Iterator<Item = &'s Trial> {
        self.update(study);
        let mut tail = self.tail_ended(study);
        tail.reverse();
        merged(self.ended.iter().rev(), tail, |a, b| a >= b)
            .filter_map(move |n| by_number(study, n))
    }

    /// The trials that ended by their parameters' doing, first first.
    pub fn first_ended<'s>(&'s mut self, study: &'s Study) -> impl Iterator<Item = &'s Trial> {
        self.update(study);
        let tail = self.tail_ended(study);
        merged(self.ended.iter(), tail, |a, b| a <= b).filter_map(move |n| by_number(study, n))
    }

    /// The tail's trials that ended by their parameters' doing, in order.
    fn tail_ended(&self, study: &Study) -> Vec<Ended> {
        let mut tail: Vec<Ended> = self
            .tail(study)
            .iter()
            .filter(|t| counts_as_ended(t))
            .map(|t| ended(t))
            .collect();
        tail.sort();
        tail
    }
}

/// The numbers of `a` and `b`, each already in the order `first` says
/// (`first(x, y)`: x comes before y), in that order, lazily.
fn merged<'a>(
    a: impl Iterator<Item = &'a Ended> + 'a,
    b: Vec<Ended>,
    first: fn(&Ended, &Ended) -> bool,
) -> impl Iterator<Item = u64> + 'a {
    let mut a = a.peekable();
    let mut b = b.into_iter().peekable();
    std::iter::from_fn(move || {
        let from_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => first(x, y),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        match from_a {
            true => a.next().map(|e| e.1),
            false => b.next().map(|e| e.1),
        }
    })
}

/// Whether a trial ended by its parameters' doing: what a run of failures
/// counts (an interrupted run or a refused point breaks none).
fn counts_as_ended(t: &Trial) -> bool {
    t.state.is_finished() && !not_its_fault(t) && !refused(t)
}

fn ended(t: &Trial) -> Ended {
    (t.datetime_complete.clone(), t.number)
}

/// The first number of a trial's runs (itself unless a re-run).
fn root(t: &Trial) -> u64 {
    retried_from(t).unwrap_or(t.number)
}

fn by_number(study: &Study, number: u64) -> Option<&Trial> {
    match study.trials.get(number as usize) {
        Some(t) if t.number == number => Some(t),
        _ => study
            .trials
            .iter()
            .find(|t| t.number == number)
            .map(|t| &**t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::StudyId;
    use crate::trial::{Direction, TrialState};
    use serde_json::json;
    use std::collections::BTreeMap;

    /// Trial `n`: its state, completion second, and attributes.
    fn trial(n: u64, state: TrialState, done: u64, attrs: serde_json::Value) -> Arc<Trial> {
        Arc::new(Trial {
            number: n,
            state,
            params: BTreeMap::new(),
            distributions: Default::default(),
            value: (state == TrialState::Complete).then_some(n as f64),
            intermediate: BTreeMap::new(),
            user_attrs: crate::trial::attrs_of(&attrs),
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: state
                .is_finished()
                .then(|| format!("2026-11-27T00:00:{done:02}.000000")),
            discarded: false,
        })
    }

    fn answers(d: &mut Digest, s: &Study) -> String {
        let latest: Vec<u64> = d.latest_ended(s).map(|t| t.number).collect();
        let first: Vec<u64> = d.first_ended(s).map(|t| t.number).collect();
        let reruns: Vec<usize> = (0..s.trials.len() as u64)
            .map(|n| d.reruns_for(s, n, "crowded"))
            .collect();
        format!(
            "drawn {} interrupted {:?} reruns {reruns:?} latest {latest:?} first {first:?}",
            d.drawn(s),
            d.interrupted_roots(s)
        )
    }

    /// A study growing a trial and an end at a time, out of order: the
    /// digest kept across the steps answers as one made from scratch.
    #[test]
    fn a_digest_kept_as_the_study_grows_answers_as_a_fresh_one() {
        use TrialState::*;
        let interrupted = json!({"error_class": "interrupted"});
        let crowded = json!({"error_class": "out-of-memory", "rerun": "crowded: 2 at once"});
        let steps: Vec<Vec<Arc<Trial>>> = vec![
            vec![trial(0, Running, 0, json!({}))],
            vec![
                trial(0, Running, 0, json!({})),
                trial(1, Fail, 3, crowded.clone()),
            ],
            vec![
                trial(0, Fail, 5, interrupted.clone()),
                trial(1, Fail, 3, crowded.clone()),
                trial(2, Running, 0, json!({"retried_from": 1})),
            ],
            vec![
                trial(0, Fail, 5, interrupted.clone()),
                trial(1, Fail, 3, crowded.clone()),
                trial(
                    2,
                    Fail,
                    4,
                    json!({"retried_from": 1, "error_class": "other"}),
                ),
                trial(3, Running, 0, json!({"retried_from": 0})),
                trial(4, Complete, 2, json!({})),
            ],
            vec![
                trial(0, Fail, 5, interrupted.clone()),
                trial(1, Fail, 3, crowded),
                trial(
                    2,
                    Fail,
                    4,
                    json!({"retried_from": 1, "error_class": "other"}),
                ),
                trial(
                    3,
                    Fail,
                    9,
                    json!({"retried_from": 0, "error_class": "interrupted"}),
                ),
                trial(4, Complete, 2, json!({})),
                trial(
                    5,
                    Fail,
                    7,
                    json!({"error_class": "predicted-out-of-memory"}),
                ),
                trial(6, Fail, 8, json!({"error_class": "other"})),
            ],
        ];
        let mut kept = Digest::default();
        let mut seen = Vec::new();
        for trials in steps {
            let study = Study {
                id: StudyId(0),
                name: "s".into(),
                direction: Direction::Minimize,
                trial_ids: Arc::default(),
                trials: Arc::new(trials),
                user_attrs: Default::default(),
                system_attrs: Default::default(),
                shared: false,
            };
            let got = answers(&mut kept, &study);
            assert_eq!(got, answers(&mut Digest::of(&study), &study));
            seen.push(got);
        }
        // What the last step says, worked by hand: 5 drawn (0, 1, 4, 5,
        // 6); root 0 interrupted in both runs; trial 1 marked crowded once
        // (its re-run 2 counts it too); by end time 4, 2, 6: the refused
        // 5, the interrupted 0 and 3 and the crowded 1 (marked to run
        // again) are in neither list.
        assert_eq!(
            seen.last().unwrap(),
            "drawn 5 interrupted [0] reruns [0, 1, 1, 0, 0, 0, 0] latest [6, 2, 4] first [4, 2, 6]"
        );
    }
}
