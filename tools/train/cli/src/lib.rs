//! train's command line for the built-in model, in one place for its two
//! binaries: `train` parses it (its `--help`, usage errors with exit 2, and
//! which command needs libtorch) without linking libtorch, then hands the
//! same arguments to `train-model`, which parses them again to train
//! (ARCHITECTURE.md, "Packaging"). No libtorch here, nothing but clap.

mod device;

pub use device::DeviceChoice;
use std::path::PathBuf;

// `train --config CFG [--fallback CFG]... | --resume DIR`: what a run of
// the built-in model is asked for. (Plain comments: clap would compile a
// doc comment here into the binary as text no help shows.)
#[derive(clap::Args, Debug)]
pub struct TrainingArgs {
    /// The config to train.
    #[arg(
        long,
        value_name = "CFG",
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub config: Option<PathBuf>,
    /// A config to continue with when the previous one fails in a way a
    /// config causes (out of memory at micro-batch 1, CUDA graphs, a
    /// diverging loss); repeat for a chain (A -> B -> C).
    #[arg(long, value_name = "CFG", conflicts_with = "resume")]
    pub fallback: Vec<PathBuf>,
    /// Continue the run in DIR from its last checkpoint.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Run directory [default: runs/<config name>-<time>].
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub out: Option<PathBuf>,
    /// Where to train.
    #[arg(long, value_enum, default_value = "auto")]
    pub device: DeviceChoice,
    /// CPU threads for libtorch [default: libtorch's choice].
    #[arg(long, value_name = "N")]
    pub threads: Option<i32>,
    /// Set CUDA_LAUNCH_BLOCKING=1, so a CUDA error points at its kernel.
    #[arg(long)]
    pub sync_errors: bool,
}

impl TrainingArgs {
    /// The command, in the words a message names it by.
    pub fn who(&self) -> &'static str {
        if self.resume.is_some() {
            "train --resume (the built-in model)"
        } else {
            "train --config (the built-in model)"
        }
    }
}

// The subcommands that need libtorch besides training itself.
#[derive(clap::Subcommand, Debug)]
pub enum ModelCommand {
    /// Time training steps on a fixed batch (for bench/train_vs_pytorch.py).
    Bench(BenchArgs),
    /// Check the config's data (shapes, dtypes, NaN/inf, labels) and print
    /// the class balance, without training.
    CheckData(CheckDataArgs),
}

impl ModelCommand {
    /// The command, in the words a message names it by.
    pub fn who(&self) -> &'static str {
        match self {
            ModelCommand::Bench(_) => "train bench",
            ModelCommand::CheckData(_) => "train check-data",
        }
    }
}

/// `train bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[arg(long, value_name = "CFG")]
    pub config: PathBuf,
    /// Timed steps (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Override the config's gradient_checkpointing.
    #[arg(long, value_parser = ["on", "off"])]
    pub checkpointing: Option<String>,
    /// Where to save the initial weights and the batch.
    #[arg(long, value_name = "FILE")]
    pub save: PathBuf,
    #[arg(long)]
    pub threads: Option<i32>,
    /// Where to run (the GPU recipe passes cuda).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceChoice,
    /// Override the config's mixed_precision.
    #[arg(long, value_parser = ["off", "bf16", "fp16"])]
    pub precision: Option<String>,
    /// Override the config's channels_last (the encoder's layout).
    #[arg(long, value_parser = ["auto", "on", "off"])]
    pub channels_last: Option<String>,
}

/// `train check-data`.
#[derive(clap::Args, Debug)]
pub struct CheckDataArgs {
    #[arg(long, value_name = "CFG")]
    pub config: PathBuf,
}

/// `train info`.
#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "yaml")]
    pub format: InfoFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InfoFormat {
    Yaml,
    Json,
}
