//! `bayes`: Optuna's TPESampler for one objective, in its two variants.
//!
//! Both: random (by [`RandomSampler`] with the same seed) until
//! `n_startup_trials` trials are COMPLETE, PRUNED or out of memory
//! (Optuna's 10, fewer for
//! a sweep of fewer than 40 trials: [`startup_for`]); then split the trials
//! into the best gamma(n) ("below") and the rest, fit a Parzen estimator
//! l(x) to the below trials' values and g(x) to the others', draw
//! `n_ei_candidates` from l and keep the one that maximises
//! log l(x) - log g(x).
//!
//! - [`TpeVariant::Multivariate`], Optuna 5's default (`multivariate=True,
//!   constant_liar=True`): one estimator over all the sampled parameters
//!   (kernel k is trial k's whole point, so what worked together is drawn
//!   together), and the constant liar: RUNNING trials join the "above" set
//!   as if they had the worst value, so parallel workers do not propose
//!   what is already running. gamma counts finished trials only.
//! - [`TpeVariant::Univariate`], Optuna 4.x's default (Optuna 5's
//!   `TPESampler(multivariate=False, constant_liar=False)`): each parameter
//!   on its own, from finished trials only.
//!
//! Ours alone: a trial that ran out of memory is an infeasible observation,
//! always "above" ([`infeasible`]), so the search moves away from the
//! region that does not fit instead of proposing it again; Optuna's TPE
//! leaves FAIL trials out.

use super::parzen::{ParzenEstimator, ParzenParams};
use super::random::RandomSampler;
use super::rng::{Rng, Stream};
use super::{single_value, to_external, to_internal, Sampler, SearchSpace};
use crate::trial::{Direction, Distribution, ParamValue, Trial, TrialState};
use anyhow::Result;
use std::collections::BTreeMap;
use std::sync::Arc;

mod split;

/// Optuna's `default_gamma`: the best 10% are "below", at most 25.
pub fn default_gamma(n: usize) -> usize {
    n.div_ceil(10).min(25)
}

/// Optuna's `n_startup_trials` default: random draws before TPE starts.
pub const OPTUNA_STARTUP: usize = 10;

/// The most trials of the worse ("above") side TPE weighs: the latest by
/// number. Optuna's TPE weighs every finished trial, so a draw's time grows
/// with the study (0.3 s at 28,000 trials here, more than an instant trial
/// costs); the better side (gamma's best, 25 at most) is still taken from
/// the whole study. Optuna's weights already give the older trials of the
/// worse side the least weight (a ramp from 1/n up to 1), and those are
/// the ones the window leaves out. Under this many finished trials nothing
/// changes. What it costs the search: bench/README.md, "TPE at scale".
pub const ABOVE_WINDOW: usize = 1000;

/// The start-up trials of a sweep of `cap` trials: a quarter of the cap,
/// rounded up, at most Optuna's 10 (a cap of 40 or more keeps Optuna's
/// default). Optuna's 10 would take the whole of a 10-trial sweep, a random
/// search under TPE's name; a quarter still gives TPE a first below/above
/// split (gamma's best tenth is one trial up to 10) and leaves it three
/// quarters of the cap. bench/tpe_vs_optuna.py gives Optuna's side the same.
pub fn startup_for(cap: u64) -> usize {
    (cap.div_ceil(4) as usize).clamp(1, OPTUNA_STARTUP)
}

