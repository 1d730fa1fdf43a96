//! The only I/O loop of a sweep: each trial is a child `train` (or, when
//! the space names `program`, the user's program under a supervisor: see
//! `program`) in its own process group with a keeper, in
//! `DIR/trials/NNNN/`. The driver never touches CUDA. It learns that a
//! trial ended from the process (exit status or signal) and what the trial
//! wrote, never from heartbeats, so a live trial is never declared dead.
//! Everything it knows is in its storage (the journal), so it can be
//! killed at any moment and `--resume`d.
//!
//! Driven by events: it sleeps until a trial's output line, a trial's exit
//! or Ctrl-C rings its bell, or until its next deadline (a grace period's
//! end, a timeout, the next look at the files trials append to). Its state
//! is in named parts that the steps take as arguments: the sweep's facts
//! (`context`), the storage, the slots (`slots`), the running trials
//! (`trials`: watched and recorded), the starts (`launch`), `recover`.

use crate::cli::Args;
use crate::context::Sweep;
use crate::history::{fails_at_start, too_many_failures, Digest};
use crate::journal::Journal;
use crate::launch::{Cores, Starter};
use crate::layout::{read_settings, space_of};
use crate::measured::{self, Largest, Now, Peaks};
use crate::memory_model::Learner;
use crate::outcome::Ending;
use crate::owner::Owner;
use crate::placement;
use crate::pruner::{Kept, PercentilePruner, Pruner};
use crate::rdb::Database;
use crate::sampler::{self, Sampler};
use crate::slots::Slots;
use crate::start::{gpus, gpus_counting, new_settings, slurm_plan, trial_cap, worst_peak_mib};
use crate::storage::Storage;
use crate::trials::{Look, Running};
use crate::truth::{new_study_name, open_db, stored_settings, study_in, Truth};
use common::bad_input;
use common::wire::run_dir::SweepDir;
use common::wire::sweep::{Options, Settings};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::{Duration, Instant};
use supervise::events::{self, Bell, Interrupter, Waiter};

/// How often the files trials append to (train's metrics.csv, a program's
/// own) are looked at when nothing rang.
const FILES_EVERY: Duration = Duration::from_secs(1);
/// How often a worker with nothing left to claim looks at the trials that
/// still run on other workers (a database's; see `running_elsewhere`).
const ELSEWHERE_EVERY: Duration = Duration::from_millis(250);

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
/// only a space with `program` runs there); `stop` is the process's stop
/// request (Ctrl-C, SIGTERM), which ends the trials and the sweep.
pub fn run(args: &Args, train: &Path, libtorch: bool, stop: &Interrupter) -> anyhow::Result<u8> {
    if let Some(dir) = &args.status {
        return crate::report::status(args, dir);
    }
    if let Some(dir) = &args.report {
        return crate::report::report(args, dir, train);
    }
    // The first reading of the cores free: the set-up's time counts
    // towards the second the first trial's threads are measured over.
    let cores = crate::cores::Watch::start();
    let (dir, settings, mode, space, db) = what_to_run(args, train, libtorch)?;
    let search = space.search_space();
    let cap = trial_cap(&settings, &space, &search)?;
    let sampler = sampler::build(space.method, &search, settings.seed, cap)
        .map_err(|e| bad_input!("{}: {e:#}", settings.space_name))?;
    if let (sampler::Method::Bayes(_), Some(w)) = (space.method, sampler::startup_warning(cap)) {
        common::say!("train sweep: WARNING: {}: {w}", settings.space_name);
    }
    let pruner = pruner_of(&space, &settings);
    let parallel = parallel_of(args, &settings, mode)?;
    let slurm_options = args.slurm_options();
    if args.slurm {
        crate::slurm::check(&slurm_options)?;
    }
    // Under Slurm, Slurm placed this worker: it runs where it was put.
    let in_slurm = mode == Mode::Worker && crate::slurm::task_from_env().is_some();
    // The GPUs memdiag sees (none where Slurm places the workers).
    let gpus = match args.slurm || in_slurm {
        true => Vec::new(),
        false => gpus(train),
    };
    let (groups, gpus) = crate::start::grouped(&space, gpus)?;
    let plan = plan_of(args.slurm, in_slurm, &space, &settings, &gpus, parallel)?;
    for w in &plan.why {
        common::say!("train sweep: placement: {w}");
    }
    // The preload server imports its modules before anything is written
    // (one it cannot import is bad input); `--slurm` only submits.
    let preload = match args.slurm {
        true => None,
        false => crate::program::Preloaded::start(&space, &settings, &args.preload)?,
    };
    let measuring = space.program.is_some() && parallel.is_none() && !in_slurm && !args.slurm;
    let torch = crate::start::torch_of(&space, &settings);
    // Everything is checked: now the sweep's directory and its truth.
    let (truth, study_id) = open_truth(db, &dir, &settings, space.metric.goal, mode)?;
    let torch = torch.and_then(|t| t.join().ok()).flatten();
    let storage = truth.storage();
    let sweep = Sweep {
        dir: dir.clone(),
        train: train.to_path_buf(),
        settings,
        space,
        search,
        study_id,
        torch,
        owner: Owner::this().to_json(),
        preload,
    };
    // A database's worker settles its own dead trials first (from its
    // trial folders' pid files), as --resume does.
    if mode == Mode::Resume || truth.db().is_some() {
        crate::recover::recover(&sweep, storage)?;
    }
    if args.slurm {
        return submit(&sweep, storage, cap, args, &slurm_options);
    }
    let inherit_gpus = in_slurm && std::env::var_os("CUDA_VISIBLE_DEVICES").is_some();
    let (bell, wait) = events::bell();
    stop.wake(&bell);
    let mut driver = Driver {
        sweep: &sweep,
        storage,
        sampler: &*sampler,
        pruner: pruner.as_deref(),
        slots: Slots::new(plan.slots, inherit_gpus).with_groups(groups),
        trials: Vec::new(),
        measuring,
        largest: Largest::default(),
        cores: RefCell::new(cores),
        threads_said: Cell::new(None),
        memory: RefCell::new(Learner::default()),
        digest: RefCell::new(Digest::default()),
        kept: RefCell::new(Kept::default()),
        gpus,
        disk_full: None,
        stop,
        bell,
        wait,
    };
    let out = driver.fold_first().and_then(|()| driver.drive(cap));
    drop(driver); // Its running trials' ends, if any, are owed to them.
    truth.leave();
    out
}

