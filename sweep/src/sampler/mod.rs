//! Samplers: (search space, trials so far, direction, trial number) -> the
//! new trial's parameters. Pure code with no I/O and no hidden state: the same
//! inputs and seed give the same parameters, so a resumed or distributed sweep
//! (every worker replaying the same journal) agrees on what trial `n` draws.
//!
//! - [`GridSampler`]: every combination, trial `i` takes combination `i`;
//! - [`RandomSampler`]: Optuna's RandomSampler per distribution, drawn from a
//!   counter-based generator keyed by (seed, trial number, parameter);
//! - [`TpeSampler`]: Optuna 5's default TPESampler (multivariate, constant
//!   liar), or Optuna 4.x's (univariate) as [`TpeVariant::Univariate`].

mod grid;
mod parzen;
mod random;
mod rng;
mod tpe;
mod truncnorm;

pub use grid::GridSampler;
pub use parzen::{default_weights, ParzenEstimator, ParzenParams};
pub use random::RandomSampler;
pub use tpe::{
    default_gamma, split_trials, split_with_liar, startup_for, startup_warning, TpeSampler,
    TpeVariant, OPTUNA_STARTUP,
};

use crate::trial::{Choice, Direction, Distribution, ParamValue, Trial};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a sampler searches: the parameters it draws, in a fixed order (the
/// grid's order follows it), and the values every trial gets as they are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchSpace {
    pub params: Vec<(String, Distribution)>,
    pub fixed: BTreeMap<String, ParamValue>,
}

impl SearchSpace {
    /// Checks every distribution (see [`check_distribution`]) and that no
    /// name is given twice, so samplers never meet an empty range or a NaN.
    pub fn check(&self) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        for (name, d) in &self.params {
            if !seen.insert(name.as_str()) || self.fixed.contains_key(name) {
                bail!("parameter {name:?} is given twice");
            }
            check_distribution(name, d)?;
        }
        Ok(())
    }
}

/// The next trial's parameters from the space, the trials so far (finished
/// and running, in any order; not the one being drawn) and the study's
/// direction.
pub trait Sampler {
    fn sample(
        &self,
        space: &SearchSpace,
        trials: &[Arc<Trial>],
        direction: Direction,
        number: u64,
    ) -> Result<BTreeMap<String, ParamValue>>;
}

/// The sampler a sweep names is the space's `method` (grid, random, bayes =
/// Optuna's TPE, with the space's `bayes.variant`): one type, here, below
/// the space that names it.
/// How the sampler picks the next trial (W&B's `method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Grid,
    Random,
    /// W&B's Bayesian search; ours is Optuna's TPE, in the variant given.
    Bayes(TpeVariant),
}

