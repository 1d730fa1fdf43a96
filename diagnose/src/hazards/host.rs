//! The hazards of the host and data loading: DataLoader workers on a small
//! host and a training set too large for its RAM (seed 002), pinned memory
//! without workers.

use super::{key_finding, Cx, Edits, ExplainCx, Hazard, Target, NO_CONFIG_FIX};
use crate::keys::{Concept, Found, KeyPlan, Scalar};
use crate::plan::Planner;
use common::estimate::{self, MIB};
use common::wire::cfgcheck::Finding;
use common::wire::config::Config;
use common::wire::hazard::HazardId;

/// A host with less RAM than this is "small" for DataLoader workers: Colab's
/// free tier has 12.7 GB (seed 002).
pub const SMALL_HOST_MIB: u64 = 16 * 1024;

pub struct WorkersSmallHost;

impl WorkersSmallHost {
    fn fires(c: &Config, ram_mib: u64) -> bool {
        workers_too_many(u64::from(c.num_workers), ram_mib)
    }
}

/// Whether `workers` DataLoader worker processes are too many for a host
/// with `ram_mib` of RAM: for a config's `num_workers` and a script's
/// `DataLoader(num_workers=...)` (`scan`).
pub fn workers_too_many(workers: u64, ram_mib: u64) -> bool {
    workers > 0 && ram_mib < SMALL_HOST_MIB
}

/// What happens with `workers` worker processes on that host.
pub fn workers_message(workers: u64, ram_mib: u64) -> String {
    format!("{workers} DataLoader workers on a host with {:.1} GiB of RAM: each worker is a process with its own copies, and the OOM killer ends the run with exit code -9", ram_mib as f64 / 1024.0)
}

/// The fix, `set` naming the setting where it lives.
pub fn workers_fix(set: &str) -> String {
    format!("set {set} on small hosts (Colab, Kaggle)")
}

impl Hazard for WorkersSmallHost {
    fn id(&self) -> HazardId {
        HazardId::WorkersSmallHost
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        match cx.target.host_ram_mib {
            Some(ram) if Self::fires(c, ram) => vec![cx.finding(
                self.id(),
                "num_workers",
                workers_message(u64::from(c.num_workers), ram),
                workers_fix("num_workers: 0"),
            )],
            _ => vec![],
        }
    }
    fn fix(&self, p: &mut Planner, target: &Target) {
        match target.host_ram_mib {
            Some(ram) if Self::fires(&p.config, ram) => p.change(
                "num_workers",
                "0".into(),
                format!(
                    "{:.1} GiB of host RAM is too little for worker processes",
                    ram as f64 / 1024.0
                ),
                |c| c.num_workers = 0,
            ),
            _ => {}
        }
    }
    fn reads_keys(&self) -> bool {
        true
    }
    fn check_keys(&self, f: &Found, target: &Target) -> Vec<Finding> {
        let Some(ram) = target.host_ram_mib.filter(|r| *r < SMALL_HOST_MIB) else {
            return vec![];
        };
        f.workers()
            .into_iter()
            .map(|(h, n)| key_finding(
                self.id(),
                h,
                &[],
                format!("{n} DataLoader workers {} on a host with {:.1} GiB of RAM: each worker is a process with its own copies, and the OOM killer ends the run with exit code -9", h.aside(), ram as f64 / 1024.0),
                format!("set {}: 0 on small hosts (Colab, Kaggle)", h.path),
            ))
            .collect()
    }
    fn fix_keys(&self, f: &Found, target: &Target, plan: &mut KeyPlan) {
        let Some(ram) = target.host_ram_mib.filter(|r| *r < SMALL_HOST_MIB) else {
            return;
        };
        for (h, _) in f.workers() {
            plan.set(
                h,
                Scalar::Int(0),
                format!(
                    "{:.1} GiB of host RAM is too little for worker processes",
                    ram as f64 / 1024.0
                ),
            );
        }
    }
    fn edits(&self, cx: &ExplainCx) -> Edits {
        if cx.config.num_workers > 0 {
            Ok(vec![("num_workers".into(), "0".into())])
        } else {
            Err(NO_CONFIG_FIX.into())
        }
    }
}