/// The sweep this process joins (its directory, settings, mode, the
/// database that holds it if one does) and its space, checked: a program
/// that exists, and a libtorch for our model.
fn what_to_run(
    args: &Args,
    train: &Path,
    libtorch: bool,
) -> anyhow::Result<(
    std::path::PathBuf,
    Settings,
    Mode,
    crate::space::Space,
    Option<Database>,
)> {
    let (dir, settings, mode, db) = match (&args.resume, &args.worker) {
        (Some(given), _) => joined(args, given, "--resume", Mode::Resume)?,
        (None, Some(given)) => joined(args, given, "--worker", Mode::Worker)?,
        (None, None) => {
            let dir = args.out.clone().expect("clap requires --out");
            let mut settings = new_settings(args, &dir)?;
            let db = match &args.storage {
                Some(url) => Some(new_study(args, url, &mut settings)?),
                None => None,
            };
            (dir, settings, Mode::New, db)
        }
    };
    let parsed = space_of(&settings)?;
    for w in &parsed.warnings {
        common::say!("train sweep: {}: {w}", settings.space_name);
    }
    let space = parsed.space;
    crate::program::check(&space, &settings)?;
    if space.program.is_none() && !libtorch {
        let who = format!(
            "train sweep of {} (a space without `program`: each trial trains train's built-in model with `train --config`)",
            settings.space_name
        );
        return Err(common::exit::no_libtorch(&who, train));
    }
    Ok((dir, settings, mode, space, db))
}

type Joined = (std::path::PathBuf, Settings, Mode, Option<Database>);

