//! What a person sees: the seeds' epoch lines on stderr, and a progress bar
//! within an epoch when stderr is a terminal (plain lines when piped).

use crate::trainer::{Event, Listener};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

pub struct Console {
    bar: Option<ProgressBar>,
    interactive: bool,
}

impl Console {
    pub fn new() -> Console {
        Console {
            bar: None,
            interactive: std::io::stderr().is_terminal(),
        }
    }
}

impl Listener for Console {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        match event {
            Event::Batch {
                epoch,
                done,
                total,
                loss,
            } if self.interactive => {
                let bar = self.bar.get_or_insert_with(|| {
                    let b = ProgressBar::new(*total);
                    b.set_style(
                        ProgressStyle::with_template(
                            "Epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({eta})",
                        )
                        .expect("a valid template")
                        .progress_chars("=> "),
                    );
                    b
                });
                bar.set_prefix(epoch.to_string());
                bar.set_position(*done);
                bar.set_message(format!("loss {loss:.4}"));
            }
            Event::Batch { .. } => {}
            Event::EpochEnd(r) => {
                if let Some(bar) = self.bar.take() {
                    bar.finish_and_clear();
                }
                let mut line = format!(
                    "Epoch {}/{} | Train Loss: {:.4} | Val Loss: {:.4} | LR: {:.6} | Time: {:.2}s",
                    r.epoch, r.epochs, r.train_loss, r.val_loss, r.lr, r.seconds
                );
                if let Some(r2) = r.metrics.r2 {
                    line += &format!(" | R²: {r2:.4}");
                }
                if let Some(acc) = r.metrics.accuracy {
                    line += &format!(" | Acc: {acc:.4}");
                }
                eprintln!("{line}");
            }
            Event::NewBest { val_loss, .. } => {
                eprintln!("New best model saved! (val_loss: {val_loss:.4})")
            }
        }
        Ok(())
    }
}

/// metrics.csv: one row per epoch, each written whole and flushed.
pub struct MetricsCsv {
    file: std::fs::File,
}

pub const METRICS_HEADER: &str =
    "epoch,train_loss,val_loss,lr,seconds,samples_per_s,peak_allocated_mib,peak_reserved_mib,skipped_steps,oom_events,micro_batch,mae,rmse,r2,accuracy,macro_f1";

impl MetricsCsv {
    /// Opens `path` keeping only rows of epochs before `first_epoch` (a
    /// resumed run redoes the rest) and no torn last line; rewritten
    /// atomically.
    pub fn open(path: &std::path::Path, first_epoch: u32) -> anyhow::Result<MetricsCsv> {
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut keep = String::from(METRICS_HEADER);
        keep.push('\n');
        for line in old.split_inclusive('\n').skip(1) {
            let whole = line.ends_with('\n');
            let epoch: Option<u32> = line.split(',').next().and_then(|e| e.parse().ok());
            if whole && epoch.is_some_and(|e| e < first_epoch) {
                keep.push_str(line);
            }
        }
        crate::checkpoint::write_atomic(path, keep.as_bytes())?;
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(MetricsCsv { file })
    }
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.6}"))
}

impl Listener for MetricsCsv {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        use std::io::Write;
        if let Event::EpochEnd(r) = event {
            let m = &r.metrics;
            let row = format!(
                "{},{:.6},{:.6},{:.8},{:.3},{:.2},{},{},{},{},{},{},{},{},{},{}\n",
                r.epoch,
                r.train_loss,
                r.val_loss,
                r.lr,
                r.seconds,
                r.samples_per_s,
                cell(r.peak_allocated_mib),
                cell(r.peak_reserved_mib),
                r.skipped_steps,
                r.oom_events,
                r.micro_batch,
                cell(m.mae),
                cell(m.rmse),
                cell(m.r2),
                cell(m.accuracy),
                cell(m.macro_f1)
            );
            self.file.write_all(row.as_bytes())?;
            self.file.flush()?;
        }
        Ok(())
    }
}
