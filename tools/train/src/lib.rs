//! `train`: any training command guarded, hyper-parameter sweeps, `train
//! info`, and the front of the trainer for the built-in model, as a library
//! whose binary is one call (uutils' shape). It links no libtorch, so it
//! starts in milliseconds: what needs libtorch (`--config`, `--resume`,
//! `bench`, `check-data`, `info`'s libtorch part) is `train-model`'s, the
//! binary beside it (tools/train/model), which `train` replaces itself with
//! after parsing the command line (ARCHITECTURE.md, "Packaging").
//!
//! Modules:
//! - `guard`: `train run -- CMD`, any command supervised (the supervise
//!   crate), with the fallback chain over `{config}`.
//! - `info`: `train info`: train-model's libtorch part and the driver's
//!   devices (`cuda_driver`, libcuda loaded at run time).
//! - `handoff`: finding `train-model` and replacing this process with it.
//!
//! The pip wheel's train is this same code without a train-model beside it:
//! what trains the built-in model exits 5 (`common::exit::no_libtorch`),
//! and its help lists only what works.

mod cuda_driver;
mod guard;
mod handoff;
mod info;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;
use train_cli::{InfoArgs, ModelCommand, TrainingArgs};

#[derive(Parser)]
#[command(
    name = "train",
    version,
    about = "Runs and sweeps your training command under guard (train run, train sweep); trains its built-in video model with libtorch (train --config)",
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 finished, 1 training failed (reason in summary.yaml and on stderr), \
                  2 bad input or usage, 3 --device cuda without a GPU, 4 train broke (an unexpected \
                  error, such as an I/O failure), 5 this train was built without libtorch (the pip \
                  wheel's: `train run` and program sweeps only; docs/guide/install.md, \"Install\")."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    training: TrainingArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Report the torch version, CUDA and cuDNN availability and the devices.
    Info(InfoArgs),
    #[command(flatten)]
    Model(ModelCommand),
    /// A hyper-parameter search, each trial a train process, every result
    /// in an Optuna journal (docs/guide/sweeps.md, "Sweeps: train sweep").
    Sweep(Box<sweep::cli::Args>),
    /// One guarded run of any command: `train run --out DIR [--config A
    /// --fallback B] -- python main.py --config {config}` (docs/guide/own-script.md,
    /// "Your own training script").
    Run(Box<guard::Args>),
}

/// What `train --help` says without a train-model beside it (the pip
/// wheel's train), in place of `Cli`'s about.
const WITHOUT_LIBTORCH: &str =
    "Runs and sweeps your training command under guard (train run, train sweep). \
     This train has no libtorch (the pip wheel's): the built-in model's commands (train --config, \
     --resume, bench, check-data) need the source build (docs/guide/install.md, \"Install\"), so \
     they are not listed here.";

/// The built-in model's flags and subcommands, which exit 5 without
/// train-model: hidden from the wheel's help, still parsed (and refused
/// with the reason).
const MODEL_ARGS: [&str; 7] = [
    "config",
    "fallback",
    "resume",
    "out",
    "device",
    "threads",
    "sync_errors",
];
const MODEL_COMMANDS: [&str; 2] = ["bench", "check-data"];

/// `Cli`'s command, its help fitted to this train: without train-model
/// beside it, the built-in model's part is said once and not listed.
fn command() -> clap::Command {
    let cmd = Cli::command();
    if handoff::binary().is_some() {
        return cmd;
    }
    let cmd = MODEL_ARGS
        .iter()
        .fold(cmd.about(WITHOUT_LIBTORCH), |c, id| {
            c.mut_arg(*id, |a| a.hide(true))
        });
    MODEL_COMMANDS
        .iter()
        .fold(cmd, |c, name| c.mut_subcommand(*name, |s| s.hide(true)))
}

/// The whole of `train`'s binary.
pub fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    common::cli::run("train", || match &cli.command {
        Some(Command::Info(args)) => info::run(args),
        // The one signal handler of this process: the request it sets is
        // handed to what must stop (train-model has its own).
        Some(Command::Sweep(args)) => {
            let stop = supervise::events::Interrupter::install(STOPPED_TWICE);
            sweep::driver::run(args, &handoff::me()?, handoff::binary().is_some(), &stop)
        }
        Some(Command::Run(args)) => {
            let stop = supervise::events::Interrupter::install(STOPPED_TWICE);
            guard::run(args, &stop)
        }
        Some(Command::Model(command)) => Err(handoff::exec(command.who())),
        None => Err(handoff::exec(cli.training.who())),
    })
}

/// The exit code when a second Ctrl-C or SIGTERM ends train at once.
const STOPPED_TWICE: i32 = common::exit::STOPPED as i32;
