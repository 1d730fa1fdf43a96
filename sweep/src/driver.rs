//! The only I/O loop of a sweep: each trial is a child `train` in its own
//! process group, in `DIR/trials/NNNN/`. The driver never touches CUDA. It
//! learns that a trial ended from the process (exit status or signal) and the
//! typed summary.yaml the trial wrote, never from heartbeats, so a live trial
//! is never declared dead. Everything it knows is in the journal, so it can
//! be killed at any moment and `--resume`d.

use crate::cli::Args;
use crate::journal::{Journal, Outcome, Study, StudyId, TrialId, TrialRecord};
use crate::placement::{self, Slot};
use crate::pruner::{Decision, PercentilePruner, Pruner};
use crate::sampler::{self, Sampler};
use crate::space::{Param, Space};
use crate::trial::{ParamValue, Trial, TrialState};
use anyhow::Context;
use common::bad_input;
use common::config::Config;
use common::failures::Class;
use common::wire::train::{EpochRow, RunStatus, TrainSummary};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const JOURNAL: &str = "journal.log";
pub const SETTINGS: &str = "sweep.yaml";
/// The error message kept per failed trial (seed 004 kept 500 characters).
pub const MESSAGE_CHARS: usize = 500;
/// Exit code after Ctrl-C or SIGTERM, as train's.
pub const STOPPED: u8 = 130;
/// How long a stopped trial gets to write its summary before SIGKILL (a
/// step on a GPU can take seconds); one past its timeout has had its time.
const GRACE: Duration = Duration::from_secs(20);
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(200);

/// sweep.yaml (sweep-settings/v1): what the sweep was started with, so that
/// `--resume` goes on with the same base config, space and settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub schema: String,
    /// The study's name in the journal (what optuna.load_study takes).
    pub study_name: String,
    /// The base config's file, and the config resolved.
    pub base_name: String,
    pub base: Config,
    /// The space's file, and its text as given (parsed again on resume).
    pub space_name: String,
    pub space_text: String,
    pub seed: u64,
    /// Trials in all (None: the space's run_cap or the grid's size).
    pub trials: Option<u64>,
    /// `auto` or a number.
    pub parallel: String,
    pub trial_timeout_s: Option<f64>,
    pub max_consecutive_failures: u32,
    /// `median`, or null (the space's early_terminate, if any, prunes).
    pub pruner: Option<String>,
}

impl common::wire::Versioned for Settings {
    const SCHEMA: &'static str = "sweep-settings/v1";
    fn example() -> Self {
        Settings {
            schema: Self::SCHEMA.into(),
            study_name: "sweep".into(),
            base_name: "configs/demo_cpu.yaml".into(),
            base: Config::default(),
            space_name: "configs/sweeps/tiny_cpu.yaml".into(),
            space_text: "method: random\n...".into(),
            seed: 0,
            trials: Some(20),
            parallel: "auto".into(),
            trial_timeout_s: Some(600.0),
            max_consecutive_failures: 10,
            pruner: Some("median".into()),
        }
    }
}

impl Settings {
    /// The sweep's space, parsed from the text it was started with.
    pub fn space(&self) -> anyhow::Result<crate::space::Parsed> {
        Space::parse(
            &common::input::Input {
                name: self.space_name.clone(),
                text: self.space_text.clone(),
            },
            &self.base,
        )
    }
}

/// Set by Ctrl-C or SIGTERM: stop the trials and end.
static STOP: AtomicBool = AtomicBool::new(false);

