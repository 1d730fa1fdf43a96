//! The memdiag report, `memdiag/v1`: what the GPUs hold at one moment. memdiag
//! writes it; cfgcheck and verify-fixes read it, always through
//! `common::report` (`Report::parse`, which also writes it as YAML, JSON, CSV
//! or a table). A GPU profile in `configs/gpus/` is the same format with
//! `source: profile`.
//!
//! A value that could not be read is `null` and its field name is a key of the
//! GPU's `unavailable` map, whose value says why ("not supported", an NVML
//! error). Unsupported is never written as 0.

use super::tiers::Recommendation;
use super::Versioned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "memdiag/v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Read from the driver through NVML.
    Nvml,
    /// A hand-written description of a GPU model (configs/gpus/).
    Profile,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub schema: String,
    pub source: Source,
    /// When the report was taken (RFC 3339, UTC); null for profiles.
    #[serde(default)]
    pub time: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub driver_version: Option<String>,
    /// The CUDA version the driver supports, as "major.minor".
    #[serde(default)]
    pub cuda_driver_version: Option<String>,
    /// Report-wide notes, e.g. why there are no GPUs.
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub index: u32,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub memory: Option<Memory>,
    #[serde(default)]
    pub utilization: Option<Utilization>,
    #[serde(default)]
    pub temperature_c: Option<u32>,
    #[serde(default)]
    pub persistence_mode: Option<bool>,
    /// Pages waiting to be retired at the next driver reload (ECC health).
    #[serde(default)]
    pub retired_pages_pending: Option<bool>,
    /// Row remapping failed on this GPU (Ampere and later).
    #[serde(default)]
    pub remapping_failed: Option<bool>,
    #[serde(default)]
    pub mig_enabled: Option<bool>,
    /// Processes holding memory; null when the list could not be read.
    #[serde(default)]
    pub processes: Option<Vec<Process>>,
    /// Field name -> why it could not be read.
    #[serde(default)]
    pub unavailable: BTreeMap<String, String>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// From the memory tiers (common::tiers); null when memory is unknown.
    #[serde(default)]
    pub recommendation: Option<Recommendation>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub total_mib: u64,
    pub used_mib: u64,
    pub free_mib: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    pub gpu_pct: u32,
    pub memory_pct: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessKind {
    Compute,
    Graphics,
    /// Listed by both the compute and the graphics query.
    Both,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    #[serde(default)]
    pub name: Option<String>,
    /// Null when the driver does not say (some containers, some drivers).
    #[serde(default)]
    pub used_mib: Option<u64>,
    pub kind: ProcessKind,
    /// The MIG GPU instance the process runs in, when MIG is on.
    #[serde(default)]
    pub gpu_instance: Option<u32>,
}

impl Gpu {
    /// A GPU with only its index known; the reader fills in what it can.
    pub fn new(index: u32) -> Gpu {
        Gpu {
            index,
            name: None,
            uuid: None,
            memory: None,
            utilization: None,
            temperature_c: None,
            persistence_mode: None,
            retired_pages_pending: None,
            remapping_failed: None,
            mig_enabled: None,
            processes: None,
            unavailable: BTreeMap::new(),
            notes: Vec::new(),
            recommendation: None,
        }
    }
}

impl Versioned for Report {
    const SCHEMA: &'static str = SCHEMA;
    /// A report with every optional field filled.
    fn example() -> Self {
        let mut g = Gpu::new(0);
        g.name = Some("Tesla T4".into());
        g.uuid = Some("GPU-00000000-0000-0000-0000-000000000000".into());
        g.memory = Some(Memory {
            total_mib: 15360,
            used_mib: 360,
            free_mib: 15000,
        });
        g.utilization = Some(Utilization {
            gpu_pct: 3,
            memory_pct: 1,
        });
        g.temperature_c = Some(40);
        g.persistence_mode = Some(true);
        g.retired_pages_pending = Some(false);
        g.remapping_failed = Some(false);
        g.mig_enabled = Some(false);
        g.processes = Some(vec![Process {
            pid: 4242,
            name: Some("python".into()),
            used_mib: Some(300),
            kind: ProcessKind::Compute,
            gpu_instance: Some(0),
        }]);
        g.unavailable
            .insert("temperature_c".into(), "not supported".into());
        g.notes.push("a note".into());
        g.recommendation = Some(Recommendation {
            model_size: "small".into(),
            batch_size: 6,
            max_train_examples: 50_000,
            min_total_gib: 14.0,
        });
        let mut r = Report::new(Source::Nvml);
        r.time = Some("2026-11-22T11:34:32Z".into());
        r.host = Some("host".into());
        r.driver_version = Some("580.65.06".into());
        r.cuda_driver_version = Some("13.0".into());
        r.notes.push("a note".into());
        r.gpus.push(g);
        r
    }
}

impl Report {
    /// An empty report of the current schema.
    pub fn new(source: Source) -> Report {
        Report {
            schema: SCHEMA.to_string(),
            source,
            time: None,
            host: None,
            driver_version: None,
            cuda_driver_version: None,
            notes: Vec::new(),
            gpus: Vec::new(),
        }
    }
}
