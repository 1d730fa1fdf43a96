//! `train --config CFG [--fallback CFG]...` and `train --resume DIR`: the
//! run directory, the environment the run gets, the fallback chain, and the
//! events of a run's start and end. Run directory: config.yaml (the resolved
//! config in use), metrics.csv, best.safetensors, checkpoint.safetensors,
//! summary.yaml, curves.png, and chain.yaml with --fallback (README, "train").

use crate::events::{End, Event, Start};
use crate::fault::Faults;
use crate::listeners;
use crate::trainer::{Stop, Trainer};
use common::bad_input;
use common::config::{Config, Precision};
use common::exit;
use common::wire::run_dir::{self, RunDir};
use common::wire::train::{ChainConfig, ChainState, Leg, RunStatus};
use common::wire::Versioned;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};
use tch::Device;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Cuda,
}

impl DeviceChoice {
    fn as_arg(self) -> &'static str {
        match self {
            DeviceChoice::Auto => "auto",
            DeviceChoice::Cpu => "cpu",
            DeviceChoice::Cuda => "cuda",
        }
    }
}

pub struct Options {
    pub device: DeviceChoice,
    pub threads: Option<i32>,
    pub sync_errors: bool,
    /// The environment train was started with, before any config's
    /// `environment` was applied: a fresh process for another config starts
    /// from it.
    pub original_env: Vec<(OsString, OsString)>,
}

/// Settings in the config that this build of train does not apply.
pub fn not_applied(c: &Config, device: Device) -> Vec<String> {
    let mut out = Vec::new();
    if c.torch_compile {
        out.push(format!(
            "torch_compile (mode {}): libtorch has no torch.compile; this trainer runs eager",
            c.torch_compile_mode.as_str()
        ));
    }
    if c.mixed_precision == Precision::Fp16 && device == Device::Cpu {
        out.push("mixed_precision fp16 on CPU: applied through CPU autocast, but slow there; bf16 is CPU's half precision".to_string());
    }
    if c.num_workers > 0 {
        out.push(format!(
            "num_workers {}: the dataset is held in memory and batched in-process; no worker processes",
            c.num_workers
        ));
    }
    if c.pin_memory {
        out.push("pin_memory: not used (the dataset is moved to the device once)".to_string());
    }
    out
}

/// The variables the run gets: the config's `environment`, expandable
/// segments unless the user chose an allocator setting (seed 004), and
/// CUDA_LAUNCH_BLOCKING=1 with --sync-errors. Called before anything starts
/// CUDA: the caching allocator reads its setting once.
pub fn apply_environment(c: &Config, sync_errors: bool) -> Vec<String> {
    let mut said = Vec::new();
    for (k, v) in &c.environment {
        std::env::set_var(k, v);
    }
    if std::env::var_os("PYTORCH_ALLOC_CONF").is_none()
        && std::env::var_os("PYTORCH_CUDA_ALLOC_CONF").is_none()
    {
        std::env::set_var("PYTORCH_ALLOC_CONF", "expandable_segments:True");
        said.push("PYTORCH_ALLOC_CONF=expandable_segments:True (train's default; set it yourself to choose)".to_string());
    }
    if sync_errors {
        std::env::set_var("CUDA_LAUNCH_BLOCKING", "1");
        said.push(
            "CUDA_LAUNCH_BLOCKING=1 (--sync-errors: errors point at their kernel, 10-20% slower)"
                .to_string(),
        );
    }
    said
}

/// `cpu` or `cuda:N`, as PyTorch writes devices.
pub fn device_name(d: Device) -> String {
    match d {
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Cpu => "cpu".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

pub fn pick_device(choice: DeviceChoice) -> anyhow::Result<Device> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Auto => Ok(Device::cuda_if_available()),
        DeviceChoice::Cuda if tch::Cuda::is_available() => Ok(Device::Cuda(0)),
        DeviceChoice::Cuda => Err(anyhow::Error::new(exit::Failure::new(
            exit::NO_GPU,
            "--device cuda: libtorch sees no CUDA device (see `train info`)",
        ))),
    }
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
    let out = out.unwrap_or_else(|| default_out(config_path));
    if RunDir::new(&out).checkpoint().exists() {
        return Err(bad_input!(
            "{}: already holds a run; continue it with `train --resume {0}` or choose another --out",
            out.display()
        ));
    }
    std::fs::create_dir_all(&out)
        .map_err(|e| bad_input!("{}: cannot create: {e}", out.display()))?;
    common::files::write_yaml(&RunDir::new(&out).config(), &configs[0].config)?;
    let chain = ChainState {
        schema: ChainState::SCHEMA.into(),
        configs,
        current: 0,
        carry_from_epoch: None,
        legs: Vec::new(),
        seconds_before: 0.0,
    };
    if chain.configs.len() > 1 {
        common::files::write_yaml(&RunDir::new(&out).chain(), &chain)?;
    }
    go_chain(chain, out, opts)
}

