//! cfgcheck's output (cfgcheck/v1): one result per config, with its
//! findings, the rules it could not apply, the memory estimate and the
//! config as checked.

use super::config::Config;
use super::hazard::{HazardId, Severity};
use super::memdiag::{Gpu, Source};
use super::Versioned;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub schema: String,
    pub results: Vec<ConfigResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigResult {
    pub config: String,
    pub target: Option<TargetInfo>,
    /// ok, warnings or errors.
    pub verdict: String,
    pub findings: Vec<Finding>,
    pub skipped: Vec<Skipped>,
    pub estimate: EstimateOut,
    /// The config as checked, every default filled in.
    pub resolved: Config,
}

/// One hazard found in a config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub id: HazardId,
    pub severity: Severity,
    /// What will happen at run time.
    pub message: String,
    pub fix: String,
    /// The config key the finding is about, and its line in the file.
    pub key: Option<String>,
    pub line: Option<usize>,
}

/// Rules that could not be applied, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub rules: Vec<HazardId>,
    pub reason: String,
}

/// The GPU the config was checked against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub index: u32,
    pub name: Option<String>,
    pub source: Source,
    pub total_mib: Option<u64>,
    pub free_mib: Option<u64>,
}

impl TargetInfo {
    pub fn of(gpu: &Gpu, source: Source) -> TargetInfo {
        TargetInfo {
            index: gpu.index,
            name: gpu.name.clone(),
            source,
            total_mib: gpu.memory.map(|m| m.total_mib),
            free_mib: gpu.memory.map(|m| m.free_mib),
        }
    }
}

/// The memory estimate's breakdown (`common::estimate`'s `Estimate`, as
/// written).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimateOut {
    pub parameters: u64,
    pub peak_mib: u64,
    pub lines: Vec<EstimateLine>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimateLine {
    pub component: String,
    /// MiB, one decimal.
    pub mib: f64,
    pub formula: String,
}

/// A config's verdict from its findings: errors, warnings or ok.
pub fn verdict(findings: &[Finding]) -> &'static str {
    match findings.iter().map(|f| f.severity).min() {
        Some(Severity::Error) => "errors",
        Some(Severity::Warning) => "warnings",
        _ => "ok",
    }
}

impl Versioned for Output {
    const SCHEMA: &'static str = "cfgcheck/v1";
    fn example() -> Self {
        let id = HazardId::AllocatorFragmentation;
        let findings = vec![Finding {
            id,
            severity: id.severity(),
            message: "50 epochs without expandable_segments:True".into(),
            fix: "set environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:True\"}".into(),
            key: Some("epochs".into()),
            line: Some(16),
        }];
        let config = Config::default();
        Output {
            schema: Self::SCHEMA.into(),
            results: vec![ConfigResult {
                config: "cfg.yaml".into(),
                target: Some(TargetInfo {
                    index: 0,
                    name: Some("Tesla T4".into()),
                    source: Source::Profile,
                    total_mib: Some(15360),
                    free_mib: Some(15360),
                }),
                verdict: verdict(&findings).into(),
                findings,
                skipped: vec![Skipped {
                    rules: vec![HazardId::WorkersSmallHost, HazardId::UncappedDataset],
                    reason: "host RAM unknown (give --host-ram-gib)".into(),
                }],
                estimate: EstimateOut {
                    parameters: 284_897,
                    peak_mib: 1024,
                    lines: vec![EstimateLine {
                        component: "weights".into(),
                        mib: 1.1,
                        formula: "284897 parameters × 4 B".into(),
                    }],
                },
                resolved: config,
            }],
        }
    }
}
