//! The keys of a config cfgcheck did not define (Hugging Face
//! `TrainingArguments`, Axolotl, any project's own nesting), as the hazards
//! read them: each key that means one of trainguard's settings (a
//! [`Concept`]), found at any depth, with its path, line and value, and what
//! each format makes of it (Hugging Face turns compile on when a mode is set;
//! Axolotl honours the mode only with `torch_compile`). `any_config` finds
//! the keys; each hazard's `check_keys` and `fix_keys` read them here.

use common::wire::cfgcheck::{ConfigFormat, KeyAt};
use common::wire::config::CompileMode;

/// A trainguard setting that a foreign key stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Concept {
    /// `torch_compile`.
    CompileOn,
    /// `torch_compile_mode`.
    CompileMode,
    /// Inductor's `triton.cudagraphs` option (Axolotl's
    /// `torch_compile_options`): CUDA graphs whatever the mode.
    CudaGraphsOption,
    /// `gradient_checkpointing`.
    Checkpointing,
    /// DataLoader workers.
    Workers,
    /// DataLoader `pin_memory`.
    PinMemory,
    /// fp16 mixed precision.
    Fp16,
    /// Examples per step on each device (`micro_batch_size`): the fix
    /// ladder's batch (`crate::knobs`); no rule reads it.
    Batch,
    /// Gradient accumulation steps (trainguard's is implied: `batch_size` /
    /// `micro_batch_size`); the fix ladder's.
    Accumulation,
    /// bf16 mixed precision; the fix ladder's (trainguard's and Accelerate's
    /// `mixed_precision` is `Fp16`'s key, which says bf16 as well).
    Bf16,
}

impl Concept {
    /// The concepts cfgcheck's rules read: the keys `check` finds and lists
    /// (`read_keys`), and those whose absence makes a file "not a config".
    pub const RULES: [Concept; 7] = [
        Concept::CompileOn,
        Concept::CompileMode,
        Concept::CudaGraphsOption,
        Concept::Checkpointing,
        Concept::Workers,
        Concept::PinMemory,
        Concept::Fp16,
    ];

    /// The concepts the fix ladder's knobs are found by
    /// (`any_config::knobs`); `Fp16` before `Bf16`, so that
    /// `mixed_precision` is found once.
    pub const KNOBS: [Concept; 7] = [
        Concept::Batch,
        Concept::Accumulation,
        Concept::Checkpointing,
        Concept::CompileOn,
        Concept::CompileMode,
        Concept::Fp16,
        Concept::Bf16,
    ];

