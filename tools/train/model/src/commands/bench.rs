//! `train bench`: steady-state training step time on a fixed batch, for the
//! side-by-side comparison with PyTorch (bench/train_vs_pytorch.py). It saves
//! the initial weights and the batch so the reference runs the very same
//! computation, and reports the initial model's eval-mode loss on that batch
//! as a correctness cross-check. Prints `train-bench/v1` JSON on stdout.

use crate::model::data::{self, Dataset};
use crate::model::net::Net;
use crate::model::optim::AdamW;
use crate::training::checkpoint;
use crate::training::step;
use common::config::Config;
use common::wire::train::TrainBench;
use common::wire::Versioned;
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use tch::{nn, Device, Tensor};
use train_cli::BenchArgs as Args;

pub fn run(args: &Args) -> anyhow::Result<u8> {
    let mut config = Config::load(&common::input::read(&args.config)?)?.config;
    if let Some(c) = &args.checkpointing {
        config.gradient_checkpointing = c == "on";
    }
    if let Some(p) = &args.precision {
        config.mixed_precision = serde_yaml::from_str(p)?;
    }
    if let Some(l) = &args.channels_last {
        config.channels_last = serde_yaml::from_str(l)?;
    }
    let device = crate::device::pick(args.device)?;
    if let Some(n) = args.threads {
        tch::set_num_threads(n);
    }
    let n = u64::from(config.batch_size);
    let batch = data::synthetic(&config, n, 0);
    let vs = nn::VarStore::new(Device::Cpu);
    tch::manual_seed(config.seed as i64);
    let net = Net::new(&vs.root(), &config);
    let (initial_eval_loss, parameters) = save_inputs(&args.save, &config, &vs, &net, &batch)?;

    // The weights and batch were saved from the CPU; now move to the device.
    let mut vs = vs;
    vs.set_device(device);
    let batch = batch.to(device);
    let (times, fb_times, faults) = time_steps(args, &config, &vs, &net, &batch)?;
    let peak = crate::system::shim::memory_stats(device).ok();
    let median = median(&times);
    let report = TrainBench {
        schema: TrainBench::SCHEMA.into(),
        threads: tch::get_num_threads(),
        batch_size: config.batch_size,
        steps: args.steps,
        step_ms_median: median,
        forward_backward_ms_median: self::median(&fb_times),
        step_ms_all: times,
        samples_per_s: n as f64 / (median / 1000.0),
        initial_eval_loss,
        parameters,
        config,
        device: crate::device::device_name(device),
        peak_allocated_mib: peak.map(|m| crate::system::shim::mib(m.peak_allocated)),
        peak_reserved_mib: peak.map(|m| crate::system::shim::mib(m.peak_reserved)),
        channels_last: net.channels_last_on(device),
        minor_faults_per_step: faults,
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string(&report)?)?;
    Ok(common::exit::OK)
}

/// Saves the initial weights and the batch to `path`, for the reference to
/// run the very same computation. Returns the initial model's eval-mode
/// loss on the batch, and its parameter count.
fn save_inputs(
    path: &Path,
    config: &Config,
    vs: &nn::VarStore,
    net: &Net,
    batch: &Dataset,
) -> anyhow::Result<(f64, i64)> {
    let mut weights: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(k, t)| (k, t.copy()))
        .collect();
    weights.sort_by(|a, b| a.0.cmp(&b.0));
    let initial_eval_loss = tch::no_grad(|| {
        let out = net.forward(&batch.frames, &batch.scalars, false);
        step::loss(config, &out, &batch.target).double_value(&[])
    });
    let mut saved: Vec<(String, Tensor)> = weights
        .iter()
        .map(|(k, t)| (k.clone(), t.shallow_clone()))
        .collect();
    saved.push(("batch.frames".into(), batch.frames.shallow_clone()));
    saved.push(("batch.scalars".into(), batch.scalars.shallow_clone()));
    saved.push(("batch.target".into(), batch.target.shallow_clone()));
    checkpoint::save(path, &saved, Default::default())?;
    let parameters = weights
        .iter()
        .filter(|(_, t)| t.requires_grad())
        .map(|(_, t)| t.numel() as i64)
        .sum();
    Ok((initial_eval_loss, parameters))
}

/// `args.warmup` untimed steps, then `args.steps` timed ones, on the
/// model's device. Returns the timed steps' whole and forward-backward
/// times (ms), and the minor page faults per timed step.
fn time_steps(
    args: &Args,
    config: &Config,
    vs: &nn::VarStore,
    net: &Net,
    batch: &Dataset,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Option<f64>)> {
    let device = vs.device();
    let mut opt = AdamW::new(vs, config.weight_decay);
    let mut scaler = (config.mixed_precision == common::config::Precision::Fp16)
        .then(crate::model::optim::LossScaler::default);
    let (mut times, mut fb_times) = (Vec::new(), Vec::new());
    let sync = || {
        if let Device::Cuda(i) = device {
            tch::Cuda::synchronize(i as i64);
        }
    };
    let mut faults_before = None;
    for i in 0..args.warmup + args.steps {
        if i == args.warmup {
            let _ = crate::system::shim::reset_peak(device);
            faults_before = minor_faults();
        }
        let started = Instant::now();
        opt.zero_grad();
        let amp = step::Amp {
            device,
            precision: config.mixed_precision,
            loss_scale: scaler.as_ref().map(|s| s.scale),
        };
        // An out-of-memory error comes back as an error (exit 1, libtorch's
        // message), not as tch's panic.
        crate::system::panics::catch(|| {
            step::forward_backward(
                net,
                config,
                &batch.frames,
                &batch.scalars,
                &batch.target,
                config.gradient_checkpointing,
                &amp,
                1.0,
            )
        })?;
        sync();
        let fb = started.elapsed();
        crate::model::optim::apply_update(
            &mut opt,
            scaler.as_mut(),
            config.grad_clip,
            config.learning_rate,
        );
        sync();
        if i >= args.warmup {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            fb_times.push(fb.as_secs_f64() * 1000.0);
        }
    }
    let faults = faults_before
        .zip(minor_faults())
        .map(|(a, b)| (b - a) as f64 / args.steps.max(1) as f64);
    Ok((times, fb_times, faults))
}

/// This process's minor page faults so far (getrusage), where counted.
fn minor_faults() -> Option<i64> {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    (rc == 0).then_some(usage.ru_minflt as i64)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}
