//! Optuna's `_split_trials` for one objective, at a cost a 50,000-trial
//! study can pay at every draw: each trial is classed once (its state, and
//! for a failed one whether it ran out of memory: a look-up in its
//! attributes), the best are picked without sorting the study, and the
//! worse side is gathered from the end when only its latest trials are
//! weighed. Sorting every trial's halves by number, a set look-up per
//! trial and classing each trial three times made a draw 22 ms there.

use super::{infeasible, usable};
use crate::trial::{Direction, Trial, TrialState};
use std::cmp::Ordering;
use std::sync::Arc;

/// What a trial is to the split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// COMPLETE with a value.
    Complete(f64),
    Pruned,
    /// Ran out of memory, or was refused as predicted to: always worse.
    Infeasible,
    /// A lie for the constant liar.
    Running,
    /// Not learned from (another failure, waiting, COMPLETE without a value).
    Other,
}

fn kind_of(t: &Trial) -> Kind {
    match t.state {
        TrialState::Running => Kind::Running,
        _ if !usable(t) => Kind::Other,
        _ if infeasible(t) => Kind::Infeasible,
        TrialState::Complete => Kind::Complete(t.value.unwrap_or(f64::NAN)),
        _ => Kind::Pruned,
    }
}

/// Each trial's kind and number, in the order of `trials`.
pub(super) fn classify(trials: &[Arc<Trial>]) -> Vec<(Kind, u64)> {
    Kinds::default().of(trials)
}

/// The kinds of the study's leading finished trials as last classed, kept
/// between draws. A finished trial never changes (the journal ignores
/// updates to it), and the one held here is the allocation a later load
/// hands out again, so comparing pointers tells that it is the same trial
/// without reading it: at 50,000 trials, reading each trial (one cache
/// miss apiece) was most of what a draw still cost.
#[derive(Debug, Default)]
pub(super) struct Kinds {
    known: Vec<(Arc<Trial>, Kind, u64)>,
}

impl Kinds {
    /// Each trial's kind and number, in the order of `trials`.
    pub(super) fn of(&mut self, trials: &[Arc<Trial>]) -> Vec<(Kind, u64)> {
        let same = self
            .known
            .iter()
            .zip(trials)
            .take_while(|(k, t)| Arc::ptr_eq(&k.0, t))
            .count();
        self.known.truncate(same);
        let mut out: Vec<(Kind, u64)> = self.known.iter().map(|(_, k, n)| (*k, *n)).collect();
        let mut settled = true;
        for t in &trials[same..] {
            let kind = kind_of(t);
            settled &= t.state.is_finished();
            if settled {
                self.known.push((Arc::clone(t), kind, t.number));
            }
            out.push((kind, t.number));
        }
        out
    }
}

/// Trials TPE learns from (COMPLETE with a value, PRUNED, out of memory).
pub(super) fn finished(kinds: &[(Kind, u64)]) -> usize {
    kinds
        .iter()
        .filter(|(k, _)| !matches!(k, Kind::Running | Kind::Other))
        .count()
}

/// The `n_below` best COMPLETE trials by value, then, if fewer, PRUNED ones
/// ranked by how far they got (last step, higher first) and then their
/// value at that step ("below"); every other learned-from trial, and with
/// `liar` every RUNNING one, is "above", of which only the latest `window`
/// by number are kept (None: all). Both halves in trial-number order; ties
/// keep trial-number order (Python's sort is stable); a NaN value ranks
/// last.
pub(super) fn split<'t>(
    trials: &'t [Arc<Trial>],
    kinds: &[(Kind, u64)],
    direction: Direction,
    n_below: usize,
    liar: bool,
    window: Option<usize>,
) -> (Vec<&'t Trial>, Vec<&'t Trial>) {
    let mut chosen = best(trials, kinds, direction, n_below);
    let mut below: Vec<&Trial> = chosen.iter().map(|&i| &*trials[i]).collect();
    below.sort_by_key(|t| t.number);
    chosen.sort_unstable();
    let is_above = |i: usize| match kinds[i].0 {
        Kind::Running => liar,
        Kind::Other => false,
        _ => chosen.binary_search(&i).is_err(),
    };
    let in_order = kinds.windows(2).all(|w| w[0].1 < w[1].1);
    let above = match window {
        // The latest `w` from the end: the study is in number order.
        Some(w) if in_order => {
            let mut above: Vec<&Trial> = (0..trials.len())
                .rev()
                .filter(|&i| is_above(i))
                .take(w)
                .map(|i| &*trials[i])
                .collect();
            above.reverse();
            above
        }
        _ => {
            let mut above: Vec<&Trial> = (0..trials.len())
                .filter(|&i| is_above(i))
                .map(|i| &*trials[i])
                .collect();
            above.sort_by_key(|t| t.number);
            if let Some(w) = window.filter(|w| above.len() > *w) {
                above.drain(..above.len() - w);
            }
            above
        }
    };
    (below, above)
}

fn nan_last(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (a_nan, b_nan) => a_nan.cmp(&b_nan),
    }
}

/// The indices of "below": the `n_below` best COMPLETE trials (by value,
/// then number), then PRUNED ones by how far they got if fewer.
fn best(
    trials: &[Arc<Trial>],
    kinds: &[(Kind, u64)],
    direction: Direction,
    n_below: usize,
) -> Vec<usize> {
    let sign = match direction {
        Direction::Minimize => 1.0,
        Direction::Maximize => -1.0,
    };
    // (signed value, number, index) of the COMPLETE trials.
    let mut complete: Vec<(f64, u64, usize)> = kinds
        .iter()
        .enumerate()
        .filter_map(|(i, (k, number))| match k {
            Kind::Complete(v) => Some((sign * v, *number, i)),
            _ => None,
        })
        .collect();
    let n_complete = n_below.min(complete.len());
    if n_complete > 0 && n_complete < complete.len() {
        complete.select_nth_unstable_by(n_complete - 1, |a, b| {
            nan_last(a.0, b.0).then(a.1.cmp(&b.1))
        });
    }
    let mut chosen: Vec<usize> = complete[..n_complete].iter().map(|c| c.2).collect();
    if n_complete < n_below {
        let mut pruned: Vec<usize> = (0..kinds.len())
            .filter(|&i| kinds[i].0 == Kind::Pruned)
            .collect();
        let score = |i: usize| -> (i128, f64) {
            match trials[i].intermediate.iter().next_back() {
                Some((&step, &v)) if v.is_nan() => (-i128::from(step), f64::INFINITY),
                Some((&step, &v)) => (-i128::from(step), sign * v),
                None => (1, 0.0),
            }
        };
        // In number order first, so that the stable sort keeps it on ties.
        pruned.sort_by_key(|&i| kinds[i].1);
        pruned.sort_by(|&a, &b| {
            let ((sa, va), (sb, vb)) = (score(a), score(b));
            sa.cmp(&sb).then_with(|| nan_last(va, vb))
        });
        chosen.extend(pruned.into_iter().take(n_below - n_complete));
    }
    chosen
}

#[cfg(test)]
mod tests;
