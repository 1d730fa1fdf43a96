//! The fix ladder's knobs (`crate::knobs`) as a config file holds them:
//! for each, the keys it is in (their dotted path and line) and its value,
//! read the way the file's format reads it. A knob of a known format (Hugging
//! Face, Axolotl, trainguard) that the file leaves out is there at the
//! format's default, and `turn` adds it as a top-level key; a file of no
//! known schema has only the knobs it names (never guessed) or the user
//! names (`--knob batch=bsz`). trainguard's accumulation is implied
//! (`batch_size` stays the effective batch, split in `micro_batch_size`
//! micro-batches), as is Axolotl's when it gives `batch_size` instead.

use super::recognise::recognise;
use super::{find, strict_note, Format, Tree};
use crate::keys::{Concept, Scalar};
use crate::knobs::{Found, Knob};
use common::config::Config;
use common::input::Input;
use common::wire::config::Precision;

/// A key of the file that holds a knob.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyAt {
    /// Dotted path (`training.batch_size`).
    pub path: String,
    /// The key as written (its last part).
    pub name: String,
    pub line: usize,
    /// Its place in the file's list of keys (`Tree::entries`).
    pub entry: usize,
    pub value: Scalar,
    /// The value as written.
    pub shown: String,
}

/// Where a knob is.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    /// In these keys (Precision's bf16 and fp16, or the same switch in two
    /// sections: each is turned).
    Keys(Vec<KeyAt>),
    /// Not in the file: the format's default, which `turn` adds as `key` at
    /// the top level.
    Default { key: &'static str },
    /// Implied by other keys (`batch_size / micro_batch_size`): turned with
    /// the batch, which must agree.
    Implied { by: &'static str },
}

/// One knob of the config: where it is and what it holds now.
#[derive(Clone, Debug, PartialEq)]
pub struct KnobAt {
    pub knob: Knob,
    pub place: Place,
    /// Batch and Accumulation: an Int; Checkpointing: a Bool (true for
    /// Axolotl's `offload` too); CompileMode: the mode, Null when none is
    /// set and nothing compiles; Precision: `no`, `fp16`, `bf16`, Axolotl's
    /// `auto`, or the value as written when it is none of those.
    pub value: Scalar,
}

impl KnobAt {
    /// Where, in words: `training.batch_size (line 4)`,
    /// `gradient_accumulation_steps (not set: the default)`.
    pub fn place(&self) -> String {
        match &self.place {
            Place::Keys(keys) => keys
                .iter()
                .map(|k| format!("{} (line {})", k.path, k.line))
                .collect::<Vec<_>>()
                .join(", "),
            Place::Default { key } => format!("{key} (not set: the default)"),
            Place::Implied { by } => format!("{by} (implied)"),
        }
    }

    pub fn found(&self) -> Found {
        Found {
            knob: self.knob,
            place: self.place(),
            value: (self.value != Scalar::Other).then(|| self.value.clone()),
        }
    }
}

/// A config's knobs, and what was not found where the user named it (or
/// could not be told apart), in words.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigKnobs {
    pub format: Format,
    /// In `Knob::ALL`'s order; a knob not found is not here.
    pub knobs: Vec<KnobAt>,
    pub notes: Vec<String>,
}

impl ConfigKnobs {
    pub fn get(&self, knob: Knob) -> Option<&KnobAt> {
        self.knobs.iter().find(|k| k.knob == knob)
    }

    /// The knobs as the ladder reads them (`ladder::next`).
    pub fn found(&self) -> Vec<Found> {
        self.knobs.iter().map(KnobAt::found).collect()
    }
}

/// The knobs of the config `input` (`named`: `--as`, None to recognise the
/// format from its keys; `user`: `--knob KNOB=NAME`, a key's name at any
/// depth or its dotted path, in place of the format's key). Bad input (not
/// YAML or JSON, trainguard's schema refused) is an error naming the file.
pub fn knobs(
    input: &Input,
    named: Option<Format>,
    user: &[(Knob, String)],
) -> anyhow::Result<ConfigKnobs> {
    let (format, tree, config) = if named == Some(Format::Trainguard) {
        let loaded = Config::load(input)?;
        (Format::Trainguard, Tree::read(input)?, Some(loaded.config))
    } else {
        let tree = Tree::read(input)?;
        let (format, tally) = match named {
            Some(f) => (f, None),
            None => {
                let (f, tally) = recognise(tree.top().map(|e| e.name.as_str()));
                (f, Some(tally))
            }
        };
        let config = match (format, tally) {
            (Format::Trainguard, Some(t)) => {
                Some(Config::load(input).map_err(|e| strict_note(e, &t))?.config)
            }
            _ => None,
        };
        (format, tree, config)
    };
    let mut found = find(&tree, format, &Concept::KNOBS);
    // A known schema's keys are its top-level ones.
    if format != Format::Generic {
        found.hits.retain(|h| tree.entries[h.entry].depth == 0);
    }
    let mut notes = Vec::new();
    let mut out = Vec::new();
    for knob in Knob::ALL {
        let at = match user.iter().find(|(k, _)| *k == knob) {
            Some((_, name)) => user_named(&tree, knob, name, &mut notes),
            None => match &config {
                Some(c) => Some(trainguard(&tree, c, knob)),
                None => by_format(&tree, &found, knob, &out, &mut notes),
            },
        };
        out.extend(at);
    }
    Ok(ConfigKnobs {
        format,
        knobs: out,
        notes,
    })
}

