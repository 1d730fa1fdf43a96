//! Random search with Optuna's RandomSampler semantics per distribution
//! (its `_SearchSpaceTransform`): uniform on [low, high) for floats, in log
//! space for log ones, over [low - step/2, high + step/2] then rounded to the
//! grid for stepped floats and ints, uniform index for choices.

use super::rng::{Rng, Stream};
use super::{float_step_high, int_step_high, single_value, Sampler, SearchSpace};
use crate::trial::{Direction, Distribution, ParamValue, Trial};
use anyhow::Result;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Trial `n`'s parameters depend only on (seed, n): unlike Optuna's
/// RandomSampler (one generator consumed in trial order), a resumed or
/// distributed sweep draws the same values for the same number.
#[derive(Clone, Debug)]
pub struct RandomSampler {
    seed: u64,
}

impl RandomSampler {
    pub fn new(seed: u64) -> RandomSampler {
        RandomSampler { seed }
    }

    /// One parameter of trial `number`.
    pub fn sample_param(&self, name: &str, d: &Distribution, number: u64) -> ParamValue {
        if let Some(v) = single_value(d) {
            return v;
        }
        let mut rng = Rng::new(self.seed, Stream::Random, number, name);
        draw(d, &mut rng)
    }
}

impl Sampler for RandomSampler {
    fn sample(
        &self,
        space: &SearchSpace,
        _trials: &[Arc<Trial>],
        _direction: Direction,
        number: u64,
    ) -> Result<BTreeMap<String, ParamValue>> {
        space.check()?;
        let mut out = space.fixed.clone();
        for (name, d) in &space.params {
            out.insert(name.clone(), self.sample_param(name, d, number));
        }
        Ok(out)
    }
}

/// numpy's round: half to even.
pub(crate) fn round_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// At most the largest float below `high`: Optuna keeps continuous draws in
/// [low, high) against rounding up in exp or in low + (high - low)·u.
fn below_high(x: f64, high: f64) -> f64 {
    let next_down = if high > 0.0 {
        f64::from_bits(high.to_bits() - 1)
    } else if high < 0.0 {
        f64::from_bits(high.to_bits() + 1)
    } else {
        -f64::from_bits(1)
    };
    x.min(next_down)
}

