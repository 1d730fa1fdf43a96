//! objective.png: each trial at its number (complete ones at their value,
//! pruned ones at their last report), the best so far as a step line, and
//! under them a strip with a row per failure class marking the trials that
//! failed. What is drawn is [`model::ObjectivePlot`] (and, for a large
//! sweep, its [`density::Density`]); this file only draws.

pub mod density;
pub mod model;

use crate::journal::Study;
use crate::trial::Direction;
use density::{shade, Density};
use model::{class_index, ObjectivePlot, Point};
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

use supervise::plotting::{err, register_font};

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<Axis, RangedCoordf64>>;

/// A continuous axis labelled at the given whole numbers only (plotters'
/// own ticks for a float axis fall at 0.5 steps on a short sweep).
struct Axis {
    range: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.range.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.range()
    }
}

impl ValueFormatter<f64> for Axis {
    fn format(value: &f64) -> String {
        format!("{value:.0}")
    }
}

const WIDTH: u32 = 1000;
const VALUES_HEIGHT: u32 = 420;
/// The y labels' least room, the same on both panels so that their trials
/// line up (the strip's labels are class names and counts: a longer one
/// widens both, `y_labels`).
const Y_LABELS: u32 = 160;

/// The y labels' room for this plot: the strip's longest label (about 6.5
/// px a character at its 13 px), at least `Y_LABELS`.
fn y_labels(plot: &ObjectivePlot) -> u32 {
    let longest = plot
        .rows
        .iter()
        .map(|r| format!("{} ({})", r.name, r.trials.len()).chars().count())
        .max()
        .unwrap_or(0);
    (longest as u32 * 13 / 2 + 16).max(Y_LABELS)
}
const COMPLETE: RGBColor = RGBColor(31, 119, 180);
const PRUNED: RGBColor = RGBColor(255, 127, 14);
const BEST: RGBColor = RGBColor(214, 39, 40);
const GRID: RGBColor = RGBColor(228, 228, 228);
/// A colour per failure class, in `Class::ALL`'s order, then one for the
/// pruned row and unknown classes.
const CLASSES: [RGBColor; 13] = [
    RGBColor(140, 20, 140),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
    RGBColor(90, 90, 160),
    RGBColor(250, 180, 120),
    RGBColor(170, 170, 170),
];

/// Draws objective.png for the study; nothing (and no error) for a study
/// without trials.
pub fn objective(path: &Path, study: &Study, metric: &str) -> anyhow::Result<()> {
    register_font();
    let plot = ObjectivePlot::of(study);
    if plot.trials == 0 {
        return Ok(());
    }
    let dense = Density::of(&plot);
    let strip = if plot.rows.is_empty() {
        0
    } else {
        80 + 30 * plot.rows.len() as u32
    };
    let goal = match study.direction {
        Direction::Minimize => "lower is better",
        Direction::Maximize => "higher is better",
    };
    common::files::write_atomic_with(path, |tmp| {
        let root = BitMapBackend::new(tmp, (WIDTH, VALUES_HEIGHT + strip)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(&format!("{metric} per trial ({goal})"), ("sans-serif", 20))
            .map_err(err)?;
        let (top, bottom) = root.split_vertically(VALUES_HEIGHT - 24);
        values(&top, &plot, dense.as_ref(), metric, strip == 0)?;
        if strip > 0 {
            failures(&bottom, &plot, dense.as_ref())?;
        }
        root.present().map_err(err)?;
        Ok(())
    })
}

fn x_axis(plot: &ObjectivePlot) -> Axis {
    Axis {
        range: (-0.5..plot.trials as f64 - 0.5).into(),
        ticks: plot.ticks.iter().map(|&t| t as f64).collect(),
    }
}

/// The upper panel: values (a point a trial, or shaded cells of a large
/// sweep), best so far, the best trial named.
fn values(
    area: &Area,
    plot: &ObjectivePlot,
    dense: Option<&Density>,
    metric: &str,
    x_labels: bool,
) -> anyhow::Result<()> {
    let (lo, hi) = plot.values.unwrap_or((0.0, 1.0));
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1e-9);
    // Room above the highest value for the legend.
    let headroom = pad + (hi - lo + 2.0 * pad) * 0.25;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(if x_labels { 40 } else { 24 })
        // Alone, the values' labels need less room.
        .y_label_area_size(if x_labels { 80 } else { y_labels(plot) })
        .build_cartesian_2d(x_axis(plot), (lo - pad)..(hi + headroom))
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    mesh.bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .y_desc(metric);
    // With the strip under it, the strip names the axis.
    if x_labels {
        mesh.x_desc("trial");
    }
    mesh.draw().map_err(err)?;
    if plot.values.is_none() {
        let at = (plot.trials as f64 / 2.0 - 0.5, 0.5);
        chart
            .draw_series(std::iter::once(Text::new(
                "no trial has a value yet",
                at,
                ("sans-serif", 16).into_font().color(&BLACK),
            )))
            .map_err(err)?;
    }
    chart
        .draw_series(LineSeries::new(plot.best.clone(), BEST.stroke_width(2)))
        .map_err(err)?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BEST.stroke_width(2)));
    match dense {
        Some(d) => cells(&mut chart, plot, d)?,
        None => points(&mut chart, plot)?,
    }
    if let Some(b) = plot.best_trial {
        name_best(&mut chart, b, plot.trials)?;
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 13))
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// A circle a trial: complete filled, pruned ringed.
fn points(chart: &mut Chart, plot: &ObjectivePlot) -> anyhow::Result<()> {
    chart
        .draw_series(
            plot.complete
                .iter()
                .map(|p| Circle::new((p.trial as f64, p.value), 4, COMPLETE.filled())),
        )
        .map_err(err)?
        .label(format!("complete ({})", plot.complete.len()))
        .legend(|(x, y)| Circle::new((x + 9, y), 4, COMPLETE.filled()));
    if !plot.pruned.is_empty() {
        chart
            .draw_series(
                plot.pruned
                    .iter()
                    .map(|p| Circle::new((p.trial as f64, p.value), 4, PRUNED.stroke_width(2))),
            )
            .map_err(err)?
            .label(format!(
                "pruned, at its last report ({})",
                plot.pruned.len()
            ))
            .legend(|(x, y)| Circle::new((x + 9, y), 4, PRUNED.stroke_width(2)));
    }
    Ok(())
}