fn key_at(tree: &Tree, entry: usize) -> KeyAt {
    let e = &tree.entries[entry];
    KeyAt {
        path: e.path.clone(),
        name: e.name.clone(),
        line: e.line,
        entry,
        value: e.value.clone(),
        shown: e.shown.clone(),
    }
}

/// Whether an entry holds a section or a list (DeepSpeed's `fp16:
/// {enabled: true}`): never a knob's key, whose value is replaced whole.
fn collection(tree: &Tree, entry: usize) -> bool {
    let e = &tree.entries[entry];
    e.value == Scalar::Other && matches!(e.shown.as_str(), "{...}" | "[...]" | "*alias")
}

/// The top-level key `name`, or its default.
fn top_or(tree: &Tree, name: &'static str) -> Place {
    match tree
        .entries
        .iter()
        .position(|e| e.depth == 0 && e.name == name)
    {
        Some(entry) => Place::Keys(vec![key_at(tree, entry)]),
        None => Place::Default { key: name },
    }
}

/// trainguard's schema, its values as loaded (defaults filled in).
fn trainguard(tree: &Tree, c: &Config, knob: Knob) -> KnobAt {
    let micro = c.forward_batch();
    let (place, value) = match knob {
        Knob::Batch => (top_or(tree, "micro_batch_size"), Scalar::Int(micro.into())),
        Knob::Accumulation => (
            Place::Implied {
                by: "batch_size / micro_batch_size",
            },
            Scalar::Int(c.batch_size.div_ceil(micro.max(1)).into()),
        ),
        Knob::Checkpointing => (
            top_or(tree, "gradient_checkpointing"),
            Scalar::Bool(c.gradient_checkpointing),
        ),
        Knob::CompileMode => (
            top_or(tree, "torch_compile_mode"),
            Scalar::Str(c.torch_compile_mode.as_str().into()),
        ),
        Knob::Precision => (
            top_or(tree, "mixed_precision"),
            Scalar::Str(
                match c.mixed_precision {
                    Precision::Off => "no",
                    Precision::Bf16 => "bf16",
                    Precision::Fp16 => "fp16",
                }
                .into(),
            ),
        ),
    };
    KnobAt { knob, place, value }
}

/// The one key the user named: a key's name at any depth, or a dotted path.
fn user_named(tree: &Tree, knob: Knob, name: &str, notes: &mut Vec<String>) -> Option<KnobAt> {
    let at: Vec<usize> = (0..tree.entries.len())
        .filter(|&i| tree.entries[i].name == name || tree.entries[i].path == name)
        .filter(|&i| !collection(tree, i))
        .collect();
    match at[..] {
        [entry] => {
            let key = key_at(tree, entry);
            let value = match knob {
                Knob::Precision => precision(std::slice::from_ref(&key), false),
                Knob::Checkpointing => Scalar::Bool(checkpointing_on(&key.value)),
                _ => key.value.clone(),
            };
            Some(KnobAt {
                knob,
                place: Place::Keys(vec![key]),
                value,
            })
        }
        [] => {
            notes.push(format!(
                "--knob {}={name}: the config has no key `{name}` holding a value",
                knob.as_str()
            ));
            None
        }
        _ => {
            notes.push(format!(
                "--knob {}={name}: several keys are `{name}` ({}); name one by its dotted path",
                knob.as_str(),
                paths(tree, &at)
            ));
            None
        }
    }
}

