//! The training config as a file: loading it (`Config::load`) and judging its
//! values (`Config::validate`); one schema for cfgcheck, train and
//! verify-fixes, whose types live in `wire::config` and are re-exported here
//! so that a caller needs one import. Every key has a default
//! (docs/guide/config.md, "Config").
//!
//! Reading never panics: serde reports type errors with their key path and
//! line, `validate` the impossible values, and an unknown key names the
//! nearest known one.

use crate::bad_input;
use crate::input::Input;
use crate::yaml_index::YamlIndex;

pub use crate::wire::config::*;

/// A config and where it came from, with its position index for messages
/// and edits.
pub struct LoadedConfig {
    pub name: String,
    pub text: String,
    pub config: Config,
    pub index: YamlIndex,
}

impl Config {
    /// Parses and checks a config. Errors name the file, the key path and
    /// the line.
    pub fn load(input: &Input) -> anyhow::Result<LoadedConfig> {
        let name = &input.name;
        if input.text.trim().is_empty() {
            return Err(bad_input!(
                "{name}: empty; expected a YAML training config (see docs/guide/config.md, \"Config\")"
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

    /// Values serde accepts but a run cannot: (key path, what was expected),
    /// in the order of the checks below.
    pub fn validate(&self) -> Vec<(String, String)> {
        let mut p = Vec::new();
        positive_counts(self, &mut p);
        finite_ranges(self, &mut p);
        architecture(self, &mut p);
        task_and_loss(self, &mut p);
        batches_and_data(self, &mut p);
        p
    }
}

/// What `Config::validate` found: (key path, what was expected).
type Problems = Vec<(String, String)>;

const POSITIVE: &str = "expected a positive integer, found 0";

/// Counts and sizes that must not be 0.
fn positive_counts(c: &Config, p: &mut Problems) {
    let mut positive = |path: &str, v: u64| {
        if v == 0 {
            p.push((path.to_string(), POSITIVE.to_string()));
        }
    };
    positive("batch_size", c.batch_size.into());
    positive("temporal_frames", c.temporal_frames.into());
    positive("parallel_trials", c.parallel_trials.into());
    positive("trials", c.trials.into());
    positive("image_channels", c.image_channels.into());
    positive("architecture.embed_dim", c.architecture.embed_dim.into());
    positive(
        "architecture.attention_heads",
        c.architecture.attention_heads.into(),
    );
    positive(
        "architecture.scalar_hidden",
        c.architecture.scalar_hidden.into(),
    );
    if let Some(f) = c.architecture.ffn_dim {
        positive("architecture.ffn_dim", f.into());
    }
    if let Some(m) = c.micro_batch_size {
        positive("micro_batch_size", m.into());
    }
    if let Some(m) = c.max_train_examples {
        positive("max_train_examples", m);
    }
    if let Some(m) = c.max_val_examples {
        positive("max_val_examples", m);
    }
}

/// Rates that must be finite and in their range.
fn finite_ranges(c: &Config, p: &mut Problems) {
    let mut range = |path: &str, v: f64, ok: bool, expected: &str| {
        if !v.is_finite() || !ok {
            p.push((path.to_string(), format!("expected {expected}, found {v}")));
        }
    };
    range(
        "learning_rate",
        c.learning_rate,
        c.learning_rate > 0.0,
        "a number > 0",
    );
    range(
        "weight_decay",
        c.weight_decay,
        c.weight_decay >= 0.0,
        "a number >= 0",
    );
    range(
        "dropout",
        c.dropout,
        (0.0..1.0).contains(&c.dropout),
        "a number in [0, 1)",
    );
    if let Some(clip) = c.grad_clip {
        range(
            "grad_clip",
            clip,
            clip > 0.0,
            "a number > 0, or null for no clipping",
        );
    }
}

/// A model that can be built: conv widths, a frame each block can halve,
/// heads that divide the embedding.
fn architecture(c: &Config, p: &mut Problems) {
    match &c.architecture.channels {
        Some(widths) if widths.is_empty() => p.push((
            "architecture.channels".into(),
            "expected a list of positive integers (one per conv block), found []".into(),
        )),
        Some(widths) => {
            for (i, w) in widths.iter().enumerate() {
                if *w == 0 {
                    p.push((format!("architecture.channels[{i}]"), POSITIVE.into()));
                }
            }
        }
        None => {}
    }
    let blocks = c.channels().len() as u32;
    let min_size = 1u64 << blocks.min(30);
    if u64::from(c.image_size) < min_size {
        p.push((
            "image_size".into(),
            format!(
                "expected at least {min_size} (each of the {blocks} conv blocks halves the frame), found {}",
                c.image_size
            ),
        ));
    }
    let (d, h) = (c.architecture.embed_dim, c.architecture.attention_heads);
    if c.architecture.name == ArchName::Transformer && h > 0 && d % h != 0 {
        p.push((
            "architecture.attention_heads".into(),
            format!("expected a divisor of embed_dim ({d}), found {h}"),
        ));
    }
}

/// Labels and a loss that fit the task.
fn task_and_loss(c: &Config, p: &mut Problems) {
    if c.task == Task::Classification && c.num_labels < 2 {
        p.push((
            "num_labels".into(),
            format!(
                "expected at least 2 classes for classification, found {}",
                c.num_labels
            ),
        ));
    }
    match (c.task, c.loss()) {
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
}

/// Micro-batches within the batch, data files that come in pairs, a
/// synthetic set that is not empty, warm-up within the epochs.
fn batches_and_data(c: &Config, p: &mut Problems) {
    if let Some(m) = c.micro_batch_size {
        if m > c.batch_size {
            p.push((
                "micro_batch_size".into(),
                format!("expected at most batch_size ({}), found {m}", c.batch_size),
            ));
        }
    }
    if c.data.path.is_some() && c.data.val_path.is_none() {
        p.push((
            "data.val_path".into(),
            "expected a validation file (same layout as data.path)".into(),
        ));
    }
    for (key, n) in [
        (
            "data.synthetic_train_examples",
            c.data.synthetic_train_examples,
        ),
        ("data.synthetic_val_examples", c.data.synthetic_val_examples),
    ] {
        if c.data.path.is_none() && n == 0 {
            p.push((key.into(), POSITIVE.into()));
        }
    }
    if c.warmup_epochs > c.epochs && c.epochs > 0 {
        p.push((
            "warmup_epochs".into(),
            format!(
                "expected at most epochs ({}), found {}",
                c.epochs, c.warmup_epochs
            ),
        ));
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
        let e = err("epochs: 2\nchannels_last: yes\n");
        assert!(
            e.contains("channels_last: unknown variant `yes`")
                && e.contains("`auto`, `on`, `off`")
                && e.contains("line 2"),
            "{e}"
        );
        let e = err("channels_last: true\n");
        assert!(e.contains("channels_last") && e.contains("line 1"), "{e}");
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
                    channels_last: [ChannelsLast::Auto, ChannelsLast::On, ChannelsLast::Off]
                        [(b.0 % 3) as usize],
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
