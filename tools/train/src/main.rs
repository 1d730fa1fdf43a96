//! `train`: the libtorch trainer. This build has one command, `train info`,
//! which reports the libtorch it runs on; training itself is not built yet
//! (see README, "Status").

mod cuda_driver;
mod info;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "train",
    version,
    about = "libtorch trainer (today: `train info`)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Report the torch version, CUDA and cuDNN availability and the devices.
    Info(info::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::cli::run("train", || match cli.command {
        Command::Info(args) => info::run(&args),
    })
}
