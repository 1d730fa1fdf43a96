//! What a person sees on stderr: the start-up lines, the seeds' epoch lines,
//! recoveries and fallbacks, and a progress bar within an epoch when stderr
//! is a terminal (plain lines when piped).

use crate::training::events::{End, Event, Listener, Skip, Start};
use common::wire::train::{EpochRow, RunStatus};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

pub struct Console {
    bar: Option<ProgressBar>,
    interactive: bool,
    /// The current config's epochs, for "Epoch 3/8".
    epochs: u32,
    out: std::path::PathBuf,
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl Console {
    pub fn new() -> Console {
        Console {
            bar: None,
            interactive: std::io::stderr().is_terminal(),
            epochs: 0,
            out: std::path::PathBuf::new(),
        }
    }

    fn clear_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn started(&mut self, s: &Start) {
        self.epochs = s.epochs;
        self.out = s.out.clone();
        if let Some((n, of)) = s.carried {
            common::say!(
                "train: {}: continuing from the last good checkpoint at epoch {}; {n} of {of} model tensors carried over{}",
                s.config,
                s.first_epoch,
                if n < of { " (the others start fresh: their shapes differ)" } else { "" }
            );
        }
        common::say!(
            "train: {} · {} · {} parameters (cfgcheck's estimate: {}) · {} training / {} validation examples · run directory {}",
            s.config,
            s.device,
            s.parameters,
            s.expected_parameters,
            s.train_examples,
            s.val_examples,
            s.out.display()
        );
        for n in &s.environment {
            common::say!("train: environment: {n}");
        }
        for n in &s.not_applied {
            common::say!("train: not applied: {n}");
        }
        if let Some(at) = s.resumed_at {
            common::say!("train: resuming {} at epoch {at}", s.out.display());
        }
    }

    /// The progress bar within an epoch (a terminal only).
    fn progress(&mut self, epoch: u32, done: u64, total: u64, loss: f64) {
        let bar = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template("Epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({eta})")
                    .expect("a valid template")
                    .progress_chars("=> "),
            );
            b
        });
        bar.set_prefix(epoch.to_string());
        bar.set_position(done);
        bar.set_message(format!("loss {loss:.4}"));
    }

    fn epoch_end(&mut self, r: &EpochRow) {
        self.clear_bar();
        let mut line = format!(
            "Epoch {}/{} | Train Loss: {:.4} | Val Loss: {:.4} | LR: {:.6} | Time: {:.2}s",
            r.epoch, self.epochs, r.train_loss, r.val_loss, r.lr, r.seconds
        );
        if let Some(r2) = r.r2 {
            line += &format!(" | R²: {r2:.4}");
        }
        if let Some(acc) = r.accuracy {
            line += &format!(" | Acc: {acc:.4}");
        }
        common::say!("{line}");
    }

    fn ended(&mut self, end: &End) {
        self.clear_bar();
        match end.status {
            RunStatus::Failed => common::say!("train: failed: {}", end.stop_reason),
            RunStatus::Stopped => common::say!(
                "train: {}; continue with `train --resume {}`",
                end.stop_reason,
                self.out.display()
            ),
            RunStatus::Finished => {}
        }
    }
}

fn mib_or_na(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.0} MiB"))
}

impl Listener for Console {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        match event {
            Event::Started(s) => self.started(s),
            Event::Labels { which, counts } => {
                let list: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
                common::say!("train: {which} labels: {}", list.join(", "));
            }
            Event::History(_) => {}
            Event::Batch {
                epoch,
                done,
                total,
                loss,
            } if self.interactive => self.progress(*epoch, *done, *total, *loss),
            Event::Batch { .. } => {}
            Event::StepSkipped {
                epoch,
                step,
                why: Skip::NonFiniteLoss(loss),
            } => {
                self.clear_bar();
                common::say!("train: loss is {loss} at epoch {epoch} step {step}: update skipped");
            }
            // The loss scaler's routine back-off: counted in metrics.csv, not
            // worth a line each.
            Event::StepSkipped { .. } => {}
            Event::OomRecovered(e) => {
                self.clear_bar();
                common::say!(
                    "train: out of memory at epoch {} step {}: micro-batch {} -> {}, same step again (allocated {}, reserved {})",
                    e.epoch,
                    e.step,
                    e.old_micro_batch,
                    e.new_micro_batch,
                    mib_or_na(e.allocated_mib),
                    mib_or_na(e.reserved_mib)
                );
            }
            Event::EpochEnd(r) => self.epoch_end(r),
            Event::NewBest(b) => {
                common::say!("New best model saved! (val_loss: {:.4})", b.val_loss)
            }
            Event::LegEnded { leg, next: Some(_) } => {
                common::say!(
                    "train: {} failed ({}): {}; falling back to the next config",
                    leg.config,
                    leg.error_class.map_or("", |c| c.as_str()),
                    leg.stop_reason
                );
            }
            Event::LegEnded { next: None, .. } => {}
            Event::FreshProcess { next, why } => {
                common::say!("train: {next} runs in a fresh train process: {why}");
            }
            Event::AlreadyFinished { epochs } => {
                common::say!("train: the run already finished all {epochs} epochs");
            }
            Event::Ended(end) => self.ended(end),
        }
        Ok(())
    }
}
