//! `train --config CFG [--fallback CFG]...` and `train --resume DIR`: the
//! run directory, the fallback chain's I/O (its rules are chain.rs's, what a
//! run gets before it trains setup.rs's), and the events of a run's start
//! and end. Run directory: config.yaml (the resolved config in use),
//! metrics.csv, best.safetensors, checkpoint.safetensors, summary.yaml,
//! curves.png, and chain.yaml with --fallback (docs/guide/train.md, "Run directory").

mod chain;
pub mod listeners;
pub mod setup;

use crate::device::{self, device_name};
use crate::training::events::{End, Event, Listeners, Start};
use crate::training::{Checkpointer, Faults, Interrupter, Stop, Trainer};
use chain::{LegStart, Next, Outcome};
use common::bad_input;
use common::config::Config;
use common::exit;
use common::wire::run_dir::{self, RunDir};
use common::wire::train::{ChainConfig, ChainState, EpochRow, Leg};
use setup::{apply_environment, not_applied};
use std::ffi::OsString;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};
use tch::Device;
use train_cli::DeviceChoice;

pub struct Options {
    pub device: DeviceChoice,
    pub threads: Option<i32>,
    pub sync_errors: bool,
    /// The environment train was started with, before any config's
    /// `environment` was applied: a fresh process for another config starts
    /// from it.
    pub original_env: Vec<(OsString, OsString)>,
}

fn default_out(config_path: &Path) -> PathBuf {
    let stem = config_path
        .file_stem()
        .map_or("run".into(), |s| s.to_string_lossy().into_owned());
    let time = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace(':', "");
    PathBuf::from("runs").join(format!("{stem}-{}", time.trim_end_matches('Z')))
}

/// A fresh run of `config_path` into `out`, with fallback configs.
pub fn start(
    config_path: &Path,
    fallbacks: &[PathBuf],
    out: Option<PathBuf>,
    opts: &Options,
) -> anyhow::Result<u8> {
    let mut configs = Vec::new();
    for f in std::iter::once(config_path).chain(fallbacks.iter().map(PathBuf::as_path)) {
        let l = Config::load(&common::input::read(f)?)?;
        configs.push(ChainConfig {
            name: l.name,
            config: l.config,
        });
    }
    let run = RunDir::new(out.unwrap_or_else(|| default_out(config_path)));
    let out = run.path();
    if run.checkpoint().exists() {
        return Err(bad_input!(
            "{}: already holds a run; continue it with `train --resume {0}` or choose another --out",
            out.display()
        ));
    }
    std::fs::create_dir_all(out)
        .map_err(|e| bad_input!("{}: cannot create: {e}", out.display()))?;
    common::files::write_yaml(&run.config(), &configs[0].config)?;
    let chain = chain::at_start(configs);
    if chain.configs.len() > 1 {
        common::files::write_yaml(&run.chain(), &chain)?;
    }
    go_chain(chain, run, opts)
}

/// Continues the run in `dir`: from its last checkpoint, or, when a chain's
/// next config has not started yet, from the previous config's.
pub fn resume(dir: &Path, opts: &Options) -> anyhow::Result<u8> {
    let run = RunDir::new(dir);
    let chain_path = run.chain();
    let no_checkpoint = || {
        bad_input!(
            "{}: no {}; nothing to resume (a run writes it at the end of its first epoch)",
            dir.display(),
            run_dir::CHECKPOINT
        )
    };
    let checkpointed = run.checkpoint().exists();
    if !checkpointed && !chain_path.exists() {
        return Err(no_checkpoint());
    }
    let chain = if chain_path.exists() {
        let input = common::input::read(&chain_path)?;
        common::wire::parse::<ChainState>(&input.name, &input.text)?
    } else {
        let loaded = Config::load(&common::input::read(&run.config())?)?;
        chain::at_start(vec![ChainConfig {
            name: loaded.name,
            config: loaded.config,
        }])
    };
    // A chain that moved on to a later config in a fresh process before any
    // checkpoint (its first config failed in epoch 1) starts that config
    // afresh; a first config needs its checkpoint.
    if !checkpointed && chain.current == 0 {
        return Err(no_checkpoint());
    }
    if chain.current >= chain.configs.len() {
        return Err(bad_input!(
            "{}: `current` is {}, but the chain has {} config(s)",
            chain_path.display(),
            chain.current,
            chain.configs.len()
        ));
    }
    go_chain(chain, run, opts)
}

