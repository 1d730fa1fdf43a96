//! The only I/O loop of a sweep: each trial is a child `train` (or, when
//! the space names `program`, the user's program under a supervisor: see
//! `program`) in its own process group, in `DIR/trials/NNNN/`; `running`
//! watches them and records their ends. The driver never touches CUDA. It
//! learns that a trial ended from the process (exit status or signal) and the
//! typed summary.yaml the trial wrote, never from heartbeats, so a live trial
//! is never declared dead. Everything it knows is in the journal, so it can
//! be killed at any moment and `--resume`d.

use crate::cli::Args;
use crate::history::{drawn, interrupted_roots, rerun_reason, too_many_failures};
use crate::journal::{Journal, Outcome, Study, StudyId, TrialId, TrialRecord, TrialRef};
use crate::layout::{read_settings, space_of};
use crate::outcome::{self, Ending, MESSAGE_CHARS};
use crate::owner::{self, Liveness, Owner};
use crate::placement::{self, Slot};
use crate::process::{end_group, live_trial_pid, print_block, POLL};
use crate::pruner::{PercentilePruner, Pruner};
use crate::running::{Proc, Running};
use crate::sampler::{self, Sampler};
use crate::space::{Param, Space};
use crate::start::{gpus, new_settings, slurm_plan, trial_cap, worst_peak_mib};
use crate::trial::{ParamValue, Trial, TrialState};
use anyhow::Context;
use common::bad_input;
use common::wire::failure::Class;
use common::wire::run_dir::{SweepDir, TrialDir};
use common::wire::sweep::{Options, Settings};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Set by Ctrl-C or SIGTERM: stop the trials and end.
static STOP: AtomicBool = AtomicBool::new(false);

/// How this process joins the sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// A new sweep.
    New,
    /// `--resume`: trials whose worker is gone run again.
    Resume,
    /// `--worker`: one more worker on a sweep that exists.
    Worker,
}

/// `train sweep ...`: `train` is the binary each trial runs; `libtorch`
/// says whether it can train the seeds' model (the pip wheel's train cannot:
/// only a space with `program` runs there).
pub fn run(args: &Args, train: &Path, libtorch: bool) -> anyhow::Result<u8> {
    if let Some(dir) = &args.status {
        return crate::report::status(dir);
    }
    if let Some(dir) = &args.report {
        return crate::report::report(dir, args.format);
    }
    let (dir, settings, mode) = match (&args.resume, &args.worker) {
        (Some(dir), _) => (dir.clone(), read_settings(dir)?, Mode::Resume),
        (None, Some(dir)) => (dir.clone(), read_settings(dir)?, Mode::Worker),
        (None, None) => {
            let dir = args.out.clone().expect("clap requires --out");
            (dir.clone(), new_settings(args, &dir)?, Mode::New)
        }
    };
    let base = settings.base.clone();
    let parsed = space_of(&settings)?;
    for w in &parsed.warnings {
        common::say!("train sweep: {}: {w}", settings.space_name);
    }
    let space = parsed.space;
    crate::program::check(&space, &settings)?;
    if space.program.is_none() && !libtorch {
        let who = format!(
            "train sweep of {} (a space without `program`: each trial trains the seeds' model with `train --config`)",
            settings.space_name
        );
        return Err(common::exit::no_libtorch(&who, train));
    }
    let search = space.search_space();
    let sampler = sampler::build(space.method, &search, settings.seed)
        .map_err(|e| bad_input!("{}: {e:#}", settings.space_name))?;
    let cap = trial_cap(&settings, &space, &search)?;
    let pruner: Option<Box<dyn Pruner>> = match (&space.early_terminate, &settings.pruner) {
        (Some(h), _) => Some(Box::new(h.clone())),
        (None, Some(_)) => Some(Box::new(PercentilePruner::median())),
        (None, None) => None,
    };
    // A worker brings its own --parallel (its machine is its own).
    let parallel_text = match mode {
        Mode::Worker => args.parallel.as_str(),
        _ => settings.parallel.as_str(),
    };
    let parallel = match parallel_text {
        "auto" => None,
        k => Some(k.parse::<u32>().ok().filter(|&k| k > 0).ok_or_else(|| {
            bad_input!("--parallel: expected auto or a positive number, found {k:?}")
        })?),
    };
    let slurm_options = args.slurm_options();
    if args.slurm {
        crate::slurm::check(&slurm_options)?;
    }
    // Under Slurm, Slurm placed this worker: it runs where it was put.
    let in_slurm = mode == Mode::Worker && crate::slurm::task_from_env().is_some();
    let plan = if args.slurm {
        placement::Plan {
            slots: Vec::new(),
            why: Vec::new(),
        }
    } else if in_slurm {
        slurm_plan(parallel)
    } else if space.program.is_some() {
        // A program has no estimate: measured (`measured`).
        crate::measured::program_plan(&gpus(train), parallel, settings.memory_budget_mib)
    } else {
        placement::plan(
            &gpus(train),
            worst_peak_mib(&space, &base),
            common::estimate::DEFAULT_MARGIN,
            parallel,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        )
        .map_err(|e| bad_input!("{e}"))?
    };
    for w in &plan.why {
        common::say!("train sweep: placement: {w}");
    }
    // Everything is checked: now the sweep's directory.
    let sweep_dir = SweepDir::new(&dir);
    std::fs::create_dir_all(sweep_dir.trials())
        .map_err(|e| bad_input!("{}: cannot create: {e}", dir.display()))?;
    if mode == Mode::New {
        common::files::write_yaml(&sweep_dir.settings(), &settings)?;
    }
    let measuring = space.program.is_some() && parallel.is_none() && !in_slurm && !args.slurm;
    let torch = match (&space.program, &settings.interpreter) {
        (Some(_), Some(i)) => supervise::env::torch_version(Path::new(i)),
        _ => None,
    };
    let journal = Journal::open(sweep_dir.journal())?;
    let study_id = journal.create_study(&settings.study_name, space.metric.goal)?;
    let mut driver = Driver {
        dir: dir.clone(),
        train: train.to_path_buf(),
        journal,
        study_id,
        settings,
        space,
        search,
        sampler,
        pruner,
        closed: vec![false; plan.slots.len()],
        crowded: 0,
        slots: plan.slots,
        inherit_gpus: in_slurm && std::env::var_os("CUDA_VISIBLE_DEVICES").is_some(),
        measuring,
        peak_mib: None,
        torch,
        running: Vec::new(),
        disk_full: None,
        owner: Owner::this().to_json(),
    };
    if mode == Mode::Resume {
        driver.recover()?;
    }
    if args.slurm {
        return driver.submit(cap, args, &slurm_options);
    }
    let _ = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst));
    driver.drive(cap)
}