/// `train sweep ...`: `train` is the binary each trial runs.
pub fn run(args: &Args, train: &Path) -> anyhow::Result<u8> {
    if let Some(dir) = &args.status {
        return crate::report::status(dir);
    }
    if let Some(dir) = &args.report {
        return crate::report::report(dir, args.format);
    }
    let (dir, settings, resuming) = match &args.resume {
        Some(dir) => (dir.clone(), read_settings(dir)?, true),
        None => {
            let dir = args.out.clone().expect("clap requires --out");
            (dir.clone(), new_settings(args, &dir)?, false)
        }
    };
    let base = settings.base.clone();
    let parsed = settings.space()?;
    for w in &parsed.warnings {
        eprintln!("train sweep: {}: {w}", settings.space_name);
    }
    let space = parsed.space;
    let search = space.search_space();
    let sampler = sampler::build(space.method, &search, settings.seed)
        .map_err(|e| bad_input!("{}: {e:#}", settings.space_name))?;
    let cap = trial_cap(&settings, &space, &search)?;
    let pruner: Option<Box<dyn Pruner>> = match (&space.early_terminate, &settings.pruner) {
        (Some(h), _) => Some(Box::new(h.clone())),
        (None, Some(_)) => Some(Box::new(PercentilePruner::median())),
        (None, None) => None,
    };
    let parallel = match settings.parallel.as_str() {
        "auto" => None,
        k => Some(k.parse::<u32>().ok().filter(|&k| k > 0).ok_or_else(|| {
            bad_input!("--parallel: expected auto or a positive number, found {k:?}")
        })?),
    };
    let plan = placement::plan(
        &gpus(train),
        worst_peak_mib(&space, &base),
        common::estimate::DEFAULT_MARGIN,
        parallel,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    )
    .map_err(|e| bad_input!("{e}"))?;
    for w in &plan.why {
        eprintln!("train sweep: placement: {w}");
    }
    // Everything is checked: now the sweep's directory.
    std::fs::create_dir_all(dir.join("trials"))
        .map_err(|e| bad_input!("{}: cannot create: {e}", dir.display()))?;
    if !resuming {
        common::files::write_yaml(&dir.join(SETTINGS), &settings)?;
    }
    let journal = Journal::open(dir.join(JOURNAL))?;
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
        slots: plan.slots,
        running: Vec::new(),
        retries: VecDeque::new(),
    };
    if resuming {
        driver.recover()?;
    }
    let _ = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst));
    driver.drive(cap)
}

fn new_settings(args: &Args, dir: &Path) -> anyhow::Result<Settings> {
    if dir.join(JOURNAL).exists() {
        return Err(bad_input!(
            "{}: already holds a sweep; continue it with `train sweep --resume {0}` or choose another --out",
            dir.display()
        ));
    }
    let base_path = args.config.as_ref().expect("clap requires --config");
    let space_path = args.space.as_ref().expect("clap requires --space");
    let base = Config::load(&common::input::read(base_path)?)?;
    let space = common::input::read(space_path)?;
    let settings = Settings {
        schema: <Settings as common::wire::Versioned>::SCHEMA.into(),
        study_name: dir
            .file_name()
            .map_or("sweep".into(), |n| n.to_string_lossy().into_owned()),
        base_name: base.name,
        base: base.config,
        space_name: space.name,
        space_text: space.text,
        seed: args.seed,
        trials: args.trials,
        parallel: args.parallel.clone(),
        trial_timeout_s: args.trial_timeout,
        max_consecutive_failures: args.max_consecutive_failures,
        pruner: args.pruner.clone(),
    };
    if let Some(t) = settings
        .trial_timeout_s
        .filter(|t| !(t.is_finite() && *t > 0.0))
    {
        return Err(bad_input!(
            "--trial-timeout: expected a positive number of seconds, found {t}"
        ));
    }
    Ok(settings)
}

pub fn read_settings(dir: &Path) -> anyhow::Result<Settings> {
    let input = common::input::read(&dir.join(SETTINGS))?;
    common::wire::parse(&input.name, &input.text)
}

/// Trials in all: --trials, else the space's run_cap, else the grid's size.
fn trial_cap(s: &Settings, space: &Space, search: &sampler::SearchSpace) -> anyhow::Result<u64> {
    let grid = match space.method {
        crate::space::Method::Grid => Some(
            sampler::GridSampler::new(search)
                .map_err(|e| bad_input!("{}: {e:#}", s.space_name))?
                .len(),
        ),
        _ => None,
    };
    s.trials
        .or(space.run_cap)
        .map(|n| grid.map_or(n, |g| n.min(g)))
        .or(grid)
        .ok_or_else(|| {
            bad_input!(
                "{}: no end: give --trials N or `run_cap` (a {} search has no size of its own)",
                s.space_name,
                space.method.as_str()
            )
        })
}