/// Runs the chain's configs from `chain.current`: when one fails in a way a
/// config causes (out of memory at micro-batch 1, CUDA graphs, a diverging
/// loss), the next starts from the last good checkpoint, the seeds' A -> B
/// -> C by hand, done here. A next config whose environment differs runs in
/// a fresh process (this one, re-executed on the run directory), since the
/// allocator and CUDA read their settings once. The rules are chain.rs's;
/// this is their I/O.
fn go_chain(chain: ChainState, run: RunDir, opts: &Options) -> anyhow::Result<u8> {
    let started = Instant::now();
    // SIGINT and SIGTERM stop the loop between steps; a second one ends the
    // process at once (the last checkpoint is whole either way).
    let interrupter = Interrupter::install(i32::from(exit::STOPPED));
    // Before anything touches CUDA: the first config's environment.
    let env_notes = apply_environment(&chain.configs[chain.current].config, opts.sync_errors);
    let faults = Faults::from_env()?;
    if let Some(n) = opts.threads {
        tch::set_num_threads(n);
    }
    let device = device::pick(opts.device)?;
    let mut driver = Driver {
        chain,
        run,
        opts,
        device,
        faults,
        interrupter,
        started,
        env_notes,
    };
    loop {
        if let ControlFlow::Break(code) = driver.leg()? {
            return Ok(code);
        }
    }
}

/// A run in this process: its chain, its directory, and what every leg of
/// it shares.
struct Driver<'a> {
    chain: ChainState,
    run: RunDir,
    opts: &'a Options,
    device: Device,
    faults: Faults,
    interrupter: Interrupter,
    /// When this process started the run.
    started: Instant,
    /// The environment train set, said by the first leg's start-up lines.
    env_notes: Vec<String>,
}

/// A config's trainer, ready to run, and how it started.
struct Ready {
    trainer: Trainer,
    /// Tensors carried from the previous config's checkpoint, of.
    carried: Option<(usize, usize)>,
    /// The epoch an exact resume continues at.
    resumed_at: Option<u32>,
}

