//! The hyper-parameter search behind `train sweep`, without libtorch: the
//! pure parts (space, samplers, pruners) have no I/O and are tested on their
//! own; the journal is the sweep's one truth, in the format of Optuna's
//! JournalFileBackend, so Optuna and optuna-dashboard read it as it is.
//!
//! - `trial`: the types every part shares (distributions, parameter values,
//!   trial states, a trial as the journal records it);
//! - `space`: W&B sweep YAML -> typed parameters, checked against the config
//!   schema;
//! - `sampler`: grid | random | tpe (and `Method`, which names one): (space, trials so far, number) -> the
//!   next trial's parameters;
//! - `pruner`: median | hyperband: (this trial's curve, the others') -> go on
//!   or stop;
//! - `journal`: Optuna's journal records: replay, append + fsync under its
//!   lock, torn-tail repair;
//! - `placement`: the estimate × free memory -> trials at once, per GPU;
//!   for a program, the largest measured peak in the estimate's place;
//! - `measured`: the driver's side of that: peaks in, slots out;
//! - `start`: settings from the command line, the trial cap, placement's
//!   inputs; `history`: what the study says of drawn and interrupted trials;
//! - `layout`: the sweep directory's settings and space, and whether its
//!   filesystem is full;
//! - `outcome`: a trial's end (its summary, metric values, the driver's
//!   reason for ending it, exit status) -> the journal's state and error
//!   class (pure, tested as a table);
//! - `process`: a trial's process group, signals, pid file and log tail;
//! - `program`: a program trial's files, command line and environment (the
//!   space names `program`; supervised by the supervise crate);
//! - `running`: the running trials (train or program): their values into
//!   the journal and the pruner, timeouts, their ends recorded;
//! - `driver`: spawns `train` per trial, reads its summary.yaml and
//!   metrics.csv, writes the journal (the only I/O loop); `--resume`,
//!   `--worker`;
//! - `owner`: which worker runs a trial, and whether it still does;
//! - `slurm`: sbatch scripts of workers, MaxArraySize, squeue;
//! - `report`: journal -> table, csv, json, yaml, best config, plot.

pub mod cli;
pub mod driver;
pub mod history;
pub mod journal;
pub mod layout;
pub mod measured;
pub mod outcome;
pub mod owner;
pub mod placement;
mod plot;
pub mod process;
pub mod program;
pub mod pruner;
pub mod report;
pub(crate) mod running;
pub mod sampler;
pub mod slurm;
pub mod space;
pub mod start;
pub mod trial;
