//! `verify-fixes -- CMD`: the gate for a command verify-fixes did not write
//! (`python main.py --config cfg.yaml`). cfgcheck's findings on the config
//! files the command names (an error fails the gate before the smoke), the
//! allocator setting it will run with, the GPU's state, then a short smoke
//! run (`smoke`) and what it showed: that it started and ran, which metric
//! a sweep will read and by which reader, and that it evaluated within the
//! smoke's time (`metric_check`), its measured peak and how many copies fit
//! at once (sweep's `--parallel auto` rule), and the disk room for its
//! output.

use crate::machine::Machine;
use crate::rows::{Check, Form, Status};
use crate::smoke::{self, Ran, Tally};
use common::config::Config;
use common::estimate::MIB;
use common::wire::program::{ProgramLeg, ProgramStatus};
use common::wire::run_dir::RunDir;
use common::wire::verify::{Smoke, SmokeMetric};
use diagnose::rules::{self, Target};
use std::path::{Path, PathBuf};
use sweep::placement::{self, Gpu, Measured, MEASURED_HEADROOM};

pub(crate) const FORM: Form = Form::Command;

/// The checks the smoke decides.
const SMOKE_IDS: [&str; 3] = ["started", "metric", "memory"];

pub struct Gate<'a> {
    pub argv: &'a [String],
    pub machine: Machine<'a>,
    pub target: Target<'a>,
    pub skip: &'a [String],
    /// The smoke's directory (created by the caller).
    pub dir: &'a Path,
    pub seconds: f64,
    /// Evaluations the smoke waits for.
    pub evaluations: u64,
    pub expect: Option<&'a str>,
    pub regex: Option<&'a str>,
}