/// A trial to run: its values, and the trial it runs again (if it does).
type Next = (BTreeMap<String, ParamValue>, Option<u64>);

pub(crate) struct Driver {
    pub(crate) dir: PathBuf,
    pub(crate) train: PathBuf,
    pub(crate) journal: Journal,
    pub(crate) study_id: StudyId,
    pub(crate) settings: Settings,
    pub(crate) space: Space,
    /// What the sampler draws from (the space's sampled and fixed values).
    pub(crate) search: sampler::SearchSpace,
    pub(crate) sampler: Box<dyn Sampler>,
    pub(crate) pruner: Option<Box<dyn Pruner>>,
    pub(crate) slots: Vec<Slot>,
    /// Slots closed (a trial ran out of memory while crowded, or fewer
    /// trials fit the measured peaks).
    pub(crate) closed: Vec<bool>,
    /// Slots taken away for crowding.
    pub(crate) crowded: usize,
    /// Slurm chose this worker's GPUs: trials inherit CUDA_VISIBLE_DEVICES.
    pub(crate) inherit_gpus: bool,
    /// `--parallel auto` of a program: slots follow the measured peaks.
    pub(crate) measuring: bool,
    /// The largest peak a program trial has reached (MiB).
    pub(crate) peak_mib: Option<f64>,
    /// A program sweep interpreter's torch (which allocator variable).
    pub(crate) torch: supervise::env::TorchVersion,
    pub(crate) running: Vec<Running>,
    /// Set when a trial failed while the sweep's filesystem was full: the
    /// sweep stops (its trials would all fail the same way).
    pub(crate) disk_full: Option<String>,
    /// This worker (`Owner::this`), read once: each trial records it, and
    /// a claim should not read /proc under the journal's lock.
    pub(crate) owner: Value,
}

impl Driver {
    pub(crate) fn trial_dir(&self, number: u64) -> TrialDir {
        SweepDir::new(&self.dir).trial(number)
    }

