//! The training loop, burn-train's shape: the trainer runs epochs and steps
//! and only emits events; when to save is the strategy, how is the
//! checkpointer; test faults are handed in.

pub mod checkpoint;
pub mod events;
pub mod fault;
pub mod interrupter;
pub mod metrics;
pub mod progress;
pub mod step;
pub mod strategy;
pub mod trainer;
pub mod validation;
