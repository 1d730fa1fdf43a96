//! Pruners: after each epoch of a trial, go on or stop it, from its curve
//! (Optuna's intermediate values, step -> metric) and the other trials'.
//!
//! - [`PercentilePruner`] (and its median form): Optuna's PercentilePruner /
//!   MedianPruner, rule for rule (optuna/pruners/_percentile.py, 4.x), so that
//!   a study in our journal prunes as Optuna would;
//! - [`Hyperband`]: W&B's `early_terminate: {type: hyperband}`, as the sweep
//!   controller computes it (wandb/sweeps, src/sweeps/hyperband_stopping.py,
//!   `hyperband_stop_runs`), so that a W&B sweep file stops the same runs.
//!
//! Both are pure: no clock, no I/O, the same answer for the same input.

use crate::trial::{Direction, Trial, TrialState};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A pruner's answer at the trial's last reported step.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Continue,
    /// Stop the trial (state PRUNED); the reason is for the console and the
    /// journal's user attributes.
    Prune(String),
}

impl Decision {
    pub fn is_prune(&self) -> bool {
        matches!(self, Decision::Prune(_))
    }
}

/// Decides whether a running trial stops at its last reported step.
pub trait Pruner {
    /// `curve`: this trial's intermediate values so far (step -> metric);
    /// `others`: the study's other trials, any state (each pruner picks the
    /// ones its rule counts); `direction`: the metric's goal.
    fn decide(
        &self,
        curve: &BTreeMap<u64, f64>,
        others: &[Arc<Trial>],
        direction: Direction,
    ) -> Decision;
}

/// Optuna's PercentilePruner: prune when the trial's best intermediate value
/// so far is worse than the given percentile of the COMPLETE trials' values
/// at the trial's last step. [`PercentilePruner::median`] is MedianPruner.
#[derive(Clone, Debug, PartialEq)]
pub struct PercentilePruner {
    /// In [0, 100]; 50 is the median. The best `percentile`% are kept.
    pub percentile: f64,
    /// No pruning until this many trials are COMPLETE.
    pub n_startup_trials: usize,
    /// No pruning before this step.
    pub n_warmup_steps: u64,
    /// Check every this many steps after the warm-up (>= 1).
    pub interval_steps: u64,
    /// No pruning unless at least this many completed trials reported a
    /// value at the step (>= 1).
    pub n_min_trials: usize,
}

impl PercentilePruner {
    /// MedianPruner's defaults: n_startup_trials 5, n_warmup_steps 0,
    /// interval_steps 1, n_min_trials 1.
    pub fn median() -> Self {
        PercentilePruner {
            percentile: 50.0,
            n_startup_trials: 5,
            n_warmup_steps: 0,
            interval_steps: 1,
            n_min_trials: 1,
        }
    }

    /// Checked as Optuna's constructor checks; the error says which
    /// argument and why.
    pub fn new(
        percentile: f64,
        n_startup_trials: usize,
        n_warmup_steps: u64,
        interval_steps: u64,
        n_min_trials: usize,
    ) -> Result<Self, String> {
        if !(0.0..=100.0).contains(&percentile) {
            return Err(format!(
                "percentile: expected a number in [0, 100], found {percentile}"
            ));
        }
        if interval_steps < 1 {
            return Err("interval_steps: expected at least 1, found 0".into());
        }
        if n_min_trials < 1 {
            return Err("n_min_trials: expected at least 1, found 0".into());
        }
        Ok(PercentilePruner {
            percentile,
            n_startup_trials,
            n_warmup_steps,
            interval_steps,
            n_min_trials,
        })
    }

    /// Optuna's `_is_first_in_interval_step`: the check runs at the first
    /// reported step at or after each interval boundary, so a boundary whose
    /// step was never reported is checked at the next report.
    fn first_in_interval(&self, step: u64, curve: &BTreeMap<u64, f64>) -> bool {
        let nearest_lower = (step - self.n_warmup_steps) / self.interval_steps
            * self.interval_steps
            + self.n_warmup_steps;
        match curve.range(..step).next_back() {
            Some((&second_last, _)) => second_last < nearest_lower,
            None => true,
        }
    }
}

