//! The training config's schema (the YAML file cfgcheck, train and
//! verify-fixes read): every key with its type and its default (docs/guide/config.md,
//! "Config"). Keys are the seeds' (memory_optimized, gradient_checkpointing,
//! torch_compile, torch_compile_mode, batch_size, temporal_frames, epochs,
//! architecture.name, ...) plus what a trainer needs. Reading a file and
//! judging its values is `common::config`'s; here is only the shape, and
//! what follows from the values alone.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompileMode {
    Default,
    ReduceOverhead,
    MaxAutotune,
    MaxAutotuneNoCudagraphs,
}

impl CompileMode {
    /// Modes that capture CUDA graphs, which need static tensor addresses.
    pub fn uses_cuda_graphs(self) -> bool {
        matches!(self, CompileMode::ReduceOverhead | CompileMode::MaxAutotune)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            CompileMode::Default => "default",
            CompileMode::ReduceOverhead => "reduce-overhead",
            CompileMode::MaxAutotune => "max-autotune",
            CompileMode::MaxAutotuneNoCudagraphs => "max-autotune-no-cudagraphs",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Off,
    Bf16,
    Fp16,
}

impl Precision {
    /// Bytes per activation element under this precision.
    pub fn activation_bytes(self) -> u64 {
        match self {
            Precision::Off => 4,
            Precision::Bf16 | Precision::Fp16 => 2,
        }
    }
}

/// The CNN encoder's memory layout (`channels_last`): NHWC strides for
/// each frame at the top of the encoder, which conv, batch norm, ReLU and
/// max-pool keep. On the CPU max-pool is about 12× faster in NHWC (issue 26);
/// on CUDA it is not measured yet, so `auto` is on for the CPU and off on
/// CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelsLast {
    Auto,
    On,
    Off,
}