impl Gate<'_> {
    /// Every check, and what the smoke saw when it ran.
    pub fn run(&self) -> (Vec<Check>, Option<Smoke>) {
        let (mut checks, env) = self.before_smoke();
        let not_run = if checks[0].status == Status::Fail {
            Some("not run: a config file in the command has an error (fix it first)")
        } else if SMOKE_IDS.iter().all(|id| self.skipped(id)) {
            Some("skipped on purpose (--skip)")
        } else {
            None
        };
        if let Some(why) = not_run {
            checks.extend(self.not_run(why));
            checks.push(self.unless_skipped("disk", || self.disk(None)));
            return (checks, None);
        }
        let ran = match self.smoke(env) {
            Ok(r) => r,
            Err(e) => {
                checks.push(FORM.row(
                    "started",
                    Status::Fail,
                    format!("{e:#}"),
                    Some("check the program's name and path (the command runs in the current directory)".into()),
                ));
                checks.extend(
                    self.not_run("the command did not start")
                        .into_iter()
                        .skip(1),
                );
                checks.push(self.unless_skipped("disk", || self.disk(None)));
                return (checks, None);
            }
        };
        let (memory, parallel) = self.memory(&ran);
        let peak = &ran.ended.leg.peak;
        // Where its tensors were: on the GPU when NVML measured some there.
        let held = match (peak.gpu_mib.filter(|g| *g > 0.0), peak.host_pss_mib) {
            (Some(g), _) => Some(Held::Gpu(g)),
            (None, Some(h)) if h > 0.0 => Some(Held::Host(h)),
            _ => None,
        };
        checks.push(self.unless_skipped("started", || self.started(&ran)));
        checks.push(self.unless_skipped("metric", || self.metric(&ran)));
        checks.push(self.unless_skipped("memory", || memory));
        checks.push(self.unless_skipped("disk", || self.disk(held)));
        let smoke = smoke_record(self, &ran, parallel);
        (checks, Some(smoke))
    }

    fn skipped(&self, id: &str) -> bool {
        self.skip.iter().any(|s| s == id)
    }

    /// The check `id` as `judge` finds, unless `--skip` left it out.
    fn unless_skipped(&self, id: &'static str, judge: impl FnOnce() -> Check) -> Check {
        if self.skipped(id) {
            FORM.skipped_on_purpose(id)
        } else {
            judge()
        }
    }

    /// The checks before the smoke (config, allocator, GPU state), and the
    /// variables to set for the smoke.
    fn before_smoke(&self) -> (Vec<Check>, Vec<(String, String)>) {
        let config = self.unless_skipped("config", || {
            crate::configs::config_check(self.argv, &self.target)
        });
        let (allocator, env) = self.allocator();
        let allocator = self.unless_skipped("allocator", || allocator);
        let gpu_state = self.unless_skipped("gpu-state", || {
            self.machine.gpu_state(FORM, &Default::default())
        });
        (vec![config, allocator, gpu_state], env)
    }

    /// The smoke's checks when it did not run, and `why`.
    fn not_run(&self, why: &str) -> Vec<Check> {
        SMOKE_IDS
            .iter()
            .map(|id| self.unless_skipped(id, || FORM.row(id, Status::Skip, why, None)))
            .collect()
    }

    /// The smoke run in the directory, its previous files gone, with `env`
    /// and `TRAINGUARD_METRICS_CSV` set.
    fn smoke(&self, mut env: Vec<(String, String)>) -> anyhow::Result<Ran> {
        let records = RunDir::new(self.dir);
        // A previous smoke's files in the same --out are replaced, not
        // appended to (the supervisor appends, for a chain's legs).
        for f in [
            records.output_log(),
            records.metrics(),
            records.own_metrics(),
            records.memory_csv(),
            records.memory_png(),
        ] {
            let _ = std::fs::remove_file(f);
        }
        env.push((
            "TRAINGUARD_METRICS_CSV".into(),
            records.own_metrics().display().to_string(),
        ));
        smoke::run(&smoke::Plan {
            argv: self.argv,
            env,
            dir: &records,
            seconds: self.seconds,
            evaluations: self.evaluations,
            expect: self.expect,
            regex: self.regex,
        })
    }

    /// The allocator setting the smoke (and `train run`, and a sweep's
    /// trials) runs with, and the variables to set for the smoke.
    fn allocator(&self) -> (Check, Vec<(String, String)>) {
        let id = "allocator";
        let fixes = supervise::env::fixes_for_command(self.machine.env, self.argv);
        let c = match rules::alloc_conf(&Config::default(), self.machine.env) {
            None => FORM.row(id, Status::Pass,
                format!(
                    "the smoke ran with {}; train run and train sweep set it too (run by hand: eval \"$(verify-fixes --print-env)\")",
                    fixes.said.join("; ")
                ),
                None,
            ),
            Some((var, value, _)) if rules::expandable_segments(&value) => FORM.row(id, Status::Pass,
                format!("{var}={value} (from the shell)"),
                None,
            ),
            Some((var, value, _)) => FORM.row(id, Status::Fail,
                format!("{var}={value} (from the shell) has no expandable_segments:True: fragmentation (\"reserved but unallocated\") can end a long run"),
                Some(format!("set {var}={}", rules::with_expandable(&value))),
            ),
        };
        (c, fixes.set)
    }

    fn started(&self, ran: &Ran) -> Check {
        let id = "started";
        let leg = &ran.ended.leg;
        let evaluations = ran.tally.evaluations(self.expect);
        let log = RunDir::new(self.dir).output_log();
        let ran_ok = ran.stopped.is_some() || leg.exit_code == Some(0);
        if !ran_ok {
            return FORM.row(
                id,
                Status::Fail,
                format!(
                    "{} after {:.1} s and {evaluations} evaluation(s)",
                    ran.ended.verdict.evidence, leg.seconds
                ),
                Some(
                    leg.advice
                        .clone()
                        .unwrap_or_else(|| format!("read {}", log.display())),
                ),
            );
        }
        let how = match &ran.stopped {
            Some(why) => why.words(),
            None => "it exited 0".to_string(),
        };
        let of = ran
            .tally
            .objective(self.expect)
            .map_or(String::new(), |m| format!(" of {m}"));
        FORM.row(
            id,
            Status::Pass,
            format!(
                "ran {:.1} s, {evaluations} evaluation(s){of} reported{}; {how}",
                leg.seconds,
                ran.tally.how_far()
            ),
            None,
        )
    }

    /// The measured peak and the copies that fit (the number `train sweep
    /// --parallel auto` would take): the check, and the number.
    fn memory(&self, ran: &Ran) -> (Check, Option<u32>) {
        let id = "memory";
        let leg = &ran.ended.leg;
        if !(ran.stopped.is_some() || leg.exit_code == Some(0)) {
            return (
                FORM.row(
                    id,
                    Status::Skip,
                    "not judged: the command failed (see the command check)",
                    None,
                ),
                None,
            );
        }
        let Some(host) = leg.peak.host_pss_mib else {
            return (
                FORM.row(
                    id,
                    Status::Warn,
                    format!(
                        "not measured: {}",
                        leg.peak.gpu_note.as_deref().unwrap_or("no sample")
                    ),
                    None,
                ),
                None,
            );
        };
        let mut fit = Fit::host(host, leg);
        self.fit_gpu(&mut fit, leg);
        fit.saw
            .push(format!("--parallel would take {}", fit.parallel));
        let saw = fit.saw.join("; ");
        let c = if fit.fails.is_empty() {
            FORM.row(id, Status::Pass, saw, None)
        } else {
            FORM.row(
                id,
                Status::Fail,
                format!("{}; {saw}", fit.fails.join("; ")),
                Some("a smaller batch or model, mixed precision or activation checkpointing; or free memory first".into()),
            )
        };
        (c, Some(fit.parallel))
    }

    /// The GPU's part of the memory check: the copies its free memory holds
    /// at the measured GPU peak, or why that was not measured.
    fn fit_gpu(&self, fit: &mut Fit, leg: &ProgramLeg) {
        let gpu = self.machine.gpu();
        match (gpu, gpu.and_then(|g| g.memory), leg.peak.gpu_mib) {
            (Some(g), Some(mem), Some(peak)) if peak > 0.0 => {
                let plan = placement::measured(&Measured {
                    peak_mib: leg.peak.host_pss_mib,
                    gpu_peak_mib: Some(peak),
                    copy_mib: leg.peak.host_anon_mib,
                    cores_busy: leg.cpu_cores,
                    host_mib: fit.available,
                    cores: fit.cores,
                    gpus: vec![Gpu {
                        index: g.index,
                        name: g.name.clone().unwrap_or_default(),
                        total_mib: mem.total_mib,
                        free_mib: mem.free_mib,
                    }],
                });
                let copies = (mem.free_mib as f64 / (peak * MEASURED_HEADROOM)).floor() as u32;
                if copies == 0 {
                    fit.fails.push(format!(
                        "one copy needs {:.0} MiB of GPU {}, {} MiB is free now",
                        peak * MEASURED_HEADROOM,
                        g.index,
                        mem.free_mib
                    ));
                }
                fit.parallel = fit.parallel.min(copies);
                fit.saw.push(format!(
                    "GPU peak {peak:.0} MiB (NVML); {}",
                    plan.why.join("; ")
                ));
            }
            _ => {
                let why = match (&leg.peak.gpu_note, gpu) {
                    (Some(note), _) => note.clone(),
                    (None, None) => self.machine.no_gpu_reason(),
                    (None, Some(_)) => "NVML attributed no memory to its processes".into(),
                };
                if self.machine.require_gpu {
                    fit.fails
                        .push(format!("GPU peak not measured: {why} (--require-gpu)"));
                }
                fit.saw.push(format!("GPU: {why}"));
            }
        }
    }

    /// The current directory (where the command runs, and writes unless it
    /// is told otherwise): writable, and room for two checkpoints (one
    /// written beside the last). What a checkpoint takes is not measured: it
    /// holds the model's and the optimizer's tensors, a part of what the
    /// process held at its peak, so twice that peak is an upper bound, said
    /// as one (a tiny model's is mostly torch's own libraries).
    fn disk(&self, held: Option<Held>) -> Check {
        let id = "disk";
        let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let probe = || -> std::io::Result<()> {
            let f = tempfile::NamedTempFile::new_in(&dir)?;
            std::io::Write::write_all(&mut f.as_file(), b"probe")?;
            f.as_file().sync_all()
        };
        if let Err(e) = probe() {
            return FORM.row(
                id,
                Status::Fail,
                format!(
                    "{}: the command's directory is not writable: {e}",
                    dir.display()
                ),
                Some("run it from a writable directory, or point its output elsewhere".into()),
            );
        }
        let Some(free) = common::host::free_bytes(&dir) else {
            return FORM.row(
                id,
                Status::Warn,
                format!("{}: writable; free space unknown", dir.display()),
                None,
            );
        };
        let free_mib = free / MIB;
        let Some(held) = held else {
            return FORM.row(id, Status::Pass, format!("{}: writable; {free_mib} MiB free (its output's size not measured: the smoke did not run)", dir.display()), None);
        };
        let (peak, what) = match held {
            Held::Gpu(g) => (
                g,
                "of GPU memory its processes held at their peak (the CUDA context included)",
            ),
            Held::Host(h) => (
                h,
                "of host memory it held at its peak (torch's own libraries included)",
            ),
        };
        let bound = (2.0 * peak).ceil() as u64;
        let saw = format!(
            "{}: writable; {free_mib} MiB free; two checkpoints (one written beside the last) take at most about {bound} MiB: an upper bound, twice the {peak:.0} MiB {what}; a checkpoint holds only the model's and the optimizer's tensors",
            dir.display()
        );
        if free_mib < bound {
            FORM.row(
                id,
                Status::Warn,
                format!("{saw}; less is free than that bound"),
                Some(
                    "free disk space, or point its output elsewhere, if its checkpoints are large"
                        .into(),
                ),
            )
        } else {
            FORM.row(id, Status::Pass, saw, None)
        }
    }
}

