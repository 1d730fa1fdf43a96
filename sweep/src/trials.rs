//! The driver's running trials: a child `train` (a trial of our model) or
//! a program trial's supervised leg, both run by supervise's one child
//! module (own process group, keeper, output read as it comes). Each look
//! reads their new metric values into the storage (and the pruner), ends
//! those past their time, and records how each one that is gone ended
//! (`outcome` decides). The steps take the driver's parts as arguments.

use crate::context::Sweep;
use crate::history::Digest;
use crate::journal::{Study, TrialId};
use crate::layout::full_disk;
use crate::memory_model::RAN_OUT_LEGS;
use crate::outcome::{self, Ended, Ending, ProgramEnd};
use crate::pruner::{Decision, Kept, Pruner};
use crate::slots::Slots;
use crate::storage::Storage;
use common::wire::failure::Class;
use common::wire::program::{ProgramLeg, ProgramStatus, ProgramSummary};
use common::wire::run_dir::{self, TrialDir};
use common::wire::train::{EpochRow, TrainSummary};
use common::wire::Versioned;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use supervise::child::Child;
use supervise::verdict::Stop;

/// How long a trial's process group gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(20);
/// How long a stopped trial gets to write its summary before SIGKILL (a
/// step on a GPU can take seconds); one past its timeout has had its time.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

/// What runs a trial.
pub(crate) enum Proc {
    Train(Box<Child>),
    Program(Box<crate::program::Started>),
    /// A program trial whose last attempt has ended (`attempts`), on its
    /// way to be recorded.
    Ended(Box<crate::attempts::Done>),
}

pub(crate) struct Running {
    pub number: u64,
    pub id: TrialId,
    pub proc: Proc,
    pub slot: usize,
    pub dir: TrialDir,
    pub started: Instant,
    /// When its attempt started (`--trial-timeout` is each attempt's).
    pub attempt_started: Instant,
    /// Its earlier attempts' legs (auto_fix), oldest first.
    pub earlier: Vec<ProgramLeg>,
    pub reported: BTreeMap<u64, f64>,
    pub ending: Option<Ending>,
    /// Trials sharing its slot's device (itself included) when it started.
    pub crowd: usize,
    /// It runs with CUDA_LAUNCH_BLOCKING=1 (a device-side assert's rerun).
    pub launch_blocking: bool,
    /// The high end of its predicted peak as it started (packing keeps
    /// room for it); None: not predicted.
    pub predicted_mib: Option<f64>,
    /// Attributes known as it started, recorded with its end.
    pub start_attrs: Vec<(&'static str, Value)>,
    /// Its earlier attempts that ran out of memory (auto_fix), each with
    /// the values it ran and its peaks: the memory model learns from them
    /// (`memory_model::learn`).
    pub ran_out_legs: Vec<Value>,
}

impl Running {
    /// Ends it for `why` (the first reason is the one recorded): SIGTERM to
    /// its process group now, SIGKILL after the grace.
    pub fn stop(&mut self, why: Ending) {
        if self.ending.is_some() {
            return;
        }
        let grace = if why == Ending::Timeout {
            TIMEOUT_GRACE
        } else {
            GRACE
        };
        match &mut self.proc {
            Proc::Train(c) => c.terminate(grace),
            Proc::Program(p) => p.leg.stop_within(
                match &why {
                    Ending::Pruned(w) => Stop::Pruned(w.clone()),
                    Ending::Timeout => Stop::Timeout {
                        limit_s: self.attempt_started.elapsed().as_secs_f64(),
                    },
                    Ending::Interrupted => Stop::Interrupted("the sweep was stopped".into()),
                },
                grace,
            ),
            Proc::Ended(_) => {}
        }
        self.ending = Some(why);
    }

    /// Its exit status once it has ended (SIGKILL past its grace).
    fn tick(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match &mut self.proc {
            Proc::Train(c) => c.try_wait(),
            Proc::Program(p) => p.leg.tick(),
            Proc::Ended(_) => Ok(None),
        }
    }