/// `--resume`/`--worker`: DIR's sweep (its journal, or the database its
/// sweep.yaml names), or with --storage the study's stored settings, this
/// host's --out for its trial folders, and a worker's own --interpreter.
fn joined(
    args: &Args,
    given: &Option<std::path::PathBuf>,
    flag: &str,
    mode: Mode,
) -> anyhow::Result<Joined> {
    let dir = args.dir_of(given, flag)?.ok_or_else(|| {
        bad_input!("{flag} with --storage: expected --out DIR (this host's folder for its trials)")
    })?;
    let Some(url) = &args.storage else {
        let settings = read_settings(&dir)?;
        let db = settings
            .storage
            .as_ref()
            .map(|u| open_db(args, u))
            .transpose()?;
        return Ok((dir, settings, mode, db));
    };
    let db = open_db(args, url)?;
    let name = study_in(&db, args, Some(&dir))?;
    // Before the first read: a joining worker starts from it.
    db.keep_checkpoint_in(&dir, &name);
    let (_, mut settings) = stored_settings(&db, &name)?;
    if let Some(i) = &args.interpreter {
        settings.interpreter = Some(crate::start::interpreter_of(i)?);
    }
    settings.storage = Some(db.shown().to_string());
    Ok((dir, settings, mode, Some(db)))
}

/// A new sweep's study in the database --storage names: refused when a
/// `train sweep` already started one of that name (join it instead).
fn new_study(args: &Args, url: &str, settings: &mut Settings) -> anyhow::Result<Database> {
    let db = open_db(args, url)?;
    let space_path = args.space.as_deref().unwrap_or(Path::new("sweep"));
    settings.study_name = new_study_name(args, space_path, &settings.space_text);
    settings.storage = Some(db.shown().to_string());
    if let Some(study) = db.load(&settings.study_name)? {
        if db.settings(&study)?.is_some() {
            return Err(bad_input!(
                "{}: study {:?} exists: add a worker with `train sweep --worker --storage {} --study {:?} --out DIR`, or name a new one with --study",
                db.shown(),
                settings.study_name,
                db.shown(),
                settings.study_name
            ));
        }
    }
    Ok(db)
}

/// The pruner the space names (its hyperband), or the median pruner that
/// `--pruner` asks for.
fn pruner_of(space: &crate::space::Space, settings: &Settings) -> Option<Box<dyn Pruner>> {
    match (&space.early_terminate, &settings.pruner) {
        (Some(h), _) => Some(Box::new(h.clone())),
        (None, Some(_)) => Some(Box::new(PercentilePruner::median())),
        (None, None) => None,
    }
}

/// `--parallel`: a number, or None for `auto`. A worker brings its own (its
/// machine is its own); the others read the sweep's.
fn parallel_of(args: &Args, settings: &Settings, mode: Mode) -> anyhow::Result<Option<u32>> {
    let text = match mode {
        Mode::Worker => args.parallel.as_str(),
        _ => settings.parallel.as_str(),
    };
    Ok(match text {
        "auto" => None,
        k => Some(k.parse::<u32>().ok().filter(|&k| k > 0).ok_or_else(|| {
            bad_input!("--parallel: expected auto or a positive number, found {k:?}")
        })?),
    })
}

/// Where trials run: none with `--slurm` (Slurm places the workers), where
/// Slurm put this worker, a program's measured slots, or our model's
/// estimate against each GPU's free memory (a group of GPUs placed as one
/// where trials are jobs of ranks, `start::grouped`).
fn plan_of(
    slurm: bool,
    in_slurm: bool,
    space: &crate::space::Space,
    settings: &Settings,
    gpus: &[placement::Gpu],
    parallel: Option<u32>,
) -> anyhow::Result<placement::Plan> {
    Ok(if slurm {
        placement::Plan {
            slots: Vec::new(),
            why: Vec::new(),
        }
    } else if in_slurm {
        slurm_plan(parallel)
    } else if space.program.is_some() {
        // A program has no estimate: measured (`measured`).
        crate::measured::program_plan(gpus, parallel, settings.memory_budget_mib)
    } else {
        placement::plan(
            gpus,
            worst_peak_mib(space, &settings.base),
            common::estimate::DEFAULT_MARGIN,
            parallel,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        )
        .map_err(|e| bad_input!("{e}"))?
    })
}

