//! What every trainguard tool shares. Each fact lives here once; the tools
//! only call it:
//!
//! - `exit`, `cli`: exit codes, the error that carries one, and the wrapper
//!   every `main` goes through (an error with no code exits 4);
//! - `format`: `--format` (table, YAML, JSON, CSV) and the one writer for it;
//! - `input`, `host`: reading files and stdin; host RAM, host name, a
//!   process's start time and the target GPU's report;
//! - `wire`: every file format a tool writes or reads (cfgcheck/v1,
//!   cfgcheck-explain/v1, verify-fixes/v1, space/v1, train-info/v1,
//!   train-data/v1), with `report` (memdiag/v1) and `tiers` (tiers/v1);
//! - `config`, `yaml_index`, `yaml_edit`: the config schema, key lines, and
//!   in-place edits that keep comments;
//! - `model`, `estimate`: the model spec, the memory estimate, the memory
//!   `Budget` and `BATCH_CAP`;
//! - `hazards`: each known hazard with its check, its `--fix` and its
//!   `--explain` edits; `rules` and `fix` run them;
//! - `failures`, `explain`: the known-failures table and `--explain`'s scanner;
//! - `tensor_headers`: safetensors and .npy headers, read without libtorch.

pub mod cli;
pub mod config;
pub mod estimate;
pub mod exit;
pub mod explain;
pub mod failures;
pub mod files;
pub mod fix;
pub mod format;
pub mod hazards;
pub mod host;
pub mod input;
pub mod model;
pub mod report;
pub mod rules;
pub mod tensor_headers;
pub mod tiers;
pub mod wire;
pub mod yaml_edit;
pub mod yaml_index;
