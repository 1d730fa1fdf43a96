//! The hazards cfgcheck knows, by id: the id every file and message names
//! (cfgcheck/v2's findings, cfgcheck-explain/v1's `rule`, verify-fixes'
//! config check), its severity and its one-line summary. Each hazard's
//! check and fix are `diagnose::hazards`'.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }

    /// The verdict of a set of findings from their severities: "errors",
    /// "warnings" or "ok" (cfgcheck/v2's and scan/v2's `verdict`).
    pub fn verdict(severities: impl IntoIterator<Item = Severity>) -> &'static str {
        match severities.into_iter().min() {
            Some(Severity::Error) => "errors",
            Some(Severity::Warning) => "warnings",
            _ => "ok",
        }
    }

    /// The counts behind a verdict as the human formats print them: "2
    /// error(s), 1 warning(s), 0 info".
    pub fn tally(severities: impl IntoIterator<Item = Severity>) -> String {
        let (mut e, mut w, mut i) = (0, 0, 0);
        for s in severities {
            match s {
                Severity::Error => e += 1,
                Severity::Warning => w += 1,
                Severity::Info => i += 1,
            }
        }
        format!("{e} error(s), {w} warning(s), {i} info")
    }
}

/// A hazard's stable id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HazardId {
    CudaGraphsCheckpointing,
    MemoryExceedsFree,
    MemoryHeadroom,
    ParallelTrialsOverflow,
    AllocatorFragmentation,
    AllocatorConfSyntax,
    WorkersSmallHost,
    PinMemoryWithoutWorkers,
    UncappedDataset,
    LaunchBlocking,
    GpuFeaturesWithoutGpu,
    CompiledCheckpointTwice,
}

impl HazardId {
    /// Every hazard, in the order `cfgcheck --list-rules` prints them.
    pub const ALL: [HazardId; 12] = [
        HazardId::CudaGraphsCheckpointing,
        HazardId::MemoryExceedsFree,
        HazardId::MemoryHeadroom,
        HazardId::ParallelTrialsOverflow,
        HazardId::AllocatorFragmentation,
        HazardId::AllocatorConfSyntax,
        HazardId::WorkersSmallHost,
        HazardId::PinMemoryWithoutWorkers,
        HazardId::UncappedDataset,
        HazardId::LaunchBlocking,
        HazardId::GpuFeaturesWithoutGpu,
        HazardId::CompiledCheckpointTwice,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            HazardId::CudaGraphsCheckpointing => "cuda-graphs-checkpointing",
            HazardId::MemoryExceedsFree => "memory-exceeds-free",
            HazardId::MemoryHeadroom => "memory-headroom",
            HazardId::ParallelTrialsOverflow => "parallel-trials-overflow",
            HazardId::AllocatorFragmentation => "allocator-fragmentation",
            HazardId::AllocatorConfSyntax => "allocator-conf-syntax",
            HazardId::WorkersSmallHost => "workers-small-host",
            HazardId::PinMemoryWithoutWorkers => "pin-memory-without-workers",
            HazardId::UncappedDataset => "uncapped-dataset",
            HazardId::LaunchBlocking => "launch-blocking",
            HazardId::GpuFeaturesWithoutGpu => "gpu-features-without-gpu",
            HazardId::CompiledCheckpointTwice => "compiled-checkpoint-twice",
        }
    }

    pub const fn severity(self) -> Severity {
        match self {
            HazardId::CudaGraphsCheckpointing
            | HazardId::MemoryExceedsFree
            | HazardId::ParallelTrialsOverflow
            | HazardId::AllocatorConfSyntax => Severity::Error,
            HazardId::MemoryHeadroom
            | HazardId::AllocatorFragmentation
            | HazardId::WorkersSmallHost
            | HazardId::UncappedDataset
            | HazardId::GpuFeaturesWithoutGpu
            | HazardId::CompiledCheckpointTwice => Severity::Warning,
            HazardId::PinMemoryWithoutWorkers | HazardId::LaunchBlocking => Severity::Info,
        }
    }

    /// One line for `cfgcheck --list-rules` and docs/guide/cfgcheck.md, "Rules".
    pub const fn summary(self) -> &'static str {
        match self {
            HazardId::CudaGraphsCheckpointing => "torch.compile with CUDA graphs (reduce-overhead, max-autotune) and gradient checkpointing: dies at epoch 2 with \"static input data pointer changed\"",
            HazardId::MemoryExceedsFree => "estimated peak above the target GPU's free memory: out of memory",
            HazardId::MemoryHeadroom => "estimated peak fits with less headroom than the margin (default 10%)",
            HazardId::ParallelTrialsOverflow => "parallel_trials × per-trial peak above the GPU's memory less the margin",
            HazardId::AllocatorFragmentation => "long run, parallel trials or a sweep without expandable_segments:True: fragmentation (\"reserved but unallocated\") ends it",
            HazardId::AllocatorConfSyntax => "an allocator setting PyTorch refuses at start-up (expandable_segments takes True or False)",
            HazardId::WorkersSmallHost => "DataLoader workers on a host with little RAM: the OOM killer ends the run (exit -9)",
            HazardId::PinMemoryWithoutWorkers => "pin_memory without workers pins host memory for no overlap",
            HazardId::UncappedDataset => "no max_train_examples and a dataset near or above host RAM: exit -9 while loading",
            HazardId::LaunchBlocking => "CUDA_LAUNCH_BLOCKING=1: 10-20% slower, for debugging only",
            HazardId::GpuFeaturesWithoutGpu => "torch.compile or fp16 on a target with no GPU",
            HazardId::CompiledCheckpointTwice => "(--scan) torch.compile over a forward that runs the same checkpointed blocks twice: 2.3x (torch 2.13) to 3.5x (2.9.1) eager's peak memory in the compiled backward (pytorch#193193)",
        }
    }
}

impl HazardId {
    /// The fix in general, as a rule's help (SARIF's `help`); each finding's
    /// own fix names the key or the call to change.
    pub const fn help(self) -> &'static str {
        match self {
            HazardId::CudaGraphsCheckpointing => "compile without CUDA graphs (mode \"default\" or \"max-autotune-no-cudagraphs\"), or turn gradient checkpointing off",
            HazardId::MemoryExceedsFree => "lower the batch size (cfgcheck --fit computes one), or turn on gradient checkpointing or mixed precision",
            HazardId::MemoryHeadroom => "lower the batch size a step, or free memory on the GPU",
            HazardId::ParallelTrialsOverflow => "run fewer trials at once (parallel_trials)",
            HazardId::AllocatorFragmentation => "set PYTORCH_ALLOC_CONF=expandable_segments:True in the run's environment",
            HazardId::AllocatorConfSyntax => "write expandable_segments:True or expandable_segments:False",
            HazardId::WorkersSmallHost => "set num_workers=0 on hosts with little RAM (Colab, Kaggle)",
            HazardId::PinMemoryWithoutWorkers => "set pin_memory to false, or give the DataLoader workers",
            HazardId::UncappedDataset => "cap the training set (max_train_examples), or load it lazily",
            HazardId::LaunchBlocking => "unset CUDA_LAUNCH_BLOCKING outside debugging",
            HazardId::GpuFeaturesWithoutGpu => "turn off torch.compile and fp16 for a run without a GPU",
            HazardId::CompiledCheckpointTwice => "put torch._dynamo.graph_break() between the two runs of the checkpointed blocks, so each is its own compiled graph",
        }
    }
}

impl fmt::Display for HazardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl PartialEq<&str> for HazardId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