impl Pruner for PercentilePruner {
    fn decide(
        &self,
        curve: &BTreeMap<u64, f64>,
        others: &[Arc<Trial>],
        direction: Direction,
    ) -> Decision {
        // Only COMPLETE trials count: not PRUNED, FAIL or RUNNING ones.
        let completed: Vec<&Trial> = others
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .map(|t| &**t)
            .collect();
        if completed.is_empty() || completed.len() < self.n_startup_trials {
            return Decision::Continue;
        }
        let Some((&step, _)) = curve.last_key_value() else {
            return Decision::Continue;
        };
        if step < self.n_warmup_steps || !self.first_in_interval(step, curve) {
            return Decision::Continue;
        }
        // Best over every step reported so far, NaN ignored (nanmin/nanmax).
        let best = curve
            .values()
            .copied()
            .filter(|v| !v.is_nan())
            .reduce(|a, b| match direction {
                Direction::Minimize => a.min(b),
                Direction::Maximize => a.max(b),
            });
        let Some(best) = best else {
            return Decision::Prune(format!("step {step}: every value reported so far is NaN"));
        };
        let at_step: Vec<f64> = completed
            .iter()
            .filter_map(|t| t.intermediate.get(&step).copied())
            .collect();
        // NaN values count towards n_min_trials (Optuna counts them before
        // nanpercentile drops them).
        if at_step.len() < self.n_min_trials {
            return Decision::Continue;
        }
        let q = match direction {
            Direction::Minimize => self.percentile,
            Direction::Maximize => 100.0 - self.percentile,
        };
        let p = nanpercentile(&at_step, q);
        if p.is_nan() {
            return Decision::Continue;
        }
        let worse = match direction {
            Direction::Minimize => best > p,
            Direction::Maximize => best < p,
        };
        if !worse {
            return Decision::Continue;
        }
        let what = if self.percentile == 50.0 {
            "median".to_string()
        } else {
            format!("{}th percentile", self.percentile)
        };
        Decision::Prune(format!(
            "step {step}: best value so far {best} is worse than the {what} {p} of the {} completed trials that reached this step",
            at_step.len()
        ))
    }
}

/// numpy's `nanpercentile(values, q)` with its default "linear" method,
/// operation for operation, so that ties and infinities decide as in Optuna
/// (numpy/lib/_function_base_impl.py: `_quantile`, `_get_indexes`, `_lerp`):
/// NaN dropped; index (n-1)·q/100; an index at or past the last element
/// takes the last element with weight index+1; then numpy's two-sided lerp,
/// which gives NaN next to an infinity.
fn nanpercentile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let virtual_index = (n as f64 - 1.0) * (q / 100.0);
    let (prev, next, gamma) = if virtual_index >= n as f64 - 1.0 {
        // numpy sets both indexes to -1 (the last) and gamma = index - (-1).
        (n - 1, n - 1, virtual_index + 1.0)
    } else if virtual_index < 0.0 {
        (0, 0, virtual_index)
    } else {
        let lo = virtual_index.floor();
        (lo as usize, lo as usize + 1, virtual_index - lo)
    };
    lerp(v[prev], v[next], gamma)
}

/// numpy's `_lerp`: a + (b-a)·t, computed from b's side when t >= 0.5.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// W&B's hyperband early termination, as `hyperband_stop_runs` computes it.
///
/// Bands are counts of reported values (iterations): with `min_iter`,
/// ⌊min_iter·ηᵏ⌋ for k = 0, 1, ...; with `max_iter` and `s`, ⌊max_iter/ηᵏ⌋
/// for k = 1..=s while >= 1. At band b, the threshold is the
/// ⌊n/η⌋-th (0-based) best of the b-th values of the n runs, in any state,
/// this one included, that reported at least b values. A running trial is
/// judged at the last band it has reached: stopped when its b-th value
/// (`strict`, W&B's default) or its best value so far (not strict) is worse
/// than that band's threshold. So about the best 1/η of the runs at each band
/// go on (ties go on). NaN and infinite values are dropped first, as W&B's
/// `metric_history(filter_invalid=True)` does; the band then counts the
/// finite values.
#[derive(Clone, Debug, PartialEq)]
pub struct Hyperband {
    /// > 1: keep the best 1/eta at each band.
    pub eta: f64,
    /// Judge the value at the band (true) or the best so far (false).
    pub strict: bool,
    /// Ascending counts of reported values at which runs are judged.
    pub bands: Vec<u64>,
}

/// W&B computes 100 bands from min_iter; those past any epoch count (epochs
/// is a u32 in the config) can never be reached, so they are left out.
const MAX_BAND: f64 = u32::MAX as f64;

