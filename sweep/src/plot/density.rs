//! objective.png of a large sweep: where a point a trial would overlap
//! hundreds of others (a 50,000-trial study has 50 trials a pixel column),
//! the values are counted in cells of a grid over (trial, value) and each
//! strip row in bins of trials, and the picture shades each cell by its
//! count. A band of 50,000 dots says nothing about where the trials
//! gather; a shaded grid does, and a failure row's shade says how often
//! that class struck in each stretch of the sweep.

use super::model::{ObjectivePlot, Point};

/// From this many trials on, objective.png draws cells rather than points:
/// about two trials a pixel column of its 1000-pixel picture's plot area.
pub const DENSE_FROM: u64 = 2000;
/// Columns of trials (each `trials / X_BINS` trials wide) and rows of
/// values of the grid.
pub const X_BINS: usize = 200;
pub const Y_BINS: usize = 60;

/// The counts behind a dense objective.png.
#[derive(Clone, Debug, PartialEq)]
pub struct Density {
    /// Complete trials per cell, `x * Y_BINS + y` (y from the lowest value).
    pub complete: Vec<u32>,
    /// Pruned trials (at their last report) per cell.
    pub pruned: Vec<u32>,
    /// Per strip row (in the plot's row order), its trials per column
    /// (the columns hold the same number of trials, give or take one, so
    /// a count is also a share).
    pub rows: Vec<Vec<u32>>,
}

impl Density {
    /// The grid of the plot's points and rows, or None when the sweep is
    /// small enough to draw trial by trial.
    pub fn of(plot: &ObjectivePlot) -> Option<Density> {
        if plot.trials < DENSE_FROM {
            return None;
        }
        let column =
            |t: u64| ((t as u128 * X_BINS as u128 / plot.trials as u128) as usize).min(X_BINS - 1);
        let (lo, hi) = plot.values.unwrap_or((0.0, 1.0));
        let row = |v: f64| {
            if hi > lo {
                (((v - lo) / (hi - lo) * Y_BINS as f64) as usize).min(Y_BINS - 1)
            } else {
                0
            }
        };
        let grid = |points: &[Point]| {
            let mut cells = vec![0u32; X_BINS * Y_BINS];
            for p in points {
                cells[column(p.trial) * Y_BINS + row(p.value)] += 1;
            }
            cells
        };
        let rows = plot
            .rows
            .iter()
            .map(|r| {
                let mut bins = vec![0u32; X_BINS];
                for &t in &r.trials {
                    bins[column(t)] += 1;
                }
                bins
            })
            .collect();
        Some(Density {
            complete: grid(&plot.complete),
            pruned: grid(&plot.pruned),
            rows,
        })
    }

    /// The trial-number span of column `x`, as the x axis places it
    /// (a trial `t` is drawn over t - 0.5 .. t + 0.5).
    pub fn columns(&self, trials: u64, x: usize) -> (f64, f64) {
        let edge = |x: usize| (x as u128 * trials as u128).div_ceil(X_BINS as u128) as f64 - 0.5;
        (edge(x), edge(x + 1))
    }

    /// The value span of row `y` over the values' range.
    pub fn values(&self, (lo, hi): (f64, f64), y: usize) -> (f64, f64) {
        if hi > lo {
            let h = (hi - lo) / Y_BINS as f64;
            (lo + y as f64 * h, lo + (y + 1) as f64 * h)
        } else {
            (lo - 0.5, hi + 0.5)
        }
    }
}

/// How strongly a cell of `count` is shaded, 0.15 to 1, on a log scale up
/// to the grid's largest count: a cell of one trial still shows, and a
/// crowded one does not wash out the rest.
pub fn shade(count: u32, max: u32) -> f64 {
    if count == 0 || max == 0 {
        0.0
    } else {
        0.15 + 0.85 * (count as f64).ln_1p() / (max as f64).ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::model::Row;

    fn plot(trials: u64, complete: Vec<Point>, rows: Vec<Row>) -> ObjectivePlot {
        let values = complete
            .iter()
            .fold(None, |r: Option<(f64, f64)>, p| match r {
                None => Some((p.value, p.value)),
                Some((lo, hi)) => Some((lo.min(p.value), hi.max(p.value))),
            });
        ObjectivePlot {
            trials,
            complete,
            pruned: vec![],
            rows,
            best: vec![],
            best_trial: None,
            values,
            ticks: vec![],
        }
    }

    #[test]
    fn a_small_sweep_is_drawn_point_by_point() {
        let p = plot(
            DENSE_FROM - 1,
            vec![Point {
                trial: 0,
                value: 1.0,
            }],
            vec![],
        );
        assert_eq!(Density::of(&p), None);
    }

    #[test]
    fn every_trial_is_counted_once_in_its_cell() {
        // 4000 trials, values 0..1 rising with the trial: cells on the
        // diagonal; every 10th trial failed out of memory, 1000..2000 only.
        let n = 4000u64;
        let complete: Vec<Point> = (0..n)
            .filter(|t| !(1000..2000).contains(t) || t % 10 != 0)
            .map(|t| Point {
                trial: t,
                value: t as f64 / (n - 1) as f64,
            })
            .collect();
        let failed: Vec<u64> = (1000..2000).filter(|t| t % 10 == 0).collect();
        let rows = vec![Row {
            name: "out-of-memory".into(),
            trials: failed.clone(),
        }];
        let d = Density::of(&plot(n, complete.clone(), rows)).unwrap();
        assert_eq!(d.complete.iter().sum::<u32>() as usize, complete.len());
        // The lowest value in the first column's lowest cell, the highest
        // in the last column's highest.
        assert!(d.complete[0] > 0);
        assert!(d.complete[(X_BINS - 1) * Y_BINS + Y_BINS - 1] > 0);
        // No cell off the diagonal band: column x holds values of trials
        // 20x..20x+19, i.e. rows near x * 60 / 200.
        for x in 0..X_BINS {
            for y in 0..Y_BINS {
                let expect = x * Y_BINS / X_BINS;
                if d.complete[x * Y_BINS + y] > 0 {
                    assert!(y.abs_diff(expect) <= 1, "cell ({x}, {y}) off the diagonal");
                }
            }
        }
        // The failure row: 2 a column over columns 50..99, none elsewhere.
        let row = &d.rows[0];
        assert_eq!(row.iter().sum::<u32>() as usize, failed.len());
        assert!((50..100).all(|x| row[x] == 2), "{row:?}");
        assert!(row[..50].iter().chain(&row[100..]).all(|&c| c == 0));
    }

    #[test]
    fn columns_tile_the_axis_without_gaps() {
        let d = Density::of(&plot(50_000, vec![], vec![])).unwrap();
        assert_eq!(d.columns(50_000, 0).0, -0.5);
        assert_eq!(d.columns(50_000, X_BINS - 1).1, 49_999.5);
        for x in 1..X_BINS {
            assert_eq!(d.columns(50_000, x - 1).1, d.columns(50_000, x).0);
        }
    }

    #[test]
    fn shades_grow_with_the_count_and_stay_visible() {
        assert_eq!(shade(0, 100), 0.0);
        assert!(shade(1, 1000) >= 0.15);
        assert!(shade(10, 1000) < shade(100, 1000));
        assert_eq!(shade(1000, 1000), 1.0);
    }
}
