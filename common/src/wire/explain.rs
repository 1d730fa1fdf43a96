//! `cfgcheck --explain`'s output (cfgcheck-explain/v1): every known failure
//! found in a log, with its evidence and, with `--config`, the config diff.

use super::failure::{Class, OomFigures};
use super::hazard::HazardId;
use super::Versioned;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub schema: String,
    pub log: String,
    pub lines: usize,
    pub found: Vec<Found>,
    /// When nothing known was found: the last line that looks like an error.
    pub last_error: Option<Evidence>,
}

/// One known failure (`diagnose::explain::Explained`, owned) and its config
/// diff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Found {
    pub id: String,
    pub class: Class,
    pub title: String,
    pub cause: String,
    pub fix: String,
    /// The cfgcheck rule that would have caught it before the run.
    pub rule: Option<HazardId>,
    /// Up to 5 matching lines, 1-based.
    pub evidence: Vec<Evidence>,
    pub matches: usize,
    /// For out-of-memory messages: the figures PyTorch printed.
    pub oom: Option<OomFigures>,
    /// With --config: the fix as a unified diff of the config, or why not.
    pub config_diff: Option<String>,
}

/// A line of the log that shows a failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// 1-based.
    pub line: usize,
    pub text: String,
}

impl Versioned for Output {
    const SCHEMA: &'static str = "cfgcheck-explain/v1";
    fn example() -> Self {
        let oom = OomFigures {
            tried_mib: Some(2048.0),
            total_mib: Some(81000.0),
            free_mib: Some(364.0),
            allocated_mib: Some(73850.0),
            reserved_unallocated_mib: Some(3870.0),
        };
        let line = Evidence {
            line: 3,
            text: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.".into(),
        };
        Output {
            schema: Self::SCHEMA.into(),
            log: "train.log".into(),
            lines: 3,
            found: vec![Found {
                id: HazardId::AllocatorFragmentation.as_str().into(),
                class: Class::OutOfMemory,
                title: "CUDA out of memory from fragmentation".into(),
                cause: "memory reserved but unallocated".into(),
                fix: "PYTORCH_ALLOC_CONF=expandable_segments:True".into(),
                rule: Some(HazardId::AllocatorFragmentation),
                evidence: vec![line.clone()],
                matches: 1,
                oom: Some(oom),
                config_diff: Some("--- cfg.yaml\n+++ cfg.yaml (fixed)\n".into()),
            }],
            last_error: Some(line),
        }
    }
}
