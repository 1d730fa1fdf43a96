//! The hazards of the compile and precision settings: CUDA graphs with
//! gradient checkpointing (seed 001), GPU-only features on a target with
//! no GPU, and a compiled forward that checkpoints the same blocks twice
//! (pytorch#193193; in code only).

use super::{key_finding, Cx, Edits, ExplainCx, Hazard, Target};
use crate::keys::{Concept, Found, Hit, KeyPlan, Scalar};
use crate::plan::Planner;
use crate::yaml_edit;
use common::wire::cfgcheck::{ConfigFormat, Finding};
use common::wire::config::{CompileMode, Config, Precision};
use common::wire::hazard::HazardId;

pub struct CudaGraphsCheckpointing;

/// What happens when `what` (a compile setting that records CUDA graphs)
/// meets gradient checkpointing: said once, for our config, a config's keys
/// and a script's calls (`scan`).
pub fn cuda_graphs_message(what: &str) -> String {
    cuda_graphs_message_at(what, "")
}

/// The same, naming where the checkpointing was found (`aside`, e.g. "(model.gc, line 4)").
pub fn cuda_graphs_message_at(what: &str, aside: &str) -> String {
    let aside = if aside.is_empty() {
        String::new()
    } else {
        format!(" {aside}")
    };
    format!("{what} records CUDA graphs, which need every tensor at a fixed address; gradient checkpointing{aside} recomputes activations at new addresses, so the run dies at epoch 2 with \"RuntimeError: static input data pointer changed\"")
}

/// The fix, in the words of where the setting lives: `to_default` keeps
/// compiling without CUDA graphs, `off` stops compiling.
pub fn cuda_graphs_fix(to_default: &str, off: &str) -> String {
    format!("set {to_default} (keeps most of the compile speed-up), or {off}")
}

impl CudaGraphsCheckpointing {
    fn fires(c: &Config) -> bool {
        c.torch_compile && c.gradient_checkpointing && c.torch_compile_mode.uses_cuda_graphs()
    }

    /// In a config cfgcheck did not define: the keys recording CUDA graphs,
    /// the key turning checkpointing on and the one turning compile on, when
    /// all halves are there (anywhere in the file).
    fn fires_keys(f: &Found) -> Option<(Vec<&Hit>, &Hit, Option<&Hit>)> {
        let switch = f.compile_on()?;
        let checkpointing = f.checkpointing()?;
        let graphs = f.cuda_graphs();
        (!graphs.is_empty()).then_some((graphs, checkpointing, switch))
    }