/// What a `bayes` sweep of `cap` trials is told at its start when the cap
/// cuts the start-up below Optuna's 10 (None: it does not).
pub fn startup_warning(cap: u64) -> Option<String> {
    let random = startup_for(cap);
    if random >= OPTUNA_STARTUP {
        return None;
    }
    let by_tpe = cap.saturating_sub(random as u64);
    if by_tpe == 0 {
        return Some(format!(
            "method: bayes with {cap} trial(s) is a random draw: TPE needs a finished trial to learn from; give --trials 40 or more for Optuna's {OPTUNA_STARTUP} random start-up trials and TPE after them"
        ));
    }
    let first = match random {
        1 => "the first is drawn".to_string(),
        n => format!("the first {n} are drawn"),
    };
    Some(format!(
        "method: bayes with {cap} trials: {first} at random (a quarter of the trials: Optuna's default of {OPTUNA_STARTUP} random start-up trials would {} and leave a random search), then {by_tpe} by TPE, which learns little from so few; give --trials 40 or more for Optuna's {OPTUNA_STARTUP}",
        if cap <= OPTUNA_STARTUP as u64 {
            format!("take all {cap}")
        } else {
            format!("take {OPTUNA_STARTUP} of the {cap}")
        }
    ))
}

/// Which TPE `bayes` runs (the space's `bayes: {variant: ...}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TpeVariant {
    /// Optuna 5's default: multivariate with the constant liar.
    #[default]
    Multivariate,
    /// Optuna 4.x's default: univariate, running trials ignored.
    Univariate,
}

impl TpeVariant {
    pub const NAMES: [&'static str; 2] = ["multivariate", "univariate"];

    pub fn parse(name: &str) -> Option<TpeVariant> {
        match name {
            "multivariate" => Some(TpeVariant::Multivariate),
            "univariate" => Some(TpeVariant::Univariate),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TpeVariant::Multivariate => "multivariate",
            TpeVariant::Univariate => "univariate",
        }
    }
}

#[derive(Clone, Debug)]
pub struct TpeSampler {
    seed: u64,
    pub variant: TpeVariant,
    /// Trials drawn at random until this many trials are COMPLETE or PRUNED.
    pub n_startup_trials: usize,
    /// Candidates drawn from l(x) per parameter (univariate) or per trial
    /// (multivariate).
    pub n_ei_candidates: usize,
    pub parzen: ParzenParams,
    /// `ABOVE_WINDOW` (None: every trial, as Optuna).
    pub above_window: Option<usize>,
    /// The study's finished trials as classed by earlier draws (shared by
    /// clones; checked against the trials of each draw).
    kinds: Arc<std::sync::Mutex<split::Kinds>>,
}

impl TpeSampler {
    /// Optuna's defaults (the same in 4.x and 5.0): 10 startup trials, 24
    /// candidates, prior weight 1, magic clip on, endpoints off.
    pub fn new(seed: u64, variant: TpeVariant) -> TpeSampler {
        TpeSampler {
            seed,
            variant,
            n_startup_trials: OPTUNA_STARTUP,
            n_ei_candidates: 24,
            parzen: ParzenParams::default(),
            above_window: Some(ABOVE_WINDOW),
            kinds: Arc::default(),
        }
    }

    /// Each trial's kind and number (the finished ones as kept from earlier
    /// draws), and how many TPE learns from.
    fn observed(&self, trials: &[Arc<Trial>]) -> (Vec<(split::Kind, u64)>, usize) {
        let kinds = self
            .kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .of(trials);
        let finished = split::finished(&kinds);
        (kinds, finished)
    }

    /// One parameter of trial `number` by the univariate TPE (Optuna's
    /// `sample_independent` without the constant liar).
    pub fn sample_param(
        &self,
        name: &str,
        d: &Distribution,
        trials: &[Arc<Trial>],
        direction: Direction,
        number: u64,
    ) -> ParamValue {
        if let Some(v) = single_value(d) {
            return v;
        }
        let (kinds, finished) = self.observed(trials);
        if finished < self.n_startup_trials {
            return RandomSampler::new(self.seed).sample_param(name, d, number);
        }
        let gamma = default_gamma(finished);
        let (below, above) =
            split::split(trials, &kinds, direction, gamma, false, self.above_window);
        let observations = |ts: &[&Trial]| -> Vec<f64> {
            ts.iter()
                .filter_map(|t| t.params.get(name).and_then(|v| to_internal(d, v)))
                .collect()
        };
        let l = ParzenEstimator::new(d, &observations(&below), &self.parzen);
        let g = ParzenEstimator::new(d, &observations(&above), &self.parzen);
        let mut rng = Rng::new(self.seed, Stream::Tpe, number, name);
        let candidates = l.sample(&mut rng, self.n_ei_candidates.max(1));
        let scores: Vec<f64> = candidates
            .iter()
            .map(|&x| l.log_pdf(x) - g.log_pdf(x))
            .collect();
        to_external(d, candidates[argmax(&scores)])
    }

