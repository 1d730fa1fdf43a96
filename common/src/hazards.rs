//! Every known hazard of a training config, each in one place with its
//! detection and its fix, the way a compiler diagnostic carries its
//! suggestion: [`HazardId`] names it (the id cfgcheck prints, `--explain`'s
//! `rule`, verify-fixes' config check), and its [`Hazard`] says when it
//! fires (`check`, for cfgcheck and verify-fixes), how `cfgcheck --fix`
//! changes the config (`fix`), and which config edits `cfgcheck --explain
//! --config` shows for a failure it caused (`edits`). `rules::check` and
//! `fix::plan_fix` only run them, in [`CHECK_ORDER`] and [`FIX_ORDER`].

use crate::config::{CompileMode, Config, LoadedConfig, Precision};
use crate::estimate::{self, Budget, Estimate, DEFAULT_MARGIN, MIB};
use crate::failures::OomFigures;
use crate::fix::Planner;
use crate::report::{Gpu, Memory};
use crate::rules::Target;
use crate::wire::cfgcheck::Finding;
use crate::yaml_edit;
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
}

impl HazardId {
    /// Every hazard, in the order `cfgcheck --list-rules` prints them.
    pub const ALL: [HazardId; 11] = [
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
            | HazardId::GpuFeaturesWithoutGpu => Severity::Warning,
            HazardId::PinMemoryWithoutWorkers | HazardId::LaunchBlocking => Severity::Info,
        }
    }

    /// One line for `cfgcheck --list-rules` and docs/GUIDE.md, "Rules".
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
        }
    }

    /// What the hazard needs to be judged at all.
    pub const fn needs(self) -> Needs {
        match self {
            HazardId::MemoryExceedsFree
            | HazardId::MemoryHeadroom
            | HazardId::ParallelTrialsOverflow => Needs::GpuMemory,
            HazardId::WorkersSmallHost | HazardId::UncappedDataset => Needs::HostRam,
            _ => Needs::Nothing,
        }
    }

    /// The hazard's detection and fix.
    pub fn hazard(self) -> &'static dyn Hazard {
        match self {
            HazardId::CudaGraphsCheckpointing => &CudaGraphsCheckpointing,
            HazardId::MemoryExceedsFree => &MemoryExceedsFree,
            HazardId::MemoryHeadroom => &MemoryHeadroom,
            HazardId::ParallelTrialsOverflow => &ParallelTrialsOverflow,
            HazardId::AllocatorFragmentation => &AllocatorFragmentation,
            HazardId::AllocatorConfSyntax => &AllocatorConfSyntax,
            HazardId::WorkersSmallHost => &WorkersSmallHost,
            HazardId::PinMemoryWithoutWorkers => &PinMemoryWithoutWorkers,
            HazardId::UncappedDataset => &UncappedDataset,
            HazardId::LaunchBlocking => &LaunchBlocking,
            HazardId::GpuFeaturesWithoutGpu => &GpuFeaturesWithoutGpu,
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
pub const CHECK_ORDER: [HazardId; 11] = [
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

    /// A finding of `id` about `key`, at its line in the file.
    fn finding(&self, id: HazardId, key: &str, message: String, fix: String) -> Finding {
        Finding {
            id,
            severity: id.severity(),
            message,
            fix,
            key: Some(key.to_string()),
            line: self.loaded.index.line_of(key),
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

/// One hazard: its detection and its fix.
pub trait Hazard: Sync {
    fn id(&self) -> HazardId;
    /// The findings for this config on this target (usually none or one).
    fn check(&self, cx: &Cx) -> Vec<Finding>;
    /// `cfgcheck --fix`: the changes that remove it, made on the planner's
    /// config, or what no config change can fix.
    fn fix(&self, _p: &mut Planner, _target: &Target) {}
    /// `cfgcheck --explain --config`: the edits for a failure it caused.
    fn edits(&self, _cx: &ExplainCx) -> Edits {
        Err(NO_CONFIG_FIX.into())
    }
}

/// A host with less RAM than this is "small" for DataLoader workers: Colab's
/// free tier has 12.7 GB (seed 002).
pub const SMALL_HOST_MIB: u64 = 16 * 1024;
/// Epochs from which a single run counts as long for fragmentation.
pub const LONG_RUN_EPOCHS: u32 = 20;

// ---------------------------------------------------------------------------

pub struct CudaGraphsCheckpointing;

impl CudaGraphsCheckpointing {
    fn fires(c: &Config) -> bool {
        c.torch_compile && c.gradient_checkpointing && c.torch_compile_mode.uses_cuda_graphs()
    }
}

impl Hazard for CudaGraphsCheckpointing {
    fn id(&self) -> HazardId {
        HazardId::CudaGraphsCheckpointing
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        if !Self::fires(c) {
            return vec![];
        }
        vec![cx.finding(
            self.id(),
            "torch_compile_mode",
            format!(
                "torch.compile mode \"{}\" records CUDA graphs, which need every tensor at a fixed address; gradient checkpointing recomputes activations at new addresses, so the run dies at epoch 2 with \"RuntimeError: static input data pointer changed\"",
                c.torch_compile_mode.as_str()
            ),
            "set torch_compile_mode: default (keeps most of the compile speed-up), or torch_compile: false".into(),
        )]
    }
    fn fix(&self, p: &mut Planner, _target: &Target) {
        if !Self::fires(&p.config) {
            return;
        }
        let mode = p.config.torch_compile_mode;
        p.change(
            "torch_compile_mode",
            yaml_edit::scalar(CompileMode::Default.as_str()),
            format!(
                "\"{}\" uses CUDA graphs, which crash with gradient checkpointing at epoch 2; \"default\" keeps most of the speed-up (seed 001, Option A)",
                mode.as_str()
            ),
            |c| c.torch_compile_mode = CompileMode::Default,
        );
    }
    fn edits(&self, cx: &ExplainCx) -> Edits {
        let c = cx.config;
        if c.torch_compile && c.torch_compile_mode.uses_cuda_graphs() {
            Ok(vec![(
                "torch_compile_mode".into(),
                yaml_edit::scalar(CompileMode::Default.as_str()),
            )])
        } else {
            Ok(vec![("torch_compile".into(), "false".into())])
        }
    }
}

// ---------------------------------------------------------------------------

/// "largest batch_size that fits ...; <levers>": the advice both memory
/// findings give.
fn memory_advice(c: &Config, est: &Estimate, budget: &Budget) -> String {
    let batch_advice = match budget.largest_batch_free(c) {
        Some(b) => format!(
            "largest batch_size that fits with {:.0}% headroom: {b}",
            budget.margin * 100.0
        ),
        None => "even batch_size 1 does not fit".to_string(),
    };
    format!("{batch_advice}; {}", levers(c, est))
}

/// What each memory lever would save, from the estimate itself.
fn levers(c: &Config, est: &Estimate) -> String {
    let mut out = Vec::new();
    let mut try_lever = |label: &str, changed: Config| {
        let saved = est
            .peak_bytes
            .saturating_sub(estimate::estimate(&changed).peak_bytes);
        if saved > 0 {
            out.push(format!("{label} saves {} MiB", estimate::whole_mib(saved)));
        }
    };
    if !c.gradient_checkpointing {
        try_lever(
            "gradient_checkpointing: true",
            Config {
                gradient_checkpointing: true,
                ..c.clone()
            },
        );
    }
    if c.mixed_precision == Precision::Off {
        try_lever(
            "mixed_precision: bf16",
            Config {
                mixed_precision: Precision::Bf16,
                ..c.clone()
            },
        );
    }
    if !c.memory_optimized && c.architecture.channels.is_none() {
        try_lever(
            "memory_optimized: true (32/64/128)",
            Config {
                memory_optimized: true,
                ..c.clone()
            },
        );
    }
    if c.temporal_frames > 1 {
        let t = c.temporal_frames - 1;
        try_lever(
            &format!("temporal_frames: {t}"),
            Config {
                temporal_frames: t,
                ..c.clone()
            },
        );
    }
    if out.is_empty() {
        "no other lever left in the config".to_string()
    } else {
        out.join(", ")
    }
}

pub struct MemoryExceedsFree;

impl Hazard for MemoryExceedsFree {
    fn id(&self) -> HazardId {
        HazardId::MemoryExceedsFree
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let Some((gpu, mem)) = cx.gpu_memory() else {
            return vec![];
        };
        let (peak, free) = (cx.estimate.peak_mib(), mem.free_mib);
        if peak <= free {
            return vec![];
        }
        let c = cx.config();
        let budget = Budget::of(mem, c.parallel_trials, cx.target.margin);
        let name = gpu.name.as_deref().unwrap_or("the GPU");
        vec![cx.finding(
            self.id(),
            "batch_size",
            format!("estimated peak {peak} MiB is above the {free} MiB free on {name} (GPU {}): the run stops with \"CUDA out of memory\"", gpu.index),
            memory_advice(c, cx.estimate, &budget),
        )]
    }
    /// The seeds' decision tree once the cheap fixes are made: compile off,
    /// then the 32/64/128 model, then the largest batch that fits.
    fn fix(&self, p: &mut Planner, target: &Target) {
        let Some(budget) = target.budget(p.config.parallel_trials) else {
            return;
        };
        let limit = budget.per_trial_bytes();
        let fits = |c: &Config| estimate::estimate(c).peak_bytes <= limit;
        if fits(&p.config) {
            return;
        }
        if p.config.torch_compile {
            p.change(
                "torch_compile",
                "false".into(),
                "memory does not fit: the seeds' next step (Option B) turns compile off, which saves its compilation memory; the estimate does not model compile, so it does not count on this".into(),
                |c| c.torch_compile = false,
            );
        }
        if !fits(&p.config)
            && !p.config.memory_optimized
            && p.config.architecture.channels.is_none()
        {
            let before = estimate::estimate(&p.config).peak_mib();
            p.change("memory_optimized", "true".into(), String::new(), |c| {
                c.memory_optimized = true
            });
            let after = estimate::estimate(&p.config).peak_mib();
            p.plan.changes.last_mut().expect("just pushed").why =
                format!("memory does not fit: the 32/64/128 model (Option C) brings the estimate from {before} to {after} MiB");
        }
        if !fits(&p.config) {
            let mib = budget.per_trial_mib();
            match budget.largest_batch_per_trial(&p.config) {
                Some(b) => {
                    let old = p.config.batch_size;
                    p.change("batch_size", b.to_string(), format!("batch {old} does not fit in {mib} MiB; {b} is the largest that does"), |c| c.batch_size = b);
                }
                None => p.plan.unfixable.push(format!(
                    "even batch_size 1 does not fit in {mib} MiB with this model; enable gradient_checkpointing or mixed_precision, lower image_size or temporal_frames, or use a larger GPU"
                )),
            }
        }
    }
    /// The batch for the GPU given (`--gpu`: its free memory), else for the
    /// capacity the message names, with the default margin.
    fn edits(&self, cx: &ExplainCx) -> Edits {
        let mib = cx
            .gpu
            .and_then(|g| g.memory)
            .map(|m| m.free_mib as f64)
            .or_else(|| cx.oom.and_then(|o| o.total_mib));
        let Some(mib) = mib else {
            return Err(
                "no GPU report (--gpu) and no capacity in the message to size the batch for".into(),
            );
        };
        let budget = Budget {
            free_mib: mib,
            total_mib: mib,
            parallel: 1,
            margin: DEFAULT_MARGIN,
        };
        match budget.largest_batch_free(cx.config) {
            Some(b) if b < cx.config.batch_size => Ok(vec![("batch_size".into(), b.to_string())]),
            Some(_) => Err("by the estimate the config fits that GPU; the OOM came from elsewhere (another process, or a larger model than the config's)".into()),
            None => Err("even batch_size 1 does not fit by the estimate: enable gradient_checkpointing or mixed_precision, or use the 32/64/128 model".into()),
        }
    }
}

pub struct MemoryHeadroom;

impl Hazard for MemoryHeadroom {
    fn id(&self) -> HazardId {
        HazardId::MemoryHeadroom
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let Some((gpu, mem)) = cx.gpu_memory() else {
            return vec![];
        };
        let (peak, free, margin) = (cx.estimate.peak_mib(), mem.free_mib, cx.target.margin);
        if peak > free || ((free - peak) as f64) >= margin * free as f64 {
            return vec![];
        }
        let c = cx.config();
        let budget = Budget::of(mem, c.parallel_trials, margin);
        let name = gpu.name.as_deref().unwrap_or("the GPU");
        vec![cx.finding(
            self.id(),
            "batch_size",
            format!(
                "estimated peak {peak} MiB leaves {} MiB ({:.1}%) of the {free} MiB free on {name}, under the {:.0}% margin: fragmentation or another process can push it out of memory",
                free - peak,
                100.0 * (free - peak) as f64 / free as f64,
                margin * 100.0
            ),
            memory_advice(c, cx.estimate, &budget),
        )]
    }
}

pub struct ParallelTrialsOverflow;

impl Hazard for ParallelTrialsOverflow {
    fn id(&self) -> HazardId {
        HazardId::ParallelTrialsOverflow
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        let Some((gpu, mem)) = cx.gpu_memory() else {
            return vec![];
        };
        if c.parallel_trials <= 1 {
            return vec![];
        }
        let budget = Budget::of(mem, c.parallel_trials, cx.target.margin);
        let peak = cx.estimate.peak_mib();
        let usable = budget.usable_total_mib();
        let n = u64::from(c.parallel_trials);
        if n * peak <= usable {
            return vec![];
        }
        let fits = budget.trials_that_fit(peak);
        let name = gpu.name.as_deref().unwrap_or("the GPU");
        vec![cx.finding(
            self.id(),
            "parallel_trials",
            format!(
                "{n} trials × {peak} MiB = {} MiB on {name}'s {} MiB less the {:.0}% margin ({usable} MiB): no breathing room, fragmentation turns into OOM and device-side asserts (seed 004: 4 trials of ~6 GB on 24 GB died, 3 ran)",
                n * peak,
                mem.total_mib,
                budget.margin * 100.0
            ),
            if fits >= 1 {
                format!("set parallel_trials: {fits} (the most that fit with the margin)")
            } else {
                "not even one trial fits with the margin: shrink the trial first".to_string()
            },
        )]
    }
    fn fix(&self, p: &mut Planner, target: &Target) {
        if p.config.parallel_trials <= 1 {
            return;
        }
        let Some(budget) = target.budget(p.config.parallel_trials) else {
            return;
        };
        let peak = estimate::estimate(&p.config).peak_mib();
        let usable = budget.usable_total_mib();
        let n = u64::from(p.config.parallel_trials);
        if n * peak > usable && usable >= peak {
            let fits = budget.trials_that_fit(peak) as u32;
            p.change("parallel_trials", fits.to_string(), format!("{n} trials of {peak} MiB do not fit in {usable} MiB; {fits} do (seed 004: 4 → 3)"), |c| c.parallel_trials = fits);
        }
    }
}

// ---------------------------------------------------------------------------

/// The allocator setting the run gets, read under both names.
pub fn alloc_conf(
    c: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String, &'static str)> {
    ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"]
        .iter()
        .find_map(|name| {
            c.env_var(name, env)
                .map(|(v, src)| (name.to_string(), v, src))
        })
}

/// An allocator setting with expandable segments turned on, the user's other
/// options kept (`max_split_size_mb:128` -> `max_split_size_mb:128,expandable_segments:True`).
pub fn with_expandable(value: &str) -> String {
    let mut parts: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty() && !o.starts_with("expandable_segments:"))
        .collect();
    parts.push("expandable_segments:True");
    parts.join(",")
}

/// Whether an allocator setting turns expandable segments on.
pub fn expandable_segments(value: &str) -> bool {
    value
        .split(',')
        .any(|opt| opt.trim() == "expandable_segments:True")
}

/// A long run for fragmentation: many epochs, parallel trials, or a sweep.
pub fn long_run(c: &Config) -> bool {
    c.epochs >= LONG_RUN_EPOCHS || c.parallel_trials > 1 || c.trials > 1
}

const EXPANDABLE_WHY: &str =
    "expandable segments keep fragmentation from ending long runs (seed 004)";

pub struct AllocatorFragmentation;

impl Hazard for AllocatorFragmentation {
    fn id(&self) -> HazardId {
        HazardId::AllocatorFragmentation
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        let on = alloc_conf(c, cx.target.env).is_some_and(|(_, v, _)| expandable_segments(&v));
        if !long_run(c) || on {
            return vec![];
        }
        let (why, key) = match (c.trials > 1, c.parallel_trials > 1) {
            (true, _) => (format!("a sweep of {} trials", c.trials), "trials"),
            (_, true) => (
                format!("{} parallel trials", c.parallel_trials),
                "parallel_trials",
            ),
            _ => (format!("{} epochs", c.epochs), "epochs"),
        };
        vec![cx.finding(
            self.id(),
            key,
            format!("{why} without expandable_segments:True: the caching allocator fragments (\"X GiB is reserved by PyTorch but unallocated\") until a small allocation fails (seed 004 died at trial 182)"),
            "set environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:True\"} (PYTORCH_CUDA_ALLOC_CONF before PyTorch 2.9); trainguard's train sets it itself when neither is set".into(),
        )]
    }
    /// Also fixes [`AllocatorConfSyntax`]: the setting is rewritten with
    /// `expandable_segments:True`, the user's other options kept.
    fn fix(&self, p: &mut Planner, target: &Target) {
        let c = p.config.clone();
        match alloc_conf(&c, target.env) {
            Some((name, value, source)) if !expandable_segments(&value) => {
                let fixed = with_expandable(&value);
                let bad_syntax = value.contains("expandable_segments:");
                if !(long_run(&c) || bad_syntax) {
                    return;
                }
                if source == "config" {
                    let key = format!("environment.{name}");
                    p.change(
                        &key,
                        yaml_edit::scalar(&fixed),
                        EXPANDABLE_WHY.into(),
                        |c| {
                            c.environment.insert(name.clone(), fixed.clone());
                        },
                    );
                } else {
                    p.plan.unfixable.push(format!(
                        "{name}={value} comes from your shell, not the config: set {name}={fixed} there"
                    ));
                }
            }
            None if long_run(&c) => {
                let value = with_expandable("");
                p.change(
                    "environment.PYTORCH_ALLOC_CONF",
                    yaml_edit::scalar(&value),
                    EXPANDABLE_WHY.into(),
                    |c| {
                        c.environment
                            .insert("PYTORCH_ALLOC_CONF".into(), value.clone());
                    },
                );
            }
            _ => {}
        }
    }
    fn edits(&self, cx: &ExplainCx) -> Edits {
        let (name, value) = match alloc_conf(cx.config, cx.env) {
            Some((n, v, _)) => (n, v),
            None => ("PYTORCH_ALLOC_CONF".to_string(), String::new()),
        };
        Ok(vec![(
            format!("environment.{name}"),
            yaml_edit::scalar(&with_expandable(&value)),
        )])
    }
}

/// Fixed by [`AllocatorFragmentation`]'s fix.
pub struct AllocatorConfSyntax;

impl Hazard for AllocatorConfSyntax {
    fn id(&self) -> HazardId {
        HazardId::AllocatorConfSyntax
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let Some((name, value, source)) = alloc_conf(cx.config(), cx.target.env) else {
            return vec![];
        };
        value
            .split(',')
            .filter_map(|opt| opt.trim().strip_prefix("expandable_segments:"))
            .filter(|v| *v != "True" && *v != "False")
            .map(|v| {
                cx.finding(
                    self.id(),
                    "environment",
                    format!("{name}={value} (from the {source}): PyTorch accepts only True or False for expandable_segments and stops at start-up on \"{v}\""),
                    "write expandable_segments:True".into(),
                )
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------

pub struct WorkersSmallHost;

impl WorkersSmallHost {
    fn fires(c: &Config, ram_mib: u64) -> bool {
        c.num_workers > 0 && ram_mib < SMALL_HOST_MIB
    }
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
                format!("{} DataLoader workers on a host with {:.1} GiB of RAM: each worker is a process with its own copies, and the OOM killer ends the run with exit code -9 (seed 002)", c.num_workers, ram as f64 / 1024.0),
                "set num_workers: 0 on small hosts (Colab, Kaggle)".into(),
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
                    "{:.1} GiB of host RAM is too little for worker processes (seed 002)",
                    ram as f64 / 1024.0
                ),
                |c| c.num_workers = 0,
            ),
            _ => {}
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
            format!("no max_train_examples and the training set takes {} MiB against {ram_mib} MiB of host RAM: loading it can get the process killed (exit -9, seed 002)", estimate::whole_mib(bytes)),
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

// ---------------------------------------------------------------------------

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
            "pin_memory without workers pins every batch in the main process: page-locked host memory with no loading overlap to gain".into(),
            "set pin_memory: false, or use it only with num_workers > 0 (seed 002)".into(),
        )]
    }
}

pub struct LaunchBlocking;

impl Hazard for LaunchBlocking {
    fn id(&self) -> HazardId {
        HazardId::LaunchBlocking
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        match cx.config().env_var("CUDA_LAUNCH_BLOCKING", cx.target.env) {
            Some((v, source)) if v.trim() == "1" => vec![cx.finding(
                self.id(),
                "environment",
                format!("CUDA_LAUNCH_BLOCKING=1 (from the {source}) makes every kernel launch synchronous: errors point at the right line, but the run is 10-20% slower"),
                "keep it for debugging a device-side assert; unset it for long runs".into(),
            )],
            _ => vec![],
        }
    }
}

pub struct GpuFeaturesWithoutGpu;

impl Hazard for GpuFeaturesWithoutGpu {
    fn id(&self) -> HazardId {
        HazardId::GpuFeaturesWithoutGpu
    }
    fn check(&self, cx: &Cx) -> Vec<Finding> {
        let c = cx.config();
        let fp16 = c.mixed_precision == Precision::Fp16;
        if !cx.target.known_no_gpu || !(c.torch_compile || fp16) {
            return vec![];
        }
        let what = match (c.torch_compile, fp16) {
            (true, true) => "torch_compile and mixed_precision fp16",
            (true, false) => "torch_compile",
            _ => "mixed_precision fp16",
        };
        vec![cx.finding(
            self.id(),
            if c.torch_compile { "torch_compile" } else { "mixed_precision" },
            format!("{what} on a target with no GPU: compile spends minutes for little CPU gain, and fp16 autocast is slow or unsupported on CPU"),
            "on CPU set torch_compile: false and mixed_precision: off (or bf16)".into(),
        )]
    }
    fn fix(&self, p: &mut Planner, target: &Target) {
        if !target.known_no_gpu {
            return;
        }
        if p.config.torch_compile {
            p.change(
                "torch_compile",
                "false".into(),
                "no GPU on the target: compile costs minutes for little CPU gain".into(),
                |c| c.torch_compile = false,
            );
        }
        if p.config.mixed_precision == Precision::Fp16 {
            p.change(
                "mixed_precision",
                yaml_edit::scalar("off"),
                "no GPU on the target: fp16 autocast is for CUDA".into(),
                |c| c.mixed_precision = Precision::Off,
            );
        }
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
            assert_eq!(id.hazard().id(), id);
        }
        let mut sorted = CHECK_ORDER.to_vec();
        sorted.sort();
        assert_eq!(sorted, HazardId::ALL.to_vec(), "every hazard is checked");
    }
}
