//! Grid search: every combination of the parameters' values, trial `i`
//! taking combination `i`. The order is fixed and documented so a sweep's
//! trial numbers map to points without any state: parameters in the space's
//! order, the last one varying fastest (nested loops, itertools.product),
//! each parameter's values in ascending order (choices in their given order).
//! Optuna's GridSampler instead picks an unvisited point at random; here the
//! caller stops at [`GridSampler::len`] trials.

use super::{float_step_high, int_step_high, Sampler, SearchSpace};
use crate::trial::{Direction, Distribution, ParamValue, Trial};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Grids above this many points are refused: a typo (step 1e-9) rather
/// than a sweep anyone means to run.
pub const MAX_GRID: u64 = 10_000_000;

#[derive(Clone, Debug)]
pub struct GridSampler {
    /// Each parameter's values, in the space's order.
    axes: Vec<(String, Vec<ParamValue>)>,
    fixed: BTreeMap<String, ParamValue>,
    len: u64,
}

impl GridSampler {
    /// Builds the grid; a continuous float (no step) has no grid and is
    /// refused, as is a grid of more than [`MAX_GRID`] points.
    pub fn new(space: &SearchSpace) -> Result<GridSampler> {
        space.check()?;
        let mut axes = Vec::with_capacity(space.params.len());
        let mut len: u64 = 1;
        for (name, d) in &space.params {
            let values = axis(name, d)?;
            len = len
                .checked_mul(values.len() as u64)
                .filter(|&n| n <= MAX_GRID)
                .with_context(|| format!("the grid has more than {MAX_GRID} points"))?;
            axes.push((name.clone(), values));
        }
        Ok(GridSampler {
            axes,
            fixed: space.fixed.clone(),
            len,
        })
    }

    /// The number of combinations: a grid sweep runs trials 0..len().
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Never true: a space without parameters is one (empty) combination.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Combination `i` (0 <= i < len()), fixed values included.
    pub fn combination(&self, i: u64) -> Result<BTreeMap<String, ParamValue>> {
        if i >= self.len {
            bail!(
                "trial {i} is past the grid's {} combinations: the sweep is done",
                self.len
            );
        }
        let mut out = self.fixed.clone();
        let mut rest = i;
        for (name, values) in self.axes.iter().rev() {
            let n = values.len() as u64;
            out.insert(name.clone(), values[(rest % n) as usize].clone());
            rest /= n;
        }
        Ok(out)
    }
}

impl Sampler for GridSampler {
    /// Combination `number`, whatever other trials ran or run: a number is
    /// claimed once, by the trial that has it. `space` must be the one the
    /// grid was built from.
    fn sample(
        &self,
        space: &SearchSpace,
        _trials: &[Arc<Trial>],
        _direction: Direction,
        number: u64,
    ) -> Result<BTreeMap<String, ParamValue>> {
        let names = space.params.iter().map(|(n, _)| n);
        if !names.eq(self.axes.iter().map(|(n, _)| n)) || space.fixed != self.fixed {
            bail!("the grid was built for another search space");
        }
        self.combination(number)
    }
}

