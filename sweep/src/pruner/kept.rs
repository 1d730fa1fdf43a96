//! What the percentile pruner keeps of a study between its decisions: the
//! values of every COMPLETE trial at each step, folded in once (a finished
//! trial never changes) and kept sorted, so that a decision in a study of
//! 50,000 trials is a look-up at its step, not a scan of every trial's
//! curve. `PercentilePruner::decide` builds one afresh from the trials it
//! is given; the driver keeps one across its looks (`decide_kept`).

use crate::trial::{Trial, TrialState};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Kept {
    /// The trials numbered below this are finished and folded in.
    settled: u64,
    /// COMPLETE trials numbered `settled` or above, folded in already.
    folded: HashSet<u64>,
    /// COMPLETE trials folded in.
    pub(super) completed: usize,
    steps: HashMap<u64, AtStep>,
    /// What the hyperband pruner keeps (its own fold: every finished
    /// state counts there).
    pub(super) bands: super::bands::Bands,
}

/// The COMPLETE trials' values at one step.
#[derive(Debug, Default)]
pub(super) struct AtStep {
    /// The values that are not NaN, in `total_cmp` order.
    pub sorted: Vec<f64>,
    /// NaN values (they count towards `n_min_trials`).
    pub nan: usize,
}

impl Kept {
    /// Folds in the COMPLETE trials of `others` not folded in yet; in
    /// number order (a study's), only those from the first unfinished one
    /// on are looked at.
    pub fn update(&mut self, others: &[Arc<Trial>]) {
        let start = others.partition_point(|t| t.number < self.settled);
        let mut prefix = true;
        for t in &others[start..] {
            if prefix && t.number == self.settled && t.state.is_finished() {
                self.settled += 1;
            } else {
                prefix = false;
            }
            if t.state == TrialState::Complete && self.folded.insert(t.number) {
                self.fold(t);
            }
        }
        let settled = self.settled;
        self.folded.retain(|n| *n >= settled);
    }

    fn fold(&mut self, t: &Trial) {
        self.completed += 1;
        for (step, v) in &t.intermediate {
            let at = self.steps.entry(*step).or_default();
            if v.is_nan() {
                at.nan += 1;
            } else {
                let i = at.sorted.partition_point(|x| x.total_cmp(v).is_le());
                at.sorted.insert(i, *v);
            }
        }
    }

    pub(super) fn at(&self, step: u64) -> Option<&AtStep> {
        self.steps.get(&step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::shared;
    use std::collections::BTreeMap;

    fn trial(number: u64, state: TrialState, curve: &[f64]) -> Trial {
        Trial {
            number,
            state,
            params: BTreeMap::new(),
            distributions: Default::default(),
            value: None,
            intermediate: curve
                .iter()
                .enumerate()
                .map(|(s, v)| (s as u64, *v))
                .collect(),
            user_attrs: Default::default(),
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        }
    }

    /// Kept across a growing study (a trial finishing out of order, one
    /// pruned, a NaN): the same steps as one made afresh, each trial once.
    #[test]
    fn kept_across_looks_it_holds_what_a_fresh_one_holds() {
        use TrialState::*;
        let steps: Vec<Vec<Trial>> = vec![
            vec![trial(0, Running, &[3.0]), trial(1, Complete, &[2.0, 1.0])],
            vec![
                trial(0, Complete, &[3.0, f64::NAN]),
                trial(1, Complete, &[2.0, 1.0]),
                trial(2, Pruned, &[9.0]),
                trial(3, Running, &[0.5]),
            ],
            vec![
                trial(0, Complete, &[3.0, f64::NAN]),
                trial(1, Complete, &[2.0, 1.0]),
                trial(2, Pruned, &[9.0]),
                trial(3, Complete, &[0.5, 0.25]),
            ],
        ];
        let mut kept = Kept::default();
        for trials in &steps {
            let trials = shared(trials);
            kept.update(&trials);
            kept.update(&trials);
            let mut fresh = Kept::default();
            fresh.update(&trials);
            assert_eq!(kept.completed, fresh.completed);
            for s in 0..3 {
                let view = |k: &Kept| k.at(s).map(|a| (a.sorted.clone(), a.nan));
                assert_eq!(view(&kept), view(&fresh), "step {s}");
            }
        }
        assert_eq!(kept.completed, 3);
        let at0 = kept.at(0).unwrap();
        assert_eq!((at0.sorted.as_slice(), at0.nan), (&[0.5, 2.0, 3.0][..], 0));
        let at1 = kept.at(1).unwrap();
        assert_eq!((at1.sorted.as_slice(), at1.nan), (&[0.25, 1.0][..], 1));
    }
}
