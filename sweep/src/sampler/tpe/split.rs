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

/// Each trial's kind, in the order of `trials`.
pub(super) fn classify(trials: &[Arc<Trial>]) -> Vec<Kind> {
    trials
        .iter()
        .map(|t| match t.state {
            TrialState::Running => Kind::Running,
            _ if !usable(t) => Kind::Other,
            _ if infeasible(t) => Kind::Infeasible,
            TrialState::Complete => Kind::Complete(t.value.unwrap_or(f64::NAN)),
            _ => Kind::Pruned,
        })
        .collect()
}

/// Trials TPE learns from (COMPLETE with a value, PRUNED, out of memory).
pub(super) fn finished(kinds: &[Kind]) -> usize {
    kinds
        .iter()
        .filter(|k| !matches!(k, Kind::Running | Kind::Other))
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
    kinds: &[Kind],
    direction: Direction,
    n_below: usize,
    liar: bool,
    window: Option<usize>,
) -> (Vec<&'t Trial>, Vec<&'t Trial>) {
    let sign = match direction {
        Direction::Minimize => 1.0,
        Direction::Maximize => -1.0,
    };
    let nan_last = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (a_nan, b_nan) => a_nan.cmp(&b_nan),
    };
    // (signed value, number, index) of the COMPLETE trials.
    let mut complete: Vec<(f64, u64, usize)> = kinds
        .iter()
        .enumerate()
        .filter_map(|(i, k)| match k {
            Kind::Complete(v) => Some((sign * v, trials[i].number, i)),
            _ => None,
        })
        .collect();
    let by_value =
        |a: &(f64, u64, usize), b: &(f64, u64, usize)| nan_last(a.0, b.0).then(a.1.cmp(&b.1));
    let n_complete = n_below.min(complete.len());
    if n_complete > 0 && n_complete < complete.len() {
        complete.select_nth_unstable_by(n_complete - 1, by_value);
    }
    let mut chosen: Vec<usize> = complete[..n_complete].iter().map(|c| c.2).collect();
    if n_complete < n_below {
        let mut pruned: Vec<usize> = (0..kinds.len())
            .filter(|&i| kinds[i] == Kind::Pruned)
            .collect();
        let score = |i: usize| -> (i128, f64) {
            match trials[i].intermediate.iter().next_back() {
                Some((&step, &v)) if v.is_nan() => (-i128::from(step), f64::INFINITY),
                Some((&step, &v)) => (-i128::from(step), sign * v),
                None => (1, 0.0),
            }
        };
        // In number order first, so that the stable sort keeps it on ties.
        pruned.sort_by_key(|&i| trials[i].number);
        pruned.sort_by(|&a, &b| {
            let ((sa, va), (sb, vb)) = (score(a), score(b));
            sa.cmp(&sb).then_with(|| nan_last(va, vb))
        });
        chosen.extend(pruned.into_iter().take(n_below - n_complete));
    }
    let mut below: Vec<&Trial> = chosen.iter().map(|&i| &*trials[i]).collect();
    below.sort_by_key(|t| t.number);
    chosen.sort_unstable();
    let is_above = |i: usize| match kinds[i] {
        Kind::Running => liar,
        Kind::Other => false,
        _ => chosen.binary_search(&i).is_err(),
    };
    let in_order = trials.windows(2).all(|w| w[0].number < w[1].number);
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
