//! One leg of a supervised run: the command (`child`), its memory sampled
//! (`memory`), the reports written to the run's metrics.csv as they are
//! read, the objective's best and last values, and its end said in words
//! (`verdict`). `train run` runs one leg per config of its chain; a program
//! sweep runs one per trial. Never blocking: its caller waits on the bell
//! given in the spec, and looks again at `deadline` at the latest.

use crate::child::{Child, Spec};
use crate::memory::{self, Sampler};
use crate::oom_kills;
use crate::readers::{Reader, Report};
use crate::verdict::{self, End, Stop};
use common::wire::failure::Class;
use common::wire::program::{
    ProgramLeg, ProgramMetric, ProgramPeak, ProgramStatus, ProgramValue, ReportRow,
};
use common::wire::run_dir::RunDir;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// How often memory is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// The metrics a run is judged by when none is named, most preferred
/// first: the validation loss each common trainer prints. Hugging Face's
/// Trainer `eval_loss`; Lightning's and Keras's `val_loss` (the epoch lines'
/// `Val Loss` too); fastai's `valid_loss`; `validation_loss`; and the
/// W&B-style keys `eval/loss` and `val/loss`.
pub const FOUND_METRICS: [&str; 6] = [
    "eval_loss",
    "val_loss",
    "valid_loss",
    "validation_loss",
    "eval/loss",
    "val/loss",
];

/// The most metric names a leg lists as seen (a script may log one per
/// layer).
const SEEN_AT_MOST: usize = 50;

/// The metric a run is judged by.
#[derive(Clone, Debug)]
pub struct Objective {
    /// The metric named; None: the first of [`FOUND_METRICS`] the run
    /// reports.
    pub metric: Option<String>,
    pub maximize: bool,
}

/// One candidate objective's reports: its best, last, first non-finite
/// value and when each came.
#[derive(Debug)]
struct Track {
    name: String,
    reported: bool,
    best: Option<ProgramValue>,
    last: Option<ProgramValue>,
    non_finite: Option<String>,
    /// Seconds since the start and step of each report.
    marks: Vec<(f64, u64)>,
}

impl Track {
    fn new(name: &str) -> Track {
        Track {
            name: name.to_string(),
            reported: false,
            best: None,
            last: None,
            non_finite: None,
            marks: Vec::new(),
        }
    }

    fn add(&mut self, r: &Report, seconds: f64, maximize: bool) {
        self.reported = true;
        self.marks.push((seconds, r.step));
        if !r.value.is_finite() {
            self.non_finite
                .get_or_insert_with(|| format!("{} {} at step {}", self.name, r.value, r.step));
            return;
        }
        let value = ProgramValue {
            metric: self.name.clone(),
            value: r.value,
            step: r.step,
        };
        let better = self.best.as_ref().is_none_or(|b| {
            if maximize {
                r.value > b.value
            } else {
                r.value < b.value
            }
        });
        if better {
            self.best = Some(value.clone());
        }
        self.last = Some(value);
    }
}

/// A running leg.
pub struct Leg {
    child: Child,
    sampler: Option<Sampler>,
    sampler_note: Option<String>,
    rows: Option<File>,
    records: RunDir,
    number: u32,
    objective: Objective,
    config: Option<String>,
    command: Vec<String>,
    /// The metric named, or each of those looked for, in preference order.
    tracks: Vec<Track>,
    /// The metrics reported, in the order first seen.
    seen: Vec<String>,
    reports: u64,
    /// Seconds to its first report of any metric.
    first_report: Option<f64>,
    stop: Option<Stop>,
    grace: Duration,
    /// Its memory cgroup's OOM-kill count, read at its start.
    oom_kills: Option<oom_kills::Counter>,
}