    /// Every sampled parameter of trial `number` at once by the multivariate
    /// TPE with the constant liar (Optuna's `sample_relative`). `trials` must
    /// not hold trial `number` itself: every RUNNING one is a lie.
    pub fn sample_joint(
        &self,
        space: &SearchSpace,
        trials: &[Arc<Trial>],
        direction: Direction,
        number: u64,
    ) -> BTreeMap<String, ParamValue> {
        let mut out = BTreeMap::new();
        let mut joint: Vec<(&str, &Distribution)> = Vec::new();
        for (name, d) in &space.params {
            match single_value(d) {
                Some(v) => {
                    out.insert(name.clone(), v);
                }
                None => joint.push((name, d)),
            }
        }
        let (kinds, finished) = self.observed(trials);
        if finished < self.n_startup_trials {
            let random = RandomSampler::new(self.seed);
            for (name, d) in joint {
                out.insert(name.into(), random.sample_param(name, d, number));
            }
            return out;
        }
        if joint.is_empty() {
            return out;
        }
        let gamma = default_gamma(finished);
        let (below, above) =
            split::split(trials, &kinds, direction, gamma, true, self.above_window);
        let l = self.joint_estimator(&joint, &below);
        let g = self.joint_estimator(&joint, &above);
        let mut rng = Rng::new(self.seed, Stream::TpeJoint, number, "");
        let candidates = l.sample_joint(&mut rng, self.n_ei_candidates.max(1));
        let scores: Vec<f64> = candidates
            .iter()
            .map(|x| l.log_pdf_joint(x) - g.log_pdf_joint(x))
            .collect();
        let best = &candidates[argmax(&scores)];
        for ((name, d), &x) in joint.iter().zip(best) {
            out.insert((*name).into(), to_external(d, x));
        }
        out
    }