/// A parameter's grid values, ascending.
fn axis(name: &str, d: &Distribution) -> Result<Vec<ParamValue>> {
    let too_many = || format!("{name}: more than {MAX_GRID} grid values");
    Ok(match d {
        Distribution::Float {
            low,
            high,
            step: None,
            ..
        } => {
            if low != high {
                bail!(
                    "{name}: a continuous float range [{low}, {high}] has no grid; \
                     give it a step or a list of values"
                );
            }
            vec![ParamValue::Float(*low)]
        }
        Distribution::Float {
            low,
            high,
            step: Some(step),
            ..
        } => {
            let high = float_step_high(*low, *high, *step);
            let n = ((high - low) / step).round() as u64 + 1;
            if n > MAX_GRID {
                bail!(too_many());
            }
            // low + k·step, as Optuna's grid points, the last one exactly high.
            (0..n)
                .map(|k| {
                    ParamValue::Float(if k + 1 == n {
                        high
                    } else {
                        low + k as f64 * step
                    })
                })
                .collect()
        }
        Distribution::Int {
            low, high, step, ..
        } => {
            let high = int_step_high(*low, *high, *step);
            let n = ((high - low) / step) as u64 + 1;
            if n > MAX_GRID {
                bail!(too_many());
            }
            (0..n as i64)
                .map(|k| ParamValue::Int(low + k * step))
                .collect()
        }
        Distribution::Categorical { choices } => {
            choices.iter().cloned().map(ParamValue::Choice).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::Choice;

    fn space() -> SearchSpace {
        SearchSpace {
            params: vec![
                (
                    "opt".into(),
                    Distribution::Categorical {
                        choices: vec![Choice::Str("adam".into()), Choice::Str("sgd".into())],
                    },
                ),
                (
                    "layers".into(),
                    Distribution::Int {
                        low: 1,
                        high: 6,
                        log: false,
                        step: 2,
                    },
                ),
                (
                    "wd".into(),
                    Distribution::Float {
                        low: 0.0,
                        high: 0.2,
                        log: false,
                        step: Some(0.1),
                    },
                ),
            ],
            fixed: [("epochs".to_string(), ParamValue::Int(3))].into(),
        }
    }

    #[test]
    fn size_and_order() {
        let g = GridSampler::new(&space()).unwrap();
        // 2 choices × {1, 3, 5} × {0, 0.1, 0.2}.
        assert_eq!(g.len(), 18);
        let key = |i| {
            let p = g.combination(i).unwrap();
            assert_eq!(p["epochs"], ParamValue::Int(3));
            (p["opt"].clone(), p["layers"].clone(), p["wd"].clone())
        };
        let adam = ParamValue::Choice(Choice::Str("adam".into()));
        let sgd = ParamValue::Choice(Choice::Str("sgd".into()));
        use ParamValue::{Float as F, Int as I};
        assert_eq!(key(0), (adam.clone(), I(1), F(0.0)));
        assert_eq!(key(1), (adam.clone(), I(1), F(0.1)));
        assert_eq!(key(2), (adam.clone(), I(1), F(0.2)));
        assert_eq!(key(3), (adam.clone(), I(3), F(0.0)));
        assert_eq!(key(8), (adam, I(5), F(0.2)));
        assert_eq!(key(9), (sgd.clone(), I(1), F(0.0)));
        assert_eq!(key(17), (sgd, I(5), F(0.2)));
        // Every combination once.
        let all: std::collections::BTreeSet<String> =
            (0..18).map(|i| format!("{:?}", key(i))).collect();
        assert_eq!(all.len(), 18);
        assert!(g.combination(18).unwrap_err().to_string().contains("done"));
    }

    #[test]
    fn by_number_whatever_ran() {
        let s = space();
        let g = GridSampler::new(&s).unwrap();
        let p = g.sample(&s, &[], Direction::Maximize, 4).unwrap();
        assert_eq!(p, g.combination(4).unwrap());
        let mut other = s.clone();
        other.params.pop();
        assert!(g.sample(&other, &[], Direction::Maximize, 4).is_err());
    }

    #[test]
    fn refuses_continuous_floats_and_huge_grids() {
        let mut s = space();
        s.params.push((
            "lr".into(),
            Distribution::Float {
                low: 1e-4,
                high: 1e-2,
                log: true,
                step: None,
            },
        ));
        let e = GridSampler::new(&s).unwrap_err().to_string();
        assert!(e.contains("lr") && e.contains("no grid"), "{e}");
        let huge = SearchSpace {
            params: vec![(
                "x".into(),
                Distribution::Float {
                    low: 0.0,
                    high: 1.0,
                    log: false,
                    step: Some(1e-9),
                },
            )],
            fixed: BTreeMap::new(),
        };
        assert!(GridSampler::new(&huge).is_err());
    }

    #[test]
    fn log_int_is_every_integer_and_empty_space_is_one_point() {
        let s = SearchSpace {
            params: vec![(
                "b".into(),
                Distribution::Int {
                    low: 1,
                    high: 4,
                    log: true,
                    step: 1,
                },
            )],
            fixed: BTreeMap::new(),
        };
        assert_eq!(GridSampler::new(&s).unwrap().len(), 4);
        let g = GridSampler::new(&SearchSpace::default()).unwrap();
        assert_eq!(g.len(), 1);
        assert!(g.combination(0).unwrap().is_empty());
    }
}