    /// The change that removes one graph key: the mode to `default`,
    /// `triton.cudagraphs` to false.
    fn fixed(graph: &Hit) -> Scalar {
        match graph.concept {
            Concept::CudaGraphsOption => Scalar::Bool(false),
            _ => Scalar::Str(CompileMode::Default.as_str().into()),
        }
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
            cuda_graphs_message(&format!(
                "torch.compile mode \"{}\"",
                c.torch_compile_mode.as_str()
            )),
            cuda_graphs_fix("torch_compile_mode: default", "torch_compile: false"),
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
                "\"{}\" uses CUDA graphs, which crash with gradient checkpointing at epoch 2; \"default\" keeps most of the speed-up",
                mode.as_str()
            ),
            |c| c.torch_compile_mode = CompileMode::Default,
        );
    }
    fn reads_keys(&self) -> bool {
        true
    }
    fn check_keys(&self, f: &Found, _target: &Target) -> Vec<Finding> {
        let Some((graphs, checkpointing, switch)) = Self::fires_keys(f) else {
            return vec![];
        };
        graphs
            .into_iter()
            .map(|g| {
                let (what, fix) = match g.concept {
                    Concept::CudaGraphsOption => (
                        format!("inductor's triton.cudagraphs: true {}", g.aside()),
                        format!("set {}: false", g.path),
                    ),
                    _ => {
                        // Hugging Face turns compile on whenever a mode is set.
                        let off = switch
                            .filter(|_| f.format != ConfigFormat::Hf)
                            .map(|s| format!(", or {}: false", s.path))
                            .unwrap_or_default();
                        (
                            format!("torch.compile mode \"{}\" {}", g.shown, g.aside()),
                            format!(
                                "set {}: default (keeps most of the compile speed-up){off}",
                                g.path
                            ),
                        )
                    }
                };
                let mut evidence = vec![checkpointing];
                evidence.extend(switch);
                key_finding(
                    self.id(),
                    g,
                    &evidence,
                    cuda_graphs_message_at(&what, &checkpointing.aside()),
                    fix,
                )
            })
            .collect()
    }
    fn fix_keys(&self, f: &Found, _target: &Target, plan: &mut KeyPlan) {
        let Some((graphs, _, _)) = Self::fires_keys(f) else {
            return;
        };
        for g in graphs {
            plan.set(
                g,
                Self::fixed(g),
                format!(
                    "{} records CUDA graphs, which crash with gradient checkpointing at epoch 2; without them compile keeps most of the speed-up",
                    g.shown
                ),
            );
        }
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

/// pytorch#193193 (open): a compiled graph that runs the same
/// checkpointed blocks twice (CoCa's text tower, without then with
/// cross-attention context) gets a backward whose recompute holds several
/// blocks at once. Only code says it: trainguard's model runs each block
/// once, and no config key says it, so the config check finds nothing.
pub struct CompiledCheckpointTwice;

/// What happens, for `--scan`: `blocks` run twice as `how` says.
pub fn checkpoint_twice_message(blocks: &str, how: &str) -> String {
    format!("torch.compile over a forward that runs the checkpointed blocks {blocks} twice ({how}): the compiled backward recomputes several blocks at once instead of one, a peak of 2.3x (torch 2.13) to 3.5x (torch 2.9.1) eager's with checkpointing, so it runs out of memory where eager fits (pytorch#193193; either run alone compiles fine)")
}

/// The fix: a graph break between the two runs, which pytorch#193193 found
/// fixes it completely at no speed cost.
pub fn checkpoint_twice_fix() -> String {
    "call torch._dynamo.graph_break() between the two runs of the blocks (no speed cost in pytorch#193193), or compile each block instead of the whole forward".into()
}

impl Hazard for CompiledCheckpointTwice {
    fn id(&self) -> HazardId {
        HazardId::CompiledCheckpointTwice
    }
    fn check(&self, _cx: &Cx) -> Vec<Finding> {
        vec![]
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
    fn reads_keys(&self) -> bool {
        true
    }
    fn check_keys(&self, f: &Found, target: &Target) -> Vec<Finding> {
        if !target.known_no_gpu {
            return vec![];
        }
        let compile = f.compile_on();
        let mode = f
            .of(Concept::CompileMode)
            .find(|h| matches!(h.value, Scalar::Str(_)));
        let compile_key = compile.and_then(|s| s.or(mode));
        let fp16 = f.fp16();
        let keys: Vec<&Hit> = compile_key.into_iter().chain(fp16).collect();
        let Some(first) = keys.first() else {
            return vec![];
        };
        let named: Vec<String> = keys
            .iter()
            .map(|h| format!("{}: {} (line {})", h.path, h.shown, h.line))
            .collect();
        vec![key_finding(
            self.id(),
            first,
            &keys,
            format!("{} on a target with no GPU: compile spends minutes for little CPU gain, and fp16 autocast is slow or unsupported on CPU", named.join(" and ")),
            "on CPU turn torch.compile and fp16 off (bf16 or no mixed precision)".into(),
        )]
    }
    fn fix_keys(&self, f: &Found, target: &Target, plan: &mut KeyPlan) {
        if !target.known_no_gpu {
            return;
        }
        if let Some(switch) = f.compile_on() {
            let modes: Vec<&Hit> = f
                .of(Concept::CompileMode)
                .filter(|h| matches!(h.value, Scalar::Str(_)))
                .collect();
            match (f.format, switch) {
                (ConfigFormat::Hf, _) if !modes.is_empty() => plan.unfixable.push(format!(
                    "remove {}: Hugging Face turns torch_compile on whenever a mode is set, and no GPU is on the target",
                    modes[0].named()
                )),
                (_, Some(s)) => plan.set(s, Scalar::Bool(false), "no GPU on the target: compile costs minutes for little CPU gain".into()),
                (_, None) => plan.unfixable.push(format!(
                    "{} asks for torch.compile and no GPU is on the target: turn compile off in your config",
                    modes.first().map_or_else(String::new, |m| m.named())
                )),
            }
        }
        match f.fp16() {
            Some(h) if matches!(h.value, Scalar::Bool(_)) => plan.set(
                h,
                Scalar::Bool(false),
                "no GPU on the target: fp16 autocast is for CUDA".into(),
            ),
            Some(h) => plan.unfixable.push(format!(
                "{}: fp16 on a target with no GPU: set it to your tool's value for bf16 or none",
                h.named()
            )),
            None => {}
        }
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
