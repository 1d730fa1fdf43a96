//! `train --config CFG` and `train --resume DIR`: the run directory, the
//! environment the run gets, and summary.yaml at the end.
//!
//! Run directory: config.yaml (the resolved config), metrics.csv,
//! best.safetensors, checkpoint.safetensors, summary.yaml (README, "train").

use crate::checkpoint;
use crate::console::{Console, MetricsCsv};
use crate::trainer::{Listener, Stop, Trainer, CHECKPOINT};
use common::bad_input;
use common::config::{Config, Precision};
use common::exit;
use common::failures::Class;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};
use tch::Device;

pub const SUMMARY_SCHEMA: &str = "train-summary/v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Cuda,
}

pub struct Options {
    pub device: DeviceChoice,
    pub threads: Option<i32>,
    pub sync_errors: bool,
}

#[derive(Serialize)]
struct Summary<'a> {
    schema: &'static str,
    status: &'static str,
    stop_reason: String,
    /// The failure's class (common::failures: out-of-memory,
    /// cuda-graph-pointer, device-side-assert, cuda-error, non-finite-loss,
    /// other), null when it finished.
    error_class: Option<&'static str>,
    config: &'a str,
    device: String,
    parameters: i64,
    epochs_completed: u32,
    resumed_at_epoch: Option<u32>,
    best: Option<Best>,
    last: Option<&'a crate::trainer::EpochRecord>,
    time_s: f64,
    peak_memory: crate::trainer::PeakMemory,
    /// fp16 steps skipped for inf/NaN gradients over the run.
    skipped_steps: u64,
    /// The micro-batch in use at the end (null: whole batches).
    micro_batch_size: Option<u32>,
    /// Out-of-memory errors recovered by splitting the batch.
    oom_events: &'a [crate::trainer::OomEvent],
    /// Each config that ran, in order, and why it stopped.
    configs: &'a [Leg],
    /// Config settings this trainer does not apply, said rather than ignored.
    not_applied: Vec<String>,
}

#[derive(Serialize)]
struct Best {
    epoch: u32,
    val_loss: f64,
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
/// CUDA_LAUNCH_BLOCKING=1 with --sync-errors. Set before CUDA starts.
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
    let loaded = Config::load(&common::input::read(config_path)?)?;
    let mut chain = vec![(loaded.config.clone(), loaded.name.clone())];
    for f in fallbacks {
        let l = Config::load(&common::input::read(f)?)?;
        chain.push((l.config, l.name));
    }
    let out = out.unwrap_or_else(|| default_out(config_path));
    if out.join(CHECKPOINT).exists() {
        return Err(bad_input!(
            "{}: already holds a run; continue it with `train --resume {0}` or choose another --out",
            out.display()
        ));
    }
    std::fs::create_dir_all(&out)
        .map_err(|e| bad_input!("{}: cannot create: {e}", out.display()))?;
    checkpoint::write_atomic(&out.join("config.yaml"), loaded.config.to_yaml().as_bytes())?;
    go_chain(chain, out, None, opts)
}

/// Continues the run in `dir` from its last checkpoint.
pub fn resume(dir: &Path, opts: &Options) -> anyhow::Result<u8> {
    let config_path = dir.join("config.yaml");
    if !dir.join(CHECKPOINT).exists() {
        return Err(bad_input!(
            "{}: no {CHECKPOINT}; nothing to resume (a run writes it at the end of its first epoch)",
            dir.display()
        ));
    }
    let loaded = Config::load(&common::input::read(&config_path)?)?;
    go_chain(
        vec![(loaded.config, loaded.name)],
        dir.to_path_buf(),
        Some(dir),
        opts,
    )
}

/// One config's part of a run (several with `--fallback`).
#[derive(Serialize)]
struct Leg {
    config: String,
    first_epoch: u32,
    last_epoch: Option<u32>,
    status: &'static str,
    stop_reason: String,
    error_class: Option<&'static str>,
    /// Model tensors carried over from the previous config's checkpoint.
    carried_tensors: Option<String>,
    seconds: f64,
}