impl Driver<'_> {
    /// Runs the current config: the run's exit code, or Continue when the
    /// chain goes on with the next config in this process.
    fn leg(&mut self) -> anyhow::Result<ControlFlow<u8>> {
        let ChainConfig { name, config } = self.chain.configs[self.chain.current].clone();
        let mut ready = self.prepare(&config)?;
        let first_epoch = ready.trainer.progress().start_epoch;
        let (mut events, history) = listeners::standard(&self.run, first_epoch)?;
        self.announce(&name, &config, &ready, &history, &mut events)?;
        if first_epoch > config.epochs {
            self.already_finished(&name, &config, &ready.trainer, &history, &mut events)?;
            return Ok(ControlFlow::Break(exit::OK));
        }
        let leg_started = Instant::now();
        let stop = ready
            .trainer
            .run(&mut self.faults, &self.interrupter, &mut events)?;
        let o = chain::outcome(stop, config.epochs);
        let leg = Leg {
            config: name,
            first_epoch,
            last_epoch: ready.trainer.progress().last.as_ref().map(|r| r.epoch),
            status: o.status,
            stop_reason: o.reason.clone(),
            error_class: o.class,
            carried_tensors: ready.carried.map(|(n, of)| format!("{n}/{of}")),
            seconds: leg_started.elapsed().as_secs_f64(),
        };
        let next = chain::after_leg(&self.chain, &o);
        let next_name = match next {
            Next::Leg { index, .. } => Some(self.chain.configs[index].name.clone()),
            Next::End { .. } => None,
        };
        events.emit(&Event::LegEnded {
            leg: &leg,
            next: next_name.as_deref(),
        })?;
        self.chain.legs.push(leg);
        match next {
            Next::Leg {
                index,
                fresh_process,
            } => self.move_to(index, fresh_process, &mut events),
            Next::End { code } => {
                let legs = self.chain.legs.clone();
                self.end(&ready.trainer, o, legs, &mut events)?;
                Ok(ControlFlow::Break(code))
            }
        }
    }

    /// The current config's trainer, started fresh, from the previous
    /// config's checkpoint, or from its own.
    fn prepare(&self, config: &Config) -> anyhow::Result<Ready> {
        let checkpointer = Checkpointer::new(self.run.clone());
        let mut trainer = Trainer::new(config.clone(), checkpointer, self.device)?;
        let (mut carried, mut resumed_at) = (None, None);
        let on_disk = crate::training::checkpoint::epoch_in(&self.run)?;
        match chain::leg_start(on_disk, self.chain.carry_from_epoch) {
            // A later config started afresh: config.yaml names the config in use.
            LegStart::Fresh if self.chain.current > 0 => {
                common::files::write_yaml(&self.run.config(), config)?;
            }
            LegStart::Fresh => {}
            LegStart::Carry => {
                carried = Some(trainer.carry_from_checkpoint()?);
                common::files::write_yaml(&self.run.config(), config)?;
            }
            LegStart::Resume => {
                trainer.resume()?;
                resumed_at = Some(trainer.progress().start_epoch);
            }
        }
        Ok(Ready {
            trainer,
            carried,
            resumed_at,
        })
    }

    /// The events of a config's start: the start-up lines, the class
    /// balance, and the rows of the epochs before.
    fn announce(
        &mut self,
        name: &str,
        config: &Config,
        ready: &Ready,
        history: &[EpochRow],
        events: &mut Listeners,
    ) -> anyhow::Result<()> {
        let trainer = &ready.trainer;
        events.emit(&Event::Started(&Start {
            config: name.to_string(),
            device: device_name(self.device),
            parameters: trainer.parameter_count(),
            expected_parameters: trainer.expected_parameters(),
            train_examples: trainer.examples().0,
            val_examples: trainer.examples().1,
            out: self.run.path().to_path_buf(),
            first_epoch: trainer.progress().start_epoch,
            epochs: config.epochs,
            environment: std::mem::take(&mut self.env_notes),
            not_applied: not_applied(config, self.device),
            resumed_at: ready.resumed_at,
            carried: ready.carried,
            best: trainer.progress().best,
        }))?;
        for (which, counts) in trainer.labels() {
            events.emit(&Event::Labels { which, counts })?;
        }
        if !history.is_empty() {
            events.emit(&Event::History(history))?;
        }
        Ok(())
    }

    /// `--resume` of a run whose checkpoint is of its last epoch.
    fn already_finished(
        &self,
        name: &str,
        config: &Config,
        trainer: &Trainer,
        history: &[EpochRow],
        events: &mut Listeners,
    ) -> anyhow::Result<()> {
        events.emit(&Event::AlreadyFinished {
            epochs: config.epochs,
        })?;
        // Killed after its last checkpoint, before summary.yaml was
        // whole (found by scripts/reliability/kill_train.py): the run
        // finished every epoch but never said so; say it now.
        if self.run.summary().exists() {
            return Ok(());
        }
        let o = chain::outcome(Stop::Finished, config.epochs);
        let mut legs = self.chain.legs.clone();
        legs.push(Leg {
            config: name.to_string(),
            first_epoch: trainer.progress().start_epoch,
            last_epoch: history.last().map(|r| r.epoch),
            status: o.status,
            stop_reason: o.reason.clone(),
            error_class: None,
            carried_tensors: None,
            seconds: 0.0,
        });
        self.end(trainer, o, legs, events)
    }

    /// The chain goes on with config `index`; in this process, Continue.
    fn move_to(
        &mut self,
        index: usize,
        fresh_process: bool,
        events: &mut Listeners,
    ) -> anyhow::Result<ControlFlow<u8>> {
        // The checkpoint on disk is this config's last good epoch.
        let on_disk = crate::training::checkpoint::epoch_in(&self.run)?;
        chain::move_to(&mut self.chain, index, on_disk);
        if fresh_process {
            self.chain.seconds_before += self.started.elapsed().as_secs_f64();
            common::files::write_yaml(&self.run.chain(), &self.chain)?;
            events.emit(&Event::FreshProcess {
                next: &self.chain.configs[index].name,
                why: "its environment differs, and the allocator and CUDA read theirs once",
            })?;
            return Err(reexec(self.run.path(), self.opts));
        }
        // A next config exists: this is a chain, and chain.yaml follows it.
        common::files::write_yaml(&self.run.chain(), &self.chain)?;
        Ok(ControlFlow::Continue(()))
    }

    /// The run's end, with every leg that ran.
    fn end(
        &self,
        trainer: &Trainer,
        o: Outcome,
        legs: Vec<Leg>,
        events: &mut Listeners,
    ) -> anyhow::Result<()> {
        events.emit(&Event::Ended(&End {
            status: o.status,
            stop_reason: o.reason,
            error_class: o.class,
            peak_memory: trainer.progress().peak.clone(),
            micro_batch: trainer.progress().micro_batch,
            time_s: self.chain.seconds_before + self.started.elapsed().as_secs_f64(),
            legs,
        }))
    }
}

/// Replaces this process with `train --resume DIR` under the environment
/// train was started with; returns only if that fails.
fn reexec(out: &Path, opts: &Options) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return anyhow::anyhow!("cannot find train's own executable to continue: {e}"),
    };
    let mut cmd = std::process::Command::new(&exe);
    cmd.arg("--resume")
        .arg(out)
        .args(["--device", opts.device.as_arg()]);
    if let Some(n) = opts.threads {
        cmd.args(["--threads", &n.to_string()]);
    }
    if opts.sync_errors {
        cmd.arg("--sync-errors");
    }
    cmd.env_clear().envs(opts.original_env.iter().cloned());
    let e = cmd.exec();
    anyhow::anyhow!(
        "cannot continue in a fresh process ({}): {e}; continue by hand with `train --resume {}`",
        exe.display(),
        out.display()
    )
}
