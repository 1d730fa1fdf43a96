//! Optuna 4.x's default TPESampler (univariate, single objective): after
//! `n_startup_trials` finished trials, each parameter on its own: split the
//! finished trials into the best gamma(n) ("below") and the rest, fit a
//! Parzen estimator l(x) to the below trials' values and g(x) to the
//! others', draw `n_ei_candidates` from l and keep the one that maximises
//! log l(x) - log g(x).

use super::parzen::{ParzenEstimator, ParzenParams};
use super::random::RandomSampler;
use super::rng::{Rng, Stream};
use super::{single_value, to_external, to_internal, Sampler, SearchSpace};
use crate::trial::{Direction, Distribution, ParamValue, Trial, TrialState};
use anyhow::Result;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Optuna's `default_gamma`: the best 10% are "below", at most 25.
pub fn default_gamma(n: usize) -> usize {
    n.div_ceil(10).min(25)
}

#[derive(Clone, Debug)]
pub struct TpeSampler {
    seed: u64,
    /// Trials drawn at random (by [`RandomSampler`] with the same seed)
    /// until this many trials are COMPLETE or PRUNED.
    pub n_startup_trials: usize,
    /// Candidates drawn from l(x) per parameter.
    pub n_ei_candidates: usize,
    pub parzen: ParzenParams,
}

impl TpeSampler {
    /// Optuna's defaults: 10 startup trials, 24 candidates, prior weight 1,
    /// magic clip on, endpoints off.
    pub fn new(seed: u64) -> TpeSampler {
        TpeSampler {
            seed,
            n_startup_trials: 10,
            n_ei_candidates: 24,
            parzen: ParzenParams::default(),
        }
    }

    /// One parameter of trial `number` (Optuna's `sample_independent`).
    pub fn sample_param(
        &self,
        name: &str,
        d: &Distribution,
        trials: &[Trial],
        direction: Direction,
        number: u64,
    ) -> ParamValue {
        if let Some(v) = single_value(d) {
            return v;
        }
        let finished: Vec<&Trial> = trials.iter().filter(|t| usable(t)).collect();
        if finished.len() < self.n_startup_trials {
            return RandomSampler::new(self.seed).sample_param(name, d, number);
        }
        let (below, above) = split_trials(trials, direction, default_gamma(finished.len()));
        let observations = |ts: &[&Trial]| -> Vec<f64> {
            ts.iter()
                .filter_map(|t| t.params.get(name).and_then(|v| to_internal(d, v)))
                .collect()
        };
        let l = ParzenEstimator::new(d, &observations(&below), &self.parzen);
        let g = ParzenEstimator::new(d, &observations(&above), &self.parzen);
        let mut rng = Rng::new(self.seed, Stream::Tpe, number, name);
        let candidates = l.sample(&mut rng, self.n_ei_candidates.max(1));
        let mut best = (candidates[0], f64::NEG_INFINITY);
        for (i, &x) in candidates.iter().enumerate() {
            let acq = l.log_pdf(x) - g.log_pdf(x);
            // The first maximum, as numpy's argmax.
            if i == 0 || acq > best.1 {
                best = (x, acq);
            }
        }
        to_external(d, best.0)
    }
}

impl Sampler for TpeSampler {
    fn sample(
        &self,
        space: &SearchSpace,
        trials: &[Trial],
        direction: Direction,
        number: u64,
    ) -> Result<BTreeMap<String, ParamValue>> {
        space.check()?;
        let mut out = space.fixed.clone();
        for (name, d) in &space.params {
            let v = self.sample_param(name, d, trials, direction, number);
            out.insert(name.clone(), v);
        }
        Ok(out)
    }
}

/// The trials TPE learns from: COMPLETE with a value, and PRUNED. Failed,
/// running and waiting trials are left out (Optuna's default, without
/// constant_liar).
fn usable(t: &Trial) -> bool {
    match t.state {
        TrialState::Complete => t.value.is_some(),
        TrialState::Pruned => true,
        _ => false,
    }
}