/// Continues the run in `dir`: from its last checkpoint, or, when a chain's
/// next config has not started yet, from the previous config's.
pub fn resume(dir: &Path, opts: &Options) -> anyhow::Result<u8> {
    let run = RunDir::new(dir);
    if !run.checkpoint().exists() {
        return Err(bad_input!(
            "{}: no {}; nothing to resume (a run writes it at the end of its first epoch)",
            dir.display(),
            run_dir::CHECKPOINT
        ));
    }
    let chain_path = run.chain();
    let chain = if chain_path.exists() {
        let input = common::input::read(&chain_path)?;
        common::wire::parse::<ChainState>(&input.name, &input.text)?
    } else {
        let loaded = Config::load(&common::input::read(&run.config())?)?;
        ChainState {
            schema: ChainState::SCHEMA.into(),
            configs: vec![ChainConfig {
                name: loaded.name,
                config: loaded.config,
            }],
            current: 0,
            carry_from_epoch: None,
            legs: Vec::new(),
            seconds_before: 0.0,
        }
    };
    if chain.current >= chain.configs.len() {
        return Err(bad_input!(
            "{}: `current` is {}, but the chain has {} config(s)",
            chain_path.display(),
            chain.current,
            chain.configs.len()
        ));
    }
    go_chain(chain, dir.to_path_buf(), opts)
}