    /// When the driver must look at it though nothing rang: its grace's
    /// end, or its timeout.
    pub fn deadline(&self, timeout_s: Option<f64>) -> Option<Instant> {
        let grace = match &self.proc {
            Proc::Train(c) => c.deadline(),
            Proc::Program(p) if p.leg.stopping().is_none() => p.leg.hang_deadline(),
            Proc::Program(p) => p.leg.deadline(),
            Proc::Ended(_) => None,
        };
        let timeout = timeout_s
            .filter(|_| self.ending.is_none())
            .map(|s| self.attempt_started + Duration::from_secs_f64(s));
        grace.into_iter().chain(timeout).min()
    }

    /// Its process tree's host memory peak so far (a program trial's).
    pub fn host_peak_mib(&self) -> Option<f64> {
        match &self.proc {
            Proc::Program(p) => p.leg.host_peak_mib(),
            Proc::Train(_) | Proc::Ended(_) => None,
        }
    }

    /// Its root process, while it runs (its tree's GPU memory is read by
    /// these pids).
    pub fn pid(&self) -> Option<u32> {
        match &self.proc {
            Proc::Program(p) => Some(p.leg.pid()),
            Proc::Train(c) => Some(c.pid()),
            Proc::Ended(_) => None,
        }
    }

    /// Its process tree's GPU memory peak so far on each GPU it was given
    /// (the most on one: a job of ranks holds about that on each), a
    /// program trial's, where NVML measured it.
    pub fn gpu_peak_mib(&self) -> Option<f64> {
        match &self.proc {
            Proc::Program(p) => p.leg.gpu_device_peak_mib(),
            Proc::Train(_) | Proc::Ended(_) => None,
        }
    }

    /// The objective's new values by step: train's metrics.csv, or what the
    /// program's leg read since the last look.
    fn new_values(&mut self, metric: &common::wire::metric::Metric) -> Vec<(u64, f64)> {
        match &mut self.proc {
            Proc::Train(c) => {
                // Its lines are only logged; they wake the driver.
                c.poll();
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
            Proc::Ended(_) => Vec::new(),
        }
    }
}

/// What `watch` needs besides the trials: the sweep, its storage, the
/// pruner, the slots (closed for crowding), the study's digest.
pub(crate) struct Look<'a> {
    pub sweep: &'a Sweep,
    pub storage: &'a dyn Storage,
    pub pruner: Option<&'a dyn Pruner>,
    pub slots: &'a mut Slots,
    pub digest: &'a RefCell<Digest>,
    /// What the pruner keeps of the finished trials between looks.
    pub kept: &'a RefCell<Kept>,
}

impl Look<'_> {
    /// One look at each running trial: new values into the storage (and
    /// the pruner), the timeout, and its end. Returns why the sweep must
    /// stop for its disk, if a trial failed on a full one.
    pub fn watch(
        &mut self,
        trials: &mut Vec<Running>,
        study: &Study,
    ) -> anyhow::Result<Option<String>> {
        let mut disk_full = None;
        let mut i = 0;
        while i < trials.len() {
            self.report_values(&mut trials[i], study)?;
            let r = &mut trials[i];
            if let (None, Some(limit)) = (&r.ending, self.sweep.settings.trial_timeout_s) {
                if r.attempt_started.elapsed().as_secs_f64() > limit {
                    r.stop(Ending::Timeout);
                }
            }
            if let (None, Proc::Program(p)) = (&r.ending, &mut r.proc) {
                if let Some(said) = p.leg.stop_if_hung() {
                    common::say!(
                        "train sweep: trial {}: {said}: ending it, SIGTERM to all its processes",
                        r.number
                    );
                }
            }
            match r.tick()? {
                None => i += 1,
                Some(status) => {
                    let r = trials.remove(i);
                    let busy: Vec<usize> = trials.iter().map(|t| t.slot).collect();
                    let (r, again) = self.end_attempt(r, status, &busy)?;
                    if again {
                        trials.insert(i, r);
                        i += 1;
                        continue;
                    }
                    let mut digest = self.digest.borrow_mut();
                    let reruns = digest.reruns_for(study, r.number, outcome::RERUN_ALLOCATOR);
                    let crowded_before =
                        digest.reruns_for(study, r.number, outcome::RERUN_CROWDED) > 0;
                    drop(digest);
                    if let Some(why) = self.finish(r, status, reruns, crowded_before, &busy)? {
                        disk_full = Some(why);
                    }
                }
            }
        }
        Ok(disk_full)
    }