/// Optuna's `_split_trials` for one objective: the `n_below` best COMPLETE
/// trials by value, then, if fewer, PRUNED ones ranked by how far they got
/// (last step, higher first) and then their value at that step; both halves
/// in trial-number order. Ties keep trial-number order (Python's sort is
/// stable); a NaN value ranks last.
pub fn split_trials(
    trials: &[Trial],
    direction: Direction,
    n_below: usize,
) -> (Vec<&Trial>, Vec<&Trial>) {
    let mut by_number: Vec<&Trial> = trials.iter().filter(|t| usable(t)).collect();
    by_number.sort_by_key(|t| t.number);
    let (mut complete, mut pruned): (Vec<&Trial>, Vec<&Trial>) = by_number
        .into_iter()
        .partition(|t| t.state == TrialState::Complete);

    let sign = match direction {
        Direction::Minimize => 1.0,
        Direction::Maximize => -1.0,
    };
    let nan_last = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (a_nan, b_nan) => a_nan.cmp(&b_nan),
    };
    complete.sort_by(|a, b| {
        nan_last(
            sign * a.value.unwrap_or(f64::NAN),
            sign * b.value.unwrap_or(f64::NAN),
        )
    });
    let pruned_score = |t: &Trial| -> (i128, f64) {
        match t.intermediate.iter().next_back() {
            Some((&step, &v)) if v.is_nan() => (-i128::from(step), f64::INFINITY),
            Some((&step, &v)) => (-i128::from(step), sign * v),
            None => (1, 0.0),
        }
    };
    pruned.sort_by(|a, b| {
        let (sa, va) = pruned_score(a);
        let (sb, vb) = pruned_score(b);
        sa.cmp(&sb).then_with(|| nan_last(va, vb))
    });

    let n_complete = n_below.min(complete.len());
    let n_pruned = (n_below - n_complete).min(pruned.len());
    let mut below: Vec<&Trial> = complete[..n_complete].to_vec();
    below.extend_from_slice(&pruned[..n_pruned]);
    let mut above: Vec<&Trial> = complete[n_complete..].to_vec();
    above.extend_from_slice(&pruned[n_pruned..]);
    below.sort_by_key(|t| t.number);
    above.sort_by_key(|t| t.number);
    (below, above)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::Choice;

    fn trial(number: u64, state: TrialState, value: Option<f64>, x: f64) -> Trial {
        Trial {
            number,
            state,
            params: [("x".to_string(), ParamValue::Float(x))].into(),
            distributions: BTreeMap::new(),
            value,
            intermediate: BTreeMap::new(),
            user_attrs: BTreeMap::new(),
            system_attrs: BTreeMap::new(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        }
    }

    fn x_dist() -> Distribution {
        Distribution::Float {
            low: -10.0,
            high: 10.0,
            log: false,
            step: None,
        }
    }

    #[test]
    fn gamma_is_a_tenth_rounded_up_at_most_25() {
        let got: Vec<usize> = [0, 1, 10, 11, 20, 21, 249, 250, 251, 1000]
            .iter()
            .map(|&n| default_gamma(n))
            .collect();
        assert_eq!(got, vec![0, 1, 1, 2, 2, 3, 25, 25, 25, 25]);
    }

    #[test]
    fn random_until_ten_finished_trials() {
        let tpe = TpeSampler::new(3);
        let random = RandomSampler::new(3);
        let d = x_dist();
        // Nine finished, plus failed and running ones that do not count.
        let mut trials: Vec<Trial> = (0..9)
            .map(|i| trial(i, TrialState::Complete, Some(i as f64), i as f64 - 4.0))
            .collect();
        trials.push(trial(9, TrialState::Fail, None, 0.0));
        trials.push(trial(10, TrialState::Running, None, 0.0));
        let at = |ts: &[Trial]| tpe.sample_param("x", &d, ts, Direction::Minimize, 11);
        assert_eq!(at(&trials), random.sample_param("x", &d, 11));
        trials.push(trial(11, TrialState::Pruned, None, 1.0));
        assert_ne!(at(&trials), random.sample_param("x", &d, 11));
    }

    #[test]
    fn split_ranks_complete_then_pruned_by_progress() {
        let mut trials = vec![
            trial(0, TrialState::Complete, Some(3.0), 0.0),
            trial(1, TrialState::Complete, Some(1.0), 0.0),
            trial(2, TrialState::Pruned, None, 0.0),
            trial(3, TrialState::Pruned, None, 0.0),
            trial(4, TrialState::Pruned, None, 0.0),
            trial(5, TrialState::Fail, None, 0.0),
            trial(6, TrialState::Running, None, 0.0),
            trial(7, TrialState::Complete, Some(2.0), 0.0),
        ];
        trials[2].intermediate = [(0, 0.1), (1, 0.5)].into();
        trials[3].intermediate = [(0, 0.2), (1, 0.4)].into();
        trials[4].intermediate = [(0, 0.0)].into();
        let numbers = |v: Vec<&Trial>| v.iter().map(|t| t.number).collect::<Vec<_>>();
        let (b, a) = split_trials(&trials, Direction::Minimize, 2);
        assert_eq!((numbers(b), numbers(a)), (vec![1, 7], vec![0, 2, 3, 4]));
        // Past the complete ones: the furthest pruned, the better value first.
        let (b, a) = split_trials(&trials, Direction::Minimize, 4);
        assert_eq!((numbers(b), numbers(a)), (vec![0, 1, 3, 7], vec![2, 4]));
        let (b, a) = split_trials(&trials, Direction::Maximize, 5);
        assert_eq!((numbers(b), numbers(a)), (vec![0, 1, 2, 3, 7], vec![4]));
        // Failed and running trials are on neither side.
        let (b, a) = split_trials(&trials, Direction::Maximize, 100);
        assert_eq!((b.len(), a.len()), (6, 0));
    }

    #[test]
    fn deterministic_and_drawn_towards_the_good_region() {
        // Minimise (x - 3)²: values near 3 are "below".
        let trials: Vec<Trial> = (0..40)
            .map(|i| {
                let x = -10.0 + 20.0 * (i as f64 * 0.618_034).fract();
                trial(i, TrialState::Complete, Some((x - 3.0).powi(2)), x)
            })
            .collect();
        let tpe = TpeSampler::new(0);
        let space = SearchSpace {
            params: vec![("x".into(), x_dist())],
            fixed: BTreeMap::new(),
        };
        let mut near = 0;
        for n in 40..90 {
            let p = tpe.sample(&space, &trials, Direction::Minimize, n).unwrap();
            assert_eq!(
                p,
                tpe.sample(&space, &trials, Direction::Minimize, n).unwrap()
            );
            let ParamValue::Float(x) = p["x"] else {
                panic!("{p:?}")
            };
            near += usize::from((x - 3.0).abs() < 2.0);
        }
        // At random 4/20 of the range: TPE should do far better.
        assert!(near >= 35, "{near} of 50 within 2 of the optimum");
    }

    #[test]
    fn categorical_and_int_values_come_back_typed() {
        let choices = vec![Choice::Str("a".into()), Choice::Str("b".into())];
        let space = SearchSpace {
            params: vec![
                (
                    "c".into(),
                    Distribution::Categorical {
                        choices: choices.clone(),
                    },
                ),
                (
                    "k".into(),
                    Distribution::Int {
                        low: 1,
                        high: 64,
                        log: true,
                        step: 1,
                    },
                ),
            ],
            fixed: [("epochs".into(), ParamValue::Int(2))].into(),
        };
        let trials: Vec<Trial> = (0..12)
            .map(|i| {
                let mut t = trial(i, TrialState::Complete, Some(i as f64), 0.0);
                t.params = [
                    (
                        "c".to_string(),
                        ParamValue::Choice(choices[(i % 2) as usize].clone()),
                    ),
                    ("k".to_string(), ParamValue::Int(1 << (i % 7))),
                ]
                .into();
                t
            })
            .collect();
        let p = TpeSampler::new(1)
            .sample(&space, &trials, Direction::Minimize, 12)
            .unwrap();
        assert!(matches!(&p["c"], ParamValue::Choice(Choice::Str(_))));
        let ParamValue::Int(k) = p["k"] else {
            panic!("{p:?}")
        };
        assert!((1..=64).contains(&k));
        assert_eq!(p["epochs"], ParamValue::Int(2));
    }
}
