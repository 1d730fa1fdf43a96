//! The hazards of the compile and precision settings: CUDA graphs with
//! gradient checkpointing (seed 001), and GPU-only features on a target
//! with no GPU.

use super::{Cx, Edits, ExplainCx, Hazard, Target};
use crate::plan::Planner;
use crate::yaml_edit;
use common::wire::cfgcheck::Finding;
use common::wire::config::{CompileMode, Config, Precision};
use common::wire::hazard::HazardId;

pub struct CudaGraphsCheckpointing;

/// What happens when `what` (a compile setting that records CUDA graphs)
/// meets gradient checkpointing: said once, for a config's keys and for a
/// script's calls (`scan`).
pub fn cuda_graphs_message(what: &str) -> String {
    format!("{what} records CUDA graphs, which need every tensor at a fixed address; gradient checkpointing recomputes activations at new addresses, so the run dies at epoch 2 with \"RuntimeError: static input data pointer changed\"")
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