/// The GPUs memdiag (beside train) sees, with their free memory.
fn gpus(train: &Path) -> Vec<placement::Gpu> {
    let memdiag = train.with_file_name("memdiag");
    let Ok(out) = Command::new(&memdiag)
        .args(["--format", "yaml"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        eprintln!(
            "train sweep: placement: {} did not run: placing trials as on a machine without a GPU",
            memdiag.display()
        );
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Ok(report) = common::report::Report::parse(&common::input::Input {
        name: "memdiag".into(),
        text,
    }) else {
        return Vec::new();
    };
    report
        .gpus
        .iter()
        .filter_map(|g| {
            g.memory.map(|m| placement::Gpu {
                index: g.index,
                name: g.name.clone().unwrap_or_default(),
                total_mib: m.total_mib,
                free_mib: m.free_mib,
            })
        })
        .collect()
}

/// cfgcheck's estimate of the space's worst combination.
fn worst_peak_mib(space: &Space, base: &Config) -> u64 {
    space
        .corners(base)
        .iter()
        .map(|(_, c)| common::estimate::estimate(c).peak_mib())
        .max()
        .unwrap_or_else(|| common::estimate::estimate(base).peak_mib())
}

/// Why the driver is ending a trial it started.
#[derive(Clone, Debug, PartialEq)]
enum Ending {
    Pruned(String),
    Timeout,
    Interrupted,
}

struct Running {
    number: u64,
    id: TrialId,
    child: Child,
    slot: usize,
    dir: PathBuf,
    started: Instant,
    reported: BTreeMap<u64, f64>,
    ending: Option<(Ending, Instant)>,
}

struct Driver {
    dir: PathBuf,
    train: PathBuf,
    journal: Journal,
    study_id: StudyId,
    settings: Settings,
    space: Space,
    /// What the sampler draws from (the space's sampled and fixed values).
    search: sampler::SearchSpace,
    sampler: Box<dyn Sampler>,
    pruner: Option<Box<dyn Pruner>>,
    slots: Vec<Slot>,
    running: Vec<Running>,
    /// Parameters of interrupted trials to run again, and their numbers.
    retries: VecDeque<(BTreeMap<String, ParamValue>, u64)>,
}

fn attr_str<'a>(t: &'a Trial, key: &str) -> Option<&'a str> {
    t.user_attrs.get(key).and_then(Value::as_str)
}

/// Trials drawn by the sampler (not re-runs of interrupted ones): the grid
/// index and the random stream of the next new trial.
fn drawn(study: &Study) -> u64 {
    study
        .trials
        .iter()
        .filter(|t| !t.user_attrs.contains_key("retried_from"))
        .count() as u64
}

pub(crate) fn trial_dir(dir: &Path, number: u64) -> PathBuf {
    dir.join("trials").join(format!("{number:04}"))
}

impl Driver {
    fn study(&self) -> anyhow::Result<Study> {
        self.journal
            .load(&self.settings.study_name)?
            .with_context(|| format!("{}: the study is gone", self.journal.path().display()))
    }

    /// After a driver that died or was stopped: end the live children of
    /// trials still RUNNING (found by the process group in their pid file)
    /// and record those trials as interrupted; then queue every trial whose
    /// runs were all interrupted to run again with the same parameters.
    fn recover(&mut self) -> anyhow::Result<()> {
        let study = self.study()?;
        for (t, id) in study.trials.iter().zip(&study.trial_ids) {
            if t.state != TrialState::Running {
                continue;
            }
            let dir = trial_dir(&self.dir, t.number);
            if let Some(pid) = live_trial_pid(&dir) {
                eprintln!(
                    "train sweep: trial {} still runs (pid {pid}) from the driver that died: ending its process group",
                    t.number
                );
                end_group(pid);
            }
            self.journal.set_user_attr(
                *id,
                "error_class",
                &Value::from(Class::Interrupted.as_str()),
            )?;
            self.journal.set_user_attr(
                *id,
                "error_message",
                &Value::from(
                    "the sweep's driver ended while the trial ran; it runs again as a new trial",
                ),
            )?;
            self.journal.finish_trial(*id, Outcome::Fail)?;
        }
        // A trial and its re-runs share a root: the first one's number.
        let study = self.study()?;
        let root = |t: &Trial| {
            t.user_attrs
                .get("retried_from")
                .and_then(Value::as_u64)
                .unwrap_or(t.number)
        };
        let interrupted = |t: &Trial| {
            t.state == TrialState::Fail && attr_str(t, "error_class") == Some("interrupted")
        };
        for t in &study.trials {
            let r = root(t);
            if r == t.number
                && study
                    .trials
                    .iter()
                    .filter(|x| root(x) == r)
                    .all(interrupted)
            {
                // The journal holds the sampled values; the fixed ones are
                // the space's.
                let mut values = self.search.fixed.clone();
                values.extend(t.params.clone());
                self.retries.push_back((values, r));
            }
        }
        Ok(())
    }

