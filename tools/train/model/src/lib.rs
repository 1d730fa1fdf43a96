//! `train-model`: train's libtorch half, the trainer for the seeds' model.
//! `train` (tools/train) parses the command line without libtorch and, for
//! `--config`, `--resume`, `bench`, `check-data` and `info`'s libtorch part,
//! replaces itself with the `train-model` binary beside it (same pid, same
//! arguments), whose main is [`main`] (ARCHITECTURE.md, "Packaging").
//!
//! Modules, by what they do (burn-train's shape):
//! - `training`: the loop. The trainer (epochs, steps with out-of-memory
//!   recovery, validation) only emits events; when to save (strategy) apart
//!   from how (checkpoint); test faults and the stop request (interrupter)
//!   are handed in. Public for the in-process tests.
//! - `run`: `--config`/`--resume`: the run directory, the fallback chain (its
//!   rules pure in chain.rs, its I/O in mod.rs), the environment (setup.rs),
//!   and the listeners that turn events into the console,
//!   metrics.csv, curves.png and summary.yaml.
//! - `model`: the network with its variables, AdamW and the loss scaler, the
//!   datasets.
//! - `system`: where train meets libtorch: the C++ shim, libtorch's panics
//!   as errors, tensors as bytes, glibc malloc's thresholds.
//! - `commands`: `train info`'s libtorch part, `train bench`,
//!   `train check-data`.
//! - `device`: the libtorch device a `--device` gets.

mod commands;
mod device;
mod model;
mod run;
mod system;
pub mod training;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use train_cli::{InfoArgs, ModelCommand, TrainingArgs};

/// libtorch's RNG is global: unit tests that draw from it take turns.
#[cfg(test)]
static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What `train` hands over: the same arguments, of the commands that need
/// libtorch (train's own command line, tools/train/src/lib.rs, says the rest).
#[derive(Parser)]
#[command(
    name = "train",
    version,
    about = "train's libtorch half: `train` runs it to train its built-in model",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    training: TrainingArgs,
}

#[derive(Subcommand)]
enum Command {
    /// train-info/v1 without the driver's devices (`train info` adds them).
    Info(InfoArgs),
    #[command(flatten)]
    Model(ModelCommand),
}

/// The whole of the `train-model` binary.
pub fn main() -> ExitCode {
    // First of all, before libtorch allocates a tensor: keep the heap that
    // training steps free and reuse, instead of glibc trimming it after
    // every step and faulting it in again (system/malloc.rs, issue 26).
    system::malloc::keep_heap_for_training();
    // Before anything changes it: a fresh process for another config of a
    // chain starts from this environment.
    let original_env = std::env::vars_os().collect();
    let cli = Cli::parse();
    common::cli::run("train", || match &cli.command {
        Some(Command::Info(args)) => commands::info::run(args),
        Some(Command::Model(ModelCommand::Bench(args))) => commands::bench::run(args),
        Some(Command::Model(ModelCommand::CheckData(args))) => commands::check_data::run(args),
        None => {
            let t = &cli.training;
            let opts = run::Options {
                device: t.device,
                threads: t.threads,
                sync_errors: t.sync_errors,
                original_env,
            };
            match (&t.resume, &t.config) {
                (Some(dir), _) => run::resume(dir, &opts),
                (None, Some(cfg)) => run::start(cfg, &t.fallback, t.out.clone(), &opts),
                (None, None) => unreachable!("clap requires --config or --resume"),
            }
        }
    })
}
