//! The training config: one schema for cfgcheck, train and verify-fixes. Keys
//! are the seeds' (memory_optimized, gradient_checkpointing, torch_compile,
//! torch_compile_mode, batch_size, temporal_frames, epochs, architecture.name,
//! ...) plus what a trainer needs; every key has a default (docs/GUIDE.md, "Config").
//!
//! Reading never panics: serde reports type errors with their key path and
//! line, `validate` the impossible values, and an unknown key names the
//! nearest known one.

use crate::bad_input;
use crate::input::Input;
use crate::yaml_index::YamlIndex;
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
    /// Trials run at once on one GPU (seed 004).
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

/// A config and where it came from, with its position index for messages
/// and edits.
pub struct LoadedConfig {
    pub name: String,
    pub text: String,
    pub config: Config,
    pub index: YamlIndex,
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

    /// Parses and checks a config. Errors name the file, the key path and
    /// the line.
    pub fn load(input: &Input) -> anyhow::Result<LoadedConfig> {
        let name = &input.name;
        if input.text.trim().is_empty() {
            return Err(bad_input!(
                "{name}: empty; expected a YAML training config (see docs/GUIDE.md, \"Config\")"
            ));
        }
        let value: serde_yaml::Value =
            serde_yaml::from_str(&input.text).map_err(|e| bad_input!("{name}: not YAML: {e}"))?;
        if !value.is_mapping() {
            return Err(bad_input!(
                "{name}: expected a mapping of config keys at the top level"
            ));
        }
        let index = YamlIndex::build(&input.text);
        let config: Config = serde_yaml::from_str(&input.text).map_err(|e| {
            let e = e.to_string();
            match unknown_key(&e, &index) {
                Some(message) => bad_input!("{name}: {message}"),
                None => bad_input!("{name}: {e}"),
            }
        })?;
        let problems = config.validate();
        if !problems.is_empty() {
            let lines: Vec<String> = problems
                .iter()
                .map(|(path, msg)| match index.line_of(path) {
                    Some(line) => format!("{name}: line {line}: `{path}`: {msg}"),
                    None => format!("{name}: `{path}`: {msg}"),
                })
                .collect();
            return Err(bad_input!("{}", lines.join("\n")));
        }
        Ok(LoadedConfig {
            name: name.clone(),
            text: input.text.clone(),
            config,
            index,
        })
    }

    /// Values serde accepts but a run cannot: (key path, what was expected).
    pub fn validate(&self) -> Vec<(String, String)> {
        let mut p = Vec::new();
        let mut positive = |path: &str, v: u64| {
            if v == 0 {
                p.push((
                    path.to_string(),
                    "expected a positive integer, found 0".to_string(),
                ));
            }
        };
        positive("batch_size", self.batch_size.into());
        positive("temporal_frames", self.temporal_frames.into());
        positive("parallel_trials", self.parallel_trials.into());
        positive("trials", self.trials.into());
        positive("image_channels", self.image_channels.into());
        positive("architecture.embed_dim", self.architecture.embed_dim.into());
        positive(
            "architecture.attention_heads",
            self.architecture.attention_heads.into(),
        );
        positive(
            "architecture.scalar_hidden",
            self.architecture.scalar_hidden.into(),
        );
        if let Some(f) = self.architecture.ffn_dim {
            positive("architecture.ffn_dim", f.into());
        }
        if let Some(m) = self.micro_batch_size {
            positive("micro_batch_size", m.into());
        }
        if let Some(m) = self.max_train_examples {
            positive("max_train_examples", m);
        }
        if let Some(m) = self.max_val_examples {
            positive("max_val_examples", m);
        }
        let mut range = |path: &str, v: f64, ok: bool, expected: &str| {
            if !v.is_finite() || !ok {
                p.push((path.to_string(), format!("expected {expected}, found {v}")));
            }
        };
        range(
            "learning_rate",
            self.learning_rate,
            self.learning_rate > 0.0,
            "a number > 0",
        );
        range(
            "weight_decay",
            self.weight_decay,
            self.weight_decay >= 0.0,
            "a number >= 0",
        );
        range(
            "dropout",
            self.dropout,
            (0.0..1.0).contains(&self.dropout),
            "a number in [0, 1)",
        );
        if let Some(c) = self.grad_clip {
            range(
                "grad_clip",
                c,
                c > 0.0,
                "a number > 0, or null for no clipping",
            );
        }
        match &self.architecture.channels {
            Some(c) if c.is_empty() => p.push((
                "architecture.channels".into(),
                "expected a list of positive integers (one per conv block), found []".into(),
            )),
            Some(c) => {
                for (i, w) in c.iter().enumerate() {
                    if *w == 0 {
                        p.push((
                            format!("architecture.channels[{i}]"),
                            "expected a positive integer, found 0".into(),
                        ));
                    }
                }
            }
            None => {}
        }
        let blocks = self.channels().len() as u32;
        let min_size = 1u64 << blocks.min(30);
        if u64::from(self.image_size) < min_size {
            p.push((
                "image_size".into(),
                format!(
                    "expected at least {min_size} (each of the {blocks} conv blocks halves the frame), found {}",
                    self.image_size
                ),
            ));
        }
        let (d, h) = (
            self.architecture.embed_dim,
            self.architecture.attention_heads,
        );
        if self.architecture.name == ArchName::Transformer && h > 0 && d % h != 0 {
            p.push((
                "architecture.attention_heads".into(),
                format!("expected a divisor of embed_dim ({d}), found {h}"),
            ));
        }
        if self.task == Task::Classification && self.num_labels < 2 {
            p.push((
                "num_labels".into(),
                format!(
                    "expected at least 2 classes for classification, found {}",
                    self.num_labels
                ),
            ));
        }
        match (self.task, self.loss()) {
            (Task::Regression, Loss::CrossEntropy) => p.push((
                "loss".into(),
                "expected mse or huber for task regression, found cross_entropy".into(),
            )),
            (Task::Classification, Loss::Mse | Loss::Huber) => p.push((
                "loss".into(),
                "expected cross_entropy for task classification".into(),
            )),
            _ => {}
        }
        if let Some(m) = self.micro_batch_size {
            if m > self.batch_size {
                p.push((
                    "micro_batch_size".into(),
                    format!(
                        "expected at most batch_size ({}), found {m}",
                        self.batch_size
                    ),
                ));
            }
        }
        if self.data.path.is_some() && self.data.val_path.is_none() {
            p.push((
                "data.val_path".into(),
                "expected a validation file (same layout as data.path)".into(),
            ));
        }
        for (key, n) in [
            (
                "data.synthetic_train_examples",
                self.data.synthetic_train_examples,
            ),
            (
                "data.synthetic_val_examples",
                self.data.synthetic_val_examples,
            ),
        ] {
            if self.data.path.is_none() && n == 0 {
                p.push((key.into(), "expected a positive integer, found 0".into()));
            }
        }
        if self.warmup_epochs > self.epochs && self.epochs > 0 {
            p.push((
                "warmup_epochs".into(),
                format!(
                    "expected at most epochs ({}), found {}",
                    self.epochs, self.warmup_epochs
                ),
            ));
        }
        p
    }