/// What the process held at its peak, MiB, where its tensors were.
#[derive(Clone, Copy)]
enum Held {
    Gpu(f64),
    Host(f64),
}

/// The memory check's findings so far: the copies that fit, what fails
/// it, what it saw; and the host it measured against.
struct Fit {
    parallel: u32,
    fails: Vec<String>,
    saw: Vec<String>,
    /// Host memory available now, MiB.
    available: f64,
    cores: usize,
}

impl Fit {
    /// The host's part: the copies its available memory and cores hold at
    /// the measured peak (`host`, MiB) of the smoke `leg`, each copy past
    /// the first adding its anonymous memory, each keeping the cores
    /// it kept busy.
    fn host(host: f64, leg: &ProgramLeg) -> Fit {
        let seconds = leg.seconds;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let available = sweep::measured::available_mib();
        let host_plan = placement::measured(&Measured {
            peak_mib: Some(host),
            gpu_peak_mib: None,
            copy_mib: leg.peak.host_anon_mib,
            cores_busy: leg.cpu_cores,
            host_mib: available,
            cores,
            gpus: Vec::new(),
        });
        let need = host * MEASURED_HEADROOM;
        let mut fails = Vec::new();
        if need > available {
            fails.push(format!(
                "one copy needs {need:.0} MiB of host memory, {available:.0} MiB is available now"
            ));
        }
        let saw = vec![
            format!(
                "peak {host:.0} MiB of host memory (PSS) in a {seconds:.1} s smoke (a full run's peak is at least this: the copies below are the most that fit)"
            ),
            format!("host: {}", host_plan.why.join("; ")),
        ];
        Fit {
            parallel: host_plan.slots.len() as u32,
            fails,
            saw,
            available,
            cores,
        }
    }
}

fn smoke_record(g: &Gate, ran: &Ran, parallel: Option<u32>) -> Smoke {
    let t: &Tally = &ran.tally;
    let leg = &ran.ended.leg;
    Smoke {
        command: g.argv.to_vec(),
        dir: Some(g.dir.display().to_string()),
        seconds: leg.seconds,
        epoch_metric: t.objective(g.expect).map(String::from),
        epochs: t.evaluations(g.expect),
        ended: match (&ran.stopped, leg.status) {
            (Some(why), _) => why.words(),
            (None, ProgramStatus::Finished) => "it exited 0".into(),
            (None, _) => ran.ended.verdict.evidence.clone(),
        },
        metrics: t
            .order
            .iter()
            .map(|m| {
                let s = &t.by[m];
                SmokeMetric {
                    name: m.clone(),
                    reader: s.source.as_str().into(),
                    reports: s.reports,
                    last: s.last,
                    non_finite: s.non_finite.clone(),
                }
            })
            .collect(),
        peak: leg.peak.clone(),
        parallel,
    }
}
