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

use crate::trial::{Direction, Trial};
use std::collections::BTreeMap;
use std::sync::Arc;

mod bands;
mod kept;
pub use kept::Kept;

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

    /// `decide` for trial `me` of a study whose trials (in number order)
    /// are `trials`, with `kept` holding what the pruner keeps of the
    /// finished ones between calls (updated here): the same answer, at the
    /// cost of what is new. By default `decide` on the others, which looks
    /// at every trial.
    fn decide_kept(
        &self,
        curve: &BTreeMap<u64, f64>,
        trials: &[Arc<Trial>],
        me: u64,
        kept: &mut Kept,
        direction: Direction,
    ) -> Decision {
        let _ = kept;
        let others: Vec<Arc<Trial>> = trials.iter().filter(|t| t.number != me).cloned().collect();
        self.decide(curve, &others, direction)
    }
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
        let mut kept = Kept::default();
        kept.update(others);
        self.judge(curve, &kept, direction)
    }

    /// Trial `me` is running, so never among the COMPLETE ones it counts.
    fn decide_kept(
        &self,
        curve: &BTreeMap<u64, f64>,
        trials: &[Arc<Trial>],
        _me: u64,
        kept: &mut Kept,
        direction: Direction,
    ) -> Decision {
        kept.update(trials);
        self.judge(curve, kept, direction)
    }
}

impl PercentilePruner {
    /// The rule, on the COMPLETE trials' values as `kept` holds them (only
    /// COMPLETE trials count: not PRUNED, FAIL or RUNNING ones).
    fn judge(&self, curve: &BTreeMap<u64, f64>, kept: &Kept, direction: Direction) -> Decision {
        if kept.completed == 0 || kept.completed < self.n_startup_trials {
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
        let (sorted, reached) = match kept.at(step) {
            Some(at) => (at.sorted.as_slice(), at.sorted.len() + at.nan),
            None => (&[][..], 0),
        };
        // NaN values count towards n_min_trials (Optuna counts them before
        // nanpercentile drops them).
        if reached < self.n_min_trials {
            return Decision::Continue;
        }
        let q = match direction {
            Direction::Minimize => self.percentile,
            Direction::Maximize => 100.0 - self.percentile,
        };
        let p = percentile_of_sorted(sorted, q);
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
            "step {step}: best value so far {best} is worse than the {what} {p} of the {reached} completed trials that reached this step"
        ))
    }
}

/// numpy's `nanpercentile(values, q)` with its default "linear" method,
/// operation for operation, so that ties and infinities decide as in Optuna
/// (numpy/lib/_function_base_impl.py: `_quantile`, `_get_indexes`, `_lerp`):
/// NaN dropped; index (n-1)·q/100; an index at or past the last element
/// takes the last element with weight index+1; then numpy's two-sided lerp,
/// which gives NaN next to an infinity.
#[cfg(test)]
fn nanpercentile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    percentile_of_sorted(&v, q)
}

/// `nanpercentile` of values already without NaN and in `total_cmp` order.
fn percentile_of_sorted(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
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

impl Hyperband {
    /// The last band a run of `reported` finite values has reached.
    fn band_of(&self, reported: usize) -> Option<u64> {
        let reached = self.bands.iter().take_while(|&&b| b as usize <= reported);
        reached.last().copied()
    }

    /// The run whose finite values are `mine` judged at `band` against the
    /// `index`-th best of the `n` runs' values there (`threshold`).
    fn judge(
        &self,
        band: u64,
        mine: &[f64],
        threshold: f64,
        index: usize,
        n: usize,
        direction: Direction,
    ) -> Decision {
        let value = if self.strict {
            mine[band as usize - 1]
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

    /// The threshold's place among `n` runs' values at a band.
    fn index_of(&self, n: usize) -> usize {
        (((1.0 / self.eta) * n as f64) as usize).min(n - 1)
    }
}

/// A run's `band`-th finite value (made smaller is better), if it has
/// reported that many.
fn at_band_of(curve: &BTreeMap<u64, f64>, band: u64, direction: Direction) -> Option<f64> {
    history(curve, direction).get(band as usize - 1).copied()
}

impl Pruner for Hyperband {
    fn decide(
        &self,
        curve: &BTreeMap<u64, f64>,
        others: &[Arc<Trial>],
        direction: Direction,
    ) -> Decision {
        let mine = history(curve, direction);
        let Some(band) = self.band_of(mine.len()) else {
            return Decision::Continue;
        };
        let mut at_band: Vec<f64> = others
            .iter()
            .filter_map(|t| at_band_of(&t.intermediate, band, direction))
            .chain(std::iter::once(mine[band as usize - 1]))
            .collect();
        at_band.sort_by(f64::total_cmp);
        // `mine` has b values, so at_band is never empty here.
        let n = at_band.len();
        let index = self.index_of(n);
        self.judge(band, &mine, at_band[index], index, n, direction)
    }

    /// The finished trials' values at each band kept sorted between calls
    /// (`bands::Bands`); the running ones' read afresh.
    fn decide_kept(
        &self,
        curve: &BTreeMap<u64, f64>,
        trials: &[Arc<Trial>],
        me: u64,
        kept: &mut Kept,
        direction: Direction,
    ) -> Decision {
        let bands = &mut kept.bands;
        bands.update(trials, me, &self.bands, direction);
        let mine = history(curve, direction);
        let Some(band) = self.band_of(mine.len()) else {
            return Decision::Continue;
        };
        let mut running: Vec<f64> = bands
            .unsettled(trials)
            .iter()
            .filter(|t| t.number != me && !bands.folded(t.number))
            .filter_map(|t| at_band_of(&t.intermediate, band, direction))
            .chain(std::iter::once(mine[band as usize - 1]))
            .collect();
        running.sort_by(f64::total_cmp);
        let finished = bands.at(band);
        let n = finished.len() + running.len();
        let index = self.index_of(n);
        let threshold = bands::kth(finished, &running, index);
        self.judge(band, &mine, threshold, index, n, direction)
    }
}

#[cfg(test)]
mod tests;
