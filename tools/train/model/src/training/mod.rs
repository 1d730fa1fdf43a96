//! The training loop, burn-train's shape: the trainer runs epochs and steps
//! and only emits events; when to save is the strategy, how is the
//! checkpointer; test faults and the stop request are handed in. Public for
//! the in-process tests (tests/loop_events.rs): the trainer, its events, its
//! checkpointer, its faults and its interrupter.

pub(crate) mod checkpoint;
pub mod events;
pub(crate) mod fault;
mod interrupter;
pub(crate) mod metrics;
mod progress;
pub(crate) mod step;
mod strategy;
pub(crate) mod trainer;
mod validation;

pub use checkpoint::Checkpointer;
pub use fault::Faults;
pub use interrupter::Interrupter;
pub use trainer::{Stop, Trainer};