fn paths(tree: &Tree, entries: &[usize]) -> String {
    entries
        .iter()
        .map(|&i| format!("{}, line {}", tree.entries[i].path, tree.entries[i].line))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Hugging Face's `TrainingArguments` defaults, and Axolotl's schema's.
fn default_value(format: Format, knob: Knob) -> Scalar {
    match (format, knob) {
        (Format::Hf, Knob::Batch) => Scalar::Int(8),
        (Format::Axolotl, Knob::Batch) => Scalar::Int(1),
        (_, Knob::Accumulation) => Scalar::Int(1),
        (_, Knob::Checkpointing) => Scalar::Bool(false),
        // Axolotl's `bf16: auto`: bf16 where the GPU has it.
        (Format::Axolotl, Knob::Precision) => Scalar::Str("auto".into()),
        (_, Knob::Precision) => Scalar::Str("no".into()),
        (_, Knob::Batch | Knob::CompileMode) => Scalar::Null,
    }
}

/// A knob of Hugging Face, Axolotl or a project's own config, by the
/// format's names (`Concept::names`; `found`: the keys of them).
/// `before`: the knobs found so far.
fn by_format(
    tree: &Tree,
    found: &crate::keys::Found,
    knob: Knob,
    before: &[KnobAt],
    notes: &mut Vec<String>,
) -> Option<KnobAt> {
    let format = found.format;
    let of = |c: Concept| {
        found
            .of(c)
            .filter(|h| !collection(tree, h.entry))
            .map(|h| key_at(tree, h.entry))
            .collect::<Vec<_>>()
    };
    let at = match knob {
        Knob::Batch | Knob::Accumulation => {
            let concept = concept_of(knob);
            one_key(tree, knob, concept.names(format), of(concept), notes)?
        }
        Knob::Checkpointing | Knob::CompileMode => of(concept_of(knob)),
        Knob::Precision => {
            let mut at = of(Concept::Fp16);
            at.extend(of(Concept::Bf16));
            at.sort_by_key(|k| k.entry);
            at
        }
    };
    if at.is_empty() {
        return absent(tree, format, knob, found, before);
    }
    let value = match knob {
        Knob::Checkpointing => Scalar::Bool(at.iter().any(|k| checkpointing_on(&k.value))),
        Knob::CompileMode => compile_mode(&at[0].value, found),
        Knob::Precision => precision(&at, format == Format::Axolotl),
        _ => at[0].value.clone(),
    };
    Some(KnobAt {
        knob,
        place: Place::Keys(at),
        value,
    })
}

/// The concept whose names are a knob's keys (Precision: the key added
/// where none is there; fp16's keys are read too).
fn concept_of(knob: Knob) -> Concept {
    match knob {
        Knob::Batch => Concept::Batch,
        Knob::Accumulation => Concept::Accumulation,
        Knob::Checkpointing => Concept::Checkpointing,
        Knob::CompileMode => Concept::CompileMode,
        Knob::Precision => Concept::Bf16,
    }
}

/// The key of the most preferred of `names` among `hits`, in a vector of
/// one (none when there is none); None, said in `notes`, when two keys of
/// that name cannot be told apart.
fn one_key(
    tree: &Tree,
    knob: Knob,
    names: &[&str],
    hits: Vec<KeyAt>,
    notes: &mut Vec<String>,
) -> Option<Vec<KeyAt>> {
    let Some(name) = names.iter().find(|n| hits.iter().any(|k| k.name == **n)) else {
        return Some(vec![]);
    };
    let at: Vec<KeyAt> = hits.into_iter().filter(|k| k.name == *name).collect();
    if at.len() > 1 {
        let entries: Vec<usize> = at.iter().map(|k| k.entry).collect();
        notes.push(format!(
            "{}: several keys could be it ({}); name one with --knob {}=PATH",
            knob.as_str(),
            paths(tree, &entries),
            knob.as_str()
        ));
        return None;
    }
    Some(at)
}

/// A knob the file leaves out: a known format's default (Axolotl's
/// accumulation implied by its `batch_size`); none in a file of no known
/// schema.
fn absent(
    tree: &Tree,
    format: Format,
    knob: Knob,
    found: &crate::keys::Found,
    before: &[KnobAt],
) -> Option<KnobAt> {
    if format == Format::Generic {
        return None;
    }
    if knob == Knob::Accumulation && format == Format::Axolotl {
        if let Some(implied) = axolotl_accumulation(tree, before) {
            return Some(implied);
        }
    }
    let key = *concept_of(knob).names(format).first()?;
    let value = match knob {
        Knob::CompileMode => compile_mode(&Scalar::Null, found),
        _ => default_value(format, knob),
    };
    Some(KnobAt {
        knob,
        place: Place::Default { key },
        value,
    })
}

/// The mode in effect: none set (null) is torch.compile's `default` when
/// it compiles at all, else null.
fn compile_mode(set: &Scalar, found: &crate::keys::Found) -> Scalar {
    match set {
        Scalar::Null if found.compile_on().is_some() => Scalar::Str("default".into()),
        v => v.clone(),
    }
}

/// Axolotl's accumulation when it gives `batch_size` (the effective batch)
/// and no `gradient_accumulation_steps`: batch_size // micro_batch_size.
fn axolotl_accumulation(tree: &Tree, before: &[KnobAt]) -> Option<KnobAt> {
    let total = tree.top().find(|e| e.name == "batch_size")?;
    let micro = before.iter().find(|k| k.knob == Knob::Batch)?;
    let value = match (&total.value, &micro.value) {
        (Scalar::Int(b), Scalar::Int(m)) if *m > 0 => Scalar::Int(b / m),
        _ => Scalar::Null,
    };
    Some(KnobAt {
        knob: Knob::Accumulation,
        place: Place::Implied {
            by: "batch_size / micro_batch_size",
        },
        value,
    })
}

/// On, as gradient checkpointing reads it: true, or Axolotl's `offload` /
/// `offload_disk` and Unsloth's `unsloth` (still recomputation).
fn checkpointing_on(v: &Scalar) -> bool {
    match v {
        Scalar::Bool(b) => *b,
        Scalar::Int(n) => *n != 0,
        Scalar::Str(s) => matches!(s.as_str(), "offload" | "offload_disk" | "unsloth"),
        _ => false,
    }
}

/// How a precision key says what it wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PrecisionKey {
    /// `bf16: true`.
    Bf16Switch,
    /// `fp16: true`.
    Fp16Switch,
    /// `mixed_precision: bf16`, Lightning's `precision: bf16-mixed`.
    Named,
}