impl Method {
    /// W&B's method names, and "tpe" for bayes (in the default variant).
    pub fn parse(name: &str) -> anyhow::Result<Method> {
        Ok(match name {
            "grid" => Method::Grid,
            "random" => Method::Random,
            "bayes" | "tpe" => Method::Bayes(TpeVariant::default()),
            other => anyhow::bail!("unknown sweep method {other:?} (grid, random, bayes or tpe)"),
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Grid => "grid",
            Method::Random => "random",
            Method::Bayes(_) => "bayes",
        }
    }
}

/// A sampler for `method` in a sweep of `cap` trials (TPE's start-up
/// follows it: [`startup_for`]); the grid is built (and a continuous
/// parameter refused) here, so a bad space fails before any trial runs.
pub fn build(method: Method, space: &SearchSpace, seed: u64, cap: u64) -> Result<Box<dyn Sampler>> {
    space.check()?;
    Ok(match method {
        Method::Grid => Box::new(GridSampler::new(space)?),
        Method::Random => Box::new(RandomSampler::new(seed)),
        Method::Bayes(variant) => {
            let mut tpe = TpeSampler::new(seed, variant);
            tpe.n_startup_trials = startup_for(cap);
            Box::new(tpe)
        }
    })
}

/// Refuses what Optuna's distributions refuse at construction: NaN or
/// infinite bounds, low > high, log with low <= 0, log with a step, a
/// non-positive step, no choices.
pub fn check_distribution(name: &str, d: &Distribution) -> Result<()> {
    d.check().map_err(|e| anyhow::anyhow!("{name}: {e}"))
}

/// The largest grid point low + k·step not above high: Optuna lowers `high`
/// to it when the range is not a multiple of the step.
pub(crate) fn float_step_high(low: f64, high: f64, step: f64) -> f64 {
    // The 1e-9 absorbs 0.3/0.1 = 2.9999999999999996-style representation
    // error; Optuna does this with decimal arithmetic.
    let k = ((high - low) / step + 1e-9).floor();
    (low + k * step).min(high)
}

pub(crate) fn int_step_high(low: i64, high: i64, step: i64) -> i64 {
    low + (high - low) / step * step
}

/// The one value of a distribution whose range holds one value (Optuna
/// returns it without asking the sampler), else None.
pub(crate) fn single_value(d: &Distribution) -> Option<ParamValue> {
    match d {
        Distribution::Float {
            low, high, step, ..
        } => {
            let single = match step {
                None => low == high,
                Some(s) => float_step_high(*low, *high, *s) == *low,
            };
            single.then_some(ParamValue::Float(*low))
        }
        Distribution::Int {
            low, high, step, ..
        } => (int_step_high(*low, *high, *step) == *low).then_some(ParamValue::Int(*low)),
        Distribution::Categorical { choices } => {
            (choices.len() == 1).then(|| ParamValue::Choice(choices[0].clone()))
        }
    }
}

/// Optuna's `to_internal_repr`: a number for numerical parameters, the
/// choice's index for categorical ones; None where Optuna would raise (a
/// value of the wrong kind, not among the choices, <= 0 on a log scale).
pub(crate) fn to_internal(d: &Distribution, v: &ParamValue) -> Option<f64> {
    let x = match (d, v) {
        (Distribution::Categorical { choices }, v) => {
            let c = match v {
                ParamValue::Choice(c) => c.clone(),
                ParamValue::Int(i) => Choice::Int(*i),
                ParamValue::Float(f) => Choice::Float(*f),
            };
            return choices
                .iter()
                .position(|x| choice_eq(x, &c))
                .map(|i| i as f64);
        }
        (_, ParamValue::Float(f)) => *f,
        (_, ParamValue::Int(i)) => *i as f64,
        (_, ParamValue::Choice(Choice::Int(i))) => *i as f64,
        (_, ParamValue::Choice(Choice::Float(f))) => *f,
        (_, ParamValue::Choice(_)) => return None,
    };
    let log = matches!(
        d,
        Distribution::Float { log: true, .. } | Distribution::Int { log: true, .. }
    );
    let invalid = x.is_nan() || (log && x <= 0.0);
    (!invalid).then_some(x)
}

/// Optuna's `_categorical_choice_equal`: 1 and 1.0 are the same choice (the
/// journal's JSON does not keep the difference), NaN equals NaN.
fn choice_eq(a: &Choice, b: &Choice) -> bool {
    match (a, b) {
        (Choice::Int(x), Choice::Float(y)) | (Choice::Float(y), Choice::Int(x)) => *x as f64 == *y,
        (Choice::Float(x), Choice::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

/// Optuna's `to_external_repr`: floats as they are, ints truncated, an index
/// to its choice.
pub(crate) fn to_external(d: &Distribution, x: f64) -> ParamValue {
    match d {
        Distribution::Float { .. } => ParamValue::Float(x),
        Distribution::Int { .. } => ParamValue::Int(x as i64),
        Distribution::Categorical { choices } => {
            ParamValue::Choice(choices[(x as usize).min(choices.len() - 1)].clone())
        }
    }
}
