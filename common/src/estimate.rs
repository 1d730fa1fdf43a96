//! The analytic memory estimate of one training step's peak on the GPU, from
//! the model train builds (`model::ModelSpec`). Each line's formula is printed
//! with it and documented in docs/guide/cfgcheck.md, "The memory estimate". Its accuracy is a
//! measurement, not an assumption: the activation lines equal the bytes
//! autograd saves (CPU, `just bench-activations`), and the backward
//! workspace, the cuBLAS workspaces and the context allowance are fit to
//! the peaks measured on an H100 (bench/gpu/results/2026-11-26-H100: 48
//! configs, all within 5% of PyTorch's peak allocated memory).

use crate::model::ModelSpec;
use crate::wire::cfgcheck::{EstimateLine, EstimateOut};
use crate::wire::config::{Config, Precision};
use crate::wire::memdiag::Memory;
use serde::{Deserialize, Serialize};

pub const MIB: u64 = 1024 * 1024;

/// The largest batch size any search for one (`--fix`, `--fit`, the
/// memory rules' advice, `--explain`'s diff) considers.
pub const BATCH_CAP: u32 = 4096;

/// Headroom kept free on the GPU when no `--margin` is given (10%).
pub const DEFAULT_MARGIN: f64 = 0.10;

/// Bytes as MiB, with the fraction.
pub fn mib_f64(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// Bytes as whole MiB, rounded down.
pub fn whole_mib(bytes: u64) -> u64 {
    bytes / MIB
}

/// Bytes as MiB rounded to one decimal, as the estimate's lines print them.
pub fn mib_1dp(bytes: u64) -> f64 {
    (mib_f64(bytes) * 10.0).round() / 10.0
}

/// The memory a run may use on its target GPU: what is free and what there
/// is in all, shared by `parallel` trials, less the `margin` (a fraction,
/// 0.10 = 10%). Every memory decision (the rules, `--fix`, `--fit`,
/// `--explain`'s diff, verify-fixes' memory check) goes through it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub free_mib: f64,
    pub total_mib: f64,
    pub parallel: u32,
    pub margin: f64,
}

impl Budget {
    /// The budget on a GPU of the report, for `parallel` trials.
    pub fn of(mem: Memory, parallel: u32, margin: f64) -> Budget {
        Budget {
            free_mib: mem.free_mib as f64,
            total_mib: mem.total_mib as f64,
            parallel,
            margin,
        }
    }

    fn less_margin(&self, mib: f64) -> u64 {
        (mib * (1.0 - self.margin)) as u64
    }

    /// Free memory less the margin, in MiB.
    pub fn usable_free_mib(&self) -> u64 {
        self.less_margin(self.free_mib)
    }

    /// Total memory less the margin, in MiB.
    pub fn usable_total_mib(&self) -> u64 {
        self.less_margin(self.total_mib)
    }

    /// What one trial may use: free memory, and with parallel trials its
    /// share of the total, less the margin, in MiB.
    pub fn per_trial_mib(&self) -> u64 {
        let share = (self.total_mib / f64::from(self.parallel.max(1))).floor();
        self.less_margin(self.free_mib.min(share))
    }

    /// [`Budget::per_trial_mib`] in bytes.
    pub fn per_trial_bytes(&self) -> u64 {
        self.per_trial_mib() * MIB
    }

    /// The largest batch (up to [`BATCH_CAP`]) whose estimated peak fits in
    /// `mib`; None when batch 1 does not.
    pub fn largest_batch_in(c: &Config, mib: u64) -> Option<u32> {
        largest_batch(c, mib * MIB, BATCH_CAP)
    }

    /// The largest batch that fits in the usable free memory.
    pub fn largest_batch_free(&self, c: &Config) -> Option<u32> {
        Self::largest_batch_in(c, self.usable_free_mib())
    }

    /// The largest batch that fits in one trial's share.
    pub fn largest_batch_per_trial(&self, c: &Config) -> Option<u32> {
        Self::largest_batch_in(c, self.per_trial_mib())
    }

    /// How many trials of `peak_mib` fit in the usable total.
    pub fn trials_that_fit(&self, peak_mib: u64) -> u64 {
        self.usable_total_mib() / peak_mib.max(1)
    }
}

/// What NVML shows for a training process beyond the allocator's peak: the
/// CUDA context (614 MiB on an H100 with CUDA 13) and the memory the caching
/// allocator reserves but has not handed out. Fit to NVML's figures on an
/// H100 (the gap was 763 to 1001 MiB over 48 configs; with 768 MiB, 94% of
/// them within 10% of NVML's figure).
pub const CONTEXT_BYTES: u64 = 768 * MIB;

/// cuBLAS's and cuBLASLt's workspaces, which the caching allocator holds
/// from the first matrix product on: a constant 64 MiB in every config
/// measured on an H100 (older GPUs use smaller ones).
pub const CUBLAS_WORKSPACE_BYTES: u64 = 64 * MIB;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub component: String,
    pub bytes: u64,
    pub formula: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub parameters: u64,
    pub lines: Vec<Line>,
    pub peak_bytes: u64,
}

