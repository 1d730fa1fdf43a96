//! memory.png: a supervised command's memory over time (host PSS, RSS
//! beside it, and the GPU's where measured), a vertical mark at each report
//! of its objective, read back from memory.csv.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// One row of memory.csv: seconds, PSS, RSS, GPU.
type Row = (f64, f64, f64, Option<f64>);

fn rows(csv: &Path) -> anyhow::Result<Vec<Row>> {
    let text = std::fs::read_to_string(csv)?;
    Ok(text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
            Some((n(0)?, n(1)?, n(2)?, n(4)))
        })
        .collect())
}

/// DejaVu Sans, embedded and registered once: the plot needs no system
/// fonts.
fn register_font() {
    static FONT: std::sync::Once = std::sync::Once::new();
    FONT.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The chart's coordinates: seconds across, MiB up.
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws memory.png from memory.csv, with a mark per (seconds, step) in
/// `marks`. Nothing is drawn (and no error) for a csv without rows.
pub fn plot(csv: &Path, marks: &[(f64, u64)], png: &Path) -> anyhow::Result<()> {
    register_font();
    let rows = rows(csv)?;
    if rows.is_empty() {
        return Ok(());
    }
    let end = rows.last().map_or(1.0, |r| r.0).max(0.5);
    let top = rows
        .iter()
        .map(|r| r.1.max(r.2).max(r.3.unwrap_or(0.0)))
        .fold(1.0, f64::max)
        * 1.1;
    common::files::write_atomic_with(png, |tmp| {
        let root = BitMapBackend::new(tmp, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("memory of the command's process tree", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..end, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("MiB")
            .draw()
            .map_err(err)?;
        for (t, _) in marks {
            chart
                .draw_series(LineSeries::new(
                    vec![(*t, 0.0), (*t, top)],
                    RGBColor(200, 200, 200).stroke_width(1),
                ))
                .map_err(err)?;
        }
        draw_series(&mut chart, &rows, !marks.is_empty())?;
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
        Ok(())
    })
}

/// The lines and their legend: host PSS, host RSS, the GPU where
/// measured, and the marks' entry when there are marks.
fn draw_series(chart: &mut Chart, rows: &[Row], marked: bool) -> anyhow::Result<()> {
    let gpu: Vec<(f64, f64)> = rows.iter().filter_map(|r| r.3.map(|g| (r.0, g))).collect();
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (r.0, r.1)),
            BLUE.stroke_width(2),
        ))
        .map_err(err)?
        .label("host PSS (shared pages once)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLUE.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (r.0, r.2)),
            RGBColor(120, 160, 230).stroke_width(1),
        ))
        .map_err(err)?
        .label("host RSS")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(120, 160, 230)));
    if !gpu.is_empty() {
        chart
            .draw_series(LineSeries::new(gpu, RED.stroke_width(2)))
            .map_err(err)?
            .label("GPU (NVML, these pids)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2)));
    }
    if marked {
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
            .map_err(err)?
            .label("a report of the objective (grey)")
            .legend(|(x, y)| {
                PathElement::new(
                    vec![(x + 9, y - 6), (x + 9, y + 6)],
                    RGBColor(200, 200, 200),
                )
            });
    }
    Ok(())
}
