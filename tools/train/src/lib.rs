//! `train`: the libtorch trainer for the seeds' model, as a library whose
//! binary is one call (uutils' shape), so that the loop can be driven and
//! tested in-process. `train --config CFG` trains, `train --resume DIR`
//! continues a killed run, `train info` reports the libtorch it runs on,
//! `train bench` and `train check-data` serve the benchmarks and verify-fixes.
//!
//! Modules, by what they do (burn-train's shape):
//! - `training`: the loop. The trainer (epochs, steps with out-of-memory
//!   recovery, validation) only emits events; when to save (strategy) apart
//!   from how (checkpoint); test faults and the stop request (interrupter)
//!   are handed in. Public for the in-process tests.
//! - `run`: `--config`/`--resume`: the run directory, the fallback chain (its
//!   rules pure in chain.rs, its I/O in mod.rs), the device and environment
//!   (setup.rs), and the listeners that turn events into the console,
//!   metrics.csv, curves.png and summary.yaml.
//! - `model`: the network with its variables, AdamW and the loss scaler, the
//!   datasets.
//! - `system`: where train meets libtorch and CUDA: the C++ shim, the CUDA
//!   driver, libtorch's panics as errors, tensors as bytes.
//! - `commands`: `train info`, `train bench`, `train check-data`.
//! - `guard`: `train run -- CMD`, any command supervised (the supervise
//!   crate), with the fallback chain over `{config}`.

mod commands;
mod guard;
mod model;
mod run;
mod system;
pub mod training;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// libtorch's RNG is global: unit tests that draw from it take turns.
#[cfg(test)]
static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[derive(Parser)]
#[command(
    name = "train",
    version,
    about = "libtorch trainer for the seeds' model",
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 finished, 1 training failed (reason in summary.yaml and on stderr), \
                  2 bad input or usage, 3 --device cuda without a GPU, 4 train broke (an unexpected \
                  error, such as an I/O failure)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The config to train.
    #[arg(
        long,
        value_name = "CFG",
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    config: Option<PathBuf>,
    /// A config to continue with when the previous one fails in a way a
    /// config causes (out of memory at micro-batch 1, CUDA graphs, a
    /// diverging loss); repeat for a chain (A -> B -> C).
    #[arg(long, value_name = "CFG", conflicts_with = "resume")]
    fallback: Vec<PathBuf>,
    /// Continue the run in DIR from its last checkpoint.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Run directory [default: runs/<config name>-<time>].
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    out: Option<PathBuf>,
    /// Where to train.
    #[arg(long, value_enum, default_value = "auto")]
    device: run::setup::DeviceChoice,
    /// CPU threads for libtorch [default: libtorch's choice].
    #[arg(long, value_name = "N")]
    threads: Option<i32>,
    /// Set CUDA_LAUNCH_BLOCKING=1, so a CUDA error points at its kernel.
    #[arg(long)]
    sync_errors: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Report the torch version, CUDA and cuDNN availability and the devices.
    Info(commands::info::Args),
    /// Time training steps on a fixed batch (for bench/train_vs_pytorch.py).
    Bench(commands::bench::Args),
    /// Check the config's data (shapes, dtypes, NaN/inf, labels) and print
    /// the class balance, without training.
    CheckData(commands::check_data::Args),
    /// A hyper-parameter search, each trial a train process, every result
    /// in an Optuna journal (docs/GUIDE.md, "Sweeps: train sweep").
    Sweep(Box<sweep::cli::Args>),
    /// One guarded run of any command: `train run --out DIR [--config A
    /// --fallback B] -- python main.py --config {config}` (docs/GUIDE.md,
    /// "Your own training script").
    Run(Box<guard::Args>),
}

/// The whole of `train`'s binary.
pub fn main() -> ExitCode {
    // First of all, before libtorch allocates a tensor: keep the heap that
    // training steps free and reuse, instead of glibc trimming it after
    // every step and faulting it in again (system/malloc.rs, issue 26).
    system::malloc::keep_heap_for_training();
    // Before anything changes it: a fresh process for another config of a
    // chain starts from this environment.
    let original_env = std::env::vars_os().collect();
    let cli = Cli::parse();
    common::cli::run("train", || {
        let opts = run::Options {
            device: cli.device,
            threads: cli.threads,
            sync_errors: cli.sync_errors,
            original_env,
        };
        match (&cli.command, &cli.resume, &cli.config) {
            (Some(Command::Info(args)), _, _) => commands::info::run(args),
            (Some(Command::Bench(args)), _, _) => commands::bench::run(args),
            (Some(Command::CheckData(args)), _, _) => commands::check_data::run(args),
            (Some(Command::Sweep(args)), _, _) => {
                let me = std::env::current_exe()
                    .map_err(|e| anyhow::anyhow!("cannot find train's own executable: {e}"))?;
                sweep::driver::run(args, &me)
            }
            (Some(Command::Run(args)), _, _) => guard::run(args),
            (None, Some(dir), _) => run::resume(dir, &opts),
            (None, None, Some(cfg)) => run::start(cfg, &cli.fallback, cli.out.clone(), &opts),
            (None, None, None) => unreachable!("clap requires --config or --resume"),
        }
    })
}