/// Runs the chain's configs from `chain.current`: when one fails in a way a
/// config causes (out of memory at micro-batch 1, CUDA graphs, a diverging
/// loss), the next starts from the last good checkpoint, the seeds' A -> B
/// -> C by hand, done here. A next config whose environment differs runs in
/// a fresh process (this one, re-executed on the run directory), since the
/// allocator and CUDA read their settings once.
fn go_chain(mut chain: ChainState, out: PathBuf, opts: &Options) -> anyhow::Result<u8> {
    let started = Instant::now();
    // SIGINT and SIGTERM stop the loop between steps; a second one ends the
    // process at once (the last checkpoint is whole either way).
    let _ = ctrlc::set_handler(|| {
        use std::sync::atomic::Ordering;
        if crate::trainer::STOP_REQUESTED.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(exit::STOPPED));
        }
    });
    // Before anything touches CUDA: the first config's environment.
    let mut env_notes = apply_environment(&chain.configs[chain.current].config, opts.sync_errors);
    let mut faults = Faults::from_env()?;
    if let Some(n) = opts.threads {
        tch::set_num_threads(n);
    }
    let device = pick_device(opts.device)?;
    loop {
        let i = chain.current;
        let ChainConfig { name, config } = chain.configs[i].clone();
        let mut trainer = Trainer::new(config.clone(), &out, device)?;
        let mut carried = None;
        let mut resumed_at = None;
        match (crate::checkpoint::epoch_in(&out)?, chain.carry_from_epoch) {
            // Nothing to start from: a fresh start.
            (None, _) => {}
            // The previous config's checkpoint: carry what fits.
            (Some(e), Some(from)) if e == from => {
                carried = Some(trainer.carry_from_checkpoint()?);
                common::files::write_yaml(&RunDir::new(&out).config(), &config)?;
            }
            // This config's own checkpoint: an exact resume.
            (Some(_), _) => {
                trainer.resume()?;
                resumed_at = Some(trainer.start_epoch);
            }
        }
        let (mut events, history) = listeners::standard(&out, trainer.start_epoch)?;
        let not_applied = not_applied(&config, device);
        events.emit(&Event::Started(&Start {
            config: name.clone(),
            device: device_name(device),
            parameters: trainer.parameter_count(),
            expected_parameters: trainer.expected_parameters(),
            train_examples: trainer.examples().0,
            val_examples: trainer.examples().1,
            out: out.clone(),
            first_epoch: trainer.start_epoch,
            epochs: config.epochs,
            environment: std::mem::take(&mut env_notes),
            not_applied,
            resumed_at,
            carried,
            best: trainer.best,
        }))?;
        for (which, counts) in &trainer.labels {
            events.emit(&Event::Labels { which, counts })?;
        }
        if !history.is_empty() {
            events.emit(&Event::History(&history))?;
        }
        if trainer.start_epoch > config.epochs {
            events.emit(&Event::AlreadyFinished {
                epochs: config.epochs,
            })?;
            // Killed after its last checkpoint, before summary.yaml was
            // whole (found by scripts/reliability/kill_train.py): the run
            // finished every epoch but never said so; say it now.
            if !RunDir::new(&out).summary().exists() {
                let reason = format!("completed {} epochs", config.epochs);
                let mut legs = chain.legs.clone();
                legs.push(Leg {
                    config: name.clone(),
                    first_epoch: trainer.start_epoch,
                    last_epoch: history.last().map(|r| r.epoch),
                    status: RunStatus::Finished,
                    stop_reason: reason.clone(),
                    error_class: None,
                    carried_tensors: None,
                    seconds: 0.0,
                });
                events.emit(&Event::Ended(&End {
                    status: RunStatus::Finished,
                    stop_reason: reason,
                    error_class: None,
                    peak_memory: trainer.peak.clone(),
                    micro_batch: trainer.micro_batch,
                    time_s: chain.seconds_before + started.elapsed().as_secs_f64(),
                    legs,
                }))?;
            }
            return Ok(exit::OK);
        }
        let first_epoch = trainer.start_epoch;
        let leg_started = Instant::now();
        let stop = trainer.run(&mut faults, &mut events)?;
        let (status, reason, class) = match stop {
            Stop::Finished => (
                RunStatus::Finished,
                format!("completed {} epochs", config.epochs),
                None,
            ),
            Stop::Failed { class, reason } => (RunStatus::Failed, reason, Some(class)),
            Stop::Stopped { reason } => (RunStatus::Stopped, reason, None),
        };
        let leg = Leg {
            config: name.clone(),
            first_epoch,
            last_epoch: trainer.last.as_ref().map(|r| r.epoch),
            status,
            stop_reason: reason.clone(),
            error_class: class,
            carried_tensors: carried.map(|(n, of)| format!("{n}/{of}")),
            seconds: leg_started.elapsed().as_secs_f64(),
        };
        let next = chain
            .configs
            .get(i + 1)
            .filter(|_| class.is_some_and(|c| c.config_caused()));
        events.emit(&Event::LegEnded {
            leg: &leg,
            next: next.map(|n| n.name.as_str()),
        })?;
        chain.legs.push(leg);
        if let Some(next) = next.cloned() {
            chain.current = i + 1;
            // The checkpoint on disk is this config's last good epoch.
            chain.carry_from_epoch = crate::checkpoint::epoch_in(&out)?;
            if next.config.environment != config.environment {
                chain.seconds_before += started.elapsed().as_secs_f64();
                common::files::write_yaml(&RunDir::new(&out).chain(), &chain)?;
                events.emit(&Event::FreshProcess {
                    next: &next.name,
                    why: "its environment differs, and the allocator and CUDA read theirs once",
                })?;
                return Err(reexec(&out, opts));
            }
            // A next config exists: this is a chain, and chain.yaml follows it.
            common::files::write_yaml(&RunDir::new(&out).chain(), &chain)?;
            continue;
        }
        events.emit(&Event::Ended(&End {
            status,
            stop_reason: reason,
            error_class: class,
            peak_memory: trainer.peak.clone(),
            micro_batch: trainer.micro_batch,
            time_s: chain.seconds_before + started.elapsed().as_secs_f64(),
            legs: chain.legs.clone(),
        }))?;
        return Ok(match status {
            RunStatus::Finished => exit::OK,
            RunStatus::Failed => exit::FOUND,
            RunStatus::Stopped => exit::STOPPED,
        });
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