    /// The key names that mean it in `format`, at any depth. Hugging Face:
    /// transformers' `TrainingArguments`; Axolotl: its config schema
    /// (`src/axolotl/utils/schemas/config.py`); generic: all of these and
    /// trainguard's own names, and common projects' (Lightning's
    /// `accumulate_grad_batches` and `precision`). A knob's names come in
    /// the order they are preferred when a file has several.
    pub fn names(self, format: ConfigFormat) -> &'static [&'static str] {
        use ConfigFormat::*;
        match (self, format) {
            (Concept::CompileOn, _) => &["torch_compile"],
            (Concept::CompileMode, _) => &["torch_compile_mode"],
            (Concept::CudaGraphsOption, Hf | Trainguard) => &[],
            (Concept::CudaGraphsOption, Axolotl | Generic) => &["triton.cudagraphs"],
            (Concept::Checkpointing, _) => &["gradient_checkpointing"],
            (Concept::Workers, Hf | Axolotl) => &["dataloader_num_workers"],
            (Concept::Workers, Trainguard) => &["num_workers"],
            (Concept::Workers, Generic) => &["dataloader_num_workers", "num_workers"],
            (Concept::PinMemory, Hf | Axolotl) => &["dataloader_pin_memory"],
            (Concept::PinMemory, Trainguard) => &["pin_memory"],
            (Concept::PinMemory, Generic) => &["dataloader_pin_memory", "pin_memory"],
            (Concept::Fp16, Hf | Axolotl) => &["fp16"],
            (Concept::Fp16, Trainguard) => &["mixed_precision"],
            // Accelerate's and Lightning-style configs say `mixed_precision: fp16`.
            (Concept::Fp16, Generic) => &["fp16", "mixed_precision"],
            (Concept::Batch, Hf) => &["per_device_train_batch_size"],
            (Concept::Batch, Axolotl | Trainguard) => &["micro_batch_size"],
            (Concept::Batch, Generic) => &[
                "per_device_train_batch_size",
                "micro_batch_size",
                "train_batch_size",
                "batch_size",
            ],
            (Concept::Accumulation, Hf | Axolotl) => &["gradient_accumulation_steps"],
            (Concept::Accumulation, Trainguard) => &[],
            (Concept::Accumulation, Generic) => {
                &["gradient_accumulation_steps", "accumulate_grad_batches"]
            }
            (Concept::Bf16, Hf | Axolotl) => &["bf16"],
            (Concept::Bf16, Trainguard) => &[],
            (Concept::Bf16, Generic) => &["bf16", "precision"],
        }
    }

    /// The trainguard key it is read as (cfgcheck's `read_keys`).
    pub fn reads_as(self) -> &'static str {
        match self {
            Concept::CompileOn => "torch_compile",
            Concept::CompileMode | Concept::CudaGraphsOption => "torch_compile_mode",
            Concept::Checkpointing => "gradient_checkpointing",
            Concept::Workers => "num_workers",
            Concept::PinMemory => "pin_memory",
            Concept::Fp16 | Concept::Bf16 => "mixed_precision",
            Concept::Batch => "micro_batch_size",
            // The effective batch: micro_batch_size × accumulation.
            Concept::Accumulation => "batch_size",
        }
    }
}

/// A value as the tools that read these files type it: Python's YAML loader
/// (YAML 1.1: `yes`, `on` are true) or JSON.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Str(String),
    Null,
    /// A float, a collection or an alias: never what these rules read.
    Other,
}