    /// The config as YAML, every key written out (the resolved config).
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("a Config always serialises")
    }
}

/// The known key nearest to a misspelt one (Damerau-Levenshtein, within half
/// the longer name, at least 2 edits), for "did you mean" messages; shared by
/// configs and sweep spaces so that both suggest the same way.
pub fn nearest_key<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(unknown, k), *k))
        .filter(|(d, k)| *d <= (k.len().max(unknown.len()) / 2).max(2))
        .min()
        .map(|(_, k)| k)
}

/// Rewrites serde's unknown-field error (`[path: ]unknown field `x`, expected
/// one of ...`) as the key's full path and line, with the nearest known key.
fn unknown_key(message: &str, index: &YamlIndex) -> Option<String> {
    let (head, rest) = message.split_once("unknown field `")?;
    let (unknown, expected) = rest.split_once('`')?;
    let parent = head.trim_end().trim_end_matches(':');
    let path = if parent.is_empty() {
        unknown.to_string()
    } else {
        format!("{parent}.{unknown}")
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    let nearest = nearest_key(unknown, &known);
    let at = index
        .line_of(&path)
        .map(|l| format!("line {l}: "))
        .unwrap_or_default();
    Some(match nearest {
        Some(k) => format!("{at}unknown key `{path}`; did you mean `{k}`?"),
        None => format!(
            "{at}unknown key `{path}`; known keys here: {}",
            known.join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn load(text: &str) -> anyhow::Result<LoadedConfig> {
        Config::load(&Input {
            name: "cfg.yaml".into(),
            text: text.into(),
        })
    }

    fn err(text: &str) -> String {
        format!("{:#}", load(text).err().expect("should fail"))
    }

    #[test]
    fn seed_keys_parse_as_written() {
        let c = load(
            "memory_optimized: false\ngradient_checkpointing: true\ntorch_compile: true\n\
             torch_compile_mode: \"reduce-overhead\"\nbatch_size: 20\ntemporal_frames: 5\nepochs: 50\n\
             architecture:\n  name: \"transformer\"\n",
        )
        .unwrap()
        .config;
        assert_eq!(c.torch_compile_mode, CompileMode::ReduceOverhead);
        assert!(c.torch_compile_mode.uses_cuda_graphs());
        assert_eq!(c.batch_size, 20);
        assert_eq!(c.channels(), FULL_CHANNELS);
        assert_eq!(
            c.learning_rate,
            Config::default().learning_rate,
            "unset keys take defaults"
        );
    }

    #[test]
    fn memory_optimized_selects_the_small_model() {
        let c = load("memory_optimized: true\n").unwrap().config;
        assert_eq!(c.channels(), SMALL_CHANNELS);
        let c = load("memory_optimized: true\narchitecture: {channels: [8, 16]}\n")
            .unwrap()
            .config;
        assert_eq!(c.channels(), vec![8, 16], "explicit channels win");
    }

    #[test]
    fn unknown_keys_name_the_nearest_known_key() {
        let e = err("batchsize: 4\n");
        assert_eq!(
            e,
            "cfg.yaml: line 1: unknown key `batchsize`; did you mean `batch_size`?"
        );
        let e = err("epochs: 2\narchitecture:\n  chanels: [1, 2]\n");
        assert_eq!(
            e,
            "cfg.yaml: line 3: unknown key `architecture.chanels`; did you mean `channels`?"
        );
        let e = err("zzzzzzzzzzzzzz: 1\n");
        assert!(e.contains("known keys here: memory_optimized, "), "{e}");
    }

    #[test]
    fn wrong_types_and_impossible_values_name_path_and_line() {
        let e = err("epochs: 3\nbatch_size: 0\n");
        assert!(
            e.contains("line 2: `batch_size`: expected a positive integer, found 0"),
            "{e}"
        );
        let e = err("epochs: -1\n");
        assert!(e.contains("epochs") && e.contains("line 1"), "{e}");
        let e = err("architecture:\n  channels: [64, 0, 256]\n");
        assert!(e.contains("line 2: `architecture.channels[1]`"), "{e}");
        let e = err("architecture:\n  channels: [64, -3]\n");
        assert!(
            e.contains("architecture.channels[1]") && e.contains("line 2"),
            "{e}"
        );
        let e = err("architecture:\n  channels: 64\n");
        assert!(e.contains("architecture.channels: invalid type"), "{e}");
        let e = err("batch_size: twenty\n");
        assert!(
            e.contains("batch_size: invalid type: string \"twenty\""),
            "{e}"
        );
        let e = err("torch_compile_mode: fast\n");
        assert!(
            e.contains("unknown variant `fast`") && e.contains("reduce-overhead"),
            "{e}"
        );
        let e = err("dropout: 1.5\nlearning_rate: .nan\n");
        assert!(
            e.contains("line 1: `dropout`") && e.contains("line 2: `learning_rate`"),
            "{e}"
        );
        let e = err("task: classification\nnum_labels: 1\n");
        assert!(e.contains("line 2: `num_labels`"), "{e}");
        let e = err("architecture: {embed_dim: 100, attention_heads: 3}\n");
        assert!(
            e.contains("attention_heads") && e.contains("divisor"),
            "{e}"
        );
    }

    #[test]
    fn malformed_files_are_refused_with_a_reason() {
        assert!(err("").contains("empty"));
        assert!(err("- 1\n- 2\n").contains("mapping"));
        assert!(err("a: [1, 2\n").contains("not YAML"));
        // An alias bomb: serde_yaml refuses to expand it.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for i in 0..9 {
            let prev = if i == 0 {
                "a".to_string()
            } else {
                format!("b{}", i - 1)
            };
            bomb += &format!("b{i}: &b{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n");
        }
        let e = err(&bomb);
        assert!(
            e.starts_with("cfg.yaml: not YAML: repetition limit exceeded"),
            "{e}"
        );
    }

    fn arb_config() -> impl Strategy<Value = Config> {
        (
            (
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
                0..4usize,
                0..3usize,
            ),
            (1..512u32, 1..16u32, 0..500u32, 1e-7..1.0f64, 0.0..1.0f64),
            (
                proptest::option::of(0.01..10.0f64),
                0.0..0.99f64,
                any::<u64>(),
                1..8u32,
            ),
            (
                proptest::option::of(proptest::collection::vec(1..512u32, 1..5)),
                1..64u32,
                any::<bool>(),
            ),
            (
                proptest::option::of(1..100_000u64),
                proptest::collection::btree_map("[A-Z_]{1,12}", "[ -~]{0,20}", 0..3),
            ),
        )
            .prop_map(|(a, b, c, d, e)| {
                let mut cfg = Config {
                    memory_optimized: a.0,
                    gradient_checkpointing: a.1,
                    torch_compile: a.2,
                    torch_compile_mode: [
                        CompileMode::Default,
                        CompileMode::ReduceOverhead,
                        CompileMode::MaxAutotune,
                        CompileMode::MaxAutotuneNoCudagraphs,
                    ][a.3],
                    mixed_precision: [Precision::Off, Precision::Bf16, Precision::Fp16][a.4],
                    batch_size: b.0,
                    temporal_frames: b.1,
                    epochs: b.2,
                    learning_rate: b.3,
                    weight_decay: b.4,
                    grad_clip: c.0,
                    dropout: c.1,
                    seed: c.2,
                    parallel_trials: c.3,
                    max_train_examples: e.0,
                    environment: e.1,
                    ..Config::default()
                };
                cfg.architecture.channels = d.0;
                cfg.architecture.embed_dim = d.1 * 4;
                cfg.pin_memory = d.2;
                cfg
            })
    }

    proptest! {
        #[test]
        fn parse_write_parse_is_identity(cfg in arb_config()) {
            let text = cfg.to_yaml();
            let back = serde_yaml::from_str::<Config>(&text).unwrap();
            prop_assert_eq!(&back, &cfg);
            let again = serde_yaml::from_str::<Config>(&back.to_yaml()).unwrap();
            prop_assert_eq!(again, cfg);
        }
    }
}
