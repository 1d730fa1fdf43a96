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
//!   rules pure in chain.rs, its I/O in mod.rs), the environment (setup.rs),
//!   and the listeners that turn events into the console,
//!   metrics.csv, curves.png and summary.yaml.
//! - `model`: the network with its variables, AdamW and the loss scaler, the
//!   datasets.
//! - `system`: where train meets libtorch and CUDA: the C++ shim, the CUDA
//!   driver, libtorch's panics as errors, tensors as bytes.
//! - `commands`: `train info`, `train bench`, `train check-data`.
//! - `device`: `--device` and the libtorch device it picks.
//! - `guard`: `train run -- CMD`, any command supervised (the supervise
//!   crate), with the fallback chain over `{config}`.
//!
//! Without the `libtorch` feature (the pip wheel's train) only `guard`, the
//! sweep, `train info` and the CUDA driver's device list are built; what
//! trains the seeds' model exits 5 (`common::exit::no_libtorch`).

mod commands;
mod device;
mod guard;
#[cfg(feature = "libtorch")]
mod model;
#[cfg(feature = "libtorch")]
mod run;
mod system;
#[cfg(feature = "libtorch")]
pub mod training;

use clap::{Parser, Subcommand};
pub use device::DeviceChoice;
use std::path::PathBuf;
use std::process::ExitCode;

/// libtorch's RNG is global: unit tests that draw from it take turns.
#[cfg(all(test, feature = "libtorch"))]
static TORCH_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[derive(Parser)]
#[command(
    name = "train",
    version,
    about = "libtorch trainer for the seeds' model",
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 finished, 1 training failed (reason in summary.yaml and on stderr), \
                  2 bad input or usage, 3 --device cuda without a GPU, 4 train broke (an unexpected \
                  error, such as an I/O failure), 5 this train was built without libtorch (the pip \
                  wheel's: `train run` and program sweeps only; docs/GUIDE.md, \"Install\")."
)]
// The training options are read only by a build with libtorch.
#[cfg_attr(not(feature = "libtorch"), allow(dead_code))]
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
    device: DeviceChoice,
    /// CPU threads for libtorch [default: libtorch's choice].
    #[arg(long, value_name = "N")]
    threads: Option<i32>,
    /// Set CUDA_LAUNCH_BLOCKING=1, so a CUDA error points at its kernel.
    #[arg(long)]
    sync_errors: bool,
}

#[cfg(feature = "libtorch")]
use commands::{bench::Args as BenchArgs, check_data::Args as CheckDataArgs};
#[cfg(not(feature = "libtorch"))]
use commands::{NotBuilt as BenchArgs, NotBuilt as CheckDataArgs};

#[derive(Subcommand)]
enum Command {
    /// Report the torch version, CUDA and cuDNN availability and the devices.
    Info(commands::info::Args),
    /// Time training steps on a fixed batch (for bench/train_vs_pytorch.py).
    Bench(BenchArgs),
    /// Check the config's data (shapes, dtypes, NaN/inf, labels) and print
    /// the class balance, without training.
    CheckData(CheckDataArgs),
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
    #[cfg(feature = "libtorch")]
    system::malloc::keep_heap_for_training();
    // Before anything changes it: a fresh process for another config of a
    // chain starts from this environment.
    #[cfg(feature = "libtorch")]
    let original_env = std::env::vars_os().collect();
    let cli = Cli::parse();
    common::cli::run("train", || {
        let me = || {
            std::env::current_exe()
                .map_err(|e| anyhow::anyhow!("cannot find train's own executable: {e}"))
        };
        match (&cli.command, &cli.resume, &cli.config) {
            (Some(Command::Info(args)), _, _) => commands::info::run(args),
            // The one signal handler of this process: the request it sets
            // is handed to what must stop (the trainer has its own).
            (Some(Command::Sweep(args)), _, _) => {
                let stop = supervise::events::Interrupter::install(STOPPED_TWICE);
                sweep::driver::run(args, &me()?, LIBTORCH, &stop)
            }
            (Some(Command::Run(args)), _, _) => {
                let stop = supervise::events::Interrupter::install(STOPPED_TWICE);
                guard::run(args, &stop)
            }
            #[cfg(feature = "libtorch")]
            (Some(Command::Bench(args)), _, _) => commands::bench::run(args),
            #[cfg(feature = "libtorch")]
            (Some(Command::CheckData(args)), _, _) => commands::check_data::run(args),
            #[cfg(feature = "libtorch")]
            (None, resume, config) => {
                let opts = run::Options {
                    device: cli.device,
                    threads: cli.threads,
                    sync_errors: cli.sync_errors,
                    original_env,
                };
                match (resume, config) {
                    (Some(dir), _) => run::resume(dir, &opts),
                    (None, Some(cfg)) => run::start(cfg, &cli.fallback, cli.out.clone(), &opts),
                    (None, None) => unreachable!("clap requires --config or --resume"),
                }
            }
            #[cfg(not(feature = "libtorch"))]
            (Some(Command::Bench(_)), _, _) => {
                Err(common::exit::no_libtorch("train bench", &me()?))
            }
            #[cfg(not(feature = "libtorch"))]
            (Some(Command::CheckData(_)), _, _) => {
                Err(common::exit::no_libtorch("train check-data", &me()?))
            }
            #[cfg(not(feature = "libtorch"))]
            (None, resume, _) => {
                let who = if resume.is_some() {
                    "train --resume (the seeds' model)"
                } else {
                    "train --config (the seeds' model)"
                };
                Err(common::exit::no_libtorch(who, &me()?))
            }
        }
    })
}

/// The exit code when a second Ctrl-C or SIGTERM ends train at once.
const STOPPED_TWICE: i32 = common::exit::STOPPED as i32;

/// Whether this build links libtorch (the feature of the same name): what
/// the sweep needs to know before it starts a trial of the seeds' model.
pub const LIBTORCH: bool = cfg!(feature = "libtorch");