/// `--slurm`: submits workers for the trials left (none: says so).
fn submit(
    sweep: &Sweep,
    storage: &dyn Storage,
    cap: u64,
    args: &Args,
    options: &Options,
) -> anyhow::Result<u8> {
    let study = sweep.study(storage)?;
    let mut history = Digest::of(&study);
    let left =
        cap.saturating_sub(history.drawn(&study)) + history.interrupted_roots(&study).len() as u64;
    if left == 0 {
        common::say!(
            "train sweep: nothing left to run in {}: {} trials, none interrupted; no job submitted",
            sweep.dir.display(),
            study.trials.len()
        );
        return Ok(common::exit::OK);
    }
    let saved = crate::slurm::read_jobs(&sweep.dir)?
        .map(|j| j.options)
        .unwrap_or_default();
    let options = saved.merged(options);
    let workers = args.array.unwrap_or(left).min(left);
    common::say!(
        "train sweep: {left} trial(s) left: {workers} Slurm worker(s), each claims trials from {} until none is left",
        storage.describe()
    );
    let train = std::fs::canonicalize(&sweep.train).unwrap_or(sweep.train.clone());
    let dir = std::fs::canonicalize(&sweep.dir).unwrap_or(sweep.dir.clone());
    crate::slurm::submit_workers(
        &dir,
        &train,
        &sweep.settings.study_name,
        &options,
        workers,
        args.dry_run,
    )?;
    Ok(common::exit::OK)
}

/// The sweep's directory, its truth (its database, else DIR's journal)
/// and its study, made for a new sweep, which also stores its settings in
/// a database.
fn open_truth(
    db: Option<Database>,
    dir: &Path,
    settings: &Settings,
    goal: crate::trial::Direction,
    mode: Mode,
) -> anyhow::Result<(Truth, crate::journal::StudyId)> {
    let sweep_dir = SweepDir::new(dir);
    std::fs::create_dir_all(sweep_dir.trials())
        .map_err(|e| bad_input!("{}: cannot create: {e}", dir.display()))?;
    // A database's worker keeps a copy of the stored settings beside its
    // trial folders (what --report DIR and --resume DIR read).
    if mode == Mode::New || db.is_some() {
        common::files::write_yaml(&sweep_dir.settings(), settings)?;
    }
    let truth = match db {
        Some(db) => {
            db.keep_checkpoint_in(dir, &settings.study_name);
            Truth::Db(db)
        }
        None => Truth::Journal(Journal::open(sweep_dir.journal())?),
    };
    let study_id = truth.storage().create_study(&settings.study_name, goal)?;
    if let (Mode::New, Some(db)) = (mode, truth.db()) {
        db.set_settings(study_id, settings)?;
        common::say!(
            "train sweep: study {:?} in {}: add workers on any host with `train sweep --worker --storage {} --study {:?} --out DIR`",
            settings.study_name,
            db.shown(),
            db.shown(),
            settings.study_name
        );
    }
    Ok((truth, study_id))
}

/// Trials our workers claimed in a shared database that still run (on
/// other workers: this one has none left when it asks).
fn running_elsewhere(study: &crate::journal::Study) -> usize {
    study
        .trials
        .iter()
        .filter(|t| t.state == crate::trial::TrialState::Running)
        .filter(|t| study.shared && crate::history::ours(study, t))
        .count()
}

/// The driver's parts: the sweep's facts, its storage, the sampler and the
/// pruner (read only), the slots, the running trials, what the measured
/// placement learned, why it stops, and what wakes it.
struct Driver<'a> {
    sweep: &'a Sweep,
    storage: &'a dyn Storage,
    sampler: &'a dyn Sampler,
    pruner: Option<&'a dyn Pruner>,
    slots: Slots,
    trials: Vec<Running>,
    /// `--parallel auto` of a program: slots follow the measured peaks.
    measuring: bool,
    /// The largest peaks a program trial has reached.
    largest: Largest,
    /// The cores free, read as the sweep goes (for CPU threads).
    cores: RefCell<crate::cores::Watch>,
    /// The threads a trial was last said to get.
    threads_said: Cell<Option<i32>>,
    /// Each point's predicted peak, learned from the trials that ended.
    memory: RefCell<Learner>,
    /// The study's history, folded in as trials finish.
    digest: RefCell<Digest>,
    /// What the pruner keeps of the finished trials.
    kept: RefCell<Kept>,
    /// The GPUs as last read, with what our trials hold there.
    gpus: Vec<placement::Gpu>,
    /// Set when a trial failed while the sweep's filesystem was full: the
    /// sweep stops (its trials would all fail the same way).
    disk_full: Option<String>,
    stop: &'a Interrupter,
    bell: Bell,
    wait: Waiter,
}

