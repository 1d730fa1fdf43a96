//! verify-fixes' output (verify-fixes/v1): every check, what it saw and the
//! fix when it failed.

use super::Versioned;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub schema: String,
    pub config: String,
    /// Checks that passed or warned.
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub checks: Vec<Check>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    Skip,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub id: String,
    pub name: String,
    pub status: Status,
    pub saw: String,
    pub fix: Option<String>,
}

impl Versioned for Output {
    const SCHEMA: &'static str = "verify-fixes/v1";
    fn example() -> Self {
        Output {
            schema: Self::SCHEMA.into(),
            config: "cfg.yaml".into(),
            passed: 0,
            failed: 1,
            skipped: 0,
            checks: vec![Check {
                id: "allocator".into(),
                name: "allocator: expandable segments".into(),
                status: Status::Fail,
                saw: "PYTORCH_ALLOC_CONF=max_split_size_mb:128 (from the config)".into(),
                fix: Some(
                    "set PYTORCH_ALLOC_CONF=max_split_size_mb:128,expandable_segments:True".into(),
                ),
            }],
        }
    }
}
