//! What objective.png shows, apart from drawing it: every trial at its
//! integer number (complete ones at their value, pruned ones at their last
//! report, failed ones in a strip of their own, one row per failure class),
//! the best so far as a step line, and the axis' integer ticks.
//!
//! Optuna's `plot_optimization_history` and optuna-dashboard's history plot
//! draw the values as points and the best so far as a line, and leave failed
//! trials out (they have no value); here a failed trial is a mark in its
//! class' row, so which trials failed and why is on the same picture.

use crate::journal::Study;
use crate::trial::{Direction, Trial, TrialState};
use common::wire::failure::Class;
use serde_json::Value;

/// A trial drawn at its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub trial: u64,
    pub value: f64,
}

/// A row of the strip under the values: the trials without a value, of
/// one failure class (or pruned before any report).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The class' name as the report writes it, or [`PRUNED_ROW`].
    pub name: String,
    pub trials: Vec<u64>,
}

/// The strip's row of pruned trials that reported nothing.
pub const PRUNED_ROW: &str = "pruned, no value";

/// The picture's content.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectivePlot {
    /// The x axis runs over trials 0..trials (every trial of the study,
    /// running ones included).
    pub trials: u64,
    pub complete: Vec<Point>,
    /// At their last reported value, as optuna-dashboard shows them.
    pub pruned: Vec<Point>,
    /// Failed trials (a complete one whose value is not finite counts as
    /// non-finite-loss), by class, most trials first; then the pruned
    /// without a value.
    pub rows: Vec<Row>,
    /// The best so far as a step line's corners: it holds its value until
    /// the trial that beats it, then drops (or rises) there; it ends at
    /// the last trial.
    pub best: Vec<(f64, f64)>,
    pub best_trial: Option<Point>,
    /// The values' range (lowest, highest), over complete and pruned.
    pub values: Option<(f64, f64)>,
    /// The x axis' labelled trial numbers: whole numbers, at most
    /// [`MAX_TICKS`].
    pub ticks: Vec<u64>,
}

pub const MAX_TICKS: usize = 20;

fn class_of(t: &Trial) -> String {
    t.user_attrs
        .get("error_class")
        .and_then(Value::as_str)
        .unwrap_or(Class::Other.as_str())
        .to_string()
}

impl ObjectivePlot {
    pub fn of(study: &Study) -> ObjectivePlot {
        let mut complete = Vec::new();
        let mut pruned = Vec::new();
        let mut failed: Vec<(String, u64)> = Vec::new();
        let mut pruned_bare = Vec::new();
        for t in study.trials.iter() {
            match t.state {
                TrialState::Complete => match t.value.filter(|v| v.is_finite()) {
                    Some(value) => complete.push(Point {
                        trial: t.number,
                        value,
                    }),
                    None => failed.push((Class::NonFiniteLoss.as_str().into(), t.number)),
                },
                TrialState::Pruned => {
                    let last = t.intermediate.values().next_back().copied();
                    match last.filter(|v| v.is_finite()) {
                        Some(value) => pruned.push(Point {
                            trial: t.number,
                            value,
                        }),
                        None => pruned_bare.push(t.number),
                    }
                }
                TrialState::Fail => failed.push((class_of(t), t.number)),
                TrialState::Running | TrialState::Waiting => {}
            }
        }
        let trials = study.trials.iter().map(|t| t.number + 1).max().unwrap_or(0);
        let mut rows = rows_by_class(failed);
        if !pruned_bare.is_empty() {
            rows.push(Row {
                name: PRUNED_ROW.into(),
                trials: pruned_bare,
            });
        }
        let values = complete.iter().chain(&pruned).map(|p| p.value).fold(
            None,
            |r: Option<(f64, f64)>, v| match r {
                None => Some((v, v)),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            },
        );
        let (best, best_trial) = best_steps(&complete, study.direction, trials);
        ObjectivePlot {
            trials,
            complete,
            pruned,
            rows,
            best,
            best_trial,
            values,
            ticks: ticks(trials),
        }
    }
}