    fn study(&self) -> anyhow::Result<Study> {
        self.journal
            .load(&self.settings.study_name)?
            .with_context(|| format!("{}: the study is gone", self.journal.path().display()))
    }

    /// After a driver or worker that died or was stopped: each trial still
    /// RUNNING whose worker is gone (its process on this host, its Slurm
    /// task in squeue) is recorded as interrupted, after its leftover train
    /// on this host is ended; trials whose worker lives are left to it.
    /// Interrupted trials then run again with the same parameters: workers
    /// claim them before new ones (`next_trial`).
    fn recover(&mut self) -> anyhow::Result<()> {
        let study = self.study()?;
        let running: Vec<(&Trial, &TrialId)> = study
            .trials
            .iter()
            .zip(&study.trial_ids)
            .filter(|(t, _)| t.state == TrialState::Running)
            .collect();
        let in_slurm = running
            .iter()
            .any(|(t, _)| Owner::of(t).is_some_and(|o| o.slurm_job.is_some()));
        let queue = if in_slurm {
            crate::slurm::Queue::query()
        } else {
            Err("not asked".into())
        };
        let here = common::host::name().unwrap_or_default();
        for (t, id) in running {
            let why = match owner::liveness(t, &queue) {
                Liveness::Live(where_) => {
                    common::say!(
                        "train sweep: trial {} still runs ({where_}): left to it",
                        t.number
                    );
                    continue;
                }
                Liveness::Unknown(why) => {
                    common::say!(
                        "train sweep: trial {} is RUNNING and {why}: left RUNNING (`train sweep --resume` on that host settles it)",
                        t.number
                    );
                    continue;
                }
                Liveness::Gone(why) => why,
            };
            let dir = self.trial_dir(t.number);
            let on_this_host = Owner::of(t).is_none_or(|o| o.host == here);
            if let Some(pid) = live_trial_pid(&dir).filter(|_| on_this_host) {
                common::say!(
                    "train sweep: trial {} still runs (pid {pid}) from a worker that ended: ending its process group",
                    t.number
                );
                end_group(pid);
            }
            common::say!(
                "train sweep: trial {} was RUNNING and {why}: interrupted; it runs again",
                t.number
            );
            self.journal.set_user_attr(
                *id,
                "error_class",
                &Value::from(Class::Interrupted.as_str()),
            )?;
            self.journal.set_user_attr(
                *id,
                "error_message",
                &Value::from(format!(
                    "the sweep's worker ended while the trial ran ({why}); it runs again as a new trial"
                )),
            )?;
            self.journal.finish_trial(*id, Outcome::Fail)?;
        }
        Ok(())
    }

    /// What to run next, decided on the journal as it stands under its lock:
    /// a trial whose every run was interrupted runs again (its parameters,
    /// `retried_from` its first number), else the sampler's next draw while
    /// the sweep has trials left. None: nothing left to claim.
    fn next_trial(&self, study: &Study, cap: u64) -> anyhow::Result<Option<Next>> {
        if let Some(root) = interrupted_roots(study).first() {
            // The journal holds the sampled values; the fixed ones are the
            // space's.
            let mut values = self.search.fixed.clone();
            values.extend(study.trials[*root as usize].params.clone());
            return Ok(Some((values, Some(*root))));
        }
        let index = drawn(study);
        if index >= cap {
            return Ok(None);
        }
        let values = self
            .sampler
            .sample(&self.search, &study.trials, self.space.metric.goal, index)
            .map_err(|e| bad_input!("{}: {e:#}", self.settings.space_name))?;
        Ok(Some((values, None)))
    }

    /// The journal record of a trial with these values.
    fn record(
        &self,
        values: &BTreeMap<String, ParamValue>,
        retried_from: Option<u64>,
    ) -> TrialRecord {
        let sampled = |n: &str| {
            self.space
                .params
                .iter()
                .any(|(m, p)| m == n && matches!(p, Param::Sampled(_)))
        };
        let mut record = TrialRecord {
            distributions: self
                .space
                .params
                .iter()
                .filter_map(|(n, p)| match p {
                    Param::Sampled(d) if values.contains_key(n) => Some((n.clone(), d.clone())),
                    _ => None,
                })
                .collect(),
            params: values
                .iter()
                .filter(|(n, _)| sampled(n))
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
            ..TrialRecord::default()
        };
        record
            .user_attrs
            .insert(owner::ATTR.into(), self.owner.clone());
        if let Some(from) = retried_from {
            record
                .user_attrs
                .insert("retried_from".into(), Value::from(from));
        }
        record
    }