impl Driver<'_> {
    fn drive(&mut self, cap: u64) -> anyhow::Result<u8> {
        let started = Instant::now();
        let mut stopping: Option<(u8, String)> = None;
        let mut beaten = Instant::now();
        let mut waiting_said = false;
        loop {
            self.beat(&mut beaten)?;
            if self.slots.slots.iter().any(|s| s.threads.is_some()) {
                self.cores.borrow_mut().look();
            }
            if stopping.is_none() {
                stopping = self.why_stop();
                if stopping.is_some() {
                    for r in &mut self.trials {
                        r.stop(Ending::Interrupted);
                    }
                }
            }
            let study = self.sweep.study(self.storage)?;
            let mut look = Look {
                sweep: self.sweep,
                storage: self.storage,
                pruner: self.pruner,
                slots: &mut self.slots,
                digest: &self.digest,
                kept: &self.kept,
            };
            let running = self.trials.len();
            if let Some(why) = look.watch(&mut self.trials, &study)? {
                self.disk_full = Some(why);
            }
            // With the ends just recorded (read again only when a trial
            // ended), before another trial starts: whether the sweep fails,
            // and how many run at once from now on. Each study is let go
            // before the next load (one held makes a load copy the trials).
            let ended = self.trials.len() < running;
            let now = if ended {
                drop(study);
                self.sweep.study(self.storage)?
            } else {
                study
            };
            if stopping.is_none() {
                stopping = self.failing(&now).map(|why| (common::exit::FOUND, why));
            }
            if self.measuring {
                self.replan(&now, ended);
            }
            drop(now);
            let exhausted = stopping.is_none() && self.disk_full.is_none() && self.launch(cap)?;
            // A database's last worker stays while another's trials run:
            // one whose heartbeat stops is failed and run again here.
            let elsewhere = match exhausted && self.trials.is_empty() {
                true => running_elsewhere(&self.sweep.study(self.storage)?),
                false => 0,
            };
            if elsewhere > 0 && stopping.is_none() && !self.stop.should_stop() {
                if !waiting_said {
                    common::say!(
                        "train sweep: nothing left to claim; {elsewhere} trial(s) run on other workers: waiting, to run again any whose worker stops sending heartbeats"
                    );
                    waiting_said = true;
                }
                // Looked at again soon: the others' trials end without
                // ringing this worker's bell.
                self.wait.until(Some(Instant::now() + ELSEWHERE_EVERY));
                continue;
            }
            if self.trials.is_empty() && (stopping.is_some() || exhausted) {
                let study = self.sweep.study(self.storage)?;
                crate::report::print_summary(&study, &self.sweep.space, started.elapsed());
                return Ok(self.end(stopping));
            }
            // A stop asked or a disk found full since is looked at first.
            if stopping.is_none() && (self.stop.should_stop() || self.disk_full.is_some()) {
                continue;
            }
            self.wait.until(Some(self.next_look()));
        }
    }

    /// Why a sweep that only fails stops: its last trials all failed
    /// (`--max-consecutive-failures`), or a program's first trials failed
    /// before reporting anything (it cannot start). `0` turns both off.
    fn failing(&self, study: &crate::journal::Study) -> Option<String> {
        let limit = self.sweep.settings.max_consecutive_failures;
        let dir = &self.sweep.dir;
        let digest = &mut self.digest.borrow_mut();
        too_many_failures(study, digest, limit, dir).or_else(|| {
            (limit > 0 && self.sweep.space.program.is_some())
                .then(|| fails_at_start(study, digest, dir))
                .flatten()
        })
    }

    /// Ctrl-C or SIGTERM, or a full disk: why the sweep stops, with its
    /// exit code.
    fn why_stop(&mut self) -> Option<(u8, String)> {
        if self.stop.should_stop() {
            return Some((
                common::exit::STOPPED,
                "stopped by Ctrl-C or SIGTERM".to_string(),
            ));
        }
        self.disk_full.take().map(|why| {
            (
                common::exit::INTERNAL,
                format!(
                    "stopped, disk full: {why}; free some space, then `train sweep --resume {}`",
                    self.sweep.dir.display()
                ),
            )
        })
    }

    /// The exit code of a sweep whose trials are all done, said on stderr,
    /// its storage's checkpoint kept for the next start.
    fn end(&self, stopping: Option<(u8, String)>) -> u8 {
        self.storage.keep_checkpoint(true);
        let Some((code, why)) = stopping else {
            return common::exit::OK;
        };
        common::say!("train sweep: {why}");
        if code == common::exit::STOPPED {
            common::say!(
                "train sweep: continue with `train sweep --resume {}`",
                self.sweep.dir.display()
            );
        }
        code
    }

    /// When to look again though nothing rang: the first trial deadline (a
    /// grace period's end, a timeout), else the next look at the files
    /// trials append to; a measured placement also revises itself then.
    fn next_look(&self) -> Instant {
        let timeout = self.sweep.settings.trial_timeout_s;
        let files = Instant::now() + FILES_EVERY;
        self.trials
            .iter()
            .filter_map(|r| r.deadline(timeout))
            .fold(files, Instant::min)
    }

    /// Stamps the running trials' heartbeats when the storage wants them
    /// (a database) and it is time.
    fn beat(&self, beaten: &mut Instant) -> anyhow::Result<()> {
        let Some(every) = self.storage.heartbeat_every() else {
            return Ok(());
        };
        if beaten.elapsed() >= every {
            let ids: Vec<_> = self.trials.iter().map(|r| r.id).collect();
            self.storage.beat(&ids)?;
            *beaten = Instant::now();
        }
        Ok(())
    }

    /// Starts what the turn can, then keeps the storage's checkpoint if it
    /// is due (after the launches: a joining worker's first trial first).
    fn launch(&mut self, cap: u64) -> anyhow::Result<bool> {
        let exhausted = Starter {
            sweep: self.sweep,
            storage: self.storage,
            sampler: self.sampler,
            slots: &self.slots,
            bell: &self.bell,
            cores: Cores {
                watch: &self.cores,
                said: &self.threads_said,
            },
            memory: &self.memory,
            digest: &self.digest,
            gpus: &self.gpus,
            packing: self.packing().then_some(self.largest),
        }
        .launch(&mut self.trials, cap)?;
        self.storage.keep_checkpoint(false);
        Ok(exhausted)
    }

    /// The first folds over the whole study, the history's digest and the
    /// memory model's rows, on two threads at once: a worker that joins a
    /// large study waits for them before its first trial (a fifth of that
    /// wait at 50,000 trials, each fold a read of every trial's
    /// attributes). Later turns fold only the trials that finished since.
    fn fold_first(&self) -> anyhow::Result<()> {
        let study = self.sweep.study(self.storage)?;
        let digest = &mut *self.digest.borrow_mut();
        std::thread::scope(|s| {
            s.spawn(|| digest.update(&study));
            if self.sweep.space.memory_model {
                self.memory.borrow_mut().update(&study.trials);
            }
        });
        Ok(())
    }

    /// Whether trials are packed by their predicted peaks: a program's
    /// `--parallel auto` (on the CPU or GPUs), with the memory model on.
    fn packing(&self) -> bool {
        self.measuring && self.sweep.space.memory_model
    }

    /// Revises the slots from the peaks so far; on GPUs only when a trial
    /// has just `ended`, with the GPUs' free memory read again then
    /// (memdiag, a process: not at every look).
    fn replan(&mut self, study: &crate::journal::Study, ended: bool) {
        let running: Vec<Now> = self
            .trials
            .iter()
            .map(|r| Now {
                slot: r.slot,
                host_mib: r.host_peak_mib(),
                gpu_mib: r.gpu_peak_mib(),
            })
            .collect();
        // What our trials hold on each GPU is read in the same snapshot as
        // the free memory (their process trees' pids in memdiag's list).
        let listed = (ended && !self.slots.all_cpu()).then(|| {
            let ours: std::collections::BTreeSet<u32> = self
                .trials
                .iter()
                .filter_map(|r| r.pid())
                .flat_map(supervise::memory::tree)
                .collect();
            self.slots
                .groups
                .apply(&gpus_counting(&self.sweep.train, &ours))
        });
        let packing = self.packing();
        measured::replan(
            &mut self.slots,
            &mut self.largest,
            &Peaks {
                study,
                running: &running,
                memory_budget_mib: self.sweep.settings.memory_budget_mib,
                available_mib: measured::available_mib(),
                cores: measured::cores(),
                gpus: listed.as_deref(),
                packing,
            },
        );
        if let Some(l) = listed.filter(|l| !l.is_empty()) {
            self.gpus = l;
        }
    }
}
