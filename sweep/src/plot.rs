//! objective.png: each finished trial's objective by trial number, and the
//! best so far as a line (optuna-dashboard's history plot, as a file).

use crate::journal::Study;
use crate::trial::TrialState;
use plotters::prelude::*;
use std::path::Path;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

pub fn objective(path: &Path, study: &Study, metric: &str) -> anyhow::Result<()> {
    static FONT: std::sync::Once = std::sync::Once::new();
    FONT.call_once(|| {
        // DejaVu Sans, embedded: the plot needs no system fonts.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
    let points: Vec<(f64, f64)> = study
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .filter_map(|t| t.value.map(|v| (t.number as f64, v)))
        .filter(|(_, v)| v.is_finite())
        .collect();
    if points.is_empty() {
        return Ok(());
    }
    let mut best = Vec::new();
    let mut so_far: Option<f64> = None;
    for &(n, v) in &points {
        so_far = Some(match so_far {
            Some(b) if !study.direction.better(v, b) => b,
            _ => v,
        });
        best.push((n, so_far.unwrap_or(v)));
    }
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &(_, v)| {
            (a.min(v), b.max(v))
        });
    let pad = ((hi - lo) * 0.05).max(1e-9);
    let last = study.trials.len().max(2) as f64;
    common::files::write_atomic_with(path, |tmp| {
        let root = BitMapBackend::new(tmp, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{metric} per trial"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..last - 0.5, (lo - pad)..(hi + pad))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("trial")
            .y_desc(metric)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))
            .map_err(err)?
            .label("complete trial")
            .legend(|(x, y)| Circle::new((x + 9, y), 4, BLUE.filled()));
        chart
            .draw_series(LineSeries::new(best.clone(), RED.stroke_width(2)))
            .map_err(err)?
            .label("best so far")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2)));
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
        Ok(())
    })
}