    /// The joint estimator of these trials: only a trial with a value for
    /// every parameter is an observation (Optuna's `_get_internal_repr`).
    fn joint_estimator(
        &self,
        joint: &[(&str, &Distribution)],
        trials: &[&Trial],
    ) -> ParzenEstimator {
        let mut columns: Vec<Vec<f64>> = vec![Vec::new(); joint.len()];
        for t in trials {
            let params = params_of(t);
            let row: Option<Vec<f64>> = joint
                .iter()
                .map(|(name, d)| params.get(*name).and_then(|v| to_internal(d, v)))
                .collect();
            if let Some(row) = row {
                columns.iter_mut().zip(row).for_each(|(c, x)| c.push(x));
            }
        }
        let dims: Vec<(&Distribution, &[f64])> = joint
            .iter()
            .zip(&columns)
            .map(|((_, d), c)| (*d, c.as_slice()))
            .collect();
        ParzenEstimator::joint(&dims, &self.parzen)
    }
}

impl Sampler for TpeSampler {
    fn sample(
        &self,
        space: &SearchSpace,
        trials: &[Arc<Trial>],
        direction: Direction,
        number: u64,
    ) -> Result<BTreeMap<String, ParamValue>> {
        space.check()?;
        let mut out = space.fixed.clone();
        match self.variant {
            TpeVariant::Multivariate => {
                out.extend(self.sample_joint(space, trials, direction, number));
            }
            TpeVariant::Univariate => {
                for (name, d) in &space.params {
                    let v = self.sample_param(name, d, trials, direction, number);
                    out.insert(name.clone(), v);
                }
            }
        }
        Ok(out)
    }
}

/// The first maximum, as numpy's argmax.
fn argmax(scores: &[f64]) -> usize {
    let mut best = 0;
    for (i, &s) in scores.iter().enumerate() {
        if s > scores[best] {
            best = i;
        }
    }
    best
}

/// Optuna's system attribute under which a worker running the multivariate
/// TPE shares a running trial's drawn values (JSON, in chunks `:0`, `:1`,
/// ...) before it sets them as parameters one by one.
const RELATIVE_PARAMS: &str = "tpe:relative_params";

/// A trial's values for the estimators: its parameters, and for a running
/// trial also what an Optuna worker drew for it and has not set yet
/// (Optuna's `_get_params`; a chunked JSON that does not parse is ignored,
/// as Optuna does).
fn params_of(t: &Trial) -> std::borrow::Cow<'_, BTreeMap<String, ParamValue>> {
    use std::borrow::Cow;
    if t.state != TrialState::Running {
        return Cow::Borrowed(&t.params);
    }
    let text: String = (0..)
        .map_while(|i| {
            t.system_attrs
                .get(format!("{RELATIVE_PARAMS}:{i}").as_str())
                .and_then(|v| v.as_str())
        })
        .collect();
    let Ok(relative) = serde_json::from_str::<BTreeMap<String, serde_json::Value>>(&text) else {
        return Cow::Borrowed(&t.params);
    };
    let mut params: BTreeMap<String, ParamValue> = relative
        .iter()
        .filter_map(|(k, v)| {
            let choice = serde_json::from_value::<crate::trial::Choice>(v.clone()).ok()?;
            Some((k.clone(), ParamValue::Choice(choice)))
        })
        .collect();
    params.extend(t.params.clone());
    Cow::Owned(params)
}

/// The trials TPE learns from: COMPLETE with a value, PRUNED, and those
/// that ran out of memory ([`infeasible`]). Other failed, running and
/// waiting trials are left out (running ones join as lies in
/// [`split_with_liar`]).
fn usable(t: &Trial) -> bool {
    match t.state {
        TrialState::Complete => t.value.is_some(),
        TrialState::Pruned => true,
        _ => infeasible(t),
    }
}

/// A trial whose point did not fit in memory (it ran out, or the memory
/// model refused it as predicted not to fit): an observation of where not
/// to go, ranked after every feasible trial (as Optuna's constrained TPE
/// ranks a constraint's violators), so never "below". It stays FAIL in the
/// journal: Optuna's own TPE, which skips FAIL trials, does not learn this.
pub fn infeasible(t: &Trial) -> bool {
    t.state == TrialState::Fail
        && matches!(
            t.user_attrs.get("error_class").and_then(|c| c.as_str()),
            Some("out-of-memory" | "predicted-out-of-memory")
        )
}

/// [`split_trials`], then every RUNNING trial into "above" (the constant
/// liar: a running trial counts as worse than any finished one), both halves
/// in trial-number order.
pub fn split_with_liar(
    trials: &[Arc<Trial>],
    direction: Direction,
    n_below: usize,
) -> (Vec<&Trial>, Vec<&Trial>) {
    split::split(
        trials,
        &split::classify(trials),
        direction,
        n_below,
        true,
        None,
    )
}

/// Optuna's `_split_trials` for one objective: the `n_below` best COMPLETE
/// trials by value, then, if fewer, PRUNED ones ranked by how far they got
/// (last step, higher first) and then their value at that step; the trials
/// that ran out of memory always above; both halves in trial-number order
/// (split.rs).
pub fn split_trials(
    trials: &[Arc<Trial>],
    direction: Direction,
    n_below: usize,
) -> (Vec<&Trial>, Vec<&Trial>) {
    split::split(
        trials,
        &split::classify(trials),
        direction,
        n_below,
        false,
        None,
    )
}

#[cfg(test)]
mod tests;
