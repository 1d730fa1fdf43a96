//! The driver's running trials: a child `train`, or a program trial's
//! supervised leg. Each poll reads their new metric values into the journal
//! (and the pruner), ends those past their time, and records how each one
//! that is gone ended (`outcome` decides).

use crate::driver::Driver;
use crate::history::reruns_for;
use crate::journal::{Study, TrialId};
use crate::layout::full_disk;
use crate::outcome::{self, Ended, Ending, ProgramEnd};
use crate::process::{log_tail, signal_group, GRACE};
use crate::pruner::Decision;
use crate::trial::Trial;
use common::wire::program::{ProgramLeg, ProgramStatus, ProgramSummary};
use common::wire::run_dir::{self, TrialDir};
use common::wire::train::{EpochRow, TrainSummary};
use common::wire::Versioned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};
use supervise::verdict::Stop;

/// How long a stopped trial gets to write its summary before SIGKILL (a
/// step on a GPU can take seconds); one past its timeout has had its time.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

/// What runs a trial.
pub(crate) enum Proc {
    Train(Child),
    Program(Box<crate::program::Started>),
}

pub(crate) struct Running {
    pub number: u64,
    pub id: TrialId,
    pub proc: Proc,
    pub slot: usize,
    pub dir: TrialDir,
    pub started: Instant,
    pub reported: BTreeMap<u64, f64>,
    pub ending: Option<(Ending, Instant)>,
    /// Trials sharing its slot's device (itself included) when it started.
    pub crowd: usize,
    /// It runs with CUDA_LAUNCH_BLOCKING=1 (a device-side assert's rerun).
    pub launch_blocking: bool,
}

impl Running {
    /// Ends it for `why` (the first reason is the one recorded): SIGTERM to
    /// its process group now, SIGKILL after the grace (`tick`).
    pub fn stop(&mut self, why: Ending) {
        if self.ending.is_some() {
            return;
        }
        match &mut self.proc {
            Proc::Train(c) => signal_group(c, libc::SIGTERM),
            Proc::Program(p) => p.leg.stop(match &why {
                Ending::Pruned(w) => Stop::Pruned(w.clone()),
                Ending::Timeout => Stop::Timeout {
                    limit_s: self.started.elapsed().as_secs_f64(),
                },
                Ending::Interrupted => Stop::Interrupted("the sweep was stopped".into()),
            }),
        }
        self.ending = Some((why, Instant::now()));
    }

    /// SIGKILL past its grace; its exit status once it has ended.
    fn tick(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        if let Some((why, since)) = &self.ending {
            let grace = if *why == Ending::Timeout {
                TIMEOUT_GRACE
            } else {
                GRACE
            };
            if since.elapsed() > grace {
                match &self.proc {
                    Proc::Train(c) => signal_group(c, libc::SIGKILL),
                    Proc::Program(p) => p.leg.signal(libc::SIGKILL),
                }
            }
        }
        Ok(match &mut self.proc {
            Proc::Train(c) => c.try_wait()?,
            Proc::Program(p) => p.leg.tick()?,
        })
    }

    /// Its process tree's host memory peak so far (a program trial's).
    pub fn host_peak_mib(&self) -> Option<f64> {
        match &self.proc {
            Proc::Train(_) => None,
            Proc::Program(p) => p.leg.host_peak_mib(),
        }
    }

    /// The objective's new values by step: train's metrics.csv, or what the
    /// program's leg read since the last poll.
    fn new_values(&mut self, metric: &common::wire::metric::Metric) -> Vec<(u64, f64)> {
        match &mut self.proc {
            Proc::Train(_) => {
                let path = self.dir.run().metrics();
                let Ok(text) = std::fs::read_to_string(&path) else {
                    return Vec::new();
                };
                let Ok(rows) = EpochRow::read_all(&path.display().to_string(), &text) else {
                    return Vec::new();
                };
                rows.iter()
                    .filter_map(|row| metric.value_in(row).map(|v| (u64::from(row.epoch), v)))
                    .collect()
            }
            Proc::Program(p) => {
                let name = metric.to_string();
                p.leg
                    .poll()
                    .into_iter()
                    .filter(|r| r.metric.to_string() == name)
                    .map(|r| (r.step, r.value))
                    .collect()
            }
        }
    }
}

