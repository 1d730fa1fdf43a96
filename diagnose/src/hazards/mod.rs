//! Every known hazard of a training config, each in one place with its
//! detection and its fix, the way a compiler diagnostic carries its
//! suggestion: [`HazardId`] (in `common::wire::hazard`) names it, and its
//! [`Hazard`] says when it fires (`check`, for cfgcheck and verify-fixes),
//! how `cfgcheck --fix` changes the config (`fix`), and which config edits
//! `cfgcheck --explain --config` shows for a failure it caused (`edits`).
//! `rules::check` and `fix::plan_fix` only run them, in [`CHECK_ORDER`] and
//! [`FIX_ORDER`]. The hazards live by what they are about:
//!
//! - `compile`: cuda-graphs-checkpointing, gpu-features-without-gpu,
//!   compiled-checkpoint-twice (found in code only, by `--scan`);
//! - `memory`: memory-exceeds-free, memory-headroom,
//!   parallel-trials-overflow;
//! - `environment`: allocator-fragmentation, allocator-conf-syntax,
//!   launch-blocking;
//! - `host`: workers-small-host, uncapped-dataset,
//!   pin-memory-without-workers.

mod compile;
mod environment;
mod host;
mod memory;

pub use compile::{
    checkpoint_twice_fix, checkpoint_twice_message, cuda_graphs_fix, cuda_graphs_message,
};
pub use environment::{
    alloc_conf, expandable_segments, launch_blocking_fix, launch_blocking_message, long_run,
    with_expandable, LONG_RUN_EPOCHS,
};
pub use host::{dataset_bytes, workers_fix, workers_message, workers_too_many, SMALL_HOST_MIB};

use crate::keys::{Found, Hit, KeyPlan};
use crate::plan::Planner;
use common::config::{Config, LoadedConfig};
use common::estimate::{Budget, Estimate};
use common::wire::cfgcheck::{Finding, KeyAt};
use common::wire::failure::OomFigures;
use common::wire::hazard::HazardId;
use common::wire::memdiag::{Gpu, Memory};

/// The hazard of an id: its detection and its fix.
pub fn of(id: HazardId) -> &'static dyn Hazard {
    match id {
        HazardId::CudaGraphsCheckpointing => &compile::CudaGraphsCheckpointing,
        HazardId::MemoryExceedsFree => &memory::MemoryExceedsFree,
        HazardId::MemoryHeadroom => &memory::MemoryHeadroom,
        HazardId::ParallelTrialsOverflow => &memory::ParallelTrialsOverflow,
        HazardId::AllocatorFragmentation => &environment::AllocatorFragmentation,
        HazardId::AllocatorConfSyntax => &environment::AllocatorConfSyntax,
        HazardId::WorkersSmallHost => &host::WorkersSmallHost,
        HazardId::PinMemoryWithoutWorkers => &host::PinMemoryWithoutWorkers,
        HazardId::UncappedDataset => &host::UncappedDataset,
        HazardId::LaunchBlocking => &environment::LaunchBlocking,
        HazardId::GpuFeaturesWithoutGpu => &compile::GpuFeaturesWithoutGpu,
        HazardId::CompiledCheckpointTwice => &compile::CompiledCheckpointTwice,
    }
}

/// What a hazard needs to be judged at all.
pub const fn needs(id: HazardId) -> Needs {
    match id {
        HazardId::MemoryExceedsFree
        | HazardId::MemoryHeadroom
        | HazardId::ParallelTrialsOverflow => Needs::GpuMemory,
        HazardId::WorkersSmallHost | HazardId::UncappedDataset => Needs::HostRam,
        _ => Needs::Nothing,
    }
}

/// What a hazard needs from the target to be judged; without it the hazard
/// is reported as skipped, with the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    GpuMemory,
    HostRam,
}

/// The order `rules::check` finds hazards in (findings are then sorted by
/// severity, stably).
pub const CHECK_ORDER: [HazardId; 12] = [
    HazardId::CudaGraphsCheckpointing,
    HazardId::MemoryExceedsFree,
    HazardId::MemoryHeadroom,
    HazardId::ParallelTrialsOverflow,
    HazardId::AllocatorConfSyntax,
    HazardId::AllocatorFragmentation,
    HazardId::WorkersSmallHost,
    HazardId::UncappedDataset,
    HazardId::PinMemoryWithoutWorkers,
    HazardId::LaunchBlocking,
    HazardId::GpuFeaturesWithoutGpu,
    HazardId::CompiledCheckpointTwice,
];

/// The order `cfgcheck --fix` fixes hazards in: the seeds' decision tree
/// (compile mode first; memory, the costliest to fix, last).
pub const FIX_ORDER: [HazardId; 7] = [
    HazardId::CudaGraphsCheckpointing,
    HazardId::AllocatorFragmentation,
    HazardId::GpuFeaturesWithoutGpu,
    HazardId::WorkersSmallHost,
    HazardId::UncappedDataset,
    HazardId::ParallelTrialsOverflow,
    HazardId::MemoryExceedsFree,
];

