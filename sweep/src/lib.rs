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
//!   for a program, the largest measured peaks (the host's, and each
//!   GPU's by the GPU peak) in the estimate's place;
//! - `measured`: the driver's side of that: peaks in, slots out;
//! - `memory_model`: each point's predicted peak, learned from the
//!   trials that ended (ln peak linear in ln of the numbers it ran with;
//!   out-of-memory trials as censored points), from running sums; not
//!   yet read by the driver, placement or the sampler;
//! - `cores`: the cores free as a trial starts (/proc/stat's idle time and
//!   our own trials'), which its CPU threads come from;
//! - `start`: settings from the command line, the trial cap, placement's
//!   inputs; `history`: what the study says of drawn and interrupted trials;
//! - `layout`: the sweep directory's settings and space, and whether its
//!   filesystem is full;
//! - `outcome`: a trial's end (its summary, metric values, the driver's
//!   reason for ending it, exit status) -> the journal's state and error
//!   class (pure, tested as a table);
//! - `storage`: what the driver asks of the sweep's truth (the journal
//!   and `rdb`, a PostgreSQL database in Optuna's tables, implement it);
//! - `program`: a program trial's files, command line and environment (the
//!   space names `program`; supervised by the supervise crate);
//! - the driver, in parts that take each other as arguments: `context`
//!   (the sweep's facts), `slots` (where trials run), `launch` (claim and
//!   start a trial), `trials` (the running trials: their values into the
//!   storage and the pruner, timeouts, their ends recorded), `recover`
//!   (`--resume`), `banner` (the block before each trial), and `driver`
//!   (setup and the one event-driven loop; `--worker`, `--slurm`);
//! - `owner`: which worker runs a trial, and whether it still does;
//! - `slurm`: sbatch scripts of workers, MaxArraySize, squeue;
//! - `report`: journal -> table, csv, json, yaml, best config, plot.

mod attempts;
mod banner;
pub mod cli;
mod context;
pub mod cores;
pub mod driver;
mod fitted;
mod groups;
pub mod history;
pub mod journal;
pub(crate) mod launch;
pub mod layout;
pub mod measured;
pub mod memory_model;
pub mod outcome;
pub mod owner;
mod packing;
pub mod placement;
mod plot;
pub mod program;
pub mod pruner;
pub mod rdb;
pub(crate) mod reading;
pub mod recover;
pub mod report;
mod room;
pub mod sampler;
mod slots;
pub mod slurm;
pub mod space;
pub mod start;
pub mod storage;
pub mod trial;
pub(crate) mod trials;
pub(crate) mod truth;