impl Scalar {
    /// A plain (unquoted) YAML scalar, resolved as PyYAML's safe loader does
    /// for the types these rules read.
    pub fn from_plain_yaml(text: &str) -> Scalar {
        match text {
            "" | "~" | "null" | "Null" | "NULL" => Scalar::Null,
            "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
                Scalar::Bool(true)
            }
            "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
                Scalar::Bool(false)
            }
            t => match t.strip_prefix('+').unwrap_or(t).replace('_', "").parse() {
                Ok(n) => Scalar::Int(n),
                Err(_) if t.parse::<f64>().is_ok() => Scalar::Other,
                Err(_) => Scalar::Str(t.to_string()),
            },
        }
    }

    /// On, for a switch: true, a non-zero number, or Axolotl's `auto`
    /// (compile on where torch has it: every torch 2.x).
    fn on(&self) -> bool {
        match self {
            Scalar::Bool(b) => *b,
            Scalar::Int(n) => *n != 0,
            Scalar::Str(s) => s == "auto",
            _ => false,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A key found in the file that means `concept`.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub concept: Concept,
    /// Its dotted path in the file.
    pub path: String,
    pub line: usize,
    /// 1-based, in characters.
    pub col: usize,
    pub value: Scalar,
    /// The value as written.
    pub shown: String,
    /// Its place in the file's list of keys (`any_config::Tree`), which
    /// tells two keys of one path apart (`{"a.b": 1, "a": {"b": 2}}`).
    pub entry: usize,
}

impl Hit {
    pub fn at(&self) -> KeyAt {
        KeyAt {
            key: self.path.clone(),
            line: self.line,
        }
    }
    /// `training.torch_compile_mode (line 12)`.
    pub fn named(&self) -> String {
        format!("{} (line {})", self.path, self.line)
    }
    /// `(training.torch_compile_mode, line 12)`, inside a sentence.
    pub fn aside(&self) -> String {
        format!("({}, line {})", self.path, self.line)
    }
}

/// The keys found in one file, read as `format`.
pub struct Found {
    pub format: ConfigFormat,
    pub hits: Vec<Hit>,
}

impl Found {
    pub fn of(&self, concept: Concept) -> impl Iterator<Item = &Hit> {
        self.hits.iter().filter(move |h| h.concept == concept)
    }

    /// Whether torch.compile is on, and the key that turns it on (None when
    /// only a mode implies it). Hugging Face turns compile on when a mode is
    /// set (`TrainingArguments.__post_init__`); Axolotl passes the mode on
    /// only with `torch_compile` true or `auto`; a config of no known schema
    /// is read as compiling when it names a mode, unless `torch_compile`
    /// says false.
    pub fn compile_on(&self) -> Option<Option<&Hit>> {
        let switch = self.of(Concept::CompileOn).next();
        let mode_set = self
            .of(Concept::CompileMode)
            .any(|h| matches!(h.value, Scalar::Str(_)));
        let on = match (self.format, switch) {
            (ConfigFormat::Hf, s) => mode_set || s.is_some_and(|h| h.value.on()),
            (ConfigFormat::Axolotl, s) => s.is_some_and(|h| h.value.on()),
            (_, Some(s)) => s.value.on(),
            (_, None) => mode_set,
        };
        on.then(|| switch.filter(|h| h.value.on()))
    }

    /// The keys that make torch.compile record CUDA graphs: a mode that does
    /// (`reduce-overhead`, `max-autotune`; not `max-autotune-no-cudagraphs`)
    /// or `triton.cudagraphs: true`.
    pub fn cuda_graphs(&self) -> Vec<&Hit> {
        self.hits
            .iter()
            .filter(|h| match h.concept {
                Concept::CompileMode => h
                    .value
                    .as_str()
                    .and_then(|s| serde_yaml::from_str::<CompileMode>(s).ok())
                    .is_some_and(CompileMode::uses_cuda_graphs),
                Concept::CudaGraphsOption => h.value.on(),
                _ => false,
            })
            .collect()
    }

    /// The first key that turns gradient checkpointing on: true, or Axolotl's
    /// `offload` / `offload_disk` (still recomputation) and Unsloth's
    /// `unsloth`.
    pub fn checkpointing(&self) -> Option<&Hit> {
        self.of(Concept::Checkpointing).find(|h| match &h.value {
            Scalar::Str(s) => matches!(s.as_str(), "offload" | "offload_disk" | "unsloth"),
            v => v.on(),
        })
    }

    /// The keys setting DataLoader workers above 0, with the count.
    pub fn workers(&self) -> Vec<(&Hit, i64)> {
        self.of(Concept::Workers)
            .filter_map(|h| match h.value {
                Scalar::Int(n) if n > 0 => Some((h, n)),
                _ => None,
            })
            .collect()
    }

    /// Whether any key sets DataLoader workers (to any count).
    pub fn workers_named(&self) -> bool {
        self.of(Concept::Workers).next().is_some()
    }

    pub fn pin_memory(&self) -> Option<&Hit> {
        self.of(Concept::PinMemory)
            .find(|h| matches!(h.value, Scalar::Bool(true)))
    }

    /// The first key asking for fp16 (`fp16: true`, `mixed_precision: fp16`).
    pub fn fp16(&self) -> Option<&Hit> {
        self.of(Concept::Fp16).find(|h| match &h.value {
            Scalar::Str(s) => s == "fp16",
            v => v.on(),
        })
    }
}

/// A change of one key's value, as `cfgcheck --fix` makes it in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyChange {
    pub path: String,
    pub line: usize,
    /// The key's place in the file's list of keys (`Hit::entry`).
    pub entry: usize,
    pub value: Scalar,
    pub why: String,
}