impl Hyperband {
    /// W&B's `min_iter` form: bands at ⌊min_iter·ηᵏ⌋.
    pub fn from_min_iter(min_iter: u64, eta: f64, strict: bool) -> Result<Self, String> {
        check_eta(eta)?;
        if min_iter < 1 {
            return Err("min_iter: expected at least 1, found 0".into());
        }
        let mut bands = Vec::new();
        let mut band = min_iter as f64;
        for _ in 0..100 {
            if band > MAX_BAND {
                break;
            }
            bands.push(band as u64);
            band *= eta;
        }
        Ok(Hyperband { eta, strict, bands })
    }

    /// W&B's `max_iter` + `s` form: bands at ⌊max_iter/ηᵏ⌋ for k = 1..=s,
    /// stopping below 1; at least one band is required.
    pub fn from_max_iter(max_iter: u64, s: u64, eta: f64, strict: bool) -> Result<Self, String> {
        check_eta(eta)?;
        let mut bands = Vec::new();
        let mut band = max_iter as f64;
        for _ in 0..s {
            band /= eta;
            if band < 1.0 {
                break;
            }
            bands.push(band as u64);
        }
        if bands.is_empty() {
            return Err(format!(
                "no band: max_iter ({max_iter}) / eta ({eta}) over s ({s}) steps never reaches 1; raise max_iter or s, or lower eta"
            ));
        }
        bands.sort_unstable();
        Ok(Hyperband { eta, strict, bands })
    }
}

fn check_eta(eta: f64) -> Result<(), String> {
    if eta.is_finite() && eta > 1.0 {
        Ok(())
    } else {
        Err(format!("eta: expected a number > 1, found {eta}"))
    }
}

/// W&B's `metric_history(filter_invalid=True)`, made "smaller is better".
fn history(curve: &BTreeMap<u64, f64>, direction: Direction) -> Vec<f64> {
    let sign = match direction {
        Direction::Minimize => 1.0,
        Direction::Maximize => -1.0,
    };
    curve
        .values()
        .filter(|v| v.is_finite())
        .map(|v| sign * v)
        .collect()
}