/// What a hazard's check reads.
pub struct Cx<'a> {
    pub loaded: &'a LoadedConfig,
    pub target: &'a Target<'a>,
    pub estimate: &'a Estimate,
}

impl Cx<'_> {
    fn config(&self) -> &Config {
        &self.loaded.config
    }

    /// A finding of `id` about `key`, at its line and column in the file.
    fn finding(&self, id: HazardId, key: &str, message: String, fix: String) -> Finding {
        let at = self.loaded.index.pos_of(key);
        Finding {
            id,
            severity: id.severity(),
            message,
            fix,
            key: Some(key.to_string()),
            line: at.map(|p| p.line),
            col: at.map(|p| p.col),
            evidence: vec![],
        }
    }

    fn gpu_memory(&self) -> Option<(&Gpu, Memory)> {
        let gpu = self.target.gpu?;
        Some((gpu, gpu.memory?))
    }
}

/// What `--explain --config` reads to turn a failure into config edits.
pub struct ExplainCx<'a> {
    pub config: &'a Config,
    /// The GPU of `--gpu`, if given.
    pub gpu: Option<&'a Gpu>,
    /// The out-of-memory message's figures, if it was one.
    pub oom: Option<OomFigures>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// Config edits as (dotted key, YAML value), or why no config change helps.
pub type Edits = Result<Vec<(String, String)>, String>;

/// What `--explain --config` says for a failure no config change fixes.
pub const NO_CONFIG_FIX: &str = "no config change fixes this; see the fix above";

/// A finding of `id` in a config cfgcheck did not define: about `hit`, at
/// its line, resting on each key of `evidence`.
fn key_finding(
    id: HazardId,
    hit: &Hit,
    evidence: &[&Hit],
    message: String,
    fix: String,
) -> Finding {
    let mut keys: Vec<KeyAt> = Vec::new();
    for h in std::iter::once(hit).chain(evidence.iter().copied()) {
        if keys.iter().all(|k| k.key != h.path) {
            keys.push(h.at());
        }
    }
    Finding {
        id,
        severity: id.severity(),
        message,
        fix,
        key: Some(hit.path.clone()),
        line: Some(hit.line),
        col: Some(hit.col),
        evidence: keys,
    }
}

/// One hazard: its detection and its fix.
pub trait Hazard: Sync {
    fn id(&self) -> HazardId;
    /// The findings for this config on this target (usually none or one).
    fn check(&self, cx: &Cx) -> Vec<Finding>;
    /// `cfgcheck --fix`: the changes that remove it, made on the planner's
    /// config, or what no config change can fix.
    fn fix(&self, _p: &mut Planner, _target: &Target) {}
    /// Whether it can judge a config cfgcheck did not define from its keys
    /// (`keys::Concept`); the others read trainguard's model, data or
    /// environment, which such a config does not have.
    fn reads_keys(&self) -> bool {
        false
    }
    /// The findings from the keys of a config cfgcheck did not define.
    fn check_keys(&self, _found: &Found, _target: &Target) -> Vec<Finding> {
        vec![]
    }
    /// `cfgcheck --fix` on such a config: the keys to change.
    fn fix_keys(&self, _found: &Found, _target: &Target, _plan: &mut KeyPlan) {}
    /// `cfgcheck --explain --config`: the edits for a failure it caused.
    fn edits(&self, _cx: &ExplainCx) -> Edits {
        Err(NO_CONFIG_FIX.into())
    }
}

/// What the config is checked against.
pub struct Target<'a> {
    /// The GPU from the report, if a report with a GPU was given.
    pub gpu: Option<&'a Gpu>,
    /// A report was given and it holds no GPU (memdiag on a CPU machine).
    pub known_no_gpu: bool,
    /// Host RAM in MiB, when known.
    pub host_ram_mib: Option<u64>,
    /// Headroom required on the GPU, as a fraction (0.10 = 10%).
    pub margin: f64,
    /// The environment the run inherits (the caller's process environment).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl Target<'_> {
    /// The GPU's memory budget for `parallel` trials; None without a GPU
    /// whose memory is known.
    pub fn budget(&self, parallel: u32) -> Option<Budget> {
        let mem = self.gpu?.memory?;
        Some(Budget::of(mem, parallel, self.margin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialise_as_their_names_and_each_hazard_knows_its_id() {
        for id in HazardId::ALL {
            assert_eq!(
                serde_yaml::to_string(&id).unwrap().trim(),
                id.as_str(),
                "{id:?}"
            );
            assert_eq!(of(id).id(), id);
        }
        let mut sorted = CHECK_ORDER.to_vec();
        sorted.sort();
        assert_eq!(sorted, HazardId::ALL.to_vec(), "every hazard is checked");
    }
}
