//! The training loop, burn-train's shape: the trainer runs epochs and steps
//! and only emits events; when to save is the strategy, how is the
//! checkpointer; test faults and the stop request are handed in. Public for
//! the in-process tests (tests/loop_events.rs): the trainer, its events, its
//! checkpointer, its faults and its interrupter.

pub(crate) mod checkpoint;
pub mod events;
pub(crate) mod fault;
pub(crate) mod metrics;
mod progress;
pub(crate) mod step;
mod strategy;
pub(crate) mod trainer;
mod validation;

pub use checkpoint::Checkpointer;
pub use fault::Faults;
/// The stop request (burn-train's `TrainingInterrupter`): the one signal
/// handler sets it, the loop reads it before each step, and a test can set
/// it in-process. The loop stops before its next step, so the run ends
/// with its summary and a checkpoint of its last whole epoch. It is
/// supervise's, the one every loop of the workspace stops by.
pub use supervise::events::Interrupter;
pub use trainer::{Stop, Trainer};
