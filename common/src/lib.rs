//! What every trainguard tool shares. Each fact lives here once; the tools
//! only call it. The modules form layers, each importing only those below:
//!
//! - `exit`: exit codes, the error that carries one, `bad_input!`; the
//!   bottom;
//! - `wire`: every file format a tool writes or reads, typed and versioned
//!   (the config schema, memdiag/v1, tiers/v1, cfgcheck/v2,
//!   cfgcheck-explain/v1, verify-fixes/v1, space/v1, train's formats, the
//!   sweep's), hazard ids and failure classes, the run directory's names
//!   and the metrics; it imports nothing else of the workspace but `exit`;
//! - I/O helpers: `input` (reading files and stdin), `files` (atomic
//!   writes), `format` (`--format` and its one writer), `cli` (the wrapper
//!   every `main` goes through; an error with no code exits 4),
//!   `tensor_headers` (safetensors and .npy headers, without libtorch),
//!   `yaml_index` (the line of each key);
//! - model knowledge: `config` (loading and validating a config), `model`
//!   (the model spec), `estimate` (the memory estimate, the `Budget`,
//!   `BATCH_CAP`), `tiers` and `report` (reading and writing tiers/v1 and
//!   memdiag/v1), `gpus` (the GPU profiles built in, and what a `--gpu`
//!   value names);
//! - `host`: host RAM, host name, a process's start time, free disk space,
//!   and the target GPU's report (memdiag's, parsed by `report`).
//!
//! The diagnosis of a config and of a failed run (hazards, rules, fixes,
//! the known failures) is the `diagnose` crate, over this one.

/// The PyTorch release whose libtorch the source build's `train` links and
/// trains with (what tch 0.26 expects). The justfile's `torch_version` says
/// the same (a test compares them). A macro, so `concat!` can put it into
/// static texts. `train run`, program sweeps and the wheel's tools work with
/// any torch: this is only the trainer's own.
#[macro_export]
macro_rules! torch_for_train {
    () => {
        "2.13.0"
    };
}

/// The tch release the source build's `train` is written against.
#[macro_export]
macro_rules! tch_version {
    () => {
        "0.26"
    };
}

pub mod cli;
pub mod config;
pub mod estimate;
pub mod exit;
pub mod files;
pub mod format;
pub mod gpus;
pub mod host;
pub mod input;
pub mod model;
pub mod report;
pub mod tensor_headers;
pub mod tiers;
pub mod wire;
pub mod yaml_index;
