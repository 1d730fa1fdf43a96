//! `curves.png` in the run directory: training and validation loss per epoch,
//! and peak GPU memory per epoch (or why there is none). Redrawn from
//! metrics.csv after each epoch, so a resumed run's plot covers all epochs;
//! written to a temp file and renamed, like every file train writes.

use crate::trainer::{Event, Listener};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

pub struct Plot {
    metrics: PathBuf,
    out: PathBuf,
}

struct Row {
    epoch: f64,
    train: f64,
    val: f64,
    allocated: Option<f64>,
    reserved: Option<f64>,
}

impl Plot {
    pub fn new(dir: &Path) -> Plot {
        Plot {
            metrics: dir.join("metrics.csv"),
            out: dir.join("curves.png"),
        }
    }

    fn rows(&self) -> anyhow::Result<Vec<Row>> {
        let mut r = csv::Reader::from_path(&self.metrics)?;
        let h = r.headers()?.clone();
        let col = |n: &str| h.iter().position(|c| c == n);
        let (e, t, v, a, re) = (
            col("epoch"),
            col("train_loss"),
            col("val_loss"),
            col("peak_allocated_mib"),
            col("peak_reserved_mib"),
        );
        let mut rows = Vec::new();
        for rec in r.records() {
            let rec = rec?;
            let num = |i: Option<usize>| {
                i.and_then(|i| rec.get(i))
                    .and_then(|s| s.parse::<f64>().ok())
            };
            if let (Some(epoch), Some(train), Some(val)) = (num(e), num(t), num(v)) {
                rows.push(Row {
                    epoch,
                    train,
                    val,
                    allocated: num(a),
                    reserved: num(re),
                });
            }
        }
        Ok(rows)
    }

    fn draw(&self) -> anyhow::Result<()> {
        static FONT: Once = Once::new();
        FONT.call_once(|| {
            // DejaVu Sans, embedded: the plot needs no system fonts.
            let _ = plotters::style::register_font(
                "sans-serif",
                FontStyle::Normal,
                dejavu::sans::regular(),
            );
        });
        let rows = self.rows()?;
        if rows.is_empty() {
            return Ok(());
        }
        let tmp = self.out.with_file_name(".curves.tmp.png");
        {
            let root = BitMapBackend::new(&tmp, (1100, 420)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
            let (left, right) = root.split_horizontally(550);
            let last = rows.last().map_or(1.0, |r| r.epoch).max(2.0);
            let top = rows
                .iter()
                .flat_map(|r| [r.train, r.val])
                .filter(|x| x.is_finite())
                .fold(0.0f64, f64::max)
                * 1.1;
            let mut chart = ChartBuilder::on(&left)
                .caption("Loss per epoch", ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(1.0..last, 0.0..top.max(1e-6))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            chart
                .configure_mesh()
                .x_desc("epoch")
                .y_desc("loss")
                .draw()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for (label, color, f) in [
                ("train", BLUE, (|r: &Row| r.train) as fn(&Row) -> f64),
                ("validation", RED, |r: &Row| r.val),
            ] {
                chart
                    .draw_series(LineSeries::new(
                        rows.iter().map(|r| (r.epoch, f(r))),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
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
                .map_err(|e| anyhow::anyhow!("{e}"))?;

            let mem: Vec<&Row> = rows.iter().filter(|r| r.allocated.is_some()).collect();
            if mem.is_empty() {
                right
                    .draw(&Text::new(
                        "GPU memory per epoch: not recorded (CPU run, or no allocator view)",
                        (40, 200),
                        ("sans-serif", 18),
                    ))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            } else {
                let top = mem
                    .iter()
                    .filter_map(|r| r.reserved.or(r.allocated))
                    .fold(0.0f64, f64::max)
                    * 1.1;
                let mut chart = ChartBuilder::on(&right)
                    .caption("Peak GPU memory per epoch (MiB)", ("sans-serif", 20))
                    .margin(12)
                    .x_label_area_size(36)
                    .y_label_area_size(64)
                    .build_cartesian_2d(1.0..last, 0.0..top.max(1.0))
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                chart
                    .configure_mesh()
                    .x_desc("epoch")
                    .y_desc("MiB")
                    .draw()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                for (label, color, f) in [
                    (
                        "allocated",
                        GREEN,
                        (|r: &Row| r.allocated) as fn(&Row) -> Option<f64>,
                    ),
                    ("reserved", MAGENTA, |r: &Row| r.reserved),
                ] {
                    chart
                        .draw_series(LineSeries::new(
                            mem.iter().filter_map(|r| f(r).map(|m| (r.epoch, m))),
                            color.stroke_width(2),
                        ))
                        .map_err(|e| anyhow::anyhow!("{e}"))?
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
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let f = std::fs::File::open(&tmp)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.out)?;
        Ok(())
    }
}

impl Listener for Plot {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        if let Event::EpochEnd(_) = event {
            // A plot that cannot be drawn is not worth stopping a run for.
            if let Err(e) = self.draw() {
                eprintln!("train: curves.png not drawn: {e:#}");
            }
        }
        Ok(())
    }
}
