//! summary.yaml (train-summary/v1), written atomically when the run ends,
//! from what the events said over the run.

use crate::training::events::{Event, Listener};
use common::wire::run_dir::RunDir;
use common::wire::train::{Best, EpochRow, OomEvent, TrainSummary};
use common::wire::Versioned;
use std::path::PathBuf;

pub struct Summary {
    path: PathBuf,
    config: String,
    device: String,
    parameters: i64,
    first_epoch: u32,
    resumed_at: Option<u32>,
    not_applied: Vec<String>,
    best: Option<Best>,
    rows: Vec<EpochRow>,
    oom_events: Vec<OomEvent>,
}

impl Summary {
    pub fn new(run: &RunDir) -> Summary {
        Summary {
            path: run.summary(),
            config: String::new(),
            device: String::new(),
            parameters: 0,
            first_epoch: 1,
            resumed_at: None,
            not_applied: Vec::new(),
            best: None,
            rows: Vec::new(),
            oom_events: Vec::new(),
        }
    }
}

impl Listener for Summary {
    fn on(&mut self, event: &Event) -> anyhow::Result<()> {
        match event {
            Event::Started(s) => {
                self.config = s.config.clone();
                self.device = s.device.clone();
                self.parameters = s.parameters;
                self.first_epoch = s.first_epoch;
                // A run resumed in this process keeps that fact across a
                // fallback to the next config.
                self.resumed_at = self.resumed_at.or(s.resumed_at);
                self.not_applied = s.not_applied.clone();
                self.best = s.best;
                // The OOM events of the config that runs last.
                self.oom_events.clear();
            }
            Event::History(rows) => self.rows.extend(rows.iter().cloned()),
            Event::EpochEnd(r) => {
                self.rows.retain(|x| x.epoch < r.epoch);
                self.rows.push((*r).clone());
            }
            Event::NewBest(b) => self.best = Some(*b),
            Event::OomRecovered(e) => self.oom_events.push((*e).clone()),
            Event::Ended(end) => {
                let last = self.rows.last().cloned();
                let summary = TrainSummary {
                    schema: TrainSummary::SCHEMA.into(),
                    status: end.status,
                    stop_reason: end.stop_reason.clone(),
                    error_class: end.error_class,
                    config: self.config.clone(),
                    device: self.device.clone(),
                    parameters: self.parameters,
                    epochs_completed: last
                        .as_ref()
                        .map_or(self.first_epoch.saturating_sub(1), |r| r.epoch),
                    resumed_at_epoch: self.resumed_at,
                    best: self.best,
                    time_s: end.time_s,
                    peak_memory: end.peak_memory.clone(),
                    skipped_steps: self.rows.iter().map(|r| r.skipped_steps).sum(),
                    micro_batch_size: end.micro_batch,
                    oom_events: self.oom_events.clone(),
                    configs: end.legs.clone(),
                    not_applied: self.not_applied.clone(),
                    last,
                };
                common::files::write_yaml(&self.path, &summary)?;
            }
            _ => {}
        }
        Ok(())
    }
}