/// Bytes the training set takes in host RAM when loaded whole (fp32), and
/// per example when that is known (the synthetic set; a file gives its size).
pub fn dataset_bytes(c: &Config) -> Option<(u64, Option<u64>)> {
    match &c.data.path {
        None => {
            let per = 4
                * (u64::from(c.temporal_frames)
                    * u64::from(c.image_channels)
                    * u64::from(c.image_size).pow(2)
                    + u64::from(c.scalar_features)
                    + 1);
            Some((per * c.data.synthetic_train_examples, Some(per)))
        }
        Some(p) => std::fs::metadata(p).ok().map(|m| (m.len(), None)),
    }
}

pub struct UncappedDataset;

impl UncappedDataset {
    /// Half the host RAM in bytes: what a loaded training set may take.
    fn half_ram_bytes(ram_mib: u64) -> u64 {
        ram_mib * MIB / 2
    }
    /// The training set's bytes and bytes per example when uncapped and
    /// larger than half the RAM.
    fn fires(c: &Config, ram_mib: u64) -> Option<(u64, Option<u64>)> {
        let (bytes, per) = dataset_bytes(c)?;
        (c.max_train_examples.is_none() && bytes > Self::half_ram_bytes(ram_mib))
            .then_some((bytes, per))
    }
}

impl Hazard for UncappedDataset {
    fn id(&self) -> HazardId {
        HazardId::UncappedDataset
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let Some(ram_mib) = cx.target.host_ram_mib else {
            return vec![];
        };
        let Some((bytes, per)) = Self::fires(cx.config(), ram_mib) else {
            return vec![];
        };
        let half = Self::half_ram_bytes(ram_mib);
        let cap =
            per.map(|per| format!(": about {} examples fit in half the RAM", half / per.max(1)));
        vec![cx.finding(
            self.id(),
            "max_train_examples",
            format!("no max_train_examples and the training set takes {} MiB against {ram_mib} MiB of host RAM: loading it can get the process killed (exit -9)", estimate::whole_mib(bytes)),
            format!("set max_train_examples{}", cap.unwrap_or_default()),
        )]
    }
    fn fix(&self, p: &mut Planner, target: &Target) {
        let Some(ram) = target.host_ram_mib else {
            return;
        };
        if let Some((bytes, Some(per))) = Self::fires(&p.config, ram) {
            let n = (Self::half_ram_bytes(ram) / per.max(1)).max(1);
            p.change(
                "max_train_examples",
                n.to_string(),
                format!(
                    "the training set ({} MiB) would not fit in half the host RAM ({} MiB)",
                    estimate::whole_mib(bytes),
                    ram / 2
                ),
                |c| c.max_train_examples = Some(n),
            );
        }
    }
}

pub struct PinMemoryWithoutWorkers;

impl Hazard for PinMemoryWithoutWorkers {
    fn id(&self) -> HazardId {
        HazardId::PinMemoryWithoutWorkers
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        if !(c.pin_memory && c.num_workers == 0) {
            return vec![];
        }
        vec![cx.finding(
            self.id(),
            "pin_memory",
            format!("pin_memory {PIN_ALONE}"),
            "set pin_memory: false, or use it only with num_workers > 0".into(),
        )]
    }
    fn reads_keys(&self) -> bool {
        true
    }
    /// Workers not named count as 0: Hugging Face's default, and Axolotl's
    /// once any of its dataloader keys (pin memory here) is set.
    fn check_keys(&self, f: &Found, _target: &Target) -> Vec<Finding> {
        let Some(pin) = f.pin_memory() else {
            return vec![];
        };
        if !f.workers().is_empty() {
            return vec![];
        }
        let workers: Vec<_> = f.of(Concept::Workers).collect();
        let name = workers.first().map_or(
            Concept::Workers
                .names(f.format)
                .first()
                .copied()
                .unwrap_or("num_workers"),
            |w| w.path.as_str(),
        );
        vec![key_finding(
            self.id(),
            pin,
            &workers,
            format!("pin memory {} {PIN_ALONE}", pin.aside()),
            format!("set {}: false, or use it only with {name} > 0", pin.path),
        )]
    }
}

/// What pinning memory without workers does.
const PIN_ALONE: &str = "without workers pins every batch in the main process: page-locked host memory with no loading overlap to gain";