impl Estimate {
    pub fn peak_mib(&self) -> u64 {
        self.peak_bytes.div_ceil(MIB)
    }
}

/// The estimate as cfgcheck/v2 writes it: MiB to one decimal per line.
impl From<&Estimate> for EstimateOut {
    fn from(e: &Estimate) -> Self {
        EstimateOut {
            parameters: e.parameters,
            peak_mib: e.peak_mib(),
            lines: e
                .lines
                .iter()
                .map(|l| EstimateLine {
                    component: l.component.clone(),
                    mib: mib_1dp(l.bytes),
                    formula: l.formula.clone(),
                })
                .collect(),
        }
    }
}

/// Bytes autograd keeps per sample, by part of the model.
struct Saved {
    /// One frame through the CNN encoder.
    encoder_frame: u64,
    /// The frame embeddings that cross the encoder boundary, all frames.
    boundary: u64,
    temporal: u64,
    scalars: u64,
    fusion: u64,
    /// The largest single activation of one frame (backward's gradient buffers).
    largest_frame_tensor: u64,
}

fn saved_per_sample(m: &ModelSpec, ab: u64) -> Saved {
    let d = m.embed_dim;
    let mut encoder_frame = 0;
    let mut largest = 0;
    for b in &m.blocks {
        let s2 = b.size * b.size;
        let half = (b.size / 2) * (b.size / 2);
        // conv input, batch-norm input (conv output), ReLU output (also the
        // max pool's input); the pool's int64 indices.
        encoder_frame +=
            ab * (b.in_channels * s2 + 2 * b.out_channels * s2) + 8 * b.out_channels * half;
        largest = largest.max(ab * b.out_channels * s2);
    }
    // Projection input and ReLU output, and a one-byte dropout mask.
    encoder_frame += ab * (m.cnn_width() + d) + d;
    let t = m.frames;
    // Per attention layer: in_proj input, q, k, v, out_proj input, residual,
    // two layer-norm inputs (8·T·d); FFN hidden and its ReLU (2·T·ff);
    // attention probabilities (h·T²); two one-byte dropout masks.
    let temporal =
        m.attention_layers * (ab * (8 * t * d + 2 * t * m.ffn_dim + m.heads * t * t) + 2 * t * d);
    let scalars = if m.scalar_features > 0 {
        ab * (m.scalar_features + 2 * m.scalar_hidden + d)
    } else {
        0
    };
    let fusion = ab * (m.fusion_inputs() + 2 * d) + d;
    Saved {
        encoder_frame,
        boundary: ab * t * d,
        temporal,
        scalars,
        fusion,
        largest_frame_tensor: largest,
    }
}

/// A size for a formula: MiB, or KiB when under one MiB.
fn mib(bytes: u64) -> String {
    if bytes < MIB {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", mib_f64(bytes))
    }
}

pub fn estimate(c: &Config) -> Estimate {
    let m = ModelSpec::from_config(c);
    let p = m.parameter_count();
    let mixed = c.mixed_precision != Precision::Off;
    let mut lines = training_state(p, mixed);
    // Activations live for one forward pass: the micro-batch when there is one.
    let b = u64::from(c.forward_batch());
    lines.push(input_batch(&m, b));
    lines.extend(activations(c, &m, b));
    lines.push(line(
        "cuBLAS workspaces",
        CUBLAS_WORKSPACE_BYTES,
        format!(
            "{} the allocator holds for cuBLAS and cuBLASLt (measured on an H100)",
            mib(CUBLAS_WORKSPACE_BYTES)
        ),
    ));
    lines.push(line(
        "CUDA context and workspaces",
        CONTEXT_BYTES,
        format!(
            "allowance of {}: the CUDA context and the allocator's reserved but unused memory (fit to NVML's figures on an H100)",
            mib(CONTEXT_BYTES)
        ),
    ));
    let peak_bytes = lines.iter().map(|l| l.bytes).sum();
    Estimate {
        parameters: p,
        lines,
        peak_bytes,
    }
}

fn line(component: &str, bytes: u64, formula: String) -> Line {
    Line {
        component: component.to_string(),
        bytes,
        formula,
    }
}

/// What lives for the whole run, whatever the batch: the weights, their
/// gradients, AdamW's moments and, under autocast, the half-precision casts.
fn training_state(p: u64, mixed: bool) -> Vec<Line> {
    let mut lines = vec![
        line(
            "Model weights",
            4 * p,
            format!("4 B × {p} parameters (fp32)"),
        ),
        line("Gradients", 4 * p, format!("4 B × {p} parameters")),
        line(
            "Optimizer state (AdamW)",
            8 * p,
            format!("2 moments × 4 B × {p} parameters"),
        ),
    ];
    if mixed {
        lines.push(line(
            "Autocast weight copies",
            2 * p,
            "2 B × parameters (half-precision casts kept for the step)".into(),
        ));
    }
    lines
}