/// Failed trials grouped by class, the most frequent class first (ties
/// by name), each row's trials in order.
fn rows_by_class(failed: Vec<(String, u64)>) -> Vec<Row> {
    let mut by: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for (class, n) in failed {
        by.entry(class).or_default().push(n);
    }
    let mut rows: Vec<Row> = by
        .into_iter()
        .map(|(name, mut trials)| {
            trials.sort_unstable();
            Row { name, trials }
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.trials.len()));
    rows
}

/// The best-so-far step line over the complete trials (in number order),
/// and the best of them. The line starts at the first complete trial; at
/// each trial that improves on it, a vertical drop; it runs on to the last
/// trial of the axis.
fn best_steps(
    complete: &[Point],
    direction: Direction,
    trials: u64,
) -> (Vec<(f64, f64)>, Option<Point>) {
    let mut corners = Vec::new();
    let mut best: Option<Point> = None;
    for &p in complete {
        match best {
            None => corners.push((p.trial as f64, p.value)),
            Some(b) if direction.better(p.value, b.value) => {
                corners.push((p.trial as f64, b.value));
                corners.push((p.trial as f64, p.value));
            }
            Some(_) => continue,
        }
        best = Some(p);
    }
    if let Some(b) = best {
        let end = (trials.saturating_sub(1) as f64).max(b.trial as f64);
        if corners.last().is_some_and(|c| c.0 < end) {
            corners.push((end, b.value));
        }
    }
    (corners, best)
}

/// Whole trial numbers for the axis, every 1, 2, 5, 10, 20, 50, ... so
/// that there are at most [`MAX_TICKS`].
pub fn ticks(trials: u64) -> Vec<u64> {
    let mut step = 1u64;
    let mut k = 0;
    while trials.div_ceil(step) as usize > MAX_TICKS {
        step = [2, 5, 10][k % 3] * 10u64.pow((k / 3) as u32);
        k += 1;
    }
    (0..trials).step_by(step as usize).collect()
}