    fn report_values(&self, r: &mut Running, study: &Study) -> anyhow::Result<()> {
        let metric = &self.sweep.space.metric;
        let new: Vec<(u64, f64)> = r
            .new_values(&metric.name)
            .into_iter()
            .filter(|(step, v)| v.is_finite() && r.reported.get(step) != Some(v))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        // The values of one look: one write, one fsync.
        self.storage.report(r.id, &new)?;
        r.reported.extend(new);
        if let (None, Some(p)) = (&r.ending, self.pruner) {
            let kept = &mut self.kept.borrow_mut();
            let decision = p.decide_kept(&r.reported, &study.trials, r.number, kept, metric.goal);
            if let Decision::Prune(why) = decision {
                common::say!("train sweep: trial {} pruned: {why}", r.number);
                r.stop(Ending::Pruned(why));
            }
        }
        Ok(())
    }

    /// Records how a trial ended: reads what it left, has `outcome` judge
    /// (`allocator_reruns`: its earlier runs re-run for a broken allocator),
    /// and records it, its attributes and its end in one write. `busy`: the
    /// slots of the trials still running. Returns the full disk's reason
    /// when the failure was the disk's.
    fn finish(
        &mut self,
        r: Running,
        status: ExitStatus,
        allocator_reruns: usize,
        crowded_before: bool,
        busy: &[usize],
    ) -> anyhow::Result<Option<String>> {
        let seconds = (r.started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        let sweep = self.sweep;
        let full = full_disk(&sweep.dir);
        let name = sweep.space.metric.name.to_string();
        // end_attempt ends a program's leg first; this is for safety.
        let r = match r.proc {
            Proc::Program(p) => Running {
                proc: Proc::Ended(Box::new(crate::attempts::Done::without_fixes(*p, status))),
                ..r
            },
            proc => Running { proc, ..r },
        };
        let (verdict, mut attrs) = if let Proc::Ended(d) = &r.proc {
            self.judge_done(&r, d, seconds, full.as_deref(), allocator_reruns, busy)
        } else {
            judge_train(
                sweep,
                &r.dir,
                r.ending.as_ref(),
                status,
                full.as_deref(),
                allocator_reruns,
            )
        };
        attrs.push(("seconds", Value::from(seconds)));
        attrs.extend(r.start_attrs.iter().cloned());
        if !r.ran_out_legs.is_empty() {
            attrs.push((RAN_OUT_LEGS, Value::from(r.ran_out_legs.clone())));
        }
        let crowded = verdict.attrs.iter().any(|(k, v)| {
            *k == "rerun"
                && v.as_str()
                    .is_some_and(|w| w.starts_with(outcome::RERUN_CROWDED))
        });
        if crowded {
            self.slots.close(r.slot);
        }
        // A crowded trial's re-run that ran out of memory alone too was too
        // big, not crowded out: the slot it cost comes back.
        let oom = verdict.attrs.iter().any(|(k, v)| {
            *k == "error_class"
                && [Class::OutOfMemory, Class::Killed]
                    .iter()
                    .any(|c| v.as_str() == Some(c.as_str()))
        });
        let alone = r.crowd.max(self.slots.crowd(r.slot, busy) + 1) == 1;
        if crowded_before && oom && alone && self.slots.reopen() {
            common::say!(
                "train sweep: placement: trial {} failed alone too, as it did beside another trial: it is too big for this machine, not crowded out; the trial at once it cost is back",
                r.number
            );
        }
        attrs.extend(verdict.attrs.iter().cloned());
        let attrs: Vec<(String, Value)> = attrs.into_iter().map(|(k, v)| (k.into(), v)).collect();
        common::say!("train sweep: trial {} {}", r.number, verdict.word(&name));
        self.storage.finish(r.id, &attrs, verdict.outcome)?;
        Ok(if verdict.for_the_disk { full } else { None })
    }

    /// A program trial's end: its summary.yaml written, judged, and its
    /// attributes.
    fn judge_done(
        &self,
        r: &Running,
        d: &crate::attempts::Done,
        seconds: f64,
        full: Option<&str>,
        allocator_reruns: usize,
        busy: &[usize],
    ) -> (outcome::Verdict, Vec<(&'static str, Value)>) {
        let sweep = self.sweep;
        let summary = program_summary(d, &r.earlier, seconds);
        let _ = common::files::write_yaml(&r.dir.run().summary(), &summary);
        let verdict = outcome::judge_program(&ProgramEnd {
            summary: &summary,
            summary_last: sweep.space.metric.summary_last,
            wandb_value: d.ended.wandb_summary,
            metric: &sweep.space.metric.name.to_string(),
            // Shared while it ran: at its start or at its end.
            crowd: r.crowd.max(self.slots.crowd(r.slot, busy) + 1),
            launch_blocking: r.launch_blocking,
            disk_full: full,
            allocator_reruns,
        });
        let mut attrs = leg_attrs(&d.ended.leg, r.reported.len());
        attrs.extend(crate::attempts::attrs(d, &r.earlier));
        (verdict, attrs)
    }
}

/// A `train` trial: its summary.yaml and metrics.csv.
fn judge_train(
    sweep: &Sweep,
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
    let metric = &sweep.space.metric;
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
        trial_timeout_s: sweep.settings.trial_timeout_s,
        slurm_task: task.as_deref(),
        disk_full: full,
        allocator_reruns,
    });
    (verdict, attrs)
}

