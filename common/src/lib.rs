//! What every trainguard tool shares: exit codes and the error that carries one,
//! output formats, the memdiag report (`memdiag/v1`) and the memory tiers.
//! Each fact lives here once; the tools only call it.

pub mod cli;
pub mod config;
pub mod estimate;
pub mod exit;
pub mod explain;
pub mod failures;
pub mod fix;
pub mod format;
pub mod hazards;
pub mod host;
pub mod input;
pub mod model;
pub mod report;
pub mod rules;
pub mod tiers;
pub mod wire;
pub mod yaml_edit;
pub mod yaml_index;