    fn drive(&mut self, cap: u64) -> anyhow::Result<u8> {
        let started = Instant::now();
        let mut stopping: Option<(u8, String)> = None;
        loop {
            if STOP.load(Ordering::SeqCst) && stopping.is_none() {
                stopping = Some((STOPPED, "stopped by Ctrl-C or SIGTERM".into()));
                for r in &mut self.running {
                    if r.ending.is_none() {
                        r.ending = Some((Ending::Interrupted, Instant::now()));
                        signal_group(&r.child, libc::SIGTERM);
                    }
                }
            }
            let study = self.study()?;
            if stopping.is_none() {
                if let Some(why) = self.too_many_failures(&study) {
                    stopping = Some((common::exit::FOUND, why));
                }
            }
            self.watch(&study)?;
            if stopping.is_none() {
                self.launch(cap)?;
            }
            if self.running.is_empty() {
                let study = self.study()?;
                let retry_pending = !self.retries.is_empty();
                if stopping.is_some() || (drawn(&study) >= cap && !retry_pending) {
                    crate::report::print_summary(&study, &self.space, started.elapsed());
                    return Ok(match stopping {
                        Some((code, why)) => {
                            eprintln!("train sweep: {why}");
                            if code == STOPPED {
                                eprintln!(
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

    /// Seed 004's lesson (and W&B's after an agent failed 470 of 500 runs):
    /// a sweep that only fails stops, saying which classes it saw.
    fn too_many_failures(&self, study: &Study) -> Option<String> {
        let limit = self.settings.max_consecutive_failures;
        if limit == 0 {
            return None;
        }
        let mut finished: Vec<&Trial> = study
            .trials
            .iter()
            .filter(|t| t.state.is_finished() && attr_str(t, "error_class") != Some("interrupted"))
            .collect();
        finished.sort_by(|a, b| a.datetime_complete.cmp(&b.datetime_complete));
        let tail: Vec<&Trial> = finished
            .iter()
            .rev()
            .take_while(|t| t.state == TrialState::Fail)
            .copied()
            .collect();
        if (tail.len() as u32) < limit {
            return None;
        }
        let mut classes: BTreeMap<&str, u32> = BTreeMap::new();
        for t in &tail {
            *classes
                .entry(attr_str(t, "error_class").unwrap_or("other"))
                .or_default() += 1;
        }
        let seen: Vec<String> = classes.iter().map(|(c, n)| format!("{c} × {n}")).collect();
        Some(format!(
            "stopped: the last {} trials failed ({}); see `train sweep --report {}`",
            tail.len(),
            seen.join(", "),
            self.dir.display()
        ))
    }

    /// Starts trials in free slots: re-runs of interrupted ones first, then
    /// new ones while the sweep has trials left.
    fn launch(&mut self, cap: u64) -> anyhow::Result<()> {
        while let Some(slot) = self.free_slot() {
            let study = self.study()?;
            let (values, retried_from) = match self.retries.pop_front() {
                Some((values, from)) => (values, Some(from)),
                None => {
                    let index = drawn(&study);
                    if index >= cap {
                        return Ok(());
                    }
                    let values = self
                        .sampler
                        .sample(&self.search, &study.trials, self.space.metric.goal, index)
                        .map_err(|e| bad_input!("{}: {e:#}", self.settings.space_name))?;
                    (values, None)
                }
            };
            self.start(slot, values, retried_from)?;
        }
        Ok(())
    }

    fn free_slot(&self) -> Option<usize> {
        (0..self.slots.len()).find(|i| self.running.iter().all(|r| r.slot != *i))
    }

    fn start(
        &mut self,
        slot: usize,
        values: BTreeMap<String, ParamValue>,
        retried_from: Option<u64>,
    ) -> anyhow::Result<()> {
        let config = self.space.apply(&self.settings.base, &values);
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
                .filter(|(n, _)| {
                    self.space
                        .params
                        .iter()
                        .any(|(m, p)| m == *n && matches!(p, Param::Sampled(_)))
                })
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
            ..TrialRecord::default()
        };
        if let Some(from) = retried_from {
            record
                .user_attrs
                .insert("retried_from".into(), Value::from(from));
        }
        let made = self.journal.create_running_trial(self.study_id, &record)?;
        let dir = trial_dir(&self.dir, made.number);
        std::fs::create_dir_all(&dir)?;
        self.journal.set_user_attr(
            made.id,
            "run_dir",
            &Value::from(dir.join("run").display().to_string()),
        )?;
        // A combination the schema refuses is a failed trial, not a crash.
        let config = match config {
            Ok(c) => c,
            Err(e) => {
                let message: String = format!("{e:#}").chars().take(MESSAGE_CHARS).collect();
                eprintln!("train sweep: trial {}: {message}", made.number);
                self.journal
                    .set_user_attr(made.id, "error_class", &Value::from("config"))?;
                self.journal
                    .set_user_attr(made.id, "error_message", &Value::from(message))?;
                self.journal.finish_trial(made.id, Outcome::Fail)?;
                return Ok(());
            }
        };
        let cfg_path = dir.join("config.yaml");
        common::files::write_atomic(&cfg_path, config.to_yaml().as_bytes())?;
        print_block(
            made.number,
            &config,
            &values,
            retried_from,
            &self.slots[slot],
        );
        let log = std::fs::File::create(dir.join("train.log"))?;
        let mut cmd = Command::new(&self.train);
        cmd.arg("--config")
            .arg(&cfg_path)
            .arg("--out")
            .arg(dir.join("run"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: the whole trial is signalled at once,
            // and Ctrl-C in the terminal reaches the driver only.
            .process_group(0);
        let s = &self.slots[slot];
        if let Some(n) = s.threads {
            cmd.args(["--threads", &n.to_string()]);
        }
        match s.gpu {
            Some(g) => {
                cmd.env("CUDA_VISIBLE_DEVICES", g.to_string());
            }
            None if self.slots.iter().all(|s| s.gpu.is_none()) => {
                cmd.args(["--device", "cpu"]);
            }
            None => {}
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.train.display()))?;
        common::files::write_atomic(&dir.join("pid"), format!("{}\n", child.id()).as_bytes())?;
        self.running.push(Running {
            number: made.number,
            id: made.id,
            child,
            slot,
            dir,
            started: Instant::now(),
            reported: BTreeMap::new(),
            ending: None,
        });
        Ok(())
    }

    /// Each running trial: new epochs into the journal (and the pruner),
    /// the timeout, and its end.
    fn watch(&mut self, study: &Study) -> anyhow::Result<()> {
        let mut i = 0;
        while i < self.running.len() {
            self.report_epochs(i, study)?;
            let r = &mut self.running[i];
            if let (None, Some(limit)) = (&r.ending, self.settings.trial_timeout_s) {
                if r.started.elapsed().as_secs_f64() > limit {
                    r.ending = Some((Ending::Timeout, Instant::now()));
                    signal_group(&r.child, libc::SIGTERM);
                }
            }
            if let Some((why, since)) = &r.ending {
                let grace = if *why == Ending::Timeout {
                    TIMEOUT_GRACE
                } else {
                    GRACE
                };
                if since.elapsed() > grace {
                    signal_group(&r.child, libc::SIGKILL);
                }
            }
            match r.child.try_wait()? {
                None => i += 1,
                Some(status) => {
                    let r = self.running.remove(i);
                    self.finish(r, status)?;
                }
            }
        }
        Ok(())
    }

    fn report_epochs(&mut self, i: usize, study: &Study) -> anyhow::Result<()> {
        let metric = self.space.metric.name.clone();
        let r = &mut self.running[i];
        let path = r.dir.join("run/metrics.csv");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        let Ok(rows) = EpochRow::read_all(&path.display().to_string(), &text) else {
            return Ok(());
        };
        let mut new = false;
        for row in rows {
            let step = u64::from(row.epoch);
            if let Some(v) = metric_of(&row, &metric).filter(|v| v.is_finite()) {
                if r.reported.get(&step) != Some(&v) {
                    self.journal.set_intermediate(r.id, step, v)?;
                    r.reported.insert(step, v);
                    new = true;
                }
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
                eprintln!("train sweep: trial {} pruned: {why}", r.number);
                r.ending = Some((Ending::Pruned(why), Instant::now()));
                signal_group(&r.child, libc::SIGTERM);
            }
        }
        Ok(())
    }

    /// Records how a trial ended: from its process and its summary.yaml.
    fn finish(&mut self, r: Running, status: std::process::ExitStatus) -> anyhow::Result<()> {
        let run = r.dir.join("run");
        let summary = std::fs::read_to_string(run.join("summary.yaml"))
            .ok()
            .and_then(|t| common::wire::parse::<TrainSummary>("summary.yaml", &t).ok());
        let rows = std::fs::read_to_string(run.join("metrics.csv"))
            .ok()
            .and_then(|t| EpochRow::read_all("metrics.csv", &t).ok())
            .unwrap_or_default();
        let metric = &self.space.metric;
        let mut attrs: Vec<(&str, Value)> = vec![
            ("epochs", Value::from(rows.len() as u64)),
            (
                "seconds",
                Value::from((r.started.elapsed().as_secs_f64() * 10.0).round() / 10.0),
            ),
        ];
        if let Some(peak) = summary.as_ref().and_then(|s| s.peak_memory.allocated_mib) {
            attrs.push(("peak_memory_mib", Value::from(peak.round())));
        }
        let fail = |class: &str, message: String| -> (Outcome, Vec<(&str, Value)>) {
            let message: String = message.chars().take(MESSAGE_CHARS).collect();
            (
                Outcome::Fail,
                vec![
                    ("error_class", Value::from(class.to_string())),
                    ("error_message", Value::from(message)),
                ],
            )
        };
        // A trial that finished as it was being stopped counts as finished.
        let finished = summary
            .as_ref()
            .is_some_and(|s| s.status == RunStatus::Finished);
        let ending = if finished { None } else { r.ending.as_ref() };
        let (outcome, more) = match (ending, &summary) {
            (Some((Ending::Pruned(why), _)), _) => (
                Outcome::Pruned,
                vec![("prune_reason", Value::from(why.clone()))],
            ),
            (Some((Ending::Timeout, _)), _) => fail(
                Class::Timeout.as_str(),
                format!(
                    "ran past --trial-timeout {} s",
                    self.settings.trial_timeout_s.unwrap_or_default()
                ),
            ),
            (Some((Ending::Interrupted, _)), _) => fail(
                Class::Interrupted.as_str(),
                "stopped with the sweep (Ctrl-C or SIGTERM)".into(),
            ),
            (None, Some(s)) if s.status == RunStatus::Finished => {
                let best = rows
                    .iter()
                    .filter_map(|row| metric_of(row, &metric.name))
                    .filter(|v| v.is_finite())
                    .reduce(|a, b| if metric.goal.better(b, a) { b } else { a });
                match best {
                    Some(v) => (Outcome::Complete(v), Vec::new()),
                    None => fail(
                        Class::NonFiniteLoss.as_str(),
                        format!("no finite {} in metrics.csv", metric.name),
                    ),
                }
            }
            (None, Some(s)) => fail(
                s.error_class.map_or("other", Class::as_str),
                s.stop_reason.clone(),
            ),
            (None, None) => {
                let tail = log_tail(&r.dir.join("train.log"));
                match (status.signal(), status.code()) {
                    (Some(sig), _) => fail(
                        Class::Killed.as_str(),
                        format!("killed by signal {sig} ({}); {tail}", signal_name(sig)),
                    ),
                    (None, code) => fail(
                        Class::Other.as_str(),
                        format!(
                            "train exited {} without a summary; {tail}",
                            code.unwrap_or(-1)
                        ),
                    ),
                }
            }
        };
        attrs.extend(more);
        for (k, v) in &attrs {
            self.journal.set_user_attr(r.id, k, v)?;
        }
        let word = match outcome {
            Outcome::Complete(v) => format!("complete, {} {v:.6}", metric.name),
            Outcome::Pruned => "pruned".into(),
            Outcome::Fail => format!(
                "failed ({})",
                attrs
                    .iter()
                    .find(|(k, _)| *k == "error_class")
                    .and_then(|(_, v)| v.as_str())
                    .unwrap_or("other")
            ),
        };
        eprintln!("train sweep: trial {} {word}", r.number);
        self.journal.finish_trial(r.id, outcome)
    }
}

/// A metrics.csv column by name (space::METRICS).
pub fn metric_of(row: &EpochRow, name: &str) -> Option<f64> {
    match name {
        "val_loss" => Some(row.val_loss),
        "train_loss" => Some(row.train_loss),
        "mae" => row.mae,
        "rmse" => row.rmse,
        "r2" => row.r2,
        "accuracy" => row.accuracy,
        "macro_f1" => row.macro_f1,
        _ => None,
    }
}

/// Seed 004's block before each trial.
fn print_block(
    number: u64,
    c: &Config,
    values: &BTreeMap<String, ParamValue>,
    retried_from: Option<u64>,
    slot: &Slot,
) {
    let rule = "=".repeat(80);
    let channels: Vec<String> = c.channels().iter().map(u32::to_string).collect();
    let mut lines = vec![
        rule.clone(),
        format!(
            "TRIAL {number} - Configuration:{}",
            retried_from.map_or(String::new(), |f| format!(
                " (again, for interrupted trial {f})"
            ))
        ),
        format!(
            "  Model: {} channels, {:?} head",
            channels.join("/"),
            c.architecture.name
        ),
        format!("  Batch size: {}", c.batch_size),
        format!("  Learning rate: {}", c.learning_rate),
        format!("  Dropout: {}", c.dropout),
    ];
    for (k, v) in values {
        if !["batch_size", "learning_rate", "dropout"].contains(&k.as_str()) {
            let text = serde_yaml::to_string(&v.to_yaml()).unwrap_or_default();
            lines.push(format!("  {k}: {}", text.trim()));
        }
    }
    lines.push(format!(
        "  Runs on: {}",
        slot.gpu
            .map_or("the CPU".to_string(), |g| format!("GPU {g}"))
    ));
    lines.push(rule);
    eprintln!("{}", lines.join("\n"));
}

fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the process group the child leads (it was started
    // with process_group(0), so its pid is the group's id).
    unsafe {
        libc::kill(-(child.id() as i32), sig);
    }
}

/// The pid in a trial's pid file, if that process lives and is the train of
/// that trial (its command line names the trial's directory).
pub(crate) fn live_trial_pid(dir: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let needle = dir.display().to_string();
    String::from_utf8_lossy(&cmdline)
        .contains(&needle)
        .then_some(pid)
}

/// SIGTERM to a process group, then SIGKILL if it is still there.
fn end_group(pid: i32) {
    // SAFETY: kill(2) with a process group id and signals; no memory involved.
    unsafe {
        libc::kill(-pid, libc::SIGTERM);
    }
    let t = Instant::now();
    while t.elapsed() < GRACE {
        // SAFETY: signal 0 only checks the group exists.
        if unsafe { libc::kill(-pid, 0) } != 0 {
            return;
        }
        std::thread::sleep(POLL);
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        _ => "a signal",
    }
}

/// The last lines of a trial's log, for a trial that left no summary.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "its log is empty".into()
    } else {
        format!("last lines of train.log: {}", tail.join(" | "))
    }
}