impl Driver {
    /// Each running trial: new values into the journal (and the pruner),
    /// the timeout, and its end.
    pub(crate) fn watch(&mut self, study: &Study) -> anyhow::Result<()> {
        let mut i = 0;
        while i < self.running.len() {
            self.report_values(i, study)?;
            let r = &mut self.running[i];
            if let (None, Some(limit)) = (&r.ending, self.settings.trial_timeout_s) {
                if r.started.elapsed().as_secs_f64() > limit {
                    r.stop(Ending::Timeout);
                }
            }
            match r.tick()? {
                None => i += 1,
                Some(status) => {
                    let r = self.running.remove(i);
                    let reruns = reruns_for(study, r.number, outcome::RERUN_ALLOCATOR);
                    self.finish(r, status, reruns)?;
                }
            }
        }
        Ok(())
    }

    fn report_values(&mut self, i: usize, study: &Study) -> anyhow::Result<()> {
        let metric = self.space.metric.name.clone();
        let r = &mut self.running[i];
        let mut new = false;
        for (step, v) in r.new_values(&metric) {
            if v.is_finite() && r.reported.get(&step) != Some(&v) {
                self.journal.set_intermediate(r.id, step, v)?;
                r.reported.insert(step, v);
                new = true;
            }
        }
        if let (true, None, Some(p)) = (new, &r.ending, &self.pruner) {
            let others: Vec<Trial> = study
                .trials
                .iter()
                .filter(|t| t.number != r.number)
                .cloned()
                .collect();
            if let Decision::Prune(why) = p.decide(&r.reported, &others, self.space.metric.goal) {
                common::say!("train sweep: trial {} pruned: {why}", r.number);
                r.stop(Ending::Pruned(why));
            }
        }
        Ok(())
    }

