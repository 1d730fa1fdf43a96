//! verify-fixes' output (verify-fixes/v1): every check, what it saw and the
//! fix when it failed; for a command (`verify-fixes -- CMD`) also what its
//! smoke run measured (`smoke`, an optional field added within v1: a
//! reader of the config form's output sees no change).

use super::program::ProgramPeak;
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
    /// The command form's smoke run (absent for `--config`, and when the
    /// smoke did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smoke: Option<Smoke>,
}

/// What the smoke run of a command saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Smoke {
    pub command: Vec<String>,
    /// Where its output.log, memory.csv, memory.png and metrics.csv stay;
    /// null when they were removed (no `--out`, and no check failed).
    pub dir: Option<String>,
    pub seconds: f64,
    /// The metric whose reports count epochs, and how many came.
    pub epoch_metric: Option<String>,
    pub epochs: u64,
    /// How it ended, in words.
    pub ended: String,
    /// Every metric read, in the order first seen.
    pub metrics: Vec<SmokeMetric>,
    /// The measured peak (a lower bound of a full run's).
    pub peak: ProgramPeak,
    /// Copies that fit at once by that peak: what `train sweep --parallel
    /// auto` would take (the most, since the peak is a lower bound).
    pub parallel: Option<u32>,
}

/// One metric of the smoke's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SmokeMetric {
    pub name: String,
    /// epoch lines | JSON or dict lines | the regex | metrics.csv rows
    pub reader: String,
    pub reports: u64,
    /// Its last finite value.
    pub last: Option<f64>,
    /// Its first non-finite report, in words.
    pub non_finite: Option<String>,
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
            smoke: Some(Smoke {
                command: vec!["python".into(), "main.py".into()],
                dir: Some("/tmp/verify-fixes-Ab12Cd".into()),
                seconds: 4.2,
                epoch_metric: Some("val_loss".into()),
                epochs: 2,
                ended: "stopped by verify-fixes after 2 epoch(s)".into(),
                metrics: vec![SmokeMetric {
                    name: "val_loss".into(),
                    reader: "epoch lines".into(),
                    reports: 2,
                    last: Some(1.21),
                    non_finite: None,
                }],
                peak: ProgramPeak {
                    host_pss_mib: Some(301.5),
                    host_rss_mib: Some(330.0),
                    host_anon_mib: Some(120.0),
                    gpu_mib: None,
                    gpu_note: Some("not available: NVML cannot be loaded".into()),
                    address_limit_mib: None,
                    ranks_host_pss_mib: Default::default(),
                    gpu_by_device_mib: Default::default(),
                },
                parallel: Some(2),
            }),
        }
    }
}
