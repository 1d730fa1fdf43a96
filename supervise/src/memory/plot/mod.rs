//! memory.png: a supervised command's memory over time (host PSS, RSS
//! beside it, and the GPU's where measured) from memory.csv, with a mark
//! at each report of the metric, the spans between reports shaded and
//! named by step with what memory did in them, and the peak named. What is
//! drawn is [`model::MemoryPlot`]; this file only draws.

pub mod model;

use model::{seconds, MemoryPlot, Peak};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

use crate::plotting::{err, register_font};

/// The chart's coordinates: seconds across, MiB up.
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

const PSS: RGBColor = RGBColor(20, 60, 170);
const RSS: RGBColor = RGBColor(130, 170, 235);
const GPU: RGBColor = RGBColor(214, 39, 40);
const GRID: RGBColor = RGBColor(228, 228, 228);
const MARK: RGBColor = RGBColor(140, 140, 140);
const SHADE: RGBColor = RGBColor(240, 240, 240);
const STARTUP: RGBColor = RGBColor(253, 244, 220);
/// Above this many spans, shading them is noise: the marks stay.
const MAX_SHADED: usize = 60;

/// Draws memory.png from memory.csv, with a mark per report of `metric`
/// in `marks` (seconds, step) and the start-up shaded up to `startup`
/// (seconds to its first output line or report). Nothing is drawn (and no
/// error) for a csv without rows.
pub fn plot(
    csv: &Path,
    marks: &[(f64, u64)],
    startup: Option<f64>,
    metric: &str,
    png: &Path,
) -> anyhow::Result<()> {
    register_font();
    let text = std::fs::read_to_string(csv)?;
    let Some(plot) = MemoryPlot::of(model::samples(&text), marks, startup) else {
        return Ok(());
    };
    common::files::write_atomic_with(png, |tmp| {
        let root = BitMapBackend::new(tmp, (1000, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("memory of the command's process tree", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..plot.end, 0.0..plot.top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .x_desc("seconds since the command started")
            .y_desc("MiB")
            .x_label_formatter(&|v| seconds(*v, plot.end))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        spans(&mut chart, &plot)?;
        lines(&mut chart, &plot, metric)?;
        name_peak(&mut chart, &plot, plot.pss_peak, "PSS", PSS)?;
        if let Some(g) = plot.gpu_peak {
            name_peak(&mut chart, &plot, g, "GPU", GPU)?;
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 13))
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
        Ok(())
    })
}

/// The start-up before its first line or report (imports, data, the
/// model), the spans between reports shaded in turn, each labelled "step
/// N" over its highest PSS, and the marks.
fn spans(chart: &mut Chart, plot: &MemoryPlot) -> anyhow::Result<()> {
    let top = plot.top;
    let label_y = top * 0.97;
    let font = |c: RGBColor| ("sans-serif", 12).into_font().color(&c);
    if let Some(first) = plot.startup_end {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, 0.0), (first, top)],
                STARTUP.filled(),
            )))
            .map_err(err)?;
        // Named where there is room for its name.
        if first >= plot.end * 0.12 {
            chart
                .draw_series(std::iter::once(Text::new(
                    "start-up",
                    (plot.end * 0.005, label_y),
                    font(RGBColor(120, 100, 40)),
                )))
                .map_err(err)?;
        }
    }
    if plot.spans.len() <= MAX_SHADED {
        chart
            .draw_series(
                plot.spans
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 2 == 0)
                    .map(|(_, s)| Rectangle::new([(s.start, 0.0), (s.end, top)], SHADE.filled())),
            )
            .map_err(err)?;
    }
    chart
        .draw_series(
            plot.reports
                .iter()
                .map(|&t| PathElement::new(vec![(t, 0.0), (t, top)], MARK.stroke_width(1))),
        )
        .map_err(err)?;
    for s in plot.spans.iter().filter(|s| s.labelled) {
        let mid = (s.start + s.end) / 2.0;
        let at = |y: f64| (mid, y);
        let centred = |c: RGBColor| {
            font(c).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ))
        };
        chart
            .draw_series([
                Text::new(format!("step {}", s.step), at(label_y), centred(BLACK)),
                Text::new(
                    format!("{:.0} MiB", s.pss_mib),
                    at(top * 0.925),
                    centred(PSS),
                ),
            ])
            .map_err(err)?;
    }
    Ok(())
}

/// The lines and their legend: host PSS, host RSS, the GPU where
/// measured, and the marks' entry when there are marks.
fn lines(chart: &mut Chart, plot: &MemoryPlot, metric: &str) -> anyhow::Result<()> {
    let rows = &plot.samples;
    let gpu: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| r.gpu_mib.map(|g| (r.seconds, g)))
        .collect();
    let key = |c: RGBColor, w: u32| {
        move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(w))
    };
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (r.seconds, r.rss_mib)),
            RSS.stroke_width(1),
        ))
        .map_err(err)?
        .label(format!("host RSS (peak {:.0} MiB)", plot.rss_peak.mib))
        .legend(key(RSS, 1));
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (r.seconds, r.pss_mib)),
            PSS.stroke_width(2),
        ))
        .map_err(err)?
        .label("host PSS (shared pages counted once)")
        .legend(key(PSS, 2));
    if !gpu.is_empty() {
        chart
            .draw_series(LineSeries::new(gpu, GPU.stroke_width(2)))
            .map_err(err)?
            .label("GPU (NVML, these processes)")
            .legend(key(GPU, 2));
    }
    if !plot.reports.is_empty() {
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())
            .map_err(err)?
            .label(format!(
                "a report of {metric}; above: step, highest PSS since the last"
            ))
            .legend(|(x, y)| PathElement::new(vec![(x + 9, y - 7), (x + 9, y + 7)], MARK));
    }
    Ok(())
}

/// The peak ringed and named: "peak PSS 588 MiB at 3.6 s".
fn name_peak(
    chart: &mut Chart,
    plot: &MemoryPlot,
    p: Peak,
    what: &str,
    colour: RGBColor,
) -> anyhow::Result<()> {
    // Right of the point, unless that runs off the chart.
    let dx = if p.seconds > plot.end * 0.7 { -210 } else { 10 };
    chart
        .draw_series(std::iter::once(
            EmptyElement::at((p.seconds, p.mib))
                + Circle::new((0, 0), 6, colour.stroke_width(2))
                + Text::new(
                    format!("peak {what} {:.0} MiB at {:.1} s", p.mib, p.seconds),
                    (dx, -22),
                    ("sans-serif", 14).into_font().color(&colour),
                ),
        ))
        .map_err(err)?;
    Ok(())
}