/// A large sweep's values: each cell of the grid shaded by how many
/// complete trials (blue) or pruned ones (orange, under them) fell in it.
fn cells(chart: &mut Chart, plot: &ObjectivePlot, d: &Density) -> anyhow::Result<()> {
    let range = plot.values.unwrap_or((0.0, 1.0));
    // Pruned under complete: where both gather, the complete trials' shade shows.
    for (grid, colour, what, n) in [
        (
            &d.pruned,
            PRUNED,
            "pruned, at its last report",
            plot.pruned.len(),
        ),
        (&d.complete, COMPLETE, "complete", plot.complete.len()),
    ] {
        if n == 0 {
            continue;
        }
        let max = grid.iter().copied().max().unwrap_or(0);
        let rects = grid
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| {
                let (x0, x1) = d.columns(plot.trials, i / density::Y_BINS);
                let (y0, y1) = d.values(range, i % density::Y_BINS);
                Rectangle::new([(x0, y0), (x1, y1)], colour.mix(shade(c, max)).filled())
            });
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(format!("{what} ({n}), shaded by trials a cell"))
            .legend(move |(x, y)| {
                Rectangle::new([(x + 3, y - 5), (x + 15, y + 5)], colour.filled())
            });
    }
    Ok(())
}

/// The best trial ringed and named with its value (the name to its left
/// in the last quarter of the axis, where it would run off the picture).
fn name_best(chart: &mut Chart, b: Point, trials: u64) -> anyhow::Result<()> {
    let at = (b.trial as f64, b.value);
    let name = format!("best: trial {}, {}", b.trial, short(b.value));
    // About 7.5 px a character at 14 px.
    let x = if b.trial * 4 > trials * 3 {
        -(name.chars().count() as i32 * 15 / 2) - 10
    } else {
        10
    };
    chart
        .draw_series(std::iter::once(
            EmptyElement::at(at)
                + Circle::new((0, 0), 8, BEST.stroke_width(2))
                + Text::new(name, (x, -20), ("sans-serif", 14).into_font().color(&BEST)),
        ))
        .map_err(err)?;
    Ok(())
}

/// A value in at most 4 significant digits.
fn short(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-3) {
        format!("{v:.3e}")
    } else {
        let digits = (3 - v.abs().log10().floor().max(-3.0) as i32).max(0) as usize;
        format!("{v:.digits$}")
    }
}

/// The lower strip: a row per failure class (and the pruned without a
/// value), a cross at each of its trials (in a large sweep, each column
/// of trials shaded by how many of them the row holds).
fn failures(area: &Area, plot: &ObjectivePlot, dense: Option<&Density>) -> anyhow::Result<()> {
    let rows = plot.rows.len();
    let names: Vec<String> = plot
        .rows
        .iter()
        .map(|r| format!("{} ({})", r.name, r.trials.len()))
        .collect();
    let caption = if plot.rows.iter().any(|r| r.name == model::PRUNED_ROW) {
        "trials without a value: failed (by class), or pruned before a report"
    } else {
        "failed trials, by class"
    };
    let caption = match dense {
        Some(_) => format!(
            "{caption}; shaded by trials a column of {}",
            plot.trials.div_ceil(density::X_BINS as u64)
        ),
        None => caption.to_string(),
    };
    let y = Axis {
        range: (0.0..rows as f64).into(),
        ticks: (0..rows).map(|i| i as f64 + 0.5).collect(),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&caption, ("sans-serif", 15))
        .margin(12)
        .margin_top(4)
        .x_label_area_size(36)
        .y_label_area_size(y_labels(plot))
        .build_cartesian_2d(x_axis(plot), y)
        .map_err(err)?;
    let label = |v: &f64| {
        let i = (rows as f64 - v - 0.5).round();
        names.get(i as usize).cloned().unwrap_or_default()
    };
    chart
        .configure_mesh()
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .x_desc("trial")
        .y_label_formatter(&label)
        .draw()
        .map_err(err)?;
    let max = dense.map_or(0, |d| d.rows.iter().flatten().copied().max().unwrap_or(0));
    for (i, row) in plot.rows.iter().enumerate() {
        let colour = CLASSES[class_index(&row.name).min(CLASSES.len() - 1)];
        let y = rows as f64 - i as f64 - 0.5;
        match dense {
            Some(d) => {
                let bars = d.rows[i]
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(x, &c)| {
                        let (x0, x1) = d.columns(plot.trials, x);
                        Rectangle::new(
                            [(x0, y - 0.3), (x1, y + 0.3)],
                            colour.mix(shade(c, max)).filled(),
                        )
                    });
                chart.draw_series(bars).map_err(err)?;
            }
            None => {
                chart
                    .draw_series(
                        row.trials
                            .iter()
                            .map(|&t| Cross::new((t as f64, y), 6, colour.stroke_width(3))),
                    )
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}