/// A leg's end: its record, and the parts the caller decides with.
pub struct Ended {
    pub leg: ProgramLeg,
    pub verdict: verdict::Verdict,
    /// The objective's best and last reports.
    pub best: Option<ProgramValue>,
    pub last: Option<ProgramValue>,
    /// Which metric they are of, and the metrics reported.
    pub metric: ProgramMetric,
    /// The objective in the run summary a W&B script printed.
    pub wandb_summary: Option<f64>,
}

impl Ended {
    /// A sweep's trial: its advice adds what a sweep can change besides
    /// the program (fewer trials at once), where that helps.
    pub fn in_a_sweep(mut self) -> Ended {
        let more = self
            .verdict
            .known
            .and_then(|id| diagnose::failures::KNOWN.iter().find(|k| k.id == id))
            .map_or("", |k| k.sweep_fix);
        if let (false, Some(a)) = (more.is_empty(), self.leg.advice.as_mut()) {
            *a = format!("{a}, {more}");
            self.verdict.advice = Some(a.clone());
        }
        self
    }
}

impl Leg {
    /// Starts the command of leg `number` (from 1), its records in `records`
    /// (metrics.csv appended to, memory.csv per leg).
    pub fn start(
        spec: &Spec,
        reader: Reader,
        records: &RunDir,
        number: u32,
        objective: Objective,
        config: Option<String>,
    ) -> anyhow::Result<Leg> {
        let child = Child::spawn(spec, Some(reader))?;
        let oom_kills = oom_kills::Counter::of(child.pid());
        let memory_csv = records.memory_csv_of(number);
        let by_rank = crate::launcher::of(&spec.argv).is_some();
        let (sampler, sampler_note) =
            match Sampler::start_for(child.lineage(), &memory_csv, SAMPLE_EVERY, by_rank) {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(format!("memory not sampled: {e:#}"))),
            };
        let metrics = records.metrics();
        let fresh = !metrics.exists();
        let mut rows = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&metrics)
            .ok();
        if let (true, Some(f)) = (fresh, rows.as_mut()) {
            let _ = f.write_all(ReportRow::HEADER.as_bytes());
        }
        Ok(Leg {
            child,
            sampler,
            sampler_note,
            rows,
            records: records.clone(),
            number,
            config,
            command: spec.argv.clone(),
            tracks: match &objective.metric {
                Some(m) => vec![Track::new(m)],
                None => FOUND_METRICS.iter().map(|m| Track::new(m)).collect(),
            },
            objective,
            seen: Vec::new(),
            reports: 0,
            first_report: None,
            stop: None,
            grace: spec.grace,
            oom_kills,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// When its command started.
    pub fn started(&self) -> Instant {
        self.child.started
    }

    pub fn seconds(&self) -> f64 {
        self.child.started.elapsed().as_secs_f64()
    }

    /// The reports since the last call, each also written to metrics.csv;
    /// the objective's best and last follow them.
    pub fn poll(&mut self) -> Vec<Report> {
        let reports = self.child.poll();
        let seconds = self.seconds();
        if !reports.is_empty() {
            self.first_report.get_or_insert(seconds);
        }
        for r in &reports {
            self.reports += 1;
            let name = r.metric.to_string();
            if let Some(f) = self.rows.as_mut() {
                let row = ReportRow {
                    seconds,
                    leg: self.number,
                    metric: name.clone(),
                    step: r.step,
                    value: r.value,
                };
                let _ = f.write_all(row.to_csv_line().as_bytes());
            }
            if self.seen.len() < SEEN_AT_MOST && !self.seen.contains(&name) {
                self.seen.push(name.clone());
            }
            if let Some(t) = self.tracks.iter_mut().find(|t| t.name == name) {
                t.add(r, seconds, self.objective.maximize);
            }
        }
        reports
    }

    /// The host memory peak so far (MiB of PSS), for placement.
    pub fn host_peak_mib(&self) -> Option<f64> {
        self.sampler.as_ref().map(|s| s.peaks().host_pss_mib)
    }

    /// The most it held on one GPU so far (MiB): a job of ranks given a
    /// group of GPUs needs this much of each; None where not measured.
    pub fn gpu_device_peak_mib(&self) -> Option<f64> {
        let peaks = self.sampler.as_ref()?.peaks();
        let most = peaks.gpu_devices_mib.values().copied().reduce(f64::max);
        most.or(peaks.gpu_mib)
    }

    /// Ends the command for `why`: SIGTERM to its group now, SIGKILL after
    /// the grace period (`tick`). The first reason is the one recorded.
    pub fn stop(&mut self, why: Stop) {
        self.stop_within(why, self.grace);
    }

    /// `stop` with its own grace period.
    pub fn stop_within(&mut self, why: Stop, grace: Duration) {
        if self.stop.is_none() {
            self.child.terminate(grace);
            self.stop = Some(why);
        }
    }

    /// When its caller must look again though the bell did not ring (a
    /// grace period's end).
    pub fn deadline(&self) -> Option<Instant> {
        self.child.deadline()
    }

    /// Watch for a failure followed by no progress for `grace`.
    pub fn watch_hangs(&mut self, grace: Duration) {
        self.child.watch_hangs(grace);
    }

    /// A failure then no progress for the grace: asks it to stop (once),
    /// and says so; the caller then waits on `deadline` as for any stop.
    pub fn stop_if_hung(&mut self) -> Option<String> {
        if self.stop.is_some() {
            return None;
        }
        let (f, grace) = self.child.hung()?;
        let said = format!(
            "{} ({}), then no output for {:.0} s: the job hangs",
            crate::launcher::in_words(&f.line),
            f.class.as_str(),
            grace.as_secs_f64()
        );
        self.stop(Stop::Hang {
            grace_s: grace.as_secs_f64(),
        });
        Some(said)
    }

    /// When it counts as hung if nothing comes before (with `watch_hangs`).
    pub fn hang_deadline(&self) -> Option<Instant> {
        self.child.hang_deadline()
    }

    /// A signal to its process group (SIGKILL past a caller's own grace).
    pub fn signal(&self, sig: i32) {
        self.child.signal(sig);
    }

    pub fn stopping(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// Escalates a stop past its grace, and returns the exit status once
    /// the command has ended.
    pub fn tick(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// After `tick` gave its status: the last reports, the last sample, the
    /// plot, the verdict.
    pub fn end(mut self, status: ExitStatus) -> Ended {
        use std::os::unix::process::ExitStatusExt;
        self.poll();
        let seconds = self.seconds();
        // Its leftover workers, if any, go with it.
        if self.child.group_alive() {
            self.child.signal(libc::SIGKILL);
        }
        let peaks = self.sampler.take().map(Sampler::finish);
        // The objective: the metric named, else the first found.
        let chosen = self.tracks.iter().position(|t| t.reported).unwrap_or(0);
        let mut track = self.tracks.swap_remove(chosen);
        let metric = ProgramMetric {
            name: (self.objective.metric.is_some() || track.reported).then(|| track.name.clone()),
            how: if self.objective.metric.is_some() {
                "given"
            } else {
                "found"
            }
            .into(),
            reported: track.reported,
            seen: std::mem::take(&mut self.seen),
        };
        let memory_csv = self.records.memory_csv_of(self.number);
        // Its start-up ends at its first line or report, not at the first
        // report of the objective (a Trainer's may come at its end).
        let first_line = self.child.first_line().map(|at| {
            at.saturating_duration_since(self.child.started)
                .as_secs_f64()
        });
        let startup = [first_line, self.first_report]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let _ = memory::plot(
            &memory_csv,
            &track.marks,
            startup,
            &track.name,
            &self.records.memory_png_of(self.number),
        );
        let tail = self.child.tail();
        let oom_killed = self.oom_kills.as_ref().and_then(oom_kills::Counter::rose);
        let verdict = verdict::judge(&End {
            code: status.code(),
            signal: status.signal(),
            stop: self.stop.as_ref(),
            tail: &tail,
            non_finite: track.non_finite.as_deref(),
            reports: self.reports as usize,
            oom_killed: oom_killed.as_deref(),
        });
        let mut peak = peak_of(peaks.as_ref(), &self.child, &self.sampler_note);
        let mut verdict = verdict;
        peak.address_limit_mib = own_limit(&mut verdict, &peak, oom_killed.as_deref());
        let leg = ProgramLeg {
            config: self.config.clone(),
            command: self.command.clone(),
            status: status_of(&verdict),
            class: verdict.class,
            evidence: verdict.evidence.clone(),
            advice: verdict.advice.clone(),
            exit_code: status.code(),
            signal: status.signal(),
            seconds: round1(seconds),
            cpu_cores: self
                .child
                .cpu_seconds()
                .filter(|_| seconds > 0.0)
                .map(|c| (c / seconds * 100.0).round() / 100.0),
            reports: self.reports,
            peak,
            changed: vec![],
            resumed_from: None,
        };
        Ended {
            wandb_summary: self
                .child
                .reader()
                .and_then(|r| r.wandb_summary(&track.name)),
            leg,
            verdict,
            best: track.best.take(),
            last: track.last.take(),
            metric,
        }
    }
}

/// A leg's peaks from its samples; the kernel's largest resident set is a
/// floor under the sampled one (a short command may end between samples).
fn peak_of(peaks: Option<&memory::Peaks>, child: &Child, note: &Option<String>) -> ProgramPeak {
    let floor = child.max_rss_mib().unwrap_or(0.0);
    match peaks {
        Some(p) => ProgramPeak {
            host_pss_mib: (p.samples > 0).then(|| round1(p.host_pss_mib)),
            host_rss_mib: Some(round1(p.host_rss_mib.max(floor))),
            host_anon_mib: (p.samples > 0).then(|| round1(p.host_anon_mib)),
            gpu_mib: p.gpu_mib.map(round1),
            gpu_note: p.gpu_note.clone(),
            address_limit_mib: p.address_limit_mib.map(round1),
            ranks_host_pss_mib: p.ranks.iter().map(|(r, m)| (*r, round1(*m))).collect(),
            gpu_by_device_mib: match p.gpu_devices_mib.len() {
                0 | 1 => Default::default(),
                _ => p
                    .gpu_devices_mib
                    .iter()
                    .map(|(d, m)| (*d, round1(*m)))
                    .collect(),
            },
        },
        None => ProgramPeak {
            host_rss_mib: child.max_rss_mib().map(round1),
            gpu_note: note.clone(),
            ..ProgramPeak::default()
        },
    }
}

/// The address-space limit of its own a host out-of-memory met (said in
/// the evidence), or None: the limit, not the host, ran out.
fn own_limit(
    v: &mut verdict::Verdict,
    peak: &ProgramPeak,
    oom_killed: Option<&str>,
) -> Option<f64> {
    // Only the host's allocator meets an address-space limit.
    let host = v.known == Some("host-out-of-memory");
    let limit = peak
        .address_limit_mib
        .filter(|_| host && oom_killed.is_none())?;
    v.evidence.push_str(&format!(
        " (it ran under its own address-space limit, RLIMIT_AS {limit:.0} MiB: the limit, not the host, ran out)"
    ));
    Some(limit)
}

fn status_of(v: &verdict::Verdict) -> ProgramStatus {
    match v.status {
        verdict::Status::Finished => ProgramStatus::Finished,
        verdict::Status::Failed => ProgramStatus::Failed,
        verdict::Status::Stopped => ProgramStatus::Stopped,
        verdict::Status::Pruned => ProgramStatus::Pruned,
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Whether a failure of this class is one a different config may avoid
/// (the fallback chain's cue).
pub fn config_caused(class: Option<Class>) -> bool {
    class.is_some_and(Class::config_caused)
}
