//! The one-pass split against one that sorts every trial, and the kinds
//! kept between draws against classing afresh.

use super::super::infeasible;
use super::super::tests::{bowl, failed_as, out_of_memory, trial};
use super::*;
use crate::trial::shared;

/// The split as Optuna's `_split_trials` states it, sorting everything:
/// the reference the one-pass split (split.rs) must equal.
fn split_by_sorting(
    trials: &[Arc<Trial>],
    direction: Direction,
    n_below: usize,
    liar: bool,
    window: Option<usize>,
) -> (Vec<u64>, Vec<u64>) {
    let sign = if direction == Direction::Minimize {
        1.0
    } else {
        -1.0
    };
    let key = |v: f64| if v.is_nan() { (1, 0.0) } else { (0, sign * v) };
    let mut complete: Vec<&Trial> = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete && t.value.is_some())
        .map(|t| &**t)
        .collect();
    complete.sort_by(|a, b| {
        let (ka, kb) = (key(a.value.unwrap()), key(b.value.unwrap()));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(a.number.cmp(&b.number))
    });
    let mut below: Vec<u64> = complete.iter().take(n_below).map(|t| t.number).collect();
    let mut pruned: Vec<&Trial> = trials
        .iter()
        .filter(|t| t.state == TrialState::Pruned)
        .map(|t| &**t)
        .collect();
    pruned.sort_by_key(|t| t.number);
    pruned.sort_by(|a, b| {
        let s = |t: &Trial| match t.intermediate.iter().next_back() {
            Some((&step, &v)) => (-(step as i128), key(v)),
            None => (1, (0, 0.0)),
        };
        let (sa, sb) = (s(a), s(b));
        sa.0.cmp(&sb.0)
            .then(sa.1 .0.cmp(&sb.1 .0))
            .then(sa.1 .1.total_cmp(&sb.1 .1))
    });
    let more = n_below - below.len().min(n_below);
    below.extend(pruned.iter().take(more).map(|t| t.number));
    below.sort_unstable();
    let mut above: Vec<u64> = trials
        .iter()
        .filter(|t| {
            let learned = matches!(t.state, TrialState::Complete if t.value.is_some())
                || t.state == TrialState::Pruned
                || infeasible(t);
            (learned && !below.contains(&t.number)) || (liar && t.state == TrialState::Running)
        })
        .map(|t| t.number)
        .collect();
    above.sort_unstable();
    if let Some(w) = window.filter(|w| above.len() > *w) {
        above.drain(..above.len() - w);
    }
    (below, above)
}

#[test]
fn the_one_pass_split_equals_sorting_every_trial() {
    // 3000 trials of every kind, values with ties and NaNs, pruned trials at
    // several steps; few complete ones in the second study, so pruned ones
    // fill "below".
    for (n, complete_every) in [(3000u64, 2u64), (300, 40)] {
        let trials: Vec<Trial> = (0..n)
            .map(|i| {
                let v = ((i * 7919) % 97) as f64 / 7.0;
                match i % 9 {
                    _ if i % complete_every == 0 => trial(
                        i,
                        TrialState::Complete,
                        Some(if i % 31 == 0 { f64::NAN } else { v.floor() }),
                        v,
                    ),
                    1 | 2 => {
                        let mut t = trial(i, TrialState::Pruned, None, v);
                        for step in 0..(i % 4) {
                            t.intermediate.insert(step, v + step as f64);
                        }
                        t
                    }
                    3 => out_of_memory(i, v),
                    4 => failed_as(i, v, "killed"),
                    5 => trial(i, TrialState::Running, None, v),
                    6 => trial(i, TrialState::Waiting, None, v),
                    _ => trial(i, TrialState::Complete, None, v),
                }
            })
            .collect();
        let st = shared(&trials);
        let numbers = |(b, a): (Vec<&Trial>, Vec<&Trial>)| {
            (
                b.iter().map(|t| t.number).collect::<Vec<_>>(),
                a.iter().map(|t| t.number).collect::<Vec<_>>(),
            )
        };
        let kinds = classify(&st);
        for direction in [Direction::Minimize, Direction::Maximize] {
            for n_below in [0, 1, 25, 400] {
                for liar in [false, true] {
                    for window in [None, Some(0), Some(7), Some(1000), Some(5000)] {
                        let got = numbers(split(&st, &kinds, direction, n_below, liar, window));
                        let want = split_by_sorting(&st, direction, n_below, liar, window);
                        assert_eq!(got, want, "{n} trials, {direction:?}, {n_below} below, liar {liar}, window {window:?}");
                    }
                }
            }
        }
        // Out of number order, the window is taken after sorting.
        let mut shuffled = st.clone();
        shuffled.reverse();
        let kinds = classify(&shuffled);
        let got = numbers(split(
            &shuffled,
            &kinds,
            Direction::Minimize,
            25,
            true,
            Some(7),
        ));
        assert_eq!(
            got,
            split_by_sorting(&st, Direction::Minimize, 25, true, Some(7))
        );
    }
}

/// The kinds kept between draws answer as classing afresh: as the study
/// grows, as a running trial ends (a new allocation in its place), and
/// when another study is handed to the same sampler.
#[test]
fn kept_kinds_answer_as_classing_afresh() {
    let mut kinds = Kinds::default();
    let mut trials: Vec<Arc<Trial>> = Vec::new();
    for i in 0..60u64 {
        let t = match i % 5 {
            0 => trial(i, TrialState::Running, None, 0.0),
            1 => out_of_memory(i, 1.0),
            2 => failed_as(i, 1.0, "killed"),
            _ => trial(i, TrialState::Complete, Some(i as f64), 1.0),
        };
        trials.push(Arc::new(t));
        // Every 7th step, the earliest running trial ends.
        if i % 7 == 0 {
            if let Some(r) = trials.iter().position(|t| t.state == TrialState::Running) {
                let mut done = (*trials[r]).clone();
                done.state = TrialState::Complete;
                done.value = Some(-1.0);
                trials[r] = Arc::new(done);
            }
        }
        assert_eq!(kinds.of(&trials), classify(&trials), "after trial {i}");
    }
    let other: Vec<Arc<Trial>> = shared(&bowl());
    assert_eq!(kinds.of(&other), classify(&other));
    assert_eq!(kinds.of(&trials), classify(&trials));
}
