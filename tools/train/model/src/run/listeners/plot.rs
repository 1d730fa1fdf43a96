//! `curves.png` in the run directory: training and validation loss per epoch,
//! and peak GPU memory per epoch (or why there is none). Redrawn after each
//! epoch from the rows the events carried (a resumed run's earlier epochs
//! come as `History`), written atomically like every file train writes.

use crate::training::events::{Event, Listener};
use common::wire::run_dir::{self, RunDir};
use common::wire::train::EpochRow;
use plotters::prelude::*;
use std::path::PathBuf;
use supervise::plotting::err as plot_err;

pub struct Plot {
    out: PathBuf,
    rows: Vec<Row>,
}

struct Row {
    epoch: f64,
    train: f64,
    val: f64,
    allocated: Option<f64>,
    reserved: Option<f64>,
}

impl Plot {
    pub fn new(run: &RunDir) -> Plot {
        Plot {
            out: run.curves(),
            rows: Vec::new(),
        }
    }

    fn add(&mut self, r: &EpochRow) {
        self.rows.retain(|x| x.epoch < f64::from(r.epoch));
        self.rows.push(Row {
            epoch: f64::from(r.epoch),
            train: r.train_loss,
            val: r.val_loss,
            allocated: r.peak_allocated_mib,
            reserved: r.peak_reserved_mib,
        });
    }

    fn draw(&self) -> anyhow::Result<()> {
        supervise::plotting::register_font();
        let rows = &self.rows;
        if rows.is_empty() {
            return Ok(());
        }
        common::files::write_atomic_with(&self.out, |tmp| {
            let root = BitMapBackend::new(tmp, (1100, 420)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let (left, right) = root.split_horizontally(550);
            let last = rows.last().map_or(1.0, |r| r.epoch).max(2.0);
            let loss: Series = [
                ("train", BLUE, |r: &Row| Some(r.train)),
                ("validation", RED, |r: &Row| Some(r.val)),
            ];
            line_chart(&left, "Loss per epoch", "loss", last, rows, &loss)?;
            if rows.iter().any(|r| r.allocated.is_some()) {
                let memory: Series = [
                    ("allocated", GREEN, |r: &Row| r.allocated),
                    ("reserved", MAGENTA, |r: &Row| r.reserved),
                ];
                line_chart(
                    &right,
                    "Peak GPU memory per epoch (MiB)",
                    "MiB",
                    last,
                    rows,
                    &memory,
                )?;
            } else {
                right
                    .draw(&Text::new(
                        "GPU memory: not recorded (CPU run, or no allocator view)",
                        (24, 200),
                        ("sans-serif", 16),
                    ))
                    .map_err(plot_err)?;
            }
            root.present().map_err(plot_err)?;
            Ok(())
        })
    }
}

type Series = [(&'static str, RGBColor, fn(&Row) -> Option<f64>); 2];

/// Two lines over epochs 1..=last in one panel, with a legend.
fn line_chart(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    last: f64,
    rows: &[Row],
    series: &Series,
) -> anyhow::Result<()> {
    let top = rows
        .iter()
        .flat_map(|r| series.iter().filter_map(move |(_, _, f)| f(r)))
        .filter(|x| x.is_finite())
        .fold(0.0f64, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(1.0..last, 0.0..top.max(1e-6))
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(y_desc)
        .draw()
        .map_err(plot_err)?;
    for &(label, color, f) in series {
        chart
            .draw_series(LineSeries::new(
                rows.iter().filter_map(|r| f(r).map(|v| (r.epoch, v))),
                color.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

impl Listener for Plot {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        if let Event::History(rows) = event {
            rows.iter().for_each(|r| self.add(r));
        }
        if let Event::EpochEnd(r) = event {
            self.add(r);
            // A plot that cannot be drawn is not worth stopping a run for.
            if let Err(e) = self.draw() {
                common::say!("train: {} not drawn: {e:#}", run_dir::CURVES);
            }
        }
        Ok(())
    }
}