    /// `--slurm`: submits workers for the trials left (none: says so).
    fn submit(&self, cap: u64, args: &Args, options: &Options) -> anyhow::Result<u8> {
        let study = self.study()?;
        let left = cap.saturating_sub(drawn(&study)) + interrupted_roots(&study).len() as u64;
        if left == 0 {
            common::say!(
                "train sweep: nothing left to run in {}: {} trials, none interrupted; no job submitted",
                self.dir.display(),
                study.trials.len()
            );
            return Ok(common::exit::OK);
        }
        let saved = crate::slurm::read_jobs(&self.dir)?
            .map(|j| j.options)
            .unwrap_or_default();
        let options = saved.merged(options);
        let workers = args.array.unwrap_or(left).min(left);
        common::say!(
            "train sweep: {left} trial(s) left: {workers} Slurm worker(s), each claims trials from {} until none is left",
            self.journal.path().display()
        );
        let train = std::fs::canonicalize(&self.train).unwrap_or(self.train.clone());
        let dir = std::fs::canonicalize(&self.dir).unwrap_or(self.dir.clone());
        crate::slurm::submit_workers(
            &dir,
            &train,
            &self.settings.study_name,
            &options,
            workers,
            args.dry_run,
        )?;
        Ok(common::exit::OK)
    }

    fn drive(&mut self, cap: u64) -> anyhow::Result<u8> {
        let started = Instant::now();
        let mut stopping: Option<(u8, String)> = None;
        loop {
            let why_stop = if STOP.load(Ordering::SeqCst) {
                Some((
                    common::exit::STOPPED,
                    "stopped by Ctrl-C or SIGTERM".to_string(),
                ))
            } else {
                self.disk_full.take().map(|why| {
                    (
                        common::exit::INTERNAL,
                        format!(
                            "stopped, disk full: {why}; free some space, then `train sweep --resume {}`",
                            self.dir.display()
                        ),
                    )
                })
            };
            if let (Some(why), None) = (why_stop, &stopping) {
                stopping = Some(why);
                for r in &mut self.running {
                    r.stop(Ending::Interrupted);
                }
            }
            let study = self.study()?;
            if stopping.is_none() {
                if let Some(why) = self.too_many_failures(&study) {
                    stopping = Some((common::exit::FOUND, why));
                }
            }
            self.watch(&study)?;
            if self.measuring {
                self.replan(&study);
            }
            let exhausted = stopping.is_none() && self.disk_full.is_none() && self.launch(cap)?;
            if self.running.is_empty() {
                let study = self.study()?;
                if stopping.is_some() || exhausted {
                    crate::report::print_summary(&study, &self.space, started.elapsed());
                    return Ok(match stopping {
                        Some((code, why)) => {
                            common::say!("train sweep: {why}");
                            if code == common::exit::STOPPED {
                                common::say!(
                                    "train sweep: continue with `train sweep --resume {}`",
                                    self.dir.display()
                                );
                            }
                            code
                        }
                        None => common::exit::OK,
                    });
                }
            }
            std::thread::sleep(POLL);
        }
    }

    /// Seed 004's lesson: `history::too_many_failures` on this sweep.
    fn too_many_failures(&self, study: &Study) -> Option<String> {
        too_many_failures(study, self.settings.max_consecutive_failures, &self.dir)
    }

    /// Starts trials in free slots, each claimed from the journal (other
    /// workers may share it). True: nothing is left to claim.
    fn launch(&mut self, cap: u64) -> anyhow::Result<bool> {
        while let Some(slot) = self.free_slot() {
            let mut chosen = None;
            let made = self.journal.claim_trial(self.study_id, |study| {
                let Some((values, from)) = self.next_trial(study, cap)? else {
                    return Ok(None);
                };
                let mut record = self.record(&values, from);
                // Under the lock the next number is the study's length.
                let run = self.trial_dir(study.trials.len() as u64).run();
                record.user_attrs.insert(
                    "run_dir".into(),
                    Value::from(run.path().display().to_string()),
                );
                // A device-side assert runs again to name its kernel.
                let blocking =
                    from.and_then(|r| rerun_reason(study, r)) == Some(outcome::RERUN_BLOCKING);
                chosen = Some((values, from, blocking));
                Ok(Some(record))
            })?;
            let (Some(made), Some((values, retried_from, blocking))) = (made, chosen) else {
                return Ok(true);
            };
            if self.space.program.is_some() {
                self.start_program(slot, made, values, retried_from, blocking)?;
            } else {
                self.start(slot, made, values, retried_from)?;
            }
        }
        Ok(false)
    }

