//! cfgcheck's output (cfgcheck/v2): one result per config, with its
//! format (trainguard's schema, or a config cfgcheck did not define), its
//! findings, the rules it could not apply, the keys it read, and for
//! trainguard's schema the memory estimate and the config as checked.
//!
//! v2 over v1: `format`, `read_keys` and a finding's `evidence` are new;
//! `estimate` and `resolved` are null for a config not in trainguard's
//! schema (a v1 reader, which requires them, would refuse those results).

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
    /// Which schema the file was read with.
    pub format: ConfigFormat,
    pub target: Option<TargetInfo>,
    /// ok, warnings or errors.
    pub verdict: String,
    pub findings: Vec<Finding>,
    pub skipped: Vec<Skipped>,
    /// The keys of a config not in trainguard's schema that the rules read
    /// (empty for trainguard's own: every key is read).
    pub read_keys: Vec<ReadKey>,
    /// trainguard's schema only: the memory estimate of its model.
    pub estimate: Option<EstimateOut>,
    /// trainguard's schema only: the config as checked, every default filled in.
    pub resolved: Option<Config>,
}

/// The schema a config file was read with: trainguard's own (strict), or the
/// keys of a config cfgcheck did not define.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigFormat {
    Trainguard,
    /// Hugging Face `TrainingArguments` (JSON or YAML).
    Hf,
    /// Axolotl's YAML.
    Axolotl,
    /// Any nesting of the keys of the three (`--as any`, or a file whose keys
    /// name none of them clearly).
    Generic,
}

impl ConfigFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigFormat::Trainguard => "trainguard",
            ConfigFormat::Hf => "hf",
            ConfigFormat::Axolotl => "axolotl",
            ConfigFormat::Generic => "generic",
        }
    }
    /// What the format is, in words.
    pub fn title(self) -> &'static str {
        match self {
            ConfigFormat::Trainguard => "trainguard config",
            ConfigFormat::Hf => "Hugging Face TrainingArguments",
            ConfigFormat::Axolotl => "Axolotl config",
            ConfigFormat::Generic => "config of no known schema",
        }
    }
}

/// A key of a config not in trainguard's schema that a rule read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadKey {
    /// Its dotted path in the file (`training.torch_compile_mode`,
    /// `datasets[0].type`).
    pub key: String,
    pub line: usize,
    /// Its value as written.
    pub value: String,
    /// The trainguard key it is read as (`num_workers` for
    /// `dataloader_num_workers`).
    pub reads_as: String,
}

/// A key a finding rests on, and its line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyAt {
    pub key: String,
    pub line: usize,
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
    /// The key's column, 1-based in characters (added within cfgcheck/v2:
    /// absent from earlier output, which reads back as null).
    #[serde(default)]
    pub col: Option<usize>,
    /// Each key the finding rests on (both halves of a hazard), for a config
    /// not in trainguard's schema; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<KeyAt>,
}

/// Rules that could not be applied, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub rules: Vec<HazardId>,
    pub reason: String,
}

/// The human formats' line: "skipped rule-a, rule-b: why".
impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rules: Vec<&str> = self.rules.iter().map(|r| r.as_str()).collect();
        write!(f, "skipped {}: {}", rules.join(", "), self.reason)
    }
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
    Severity::verdict(findings.iter().map(|f| f.severity))
}

impl Versioned for Output {
    const SCHEMA: &'static str = "cfgcheck/v2";
    fn example() -> Self {
        let id = HazardId::AllocatorFragmentation;
        let findings = vec![Finding {
            id,
            severity: id.severity(),
            message: "50 epochs without expandable_segments:True".into(),
            fix: "set environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:True\"}".into(),
            key: Some("epochs".into()),
            line: Some(16),
            col: Some(1),
            evidence: vec![KeyAt {
                key: "epochs".into(),
                line: 16,
            }],
        }];
        let config = Config::default();
        Output {
            schema: Self::SCHEMA.into(),
            results: vec![ConfigResult {
                config: "cfg.yaml".into(),
                format: ConfigFormat::Trainguard,
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
                read_keys: vec![ReadKey {
                    key: "training.dataloader_num_workers".into(),
                    line: 12,
                    value: "2".into(),
                    reads_as: "num_workers".into(),
                }],
                estimate: Some(EstimateOut {
                    parameters: 284_897,
                    peak_mib: 1024,
                    lines: vec![EstimateLine {
                        component: "weights".into(),
                        mib: 1.1,
                        formula: "284897 parameters × 4 B".into(),
                    }],
                }),
                resolved: Some(config),
            }],
        }
    }
}
