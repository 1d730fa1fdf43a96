//! What the hyperband pruner keeps of a study between its decisions: at
//! each band b, the b-th value of every finished trial that reported that
//! many, folded in once (a finished trial never changes) and kept sorted.
//! A decision then reads the running trials' values only, and finds its
//! threshold in the union of the two sorted lists without building it: at
//! 50,000 trials, building every trial's history at each decision was a
//! scan and an allocation a trial.

use super::history;
use crate::trial::{Direction, Trial};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Bands {
    /// The trials numbered below this are finished and folded in.
    settled: u64,
    /// Finished trials numbered `settled` or above, folded in already.
    folded: HashSet<u64>,
    /// By band: the finished trials' b-th values (made smaller is better),
    /// in `total_cmp` order.
    at: HashMap<u64, Vec<f64>>,
}

impl Bands {
    /// Folds in the finished trials of `trials` (a study's, in number
    /// order) not folded in yet, other than `me`, at each of `bands`.
    pub fn update(&mut self, trials: &[Arc<Trial>], me: u64, bands: &[u64], direction: Direction) {
        let mut prefix = true;
        let mut touched = HashSet::new();
        for t in self.unsettled(trials) {
            let finished = t.state.is_finished() && t.number != me;
            if prefix && finished && t.number == self.settled {
                self.settled += 1;
            } else {
                prefix = false;
            }
            if finished && self.folded.insert(t.number) {
                let h = history(&t.intermediate, direction);
                for b in bands.iter().filter(|b| **b as usize <= h.len()) {
                    self.at.entry(*b).or_default().push(h[*b as usize - 1]);
                    touched.insert(*b);
                }
            }
        }
        // Sorted again once: a run of new values after a sorted run (a
        // first fold of 50,000 trials inserted one by one moved a quarter
        // of a second of memory).
        for b in touched {
            if let Some(v) = self.at.get_mut(&b) {
                v.sort_by(f64::total_cmp);
            }
        }
        let settled = self.settled;
        self.folded.retain(|n| *n >= settled);
    }

    /// The trials from the first one not known finished on.
    pub fn unsettled<'t>(&self, trials: &'t [Arc<Trial>]) -> &'t [Arc<Trial>] {
        &trials[trials.partition_point(|t| t.number < self.settled)..]
    }

    /// Whether trial `number` is folded in (finished).
    pub fn folded(&self, number: u64) -> bool {
        number < self.settled || self.folded.contains(&number)
    }

    /// The finished trials' values at band `b`, sorted.
    pub fn at(&self, b: u64) -> &[f64] {
        self.at.get(&b).map_or(&[], Vec::as_slice)
    }
}

/// The `k`-th (from 0) smallest of the union of the sorted `f` and the
/// sorted `x` (`x` short: a few running trials), in `total_cmp` order.
/// Looks for how many of `x` are among the first k + 1: O(|x|).
pub fn kth(f: &[f64], x: &[f64], k: usize) -> f64 {
    let le = |a: f64, b: f64| a.total_cmp(&b).is_le();
    for j in 0..=x.len().min(k + 1) {
        let i = k + 1 - j; // Taken from f.
        if i > f.len() {
            continue;
        }
        let x_next_ok = j == x.len() || i == 0 || le(f[i - 1], x[j]);
        let f_next_ok = i == f.len() || j == 0 || le(x[j - 1], f[i]);
        if x_next_ok && f_next_ok {
            return match (i, j) {
                (0, _) => x[j - 1],
                (_, 0) => f[i - 1],
                _ => f[i - 1].max(x[j - 1]),
            };
        }
    }
    unreachable!("k {k} is within the {} values", f.len() + x.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kth_of_two_sorted_lists_is_kth_of_their_union() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % 9
        };
        for _ in 0..500 {
            let mut f: Vec<f64> = (0..next()).map(|_| next() as f64).collect();
            let mut x: Vec<f64> = (0..next() % 4).map(|_| next() as f64).collect();
            f.sort_by(f64::total_cmp);
            x.sort_by(f64::total_cmp);
            let mut all = [f.clone(), x.clone()].concat();
            all.sort_by(f64::total_cmp);
            for (k, want) in all.iter().enumerate() {
                assert_eq!(kth(&f, &x, k), *want, "{f:?} {x:?} {k}");
            }
        }
    }
}