impl PrecisionKey {
    /// By the key's name; a true/false key of another name by its section's
    /// (DeepSpeed's `fp16.enabled`).
    pub(super) fn of(k: &KeyAt) -> PrecisionKey {
        let by = |name: &str| {
            let name = name.to_ascii_lowercase();
            if name.contains("bf16") {
                PrecisionKey::Bf16Switch
            } else if name.contains("fp16") || name == "half" {
                PrecisionKey::Fp16Switch
            } else {
                PrecisionKey::Named
            }
        };
        match (by(&k.name), &k.value) {
            (PrecisionKey::Named, Scalar::Bool(_)) => by(&k.path),
            (p, _) => p,
        }
    }
}

/// What one key asks for: `bf16`, `fp16`, `auto`, `no`, or its own word.
fn precision_word(k: &KeyAt) -> String {
    let word = |w: &str| w.to_string();
    match (PrecisionKey::of(k), &k.value) {
        (PrecisionKey::Bf16Switch, Scalar::Str(s)) if s == "auto" => word("auto"),
        (PrecisionKey::Bf16Switch, v) => word(if on(v) { "bf16" } else { "no" }),
        (PrecisionKey::Fp16Switch, v) => word(if on(v) { "fp16" } else { "no" }),
        (PrecisionKey::Named, Scalar::Int(16)) => word("fp16"),
        (PrecisionKey::Named, Scalar::Int(_) | Scalar::Null | Scalar::Bool(false)) => word("no"),
        (PrecisionKey::Named, Scalar::Str(s)) => {
            let s = s.to_ascii_lowercase();
            if s.contains("bf16") {
                word("bf16")
            } else if s == "auto" {
                word("auto")
            } else if s.contains("fp16") || s == "16" || s.starts_with("16-") || s == "half" {
                word("fp16")
            } else if matches!(
                s.as_str(),
                "no" | "off" | "none" | "fp32" | "32" | "32-true" | "64" | "64-true"
            ) {
                word("no")
            } else {
                s
            }
        }
        (PrecisionKey::Named, v) => super::edit::shown(v),
    }
}

fn on(v: &Scalar) -> bool {
    matches!(v, Scalar::Bool(true)) || matches!(v, Scalar::Int(n) if *n != 0)
}

/// The precision the keys ask for together: bf16 over fp16 over anything
/// else; Axolotl's `auto` when it has no `bf16` key.
fn precision(keys: &[KeyAt], axolotl: bool) -> Scalar {
    let words: Vec<String> = keys.iter().map(precision_word).collect();
    let has = |w: &str| words.iter().any(|x| x == w);
    let no_bf16_key = keys
        .iter()
        .all(|k| PrecisionKey::of(k) != PrecisionKey::Bf16Switch);
    let word = if has("bf16") {
        "bf16".to_string()
    } else if has("fp16") {
        "fp16".to_string()
    } else if let Some(other) = words.iter().find(|w| !matches!(w.as_str(), "no" | "auto")) {
        other.clone()
    } else if has("auto") || (axolotl && no_bf16_key) {
        "auto".to_string()
    } else {
        "no".to_string()
    };
    Scalar::Str(word)
}