impl Pruner for Hyperband {
    fn decide(
        &self,
        curve: &BTreeMap<u64, f64>,
        others: &[Arc<Trial>],
        direction: Direction,
    ) -> Decision {
        let mine = history(curve, direction);
        let Some(&band) = self
            .bands
            .iter()
            .take_while(|&&b| b as usize <= mine.len())
            .last()
        else {
            return Decision::Continue;
        };
        let b = band as usize;
        let mut at_band: Vec<f64> = others
            .iter()
            .map(|t| history(&t.intermediate, direction))
            .chain(std::iter::once(mine.clone()))
            .filter(|h| h.len() >= b)
            .map(|h| h[b - 1])
            .collect();
        at_band.sort_by(f64::total_cmp);
        // `mine` has b values, so at_band is never empty here.
        let n = at_band.len();
        let index = (((1.0 / self.eta) * n as f64) as usize).min(n - 1);
        let threshold = at_band[index];
        let value = if self.strict {
            mine[b - 1]
        } else {
            mine.iter().copied().fold(f64::INFINITY, f64::min)
        };
        if value <= threshold {
            return Decision::Continue;
        }
        let sign = match direction {
            Direction::Minimize => 1.0,
            Direction::Maximize => -1.0,
        };
        let which = if self.strict {
            format!("value at iteration {band}")
        } else {
            "best value so far".to_string()
        };
        Decision::Prune(format!(
            "hyperband band {band}: {which} {} is outside the best 1/{} ({} of {n} runs; threshold {})",
            sign * value,
            self.eta,
            index + 1,
            sign * threshold
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::shared;

    fn trial(number: u64, state: TrialState, values: &[f64]) -> Trial {
        Trial {
            number,
            state,
            params: BTreeMap::new(),
            distributions: Default::default(),
            value: (state == TrialState::Complete).then(|| values.last().copied().unwrap_or(0.0)),
            intermediate: curve(values),
            user_attrs: BTreeMap::new(),
            system_attrs: BTreeMap::new(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        }
    }

    /// Steps 1, 2, ... as train's epochs.
    fn curve(values: &[f64]) -> BTreeMap<u64, f64> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u64 + 1, *v))
            .collect()
    }

    fn complete(curves: &[&[f64]]) -> Vec<Trial> {
        curves
            .iter()
            .enumerate()
            .map(|(i, c)| trial(i as u64, TrialState::Complete, c))
            .collect()
    }

    #[test]
    fn numpy_percentile_cases() {
        // Values printed by numpy 2.4 for np.nanpercentile(a, 50).
        let inf = f64::INFINITY;
        assert_eq!(nanpercentile(&[1.0, 2.0, 3.0], 50.0), 2.0);
        assert_eq!(nanpercentile(&[0.1, 0.2], 50.0), 0.15000000000000002);
        assert_eq!(nanpercentile(&[1.0, f64::NAN], 50.0), 1.0);
        assert_eq!(nanpercentile(&[-inf, 1.0], 50.0), -inf);
        for nan in [
            &[f64::NAN][..],
            &[inf],
            &[1.0, inf],
            &[1.0, 3.0, inf, inf],
            &[-inf, inf],
        ] {
            assert!(nanpercentile(nan, 50.0).is_nan(), "{nan:?}");
        }
        assert_eq!(nanpercentile(&[1.0, 2.0, 3.0, 4.0], 25.0), 1.75);
        assert_eq!(nanpercentile(&[1.0, 2.0, 3.0, 4.0], 100.0), 4.0);
        assert_eq!(nanpercentile(&[1.0, 2.0, 3.0, 4.0], 0.0), 1.0);
    }

    #[test]
    fn median_waits_for_five_completed_trials() {
        let m = PercentilePruner::median();
        let bad = curve(&[9.0]);
        let mut others = complete(&[&[1.0], &[1.0], &[1.0], &[1.0]]);
        // Pruned, failed and running trials do not count towards startup.
        others.push(trial(10, TrialState::Pruned, &[1.0]));
        others.push(trial(11, TrialState::Fail, &[1.0]));
        others.push(trial(12, TrialState::Running, &[1.0]));
        assert_eq!(
            m.decide(&bad, &shared(&others), Direction::Minimize),
            Decision::Continue
        );
        others.push(trial(13, TrialState::Complete, &[1.0]));
        assert!(m
            .decide(&bad, &shared(&others), Direction::Minimize)
            .is_prune());
    }

    #[test]
    fn median_compares_the_best_so_far_with_the_median_at_the_last_step() {
        let m = PercentilePruner::median();
        let others = complete(&[
            &[5.0, 4.0, 3.0],
            &[5.0, 4.0, 3.0],
            &[6.0, 5.0, 4.0],
            &[6.0, 5.0, 4.0],
            &[7.0, 6.0, 5.0],
        ]);
        // Step 3's median is 4; this trial's best (3.5 at step 2) is better
        // than it even though its value at step 3 (9) is worse.
        let c = curve(&[6.0, 3.5, 9.0]);
        assert_eq!(
            m.decide(&c, &shared(&others), Direction::Minimize),
            Decision::Continue
        );
        let c = curve(&[6.0, 5.0, 4.5]);
        let d = m.decide(&c, &shared(&others), Direction::Minimize);
        assert!(
            matches!(&d, Decision::Prune(r) if r.contains("median 4 of the 5")),
            "{d:?}"
        );
        // Equal to the median: not worse, goes on.
        let c = curve(&[6.0, 5.0, 4.0]);
        assert_eq!(
            m.decide(&c, &shared(&others), Direction::Minimize),
            Decision::Continue
        );
        // Maximize: the same numbers read the other way.
        let c = curve(&[3.0, 3.5, 3.9]);
        assert!(m
            .decide(&c, &shared(&others), Direction::Maximize)
            .is_prune());
        let c = curve(&[4.0, 4.0, 4.1]);
        assert_eq!(
            m.decide(&c, &shared(&others), Direction::Maximize),
            Decision::Continue
        );
    }

    #[test]
    fn median_nan_rules() {
        let m = PercentilePruner::median();
        let others = complete(&[&[1.0], &[1.0], &[1.0], &[f64::NAN], &[f64::NAN]]);
        // All NaN so far: pruned.
        let c = curve(&[f64::NAN]);
        assert!(m
            .decide(&c, &shared(&others), Direction::Minimize)
            .is_prune());
        // NaN among the completed values is ignored: median of [1, 1, 1].
        let c = curve(&[f64::NAN, 2.0]);
        let c1: BTreeMap<u64, f64> = [(1, 2.0)].into();
        assert!(m
            .decide(&c1, &shared(&others), Direction::Minimize)
            .is_prune());
        // No completed trial reached step 2: nothing to compare with.
        assert_eq!(
            m.decide(&c, &shared(&others), Direction::Minimize),
            Decision::Continue
        );
        // Every completed value at the step NaN: the median is NaN, go on.
        let nan: &[f64] = &[f64::NAN];
        let others = complete(&[nan; 5]);
        assert_eq!(
            m.decide(&c1, &shared(&others), Direction::Minimize),
            Decision::Continue
        );
        // No report yet: go on.
        assert_eq!(
            m.decide(&BTreeMap::new(), &shared(&others), Direction::Minimize),
            Decision::Continue
        );
    }

    #[test]
    fn warmup_and_interval_as_optuna() {
        let p = PercentilePruner::new(50.0, 0, 2, 3, 1).unwrap();
        let others = complete(&[&[1.0; 12]]);
        let bad =
            |steps: &[u64]| -> BTreeMap<u64, f64> { steps.iter().map(|&s| (s, 9.0)).collect() };
        let d = |steps: &[u64]| {
            p.decide(&bad(steps), &shared(&others), Direction::Minimize)
                .is_prune()
        };
        // Steps before the warm-up (2) are never pruned.
        assert!(!d(&[0]) && !d(&[0, 1]));
        // Checks at 2, 5, 8, ...: the first report at or after each.
        assert!(d(&[0, 1, 2]));
        assert!(!d(&[0, 1, 2, 3]) && !d(&[0, 1, 2, 3, 4]));
        assert!(d(&[0, 1, 2, 3, 4, 5]));
        // 5 was skipped: 6 is the first report of its interval.
        assert!(d(&[0, 1, 2, 3, 4, 6]));
        assert!(!d(&[0, 1, 2, 3, 4, 6, 7]));
        assert!(PercentilePruner::new(101.0, 5, 0, 1, 1).is_err());
        assert!(PercentilePruner::new(50.0, 5, 0, 0, 1).is_err());
        assert!(PercentilePruner::new(50.0, 5, 0, 1, 0).is_err());
    }

    #[test]
    fn n_min_trials_counts_reports_at_the_step() {
        let p = PercentilePruner::new(50.0, 1, 0, 1, 3).unwrap();
        let others = complete(&[&[1.0, 1.0], &[1.0, 1.0], &[1.0]]);
        assert!(p
            .decide(&curve(&[9.0]), &shared(&others), Direction::Minimize)
            .is_prune());
        assert_eq!(
            p.decide(&curve(&[9.0, 9.0]), &shared(&others), Direction::Minimize),
            Decision::Continue
        );
    }

    #[test]
    fn hyperband_bands_as_wandb_computes_them() {
        let h = Hyperband::from_min_iter(3, 3.0, true).unwrap();
        assert_eq!(&h.bands[..5], &[3, 9, 27, 81, 243]);
        assert!(h.bands.iter().all(|&b| b as f64 <= MAX_BAND));
        // W&B's docs: max_iter 27, s 2 -> 27/3 = 9, 9/3 = 3.
        let h = Hyperband::from_max_iter(27, 2, 3.0, true).unwrap();
        assert_eq!(h.bands, vec![3, 9]);
        // Truncated, sorted, and cut where the band drops below 1.
        let h = Hyperband::from_max_iter(10, 5, 2.0, true).unwrap();
        assert_eq!(h.bands, vec![1, 2, 5]);
        let h = Hyperband::from_min_iter(2, 1.5, true).unwrap();
        assert_eq!(&h.bands[..4], &[2, 3, 4, 6]);
        assert!(Hyperband::from_max_iter(2, 3, 3.0, true).is_err());
        assert!(Hyperband::from_max_iter(27, 0, 3.0, true).is_err());
        assert!(Hyperband::from_min_iter(0, 3.0, true).is_err());
        assert!(Hyperband::from_min_iter(1, 1.0, true).is_err());
        assert!(Hyperband::from_min_iter(1, f64::NAN, true).is_err());
    }

    #[test]
    fn hyperband_docstring_example() {
        // hyperband_stop_runs' docstring runs: max_iter 5, eta 2, s 2 ->
        // bands [1, 2]. Band 1: all 10 -> threshold sorted[⌊5/2⌋] = 10.
        // Band 2: [9, 10, 8, 7, 6] -> sorted[2] = 8. Strict: b (10 at 2)
        // stops; c (8) ties the threshold and goes on; d (7) goes on.
        let h = Hyperband::from_max_iter(5, 2, 2.0, true).unwrap();
        let a = trial(0, TrialState::Complete, &[10.0, 9.0]);
        let b = trial(1, TrialState::Running, &[10.0, 10.0]);
        let c = trial(2, TrialState::Running, &[10.0, 8.0, 8.0]);
        let d = trial(3, TrialState::Running, &[10.0, 7.0, 7.0]);
        let e = trial(4, TrialState::Complete, &[10.0, 6.0, 6.0]);
        let all = [a, b, c, d, e];
        let judge = |i: usize| {
            let others: Vec<Trial> = all
                .iter()
                .filter(|t| t.number != i as u64)
                .cloned()
                .collect();
            h.decide(&all[i].intermediate, &shared(&others), Direction::Minimize)
        };
        let d1 = judge(1);
        assert!(
            matches!(&d1, Decision::Prune(r) if r.contains("band 2") && r.contains("threshold 8")),
            "{d1:?}"
        );
        assert_eq!(judge(2), Decision::Continue);
        assert_eq!(judge(3), Decision::Continue);
        // Not strict: b's best so far (10) is still worse than 8.
        let loose = Hyperband {
            strict: false,
            ..h.clone()
        };
        let others: Vec<Trial> = all.iter().filter(|t| t.number != 1).cloned().collect();
        assert!(loose
            .decide(&all[1].intermediate, &shared(&others), Direction::Minimize)
            .is_prune());
    }

    #[test]
    fn hyperband_top_third_at_each_band() {
        // min_iter 2, eta 3: bands 2, 6, 18, ... Nine runs reached band 2
        // with values 1..=9 at iteration 2: threshold sorted[⌊9/3⌋] = 4.
        let h = Hyperband::from_min_iter(2, 3.0, true).unwrap();
        let others: Vec<Trial> = (1..=8)
            .map(|v| trial(v, TrialState::Complete, &[0.0, v as f64]))
            .collect();
        let judge = |c: &[f64]| h.decide(&curve(c), &shared(&others), Direction::Minimize);
        assert_eq!(judge(&[0.0]), Decision::Continue, "before the first band");
        // This run is the ninth: its 9 is worse than 4.
        assert!(judge(&[0.0, 9.0]).is_prune());
        // With 4.5 the sorted values are 1..4, 4.5, 5.., threshold 4: stop.
        assert!(judge(&[0.0, 4.5]).is_prune());
        assert_eq!(judge(&[0.0, 3.5]), Decision::Continue);
        // Judged at band 2 until band 6: the value at iteration 2 decides
        // (strict), whatever comes after.
        assert!(judge(&[0.0, 9.0, 0.1, 0.1]).is_prune());
        assert_eq!(judge(&[0.0, 3.0, 50.0]), Decision::Continue);
        // Maximize: negated, so the best are the largest; the fourth largest
        // of the nine is the threshold. With 8.5: 8.5, 8, 7, 6 -> 6.
        assert_eq!(
            judge_max(&h, &shared(&others), &[0.0, 8.5]),
            Decision::Continue
        );
        // 5.5 is itself the fourth largest (8, 7, 6, 5.5): it goes on.
        assert_eq!(
            judge_max(&h, &shared(&others), &[0.0, 5.5]),
            Decision::Continue
        );
        // 4.5: 8, 7, 6, 5 -> threshold 5; 4.5 is worse.
        assert!(judge_max(&h, &shared(&others), &[0.0, 4.5]).is_prune());
    }

    fn judge_max(h: &Hyperband, others: &[Arc<Trial>], c: &[f64]) -> Decision {
        h.decide(&curve(c), others, Direction::Maximize)
    }

    #[test]
    fn hyperband_counts_finite_values_and_every_state() {
        let h = Hyperband::from_min_iter(1, 2.0, true).unwrap();
        // A failed run's first value counts in band 1's threshold.
        let others = vec![
            trial(0, TrialState::Fail, &[1.0]),
            trial(1, TrialState::Pruned, &[2.0]),
        ];
        // [1, 2, 3]: threshold sorted[⌊3/2⌋] = 2; 3 > 2: stop.
        assert!(h
            .decide(&curve(&[3.0]), &shared(&others), Direction::Minimize)
            .is_prune());
        // NaN is dropped: the run has reported no value yet.
        assert_eq!(
            h.decide(&curve(&[f64::NAN]), &shared(&others), Direction::Minimize),
            Decision::Continue
        );
        // [NaN, 1.5]: one finite value, 1.5 at band 1; threshold 1.5.
        assert_eq!(
            h.decide(
                &curve(&[f64::NAN, 1.5]),
                &shared(&others),
                Direction::Minimize
            ),
            Decision::Continue
        );
        // Alone: the run is its own threshold.
        assert_eq!(
            h.decide(&curve(&[100.0]), &[], Direction::Minimize),
            Decision::Continue
        );
    }
}
