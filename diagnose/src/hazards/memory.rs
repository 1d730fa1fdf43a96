//! The memory hazards: the estimated peak against the target GPU's free
//! memory, the margin, and parallel trials sharing one GPU. Their fix is
//! the seeds' decision tree (compile off, the small model, the largest batch
//! that fits).

use super::{Cx, Edits, ExplainCx, Hazard, Target};
use crate::plan::Planner;
use common::estimate::{self, Budget, Estimate, DEFAULT_MARGIN};
use common::wire::cfgcheck::Finding;
use common::wire::config::{Config, Precision};
use common::wire::hazard::HazardId;

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
                "memory does not fit: compile off saves the memory its compilation takes; the estimate does not model compile, so it does not count on this".into(),
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
                format!("memory does not fit: the memory-optimized model (32/64/128 channels) brings the estimate from {before} to {after} MiB");
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
                "{n} trials × {peak} MiB = {} MiB on {name}'s {} MiB less the {:.0}% margin ({usable} MiB): no breathing room, fragmentation turns into OOM and device-side asserts (4 trials of ~6 GB on a 24 GB card die where 3 run)",
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
            p.change(
                "parallel_trials",
                fits.to_string(),
                format!("{n} trials of {peak} MiB do not fit in {usable} MiB; {fits} do"),
                |c| c.parallel_trials = fits,
            );
        }
    }
}