fn draw(d: &Distribution, rng: &mut Rng) -> ParamValue {
    match d {
        Distribution::Float {
            low,
            high,
            log: false,
            step: None,
        } => ParamValue::Float(below_high(rng.uniform_in(*low, *high), *high)),
        Distribution::Float {
            low,
            high,
            log: true,
            ..
        } => {
            let x = rng.uniform_in(low.ln(), high.ln()).exp();
            ParamValue::Float(below_high(x, *high).max(*low))
        }
        Distribution::Float {
            low,
            high,
            step: Some(step),
            ..
        } => {
            let high = float_step_high(*low, *high, *step);
            let x = rng.uniform_in(low - step / 2.0, high + step / 2.0);
            let v = round_even((x - low) / step) * step + low;
            ParamValue::Float(v.clamp(*low, high))
        }
        Distribution::Int {
            low,
            high,
            log,
            step,
        } => {
            let high = int_step_high(*low, *high, *step);
            let (lo, hi, s) = (*low as f64, high as f64, *step as f64);
            let v = if *log {
                let x = rng.uniform_in((lo - 0.5).ln(), (hi + 0.5).ln());
                round_even(x.exp())
            } else {
                let x = rng.uniform_in(lo - s / 2.0, hi + s / 2.0);
                round_even((x - lo) / s) * s + lo
            };
            ParamValue::Int(v.clamp(lo, hi) as i64)
        }
        Distribution::Categorical { choices } => {
            let i = rng.below(choices.len() as u64) as usize;
            ParamValue::Choice(choices[i].clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::Choice;

    fn space() -> SearchSpace {
        SearchSpace {
            params: vec![
                (
                    "lr".into(),
                    Distribution::Float {
                        low: 1e-5,
                        high: 1e-1,
                        log: true,
                        step: None,
                    },
                ),
                (
                    "dropout".into(),
                    Distribution::Float {
                        low: 0.0,
                        high: 0.5,
                        log: false,
                        step: None,
                    },
                ),
                (
                    "wd".into(),
                    Distribution::Float {
                        low: 0.0,
                        high: 0.3,
                        log: false,
                        step: Some(0.1),
                    },
                ),
                (
                    "layers".into(),
                    Distribution::Int {
                        low: 1,
                        high: 9,
                        log: false,
                        step: 2,
                    },
                ),
                (
                    "batch".into(),
                    Distribution::Int {
                        low: 1,
                        high: 1024,
                        log: true,
                        step: 1,
                    },
                ),
                (
                    "opt".into(),
                    Distribution::Categorical {
                        choices: vec![Choice::Str("adam".into()), Choice::Str("sgd".into())],
                    },
                ),
            ],
            fixed: [("epochs".to_string(), ParamValue::Int(3))].into(),
        }
    }

    fn f(v: &ParamValue) -> f64 {
        match v {
            ParamValue::Float(x) => *x,
            ParamValue::Int(i) => *i as f64,
            ParamValue::Choice(_) => f64::NAN,
        }
    }

    #[test]
    fn depends_only_on_seed_and_number() {
        let s = space();
        let a = RandomSampler::new(7);
        let one = a.sample(&s, &[], Direction::Minimize, 5).unwrap();
        // Another sampler instance, other trials, other direction: same draw.
        let again = RandomSampler::new(7)
            .sample(&s, &[], Direction::Maximize, 5)
            .unwrap();
        assert_eq!(one, again);
        assert_ne!(one, a.sample(&s, &[], Direction::Minimize, 6).unwrap());
        assert_ne!(
            one,
            RandomSampler::new(8)
                .sample(&s, &[], Direction::Minimize, 5)
                .unwrap()
        );
        assert_eq!(one["epochs"], ParamValue::Int(3));
        // A parameter's draw does not depend on the others.
        let lr_only = SearchSpace {
            params: vec![s.params[0].clone()],
            fixed: BTreeMap::new(),
        };
        let b = a.sample(&lr_only, &[], Direction::Minimize, 5).unwrap();
        assert_eq!(b["lr"], one["lr"]);
    }

    #[test]
    fn ranges_log_step_int_categorical() {
        let s = space();
        let r = RandomSampler::new(1);
        let n = 4000;
        let mut lr_decades = [0u32; 4];
        let mut wd = BTreeMap::new();
        let mut layers = BTreeMap::new();
        let mut small_batch = 0;
        let mut adam = 0;
        for i in 0..n {
            let p = r.sample(&s, &[], Direction::Minimize, i).unwrap();
            let lr = f(&p["lr"]);
            assert!((1e-5..1e-1).contains(&lr));
            lr_decades[((lr.log10() + 5.0).floor() as usize).min(3)] += 1;
            let d = f(&p["dropout"]);
            assert!((0.0..0.5).contains(&d));
            *wd.entry((f(&p["wd"]) * 10.0).round() as i64)
                .or_insert(0u32) += 1;
            let l = f(&p["layers"]) as i64;
            assert!(l % 2 == 1 && (1..=9).contains(&l));
            *layers.entry(l).or_insert(0u32) += 1;
            let b = f(&p["batch"]);
            assert!((1.0..=1024.0).contains(&b));
            small_batch += u32::from(b <= 32.0);
            adam += u32::from(p["opt"] == ParamValue::Choice(Choice::Str("adam".into())));
        }
        // Log-uniform: each decade of [1e-5, 1e-1) about a quarter.
        assert!(
            lr_decades.iter().all(|&c| (850..1150).contains(&c)),
            "{lr_decades:?}"
        );
        // Step grid {0, .1, .2, .3}, each about a quarter (half steps at the ends).
        assert_eq!(wd.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert!(wd.values().all(|&c| (850..1150).contains(&c)), "{wd:?}");
        assert_eq!(layers.len(), 5);
        assert!(
            layers.values().all(|&c| (650..950).contains(&c)),
            "{layers:?}"
        );
        // log2(32.5 / 0.5) / log2(1024.5 / 0.5) ≈ 0.55 of the draws.
        assert!((2000..2400).contains(&small_batch), "{small_batch}");
        assert!((1800..2200).contains(&adam), "{adam}");
    }

    #[test]
    fn single_valued_ranges_return_their_value() {
        let r = RandomSampler::new(0);
        let d = Distribution::Float {
            low: 0.2,
            high: 0.25,
            log: false,
            step: Some(0.1),
        };
        assert_eq!(r.sample_param("x", &d, 3), ParamValue::Float(0.2));
        let d = Distribution::Int {
            low: 4,
            high: 4,
            log: true,
            step: 1,
        };
        assert_eq!(r.sample_param("x", &d, 3), ParamValue::Int(4));
    }
}
