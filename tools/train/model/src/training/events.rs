//! What happens in a run, as events. The loop (trainer.rs) and the run driver
//! (run/mod.rs) only emit them; every line a person reads and every file but
//! the checkpoints is a listener that builds its output from the events it
//! receives (burn-train's shape): console lines and the progress bar,
//! metrics.csv, curves.png, summary.yaml. Listeners are independent of each
//! other: none reads another's file, so their order does not matter.

use common::wire::failure::Class;
use common::wire::train::{Best, EpochRow, Leg, OomEvent, PeakMemory, RunStatus};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A config of the run starts (one per config of a fallback chain).
#[derive(Clone, Debug)]
pub struct Start {
    /// The config's file name.
    pub config: String,
    pub device: String,
    pub parameters: i64,
    /// The parameter count the memory estimate computes for this config.
    pub expected_parameters: u64,
    pub train_examples: i64,
    pub val_examples: i64,
    pub out: PathBuf,
    /// The first epoch this config runs, and the config's epochs.
    pub first_epoch: u32,
    pub epochs: u32,
    /// Environment variables train set, said with why.
    pub environment: Vec<String>,
    /// Settings of the config this trainer does not apply.
    pub not_applied: Vec<String>,
    /// Continuing a killed run at this epoch.
    pub resumed_at: Option<u32>,
    /// Starting from the previous config's checkpoint: tensors carried, of.
    pub carried: Option<(usize, usize)>,
    /// The best epoch so far (restored by a resume).
    pub best: Option<Best>,
}

/// How the run ended.
#[derive(Clone, Debug)]
pub struct End {
    pub status: RunStatus,
    pub stop_reason: String,
    pub error_class: Option<Class>,
    pub peak_memory: PeakMemory,
    /// The micro-batch in use at the end (None: whole batches).
    pub micro_batch: Option<u32>,
    pub time_s: f64,
    /// Every config that ran, this process's and earlier ones'.
    pub legs: Vec<Leg>,
}

pub enum Event<'a> {
    Started(&'a Start),
    /// The class balance of a classification set (seed 004's data pass).
    Labels {
        which: &'a str,
        counts: &'a BTreeMap<i64, i64>,
    },
    /// Rows of the epochs finished before this process (a resumed run).
    History(&'a [EpochRow]),
    Batch {
        epoch: u32,
        done: u64,
        total: u64,
        loss: f64,
    },
    /// A step whose update was skipped, and why.
    StepSkipped {
        epoch: u32,
        step: u64,
        why: Skip,
    },
    OomRecovered(&'a OomEvent),
    EpochEnd(&'a EpochRow),
    NewBest(Best),
    /// A config of the chain ended; `next` is the config that follows.
    LegEnded {
        leg: &'a Leg,
        next: Option<&'a str>,
    },
    /// The next config runs in a fresh process (its environment differs,
    /// and the allocator reads its setting once).
    FreshProcess {
        next: &'a str,
        why: &'a str,
    },
    /// `--resume` of a run that had finished all its epochs.
    AlreadyFinished {
        epochs: u32,
    },
    Ended(&'a End),
}

/// Why a step's update was skipped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Skip {
    /// The loss was NaN or infinite.
    NonFiniteLoss(f64),
    /// fp16 gradients overflowed; the loss scaler halved its scale to this.
    Fp16Overflow { new_scale: f64 },
}

pub trait Listener {
    fn on(&mut self, event: &Event) -> anyhow::Result<()>;
}

/// The listeners of a run; `emit` hands each event to every one.
#[derive(Default)]
pub struct Listeners(Vec<Box<dyn Listener>>);

impl Listeners {
    pub fn push(&mut self, l: impl Listener + 'static) {
        self.0.push(Box::new(l));
    }

    pub fn emit(&mut self, event: &Event) -> anyhow::Result<()> {
        for l in &mut self.0 {
            l.on(event)?;
        }
        Ok(())
    }
}