/// The changes `--fix` makes to a config it did not define, and what no
/// change of a key can fix.
#[derive(Debug, Default)]
pub struct KeyPlan {
    pub changes: Vec<KeyChange>,
    pub unfixable: Vec<String>,
}

impl KeyPlan {
    /// Sets `hit` to `value` (once: a key already changed keeps its change).
    pub fn set(&mut self, hit: &Hit, value: Scalar, why: String) {
        if self.changes.iter().all(|c| c.entry != hit.entry) {
            self.changes.push(KeyChange {
                path: hit.path.clone(),
                line: hit.line,
                entry: hit.entry,
                value,
                why,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(format: ConfigFormat, hits: &[(Concept, Scalar)]) -> Found {
        Found {
            format,
            hits: hits
                .iter()
                .enumerate()
                .map(|(i, (c, v))| Hit {
                    concept: *c,
                    path: format!("k{i}"),
                    line: i + 1,
                    col: 1,
                    value: v.clone(),
                    shown: String::new(),
                    entry: i,
                })
                .collect(),
        }
    }

    #[test]
    fn yaml_plain_scalars_resolve_as_pyyaml_does() {
        assert_eq!(Scalar::from_plain_yaml("yes"), Scalar::Bool(true));
        assert_eq!(Scalar::from_plain_yaml("Off"), Scalar::Bool(false));
        assert_eq!(Scalar::from_plain_yaml("2"), Scalar::Int(2));
        assert_eq!(Scalar::from_plain_yaml("~"), Scalar::Null);
        assert_eq!(Scalar::from_plain_yaml("2e-5"), Scalar::Other);
        assert_eq!(
            Scalar::from_plain_yaml("max-autotune"),
            Scalar::Str("max-autotune".into())
        );
    }

    #[test]
    fn each_format_says_when_compile_is_on() {
        let mode = (Concept::CompileMode, Scalar::Str("reduce-overhead".into()));
        let off = (Concept::CompileOn, Scalar::Bool(false));
        let auto = (Concept::CompileOn, Scalar::Str("auto".into()));
        // Hugging Face: a mode turns compile on, even against torch_compile: false.
        assert!(found(ConfigFormat::Hf, std::slice::from_ref(&mode))
            .compile_on()
            .is_some());
        assert!(found(ConfigFormat::Hf, &[mode.clone(), off.clone()])
            .compile_on()
            .is_some());
        // Axolotl: only with torch_compile true or auto.
        assert!(found(ConfigFormat::Axolotl, std::slice::from_ref(&mode))
            .compile_on()
            .is_none());
        assert!(found(ConfigFormat::Axolotl, &[mode.clone(), auto])
            .compile_on()
            .is_some());
        // No known schema: the mode, unless torch_compile says false.
        assert!(found(ConfigFormat::Generic, std::slice::from_ref(&mode))
            .compile_on()
            .is_some());
        assert!(found(ConfigFormat::Generic, &[mode, off])
            .compile_on()
            .is_none());
    }

    #[test]
    fn graph_modes_and_checkpointing_values() {
        let f = found(
            ConfigFormat::Axolotl,
            &[
                (Concept::CompileMode, Scalar::Str("max-autotune".into())),
                (
                    Concept::CompileMode,
                    Scalar::Str("max-autotune-no-cudagraphs".into()),
                ),
                (Concept::CudaGraphsOption, Scalar::Bool(true)),
                (Concept::Checkpointing, Scalar::Bool(false)),
                (Concept::Checkpointing, Scalar::Str("offload".into())),
            ],
        );
        let graphs: Vec<&str> = f.cuda_graphs().iter().map(|h| h.path.as_str()).collect();
        assert_eq!(graphs, ["k0", "k2"]);
        assert_eq!(f.checkpointing().map(|h| h.path.as_str()), Some("k4"));
    }
}