    /// Records how a trial ended: reads what it left, has `outcome` judge
    /// (`allocator_reruns`: its earlier runs re-run for a broken allocator),
    /// and records it in the journal.
    fn finish(
        &mut self,
        r: Running,
        status: ExitStatus,
        allocator_reruns: usize,
    ) -> anyhow::Result<()> {
        let seconds = (r.started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        let full = full_disk(&self.dir);
        let name = self.space.metric.name.to_string();
        let (verdict, mut attrs) = match r.proc {
            Proc::Train(_) => self.judge_train(
                &r.dir,
                r.ending.as_ref().map(|(e, _)| e),
                status,
                full.as_deref(),
                allocator_reruns,
            ),
            Proc::Program(p) => {
                let ended = p.leg.end(status);
                let summary = program_summary(&p.cwd, &p.env_said, &ended, seconds);
                let _ = common::files::write_yaml(&r.dir.run().summary(), &summary);
                let verdict = outcome::judge_program(&ProgramEnd {
                    summary: &summary,
                    summary_last: self.space.metric.summary_last,
                    wandb_value: ended.wandb_summary,
                    metric: &name,
                    // Shared while it ran: at its start or at its end.
                    crowd: r.crowd.max(self.crowd(r.slot) + 1),
                    launch_blocking: r.launch_blocking,
                    disk_full: full.as_deref(),
                    allocator_reruns,
                });
                (verdict, leg_attrs(&ended.leg, r.reported.len()))
            }
        };
        attrs.push(("seconds", Value::from(seconds)));
        if verdict.for_the_disk {
            self.disk_full = full;
        }
        let crowded = verdict.attrs.iter().any(|(k, v)| {
            *k == "rerun"
                && v.as_str()
                    .is_some_and(|w| w.starts_with(outcome::RERUN_CROWDED))
        });
        if crowded {
            self.close_slot(r.slot);
        }
        attrs.extend(verdict.attrs.iter().cloned());
        for (k, v) in &attrs {
            self.journal.set_user_attr(r.id, k, v)?;
        }
        common::say!("train sweep: trial {} {}", r.number, verdict.word(&name));
        self.journal.finish_trial(r.id, verdict.outcome)
    }

    /// A `train` trial: its summary.yaml and metrics.csv.
    fn judge_train(
        &self,
        dir: &TrialDir,
        ending: Option<&Ending>,
        status: ExitStatus,
        full: Option<&str>,
        allocator_reruns: usize,
    ) -> (outcome::Verdict, Vec<(&'static str, Value)>) {
        let run = dir.run();
        let summary = std::fs::read_to_string(run.summary())
            .ok()
            .and_then(|t| common::wire::parse::<TrainSummary>(run_dir::SUMMARY, &t).ok());
        let rows = std::fs::read_to_string(run.metrics())
            .ok()
            .and_then(|t| EpochRow::read_all(run_dir::METRICS, &t).ok())
            .unwrap_or_default();
        let metric = &self.space.metric;
        let mut attrs: Vec<(&str, Value)> = vec![("epochs", Value::from(rows.len() as u64))];
        if let Some(peak) = summary.as_ref().and_then(|s| s.peak_memory.allocated_mib) {
            attrs.push(("peak_memory_mib", Value::from(peak.round())));
        }
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|row| metric.name.value_in(row))
            .collect();
        let name = metric.name.to_string();
        let (tail, task) = (log_tail(&dir.log()), crate::slurm::task_from_env());
        let verdict = outcome::judge(&Ended {
            summary: summary.as_ref(),
            values: &values,
            metric: &name,
            goal: metric.goal,
            ending,
            signal: status.signal(),
            code: status.code(),
            log_tail: &tail,
            trial_timeout_s: self.settings.trial_timeout_s,
            slurm_task: task.as_deref(),
            disk_full: full,
            allocator_reruns,
        });
        (verdict, attrs)
    }
}

/// A program trial's summary.yaml, from its one leg.
fn program_summary(
    cwd: &std::path::Path,
    env_said: &[String],
    ended: &supervise::leg::Ended,
    seconds: f64,
) -> ProgramSummary {
    ProgramSummary {
        schema: ProgramSummary::SCHEMA.into(),
        status: ended.leg.status,
        class: ended.leg.class,
        evidence: ended.leg.evidence.clone(),
        advice: ended.leg.advice.clone(),
        cwd: cwd.display().to_string(),
        env_set: env_said.to_vec(),
        best: ended.best.clone(),
        last: ended.last.clone(),
        seconds,
        legs: vec![ended.leg.clone()],
    }
}

/// The journal attributes of a program trial's leg: its reports, peaks,
/// advice and exit.
fn leg_attrs(leg: &ProgramLeg, epochs: usize) -> Vec<(&'static str, Value)> {
    let mut attrs: Vec<(&str, Value)> = vec![
        ("epochs", Value::from(epochs as u64)),
        ("reports", Value::from(leg.reports)),
    ];
    if let Some(m) = leg.peak.host_pss_mib {
        attrs.push(("peak_host_pss_mib", Value::from(m)));
    }
    if let Some(m) = leg.peak.gpu_mib {
        attrs.push(("peak_gpu_mib", Value::from(m)));
    }
    if let Some(a) = &leg.advice {
        attrs.push(("advice", Value::from(a.clone())));
    }
    if leg.status == ProgramStatus::Failed {
        attrs.push(("exit", Value::from(exit_words(leg))));
    }
    attrs
}

/// "exit 1", "signal 9".
fn exit_words(leg: &ProgramLeg) -> String {
    match (leg.exit_code, leg.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    }
}