/// The colour index of a strip row's class: its place in
/// [`Class::ALL`] (the pruned row and unknown names after them).
pub fn class_index(name: &str) -> usize {
    Class::ALL
        .iter()
        .position(|c| c.as_str() == name)
        .unwrap_or(Class::ALL.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Study, StudyId};

    fn trial(number: u64, state: TrialState, value: Option<f64>) -> Trial {
        Trial {
            number,
            state,
            value,
            ..Trial::default()
        }
    }

    fn failed(number: u64, class: &str) -> Trial {
        let mut t = trial(number, TrialState::Fail, None);
        t.user_attrs
            .insert("error_class".into(), Value::String(class.into()));
        t
    }

    fn done(number: u64, v: f64) -> Trial {
        trial(number, TrialState::Complete, Some(v))
    }

    fn study(direction: Direction, trials: Vec<Trial>) -> Study {
        Study {
            id: StudyId(0),
            name: "s".into(),
            direction,
            trial_ids: Default::default(),
            trials: std::sync::Arc::new(trials.into_iter().map(std::sync::Arc::new).collect()),
            user_attrs: Default::default(),
            system_attrs: Default::default(),
            shared: false,
        }
    }

    /// A sweep as a user meets it: values, two classes of failure, a
    /// pruned trial with a report and one without, one still running.
    fn mixed(direction: Direction) -> Study {
        let mut pruned = trial(5, TrialState::Pruned, None);
        pruned.intermediate.insert(1, 0.9);
        pruned.intermediate.insert(2, 0.8);
        study(
            direction,
            vec![
                done(0, 0.5),
                failed(1, "out-of-memory"),
                done(2, 0.7),
                done(3, 0.3),
                failed(4, "out-of-memory"),
                pruned,
                failed(6, "label-out-of-range"),
                trial(7, TrialState::Pruned, None),
                trial(8, TrialState::Complete, Some(f64::NAN)),
                done(9, 0.2),
                trial(10, TrialState::Running, None),
            ],
        )
    }

    #[test]
    fn failed_trials_are_drawn_in_their_class_row() {
        let p = ObjectivePlot::of(&mixed(Direction::Minimize));
        assert_eq!(p.trials, 11);
        let rows: Vec<(&str, &[u64])> = p
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.trials.as_slice()))
            .collect();
        assert_eq!(
            rows,
            [
                ("out-of-memory", &[1, 4][..]),
                ("label-out-of-range", &[6][..]),
                ("non-finite-loss", &[8][..]),
                (PRUNED_ROW, &[7][..]),
            ]
        );
        // Every finished trial is on the picture, once.
        let mut drawn: Vec<u64> = p
            .complete
            .iter()
            .chain(&p.pruned)
            .map(|q| q.trial)
            .chain(p.rows.iter().flat_map(|r| r.trials.clone()))
            .collect();
        drawn.sort_unstable();
        assert_eq!(drawn, (0..10).collect::<Vec<_>>());
        assert_eq!(
            p.pruned,
            [Point {
                trial: 5,
                value: 0.8
            }]
        );
        assert_eq!(p.values, Some((0.2, 0.8)));
        assert!(class_index("out-of-memory") < class_index(PRUNED_ROW));
    }

    /// Only horizontal and vertical segments, never worse than before,
    /// dropping exactly at the improving trials, running to the last one.
    fn assert_step(best: &[(f64, f64)], direction: Direction) {
        for w in best.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            assert!(x0 == x1 || y0 == y1, "a diagonal: {w:?}");
            assert!(x1 >= x0, "{w:?}");
            assert!(!direction.better(y0, y1), "worse than before: {w:?}");
            assert_eq!(x0.fract(), 0.0);
        }
    }

    #[test]
    fn best_so_far_is_a_monotone_step_line() {
        let p = ObjectivePlot::of(&mixed(Direction::Minimize));
        assert_step(&p.best, Direction::Minimize);
        assert_eq!(
            p.best,
            [
                (0.0, 0.5),
                (3.0, 0.5),
                (3.0, 0.3),
                (9.0, 0.3),
                (9.0, 0.2),
                (10.0, 0.2)
            ]
        );
        assert_eq!(p.best_trial.map(|b| b.trial), Some(9));
        let p = ObjectivePlot::of(&mixed(Direction::Maximize));
        assert_step(&p.best, Direction::Maximize);
        assert_eq!(p.best, [(0.0, 0.5), (2.0, 0.5), (2.0, 0.7), (10.0, 0.7)]);
        // The pruned trial's 0.8 is not a best: it did not finish.
        assert_eq!(p.best_trial.map(|b| b.trial), Some(2));
    }

    #[test]
    fn ticks_are_whole_trial_numbers_at_most_twenty() {
        assert_eq!(ticks(1), [0]);
        assert_eq!(ticks(2), [0, 1]);
        assert_eq!(ticks(20), (0..20).collect::<Vec<_>>());
        assert_eq!(ticks(21), (0..21).step_by(2).collect::<Vec<_>>());
        assert_eq!(ticks(95), (0..95).step_by(5).collect::<Vec<_>>());
        for n in [3, 41, 99, 100, 101, 250, 1999, 5000] {
            let t = ticks(n);
            let few = (n as usize).min(MAX_TICKS / 5);
            assert!(t.len() <= MAX_TICKS && t.len() >= few, "{n}: {t:?}");
            assert!(t.iter().all(|&x| x < n), "{n}: {t:?}");
            assert_eq!(t[0], 0);
        }
        let p = ObjectivePlot::of(&mixed(Direction::Minimize));
        assert_eq!(p.ticks, (0..11).collect::<Vec<_>>());
    }

    #[test]
    fn a_sweep_whose_trials_all_failed_still_has_its_failures() {
        let p = ObjectivePlot::of(&study(
            Direction::Minimize,
            vec![
                failed(0, "killed"),
                failed(1, "killed"),
                trial(2, TrialState::Fail, None),
            ],
        ));
        assert!(p.best.is_empty() && p.values.is_none() && p.best_trial.is_none());
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.rows[0].trials, [0, 1]);
        // A failure with no class recorded is "other".
        assert_eq!(p.rows[1].name, "other");
    }
}