/// The last lines of a trial's log, for a trial that left no summary.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "its log is empty".into()
    } else {
        format!("last lines of {}: {}", run_dir::TRIAL_LOG, tail.join(" | "))
    }
}

/// A program trial's summary.yaml: its earlier attempts' legs, then the
/// last one's.
fn program_summary(
    d: &crate::attempts::Done,
    earlier: &[ProgramLeg],
    seconds: f64,
) -> ProgramSummary {
    let ended = &d.ended;
    let mut legs = earlier.to_vec();
    legs.push(ended.leg.clone());
    ProgramSummary {
        schema: ProgramSummary::SCHEMA.into(),
        status: ended.leg.status,
        class: ended.leg.class,
        evidence: ended.leg.evidence.clone(),
        advice: ended.leg.advice.clone(),
        cwd: d.cwd.display().to_string(),
        env_set: d.env_said.clone(),
        metric: Some(ended.metric.clone()),
        best: ended.best.clone(),
        last: ended.last.clone(),
        seconds,
        legs,
        auto_fix: d.account.clone(),
        ranks: supervise::launcher::account(&d.attempt.command, &|k| std::env::var(k).ok()),
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
    if let Some(m) = leg.peak.host_anon_mib {
        attrs.push(("peak_host_anon_mib", Value::from(m)));
    }
    if let Some(m) = leg.peak.address_limit_mib {
        attrs.push(("address_limit_mib", Value::from(m)));
    }
    if let Some(c) = leg.cpu_cores {
        attrs.push(("cpu_cores", Value::from(c)));
    }
    // What it needs of each GPU: placement's and the memory model's unit.
    if let Some(m) = leg.peak.gpu_each_mib() {
        attrs.push(("peak_gpu_mib", Value::from(m)));
    }
    if let (Some(m), true) = (leg.peak.gpu_mib, leg.peak.gpu_by_device_mib.len() > 1) {
        attrs.push(("peak_gpu_total_mib", Value::from(m)));
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