impl ChannelsLast {
    /// Whether frames get NHWC strides on a device (`cuda`: a CUDA device).
    pub fn applies(self, cuda: bool) -> bool {
        match self {
            ChannelsLast::Auto => !cuda,
            ChannelsLast::On => true,
            ChannelsLast::Off => false,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelsLast::Auto => "auto",
            ChannelsLast::On => "on",
            ChannelsLast::Off => "off",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    Regression,
    Classification,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    Mse,
    Huber,
    CrossEntropy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArchName {
    /// Temporal self-attention across the frame embeddings.
    Transformer,
    /// Frame embeddings averaged, no attention.
    Cnn,
}

/// The full model's CNN widths (seed 000, configs A and B).
pub const FULL_CHANNELS: [u32; 3] = [64, 128, 256];
/// The memory-optimized model's widths (seed 000, config C).
pub const SMALL_CHANNELS: [u32; 3] = [32, 64, 128];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Architecture {
    pub name: ArchName,
    /// CNN widths, one conv block each; null: 64/128/256, or 32/64/128 when
    /// memory_optimized.
    pub channels: Option<Vec<u32>>,
    pub embed_dim: u32,
    pub attention_heads: u32,
    pub attention_layers: u32,
    /// Feed-forward width of each attention layer; null: 2 × embed_dim.
    pub ffn_dim: Option<u32>,
    pub scalar_hidden: u32,
}

impl Default for Architecture {
    fn default() -> Self {
        Architecture {
            name: ArchName::Transformer,
            channels: None,
            embed_dim: 128,
            attention_heads: 4,
            attention_layers: 1,
            ffn_dim: None,
            scalar_hidden: 64,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Data {
    /// A safetensors or .npz file with frames, scalars and target; null: the
    /// built-in synthetic dataset.
    pub path: Option<PathBuf>,
    /// The validation file, same layout, required with `path`.
    pub val_path: Option<PathBuf>,
    /// Size of the synthetic dataset.
    pub synthetic_train_examples: u64,
    pub synthetic_val_examples: u64,
}

impl Default for Data {
    fn default() -> Self {
        Data {
            path: None,
            val_path: None,
            synthetic_train_examples: 2000,
            synthetic_val_examples: 400,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    // Memory and speed.
    pub memory_optimized: bool,
    pub gradient_checkpointing: bool,
    pub torch_compile: bool,
    pub torch_compile_mode: CompileMode,
    pub mixed_precision: Precision,
    /// The encoder's layout: NHWC (`on`), NCHW (`off`), or `auto` (NHWC on
    /// the CPU, NCHW on CUDA).
    pub channels_last: ChannelsLast,
    // Training.
    pub batch_size: u32,
    /// Split each batch into micro-batches of this size with gradient
    /// accumulation (the same update, less activation memory); null: whole
    /// batches. train lowers it by itself after an out-of-memory error.
    pub micro_batch_size: Option<u32>,
    pub temporal_frames: u32,
    pub epochs: u32,
    pub learning_rate: f64,
    pub weight_decay: f64,
    pub warmup_epochs: u32,
    /// Gradient-norm clipping; null: off.
    pub grad_clip: Option<f64>,
    pub dropout: f64,
    pub seed: u64,
    /// Trials run at once on one GPU.
    pub parallel_trials: u32,
    /// Trials in a sweep; 1 for a single run.
    pub trials: u32,
    // Task and inputs.
    pub task: Task,
    /// Classes, for classification.
    pub num_labels: u32,
    /// null: mse for regression, cross_entropy for classification.
    pub loss: Option<Loss>,
    /// Frames are image_size × image_size.
    pub image_size: u32,
    pub image_channels: u32,
    pub scalar_features: u32,
    pub data: Data,
    pub max_train_examples: Option<u64>,
    pub max_val_examples: Option<u64>,
    pub num_workers: u32,
    pub pin_memory: bool,
    pub architecture: Architecture,
    /// Environment variables the run gets (PYTORCH_ALLOC_CONF,
    /// PYTORCH_CUDA_ALLOC_CONF, CUDA_LAUNCH_BLOCKING, ...).
    pub environment: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            memory_optimized: false,
            gradient_checkpointing: false,
            torch_compile: false,
            torch_compile_mode: CompileMode::Default,
            mixed_precision: Precision::Off,
            channels_last: ChannelsLast::Auto,
            batch_size: 16,
            micro_batch_size: None,
            temporal_frames: 5,
            epochs: 10,
            learning_rate: 1e-3,
            weight_decay: 0.01,
            warmup_epochs: 1,
            grad_clip: Some(1.0),
            dropout: 0.1,
            seed: 42,
            parallel_trials: 1,
            trials: 1,
            task: Task::Regression,
            num_labels: 2,
            loss: None,
            image_size: 64,
            image_channels: 3,
            scalar_features: 8,
            data: Data::default(),
            max_train_examples: None,
            max_val_examples: None,
            num_workers: 0,
            pin_memory: false,
            architecture: Architecture::default(),
            environment: BTreeMap::new(),
        }
    }
}

impl Config {
    /// The CNN widths in effect.
    pub fn channels(&self) -> Vec<u32> {
        match &self.architecture.channels {
            Some(c) => c.clone(),
            None if self.memory_optimized => SMALL_CHANNELS.to_vec(),
            None => FULL_CHANNELS.to_vec(),
        }
    }

    pub fn ffn_dim(&self) -> u32 {
        self.architecture
            .ffn_dim
            .unwrap_or(2 * self.architecture.embed_dim)
    }

    pub fn loss(&self) -> Loss {
        self.loss.unwrap_or(match self.task {
            Task::Regression => Loss::Mse,
            Task::Classification => Loss::CrossEntropy,
        })
    }

    /// The batch one forward pass holds: the micro-batch when set.
    pub fn forward_batch(&self) -> u32 {
        self.micro_batch_size
            .unwrap_or(self.batch_size)
            .min(self.batch_size)
    }

    /// Outputs of the head: 1 for regression, num_labels for classification.
    pub fn outputs(&self) -> u32 {
        match self.task {
            Task::Regression => 1,
            Task::Classification => self.num_labels,
        }
    }

    /// A variable of the run's environment: the config's, else `process`'s
    /// (what the run would inherit).
    pub fn env_var<'a>(
        &'a self,
        name: &str,
        process: &'a dyn Fn(&str) -> Option<String>,
    ) -> Option<(String, &'static str)> {
        match self.environment.get(name) {
            Some(v) => Some((v.clone(), "config")),
            None => process(name).map(|v| (v, "environment")),
        }
    }

    /// The config as YAML, every key written out (the resolved config).
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("a Config always serialises")
    }
}