    /// Where a slot's trial runs, for its block.
    pub(crate) fn runs_on(&self, slot: usize) -> String {
        match (self.slots[slot].gpu, self.inherit_gpus) {
            (Some(g), _) => format!("GPU {g}"),
            (None, true) => format!(
                "the GPUs Slurm gave this task (CUDA_VISIBLE_DEVICES={})",
                std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default()
            ),
            (None, false) => "the CPU".into(),
        }
    }

    fn free_slot(&self) -> Option<usize> {
        (0..self.slots.len())
            .find(|i| !self.closed[*i] && self.running.iter().all(|r| r.slot != *i))
    }

    /// Trials on the device of `slot` (its GPU, or the CPU) now.
    pub(crate) fn crowd(&self, slot: usize) -> usize {
        let gpu = self.slots[slot].gpu;
        self.running
            .iter()
            .filter(|r| self.slots[r.slot].gpu == gpu)
            .count()
    }

    /// One trial fewer on the device of `slot` (a trial there ran out of
    /// memory while it shared it): `slot` closes, if another stays open.
    pub(crate) fn close_slot(&mut self, slot: usize) {
        let gpu = self.slots[slot].gpu;
        let open = (0..self.slots.len())
            .filter(|i| !self.closed[*i] && self.slots[*i].gpu == gpu)
            .count();
        if open > 1 {
            self.closed[slot] = true;
            self.crowded += 1;
            common::say!(
                "train sweep: placement: {} trial(s) at once on {} from now on (a trial ran out of memory while it shared it)",
                open - 1,
                self.runs_on(slot)
            );
        }
    }

    fn start(
        &mut self,
        slot: usize,
        made: TrialRef,
        values: BTreeMap<String, ParamValue>,
        retried_from: Option<u64>,
    ) -> anyhow::Result<()> {
        let config = self.space.apply(&self.settings.base, &values);
        let dir = self.trial_dir(made.number);
        std::fs::create_dir_all(dir.path())?;
        // A combination the schema refuses is a failed trial, not a crash.
        let config = match config {
            Ok(c) => c,
            Err(e) => {
                let message: String = format!("{e:#}").chars().take(MESSAGE_CHARS).collect();
                common::say!("train sweep: trial {}: {message}", made.number);
                self.journal
                    .set_user_attr(made.id, "error_class", &Value::from("config"))?;
                self.journal
                    .set_user_attr(made.id, "error_message", &Value::from(message))?;
                self.journal.finish_trial(made.id, Outcome::Fail)?;
                return Ok(());
            }
        };
        let cfg_path = dir.config();
        common::files::write_atomic(&cfg_path, config.to_yaml().as_bytes())?;
        print_block(
            made.number,
            &config,
            &values,
            retried_from,
            &self.runs_on(slot),
        );
        let log = std::fs::File::create(dir.log())?;
        let mut cmd = Command::new(&self.train);
        cmd.arg("--config")
            .arg(&cfg_path)
            .arg("--out")
            .arg(dir.run().path())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: the whole trial is signalled at once,
            // and Ctrl-C in the terminal reaches the driver only.
            .process_group(0);
        supervise::child::first_for_the_oom_killer(&mut cmd);
        let s = &self.slots[slot];
        if let Some(n) = s.threads {
            cmd.args(["--threads", &n.to_string()]);
        }
        match s.gpu {
            Some(g) => {
                cmd.env("CUDA_VISIBLE_DEVICES", g.to_string());
            }
            None if self.inherit_gpus => {}
            None if self.slots.iter().all(|s| s.gpu.is_none()) => {
                cmd.args(["--device", "cpu"]);
            }
            None => {}
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.train.display()))?;
        common::files::write_atomic(&dir.pid(), format!("{}\n", child.id()).as_bytes())?;
        let crowd = self.crowd(slot) + 1;
        self.running.push(Running {
            number: made.number,
            id: made.id,
            proc: Proc::Train(child),
            slot,
            dir,
            started: Instant::now(),
            reported: BTreeMap::new(),
            ending: None,
            crowd,
            launch_blocking: false,
        });
        Ok(())
    }
}