fn input_batch(m: &ModelSpec, b: u64) -> Line {
    let t = m.frames;
    let input =
        4 * b * (t * m.image_channels * m.image_size * m.image_size + m.scalar_features + 1);
    line(
        "Input batch",
        input,
        format!(
            "4 B × batch {b} × (frames {t} × {}×{}×{} + {} scalars + target)",
            m.image_channels, m.image_size, m.image_size, m.scalar_features
        ),
    )
}

/// What autograd keeps for a forward pass of `b` samples, and backward's
/// gradient buffers.
fn activations(c: &Config, m: &ModelSpec, b: u64) -> [Line; 3] {
    let t = m.frames;
    let mixed = c.mixed_precision != Precision::Off;
    let s = saved_per_sample(m, c.mixed_precision.activation_bytes());
    // With checkpointing, one frame's graph is alive beside the head's: the
    // last frame's, kept from the first pass through the head's backward
    // (train does not recompute it), then each recomputed frame's alone.
    // The lines below add both, as the first of those moments holds them.
    let (encoder, encoder_formula) = if c.gradient_checkpointing {
        (
            b * (s.encoder_frame + s.boundary),
            format!(
                "batch {b} × (one frame's encoder activations {} + frame embeddings {}): per-frame checkpointing keeps one frame's graph at a time",
                mib(s.encoder_frame),
                mib(s.boundary)
            ),
        )
    } else {
        (
            b * t * s.encoder_frame,
            format!(
                "batch {b} × frames {t} × encoder activations per frame {}",
                mib(s.encoder_frame)
            ),
        )
    };
    let precision = if mixed {
        "2 B (mixed precision)"
    } else {
        "4 B (fp32)"
    };
    [
        line(
            "Activations: CNN encoder",
            encoder,
            format!("{encoder_formula}; elements × {precision}, pool indices 8 B"),
        ),
        line(
            "Activations: temporal, scalars, fusion",
            b * (s.temporal + s.scalars + s.fusion),
            format!(
                "batch {b} × ({} attention layer(s) {} + scalar MLP {} + fusion and head {})",
                m.attention_layers,
                mib(s.temporal),
                mib(s.scalars),
                mib(s.fusion)
            ),
        ),
        // Measured on an H100: backward's gradient buffers reuse what it
        // frees as it goes, so beyond the saved activations it holds about
        // half of one frame's largest activation per sample, with per-frame
        // checkpointing or without.
        line(
            "Backward workspace",
            b * s.largest_frame_tensor / 2,
            format!(
                "half the largest activation of a frame ({}) × batch {b}: the gradient buffers beside the saved activations, which backward frees as it goes (fit on an H100)",
                mib(s.largest_frame_tensor)
            ),
        ),
    ]
}

/// The largest batch size whose estimated peak is at most `budget_bytes`, up
/// to `cap`; None when even a batch of 1 does not fit.
pub fn largest_batch(c: &Config, budget_bytes: u64, cap: u32) -> Option<u32> {
    let fits = |b: u32| {
        estimate(&Config {
            batch_size: b,
            ..c.clone()
        })
        .peak_bytes
            <= budget_bytes
    };
    if !fits(1) {
        return None;
    }
    // The estimate grows with the batch, so bisect.
    let (mut lo, mut hi) = (1u32, cap.max(1));
    if fits(hi) {
        return Some(hi);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peak(f: impl FnOnce(&mut Config)) -> u64 {
        let mut c = Config {
            image_size: 128,
            batch_size: 16,
            ..Config::default()
        };
        f(&mut c);
        estimate(&c).peak_bytes
    }

    #[test]
    fn each_lever_lowers_the_peak() {
        let base = peak(|_| {});
        assert!(peak(|c| c.gradient_checkpointing = true) < base);
        assert!(peak(|c| c.mixed_precision = Precision::Bf16) < base);
        assert!(peak(|c| c.memory_optimized = true) < base);
        assert!(peak(|c| c.temporal_frames = 4) < base);
        assert!(peak(|c| c.batch_size = 32) > base);
    }

    #[test]
    fn lines_add_up_and_parameters_match_the_model() {
        let c = Config::default();
        let e = estimate(&c);
        assert_eq!(e.peak_bytes, e.lines.iter().map(|l| l.bytes).sum::<u64>());
        assert_eq!(e.parameters, ModelSpec::from_config(&c).parameter_count());
        assert_eq!(e.lines[0].bytes, 4 * e.parameters);
    }

    #[test]
    fn largest_batch_is_the_edge_of_the_budget() {
        let c = Config {
            image_size: 128,
            ..Config::default()
        };
        let budget = 4 * 1024 * MIB;
        let b = largest_batch(&c, budget, 4096).unwrap();
        let at = |b: u32| {
            estimate(&Config {
                batch_size: b,
                ..c.clone()
            })
            .peak_bytes
        };
        assert!(at(b) <= budget && at(b + 1) > budget, "batch {b}");
        assert_eq!(largest_batch(&c, CONTEXT_BYTES, 4096), None);
        assert_eq!(largest_batch(&c, u64::MAX, 64), Some(64));
    }
}