/// Runs the first config and, when it fails in a way a config causes (out
/// of memory at micro-batch 1, CUDA graphs, a diverging loss), the next,
/// from the last good checkpoint: the seeds' A -> B -> C by hand, done here.
pub fn go_chain(
    configs: Vec<(Config, String)>,
    out: PathBuf,
    resume_from: Option<&Path>,
    opts: &Options,
) -> anyhow::Result<u8> {
    if let Some(n) = opts.threads {
        tch::set_num_threads(n);
    }
    let device = pick_device(opts.device)?;
    let started = Instant::now();
    let mut legs: Vec<Leg> = Vec::new();
    let mut resumed_at = None;
    let count = configs.len();
    for (i, (config, name)) in configs.into_iter().enumerate() {
        let env_notes = apply_environment(&config, opts.sync_errors);
        let mut trainer = Trainer::new(config.clone(), out.clone(), device)?;
        let mut carried = None;
        if let Some(dir) = resume_from.filter(|_| i == 0) {
            trainer.resume(dir)?;
            resumed_at = Some(trainer.start_epoch);
        } else if i > 0 && out.join(CHECKPOINT).exists() {
            let (n, of) = trainer.carry_from(&out)?;
            eprintln!(
                "train: {name}: continuing from the last good checkpoint at epoch {}; {n} of {of} model tensors carried over{}",
                trainer.start_epoch,
                if n < of { " (the others start fresh: their shapes differ)" } else { "" }
            );
            carried = Some(format!("{n}/{of}"));
        }
        if i > 0 {
            checkpoint::write_atomic(&out.join("config.yaml"), config.to_yaml().as_bytes())?;
        }
        let params = trainer.parameter_count();
        eprintln!(
            "train: {name} · {} · {params} parameters (cfgcheck's estimate: {}) · {} training / {} validation examples · run directory {}",
            device_name(device),
            trainer.expected_parameters(),
            trainer.examples().0,
            trainer.examples().1,
            out.display()
        );
        for n in &env_notes {
            eprintln!("train: environment: {n}");
        }
        let skipped = not_applied(&config, device);
        for n in &skipped {
            eprintln!("train: not applied: {n}");
        }
        if let Some(at) = resumed_at.filter(|_| i == 0) {
            eprintln!("train: resuming {} at epoch {at}", out.display());
        }
        if trainer.start_epoch > config.epochs {
            eprintln!(
                "train: the run already finished all {} epochs",
                config.epochs
            );
            return Ok(exit::OK);
        }
        let first_epoch = trainer.start_epoch;
        let leg_started = Instant::now();
        let mut console = Console::new();
        let mut csv = MetricsCsv::open(&out.join("metrics.csv"), trainer.start_epoch)?;
        let mut plot = crate::plot::Plot::new(&out);
        // metrics.csv first: the plot is drawn from it.
        let stop = trainer.run(&mut [&mut console as &mut dyn Listener, &mut csv, &mut plot])?;
        let (status, reason, class) = match &stop {
            Stop::Finished => (
                "finished",
                format!("completed {} epochs", config.epochs),
                None,
            ),
            Stop::Failed { class, reason } => ("failed", reason.clone(), Some(*class)),
        };
        legs.push(Leg {
            config: name.clone(),
            first_epoch,
            last_epoch: trainer.last.as_ref().map(|r| r.epoch),
            status,
            stop_reason: reason.clone(),
            error_class: class.map(Class::as_str),
            carried_tensors: carried,
            seconds: leg_started.elapsed().as_secs_f64(),
        });
        let falls_back = class.is_some_and(Class::config_caused) && i + 1 < count;
        if falls_back {
            eprintln!(
                "train: {name} failed ({}): {reason}; falling back to the next config",
                class.map_or("", Class::as_str)
            );
            continue;
        }
        let summary = Summary {
            schema: SUMMARY_SCHEMA,
            status,
            stop_reason: reason.clone(),
            error_class: class.map(Class::as_str),
            config: &name,
            device: device_name(device),
            parameters: params,
            epochs_completed: trainer
                .last
                .as_ref()
                .map_or(trainer.start_epoch - 1, |r| r.epoch),
            resumed_at_epoch: resumed_at,
            best: trainer
                .best
                .map(|(epoch, val_loss)| Best { epoch, val_loss }),
            last: trainer.last.as_ref(),
            time_s: started.elapsed().as_secs_f64(),
            peak_memory: trainer.peak.clone(),
            skipped_steps: trainer.scaler.as_ref().map_or(0, |s| s.skipped),
            micro_batch_size: trainer.micro_batch,
            oom_events: &trainer.oom_events,
            configs: &legs,
            not_applied: skipped,
        };
        checkpoint::write_atomic(
            &out.join("summary.yaml"),
            serde_yaml::to_string(&summary)?.as_bytes(),
        )?;
        if status != "finished" {
            eprintln!("train: failed: {reason}");
            return Ok(exit::FOUND);
        }
        return Ok(exit::OK);
    }
    unreachable!("the last config always returns")
}
