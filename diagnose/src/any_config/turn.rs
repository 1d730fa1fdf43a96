//! A fix's turns (`crate::knobs::Turn`) made in a copy of a config's text:
//! `train run --auto-fix` writes it as a new file, the user's is never
//! changed. Each knob's keys are changed where they stand (YAML keeps its
//! comments, JSON every byte but the values); a known format's knob the file
//! leaves at its default is added at the top level. The text is read back,
//! each key and each knob checked to hold its new value.

use super::edit;
use super::knobs::{knobs, ConfigKnobs, KeyAt, KnobAt, Place, PrecisionKey};
use super::{Format, Tree};
use crate::keys::{KeyChange, Scalar};
use crate::knobs::{Knob, Turn};
use common::input::Input;

/// One key changed or added.
#[derive(Clone, Debug, PartialEq)]
pub struct KnobChange {
    pub knob: Knob,
    /// Dotted path.
    pub key: String,
    /// Its line before; None for a key added.
    pub line: Option<usize>,
    /// The value before, as written (the format's default, for a key added).
    pub old: String,
    pub new: String,
    pub why: String,
}

impl KnobChange {
    /// `per_device_train_batch_size: 64 -> 32 (why)`, a key added
    /// `gradient_accumulation_steps (added): 1 -> 2 (why)`.
    pub fn words(&self) -> String {
        let added = if self.line.is_none() { " (added)" } else { "" };
        format!(
            "{}{added}: {} -> {} ({})",
            self.key, self.old, self.new, self.why
        )
    }
}

/// A config with the turns made.
#[derive(Clone, Debug, PartialEq)]
pub struct Turned {
    pub format: Format,
    /// The new text, for the caller to write elsewhere.
    pub text: String,
    /// Each key changed or added, in the turns' order; empty when no turn
    /// needed an edit.
    pub changes: Vec<KnobChange>,
    /// The turns that needed no edit, in words (a knob at its value
    /// already; an implied accumulation the batch turned).
    pub notes: Vec<String>,
}

/// One edit of the text.
enum Edit {
    Set(KeyAt, Scalar),
    Add(&'static str, Scalar),
}

/// What one turn does to the text.
enum Plan {
    Edits(Vec<Edit>),
    /// No edit: why not.
    Nothing(String),
}

/// The text of `input` with each of `turns` made (`named`, `user`: as for
/// `knobs`). Err(why) when a turn cannot be made safely (its knob is not in
/// the config, a value of the wrong kind, an implied accumulation that
/// disagrees with the batch, an edit that does not read back): nothing is
/// changed then. Bad input is an error naming the file, as `knobs` says.
pub fn turn(
    input: &Input,
    named: Option<Format>,
    turns: &[Turn],
    user: &[(Knob, String)],
) -> anyhow::Result<Result<Turned, String>> {
    let before = knobs(input, named, user)?;
    let tree = Tree::read(input)?;
    let planned = match plan_all(&before, turns) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    let text = match apply(&input.text, &tree, &planned.edits) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let again = Input {
        name: input.name.clone(),
        text: text.clone(),
    };
    let checked = took(&again, &planned.edits).and_then(|()| {
        let after = knobs(&again, Some(before.format), user).map_err(|e| {
            format!("the edited config does not read back ({e:#}); nothing was changed")
        })?;
        agree(&before, &after, &planned.expect)
    });
    Ok(checked.map(|()| Turned {
        format: before.format,
        text,
        changes: planned.changes,
        notes: planned.notes,
    }))
}

/// The edits of all the turns, their changes in words, the turns that need
/// none, and the value each knob must read back with.
#[derive(Default)]
struct Planned {
    edits: Vec<Edit>,
    changes: Vec<KnobChange>,
    notes: Vec<String>,
    expect: Vec<(Knob, Scalar)>,
}

fn plan_all(before: &ConfigKnobs, turns: &[Turn]) -> Result<Planned, String> {
    let mut p = Planned::default();
    for t in turns {
        let name = t.knob.as_str();
        let at = before.get(t.knob).ok_or_else(|| {
            format!("the config has no {name} key to turn (name one with --knob {name}=KEY)")
        })?;
        let want = wanted(t)?;
        // An implied accumulation is checked against the batch's turn even
        // at its value now.
        let implied = matches!(at.place, Place::Implied { .. });
        if at.value == want && !implied {
            p.notes.push(format!(
                "{name}: {} already ({})",
                edit::shown(&want),
                at.place()
            ));
            continue;
        }
        match plan(before.format, at, &want)? {
            Plan::Nothing(why) => {
                p.notes.push(why);
                if implied {
                    p.expect.push((t.knob, want));
                }
            }
            Plan::Edits(es) => {
                for e in es {
                    p.changes.push(change(t, &at.value, &e));
                    p.edits.push(e);
                }
                p.expect.push((t.knob, want));
            }
        }
    }
    Ok(p)
}

/// Whether each knob turned reads back with its new value.
fn agree(
    before: &ConfigKnobs,
    after: &ConfigKnobs,
    expect: &[(Knob, Scalar)],
) -> Result<(), String> {
    for (knob, want) in expect {
        let got = after.get(*knob).map(|k| &k.value);
        if got == Some(want) {
            continue;
        }
        let (name, want) = (knob.as_str(), edit::shown(want));
        let got = got.map_or("nothing".into(), edit::shown);
        return Err(match before.get(*knob).map(|k| &k.place) {
            Some(Place::Implied { by }) => format!(
                "{name} is {by} in this config: {got} with the turns given, not {want} (turn the batch with it); nothing was changed"
            ),
            _ => format!(
                "the edited config reads back with {name} {got}, not {want}; nothing was changed"
            ),
        });
    }
    Ok(())
}

/// The turn's value, checked for its knob (Precision's `off` is `no`).
fn wanted(t: &Turn) -> Result<Scalar, String> {
    let v = &t.value;
    let ok = match (t.knob, v) {
        (Knob::Batch | Knob::Accumulation, Scalar::Int(n)) => *n >= 1,
        (Knob::Checkpointing, Scalar::Bool(_)) => true,
        (Knob::CompileMode, Scalar::Str(_)) => true,
        (Knob::Precision, Scalar::Str(s)) => matches!(s.as_str(), "bf16" | "fp16" | "no" | "off"),
        _ => false,
    };
    if !ok {
        let expected = match t.knob {
            Knob::Batch | Knob::Accumulation => "a whole number, 1 or more",
            Knob::Checkpointing => "true or false",
            Knob::CompileMode => "a torch.compile mode",
            Knob::Precision => "bf16, fp16 or no",
        };
        return Err(format!(
            "{}: expected {expected}, found {}",
            t.knob.as_str(),
            edit::shown(v)
        ));
    }
    Ok(match v {
        Scalar::Str(s) if s == "off" => Scalar::Str("no".into()),
        v => v.clone(),
    })
}

fn plan(format: Format, at: &KnobAt, want: &Scalar) -> Result<Plan, String> {
    if at.knob == Knob::Precision {
        let word = want.as_str().unwrap_or("no");
        return precision(format, at, word).map(Plan::Edits);
    }
    // No mode set (absent or null) is torch.compile's `default` already;
    // setting one would turn compile on (Hugging Face's reading) where it
    // is off.
    if at.knob == Knob::CompileMode && at.value == Scalar::Null && want.as_str() == Some("default")
    {
        return Ok(Plan::Nothing(format!(
            "compile_mode: {} sets no mode, which is torch.compile's `default` wherever it compiles; not set",
            at.place()
        )));
    }
    Ok(match &at.place {
        Place::Keys(keys) => Plan::Edits(
            keys.iter()
                .map(|k| Edit::Set(k.clone(), want.clone()))
                .collect(),
        ),
        Place::Implied { by } => Plan::Nothing(format!(
            "{}: implied by {by}, {} with the batch as turned",
            at.knob.as_str(),
            edit::shown(want)
        )),
        Place::Default { key } => Plan::Edits(vec![Edit::Add(key, want.clone())]),
    })
}

/// Precision `word` (bf16, fp16, no): each switch on or off, each named
/// key set, and a known format's missing key added where none can say it.
fn precision(format: Format, at: &KnobAt, word: &str) -> Result<Vec<Edit>, String> {
    let keys: &[KeyAt] = match &at.place {
        Place::Keys(k) => k,
        _ => &[],
    };
    let mut edits = Vec::new();
    let mut said = false;
    for k in keys {
        let new = match PrecisionKey::of(k) {
            PrecisionKey::Bf16Switch => {
                said |= word == "bf16";
                Scalar::Bool(word == "bf16")
            }
            PrecisionKey::Fp16Switch => {
                said |= word == "fp16";
                Scalar::Bool(word == "fp16")
            }
            PrecisionKey::Named => {
                said = true;
                named_precision(format, k, word)?
            }
        };
        if new != k.value {
            edits.push(Edit::Set(k.clone(), new));
        }
    }
    // Off needs no key, but Axolotl's bf16 is `auto` unless said.
    let axolotl_auto = format == Format::Axolotl
        && keys
            .iter()
            .all(|k| PrecisionKey::of(k) != PrecisionKey::Bf16Switch);
    if said || (word == "no" && !axolotl_auto) {
        return Ok(edits);
    }
    match (format, word) {
        (Format::Trainguard, _) => edits.push(Edit::Add(
            "mixed_precision",
            Scalar::Str(if word == "no" { "off" } else { word }.into()),
        )),
        (Format::Hf | Format::Axolotl, "fp16") => edits.push(Edit::Add("fp16", Scalar::Bool(true))),
        (Format::Hf | Format::Axolotl, _) => {
            edits.push(Edit::Add("bf16", Scalar::Bool(word == "bf16")))
        }
        (Format::Generic, _) => {
            return Err(format!(
                "precision: no key of this config can ask for {word} ({}); name one with --knob precision=KEY",
                at.place()
            ))
        }
    }
    Ok(edits)
}

/// A named precision key's new value, in its own vocabulary: trainguard's
/// `off`, Lightning's `bf16-mixed` (where it says `16-mixed`, `32-true` or
/// a number), else Accelerate's `bf16` / `fp16` / `no`.
fn named_precision(format: Format, k: &KeyAt, word: &str) -> Result<Scalar, String> {
    let lightning = match &k.value {
        Scalar::Int(_) => true,
        Scalar::Str(s) => s.ends_with("-mixed") || s.ends_with("-true"),
        // A true/false switch of no precision's name (`use_amp: true`);
        // YAML 1.1 reads Accelerate's `no` and trainguard's `off` as false.
        Scalar::Bool(_) if !matches!(k.shown.to_ascii_lowercase().as_str(), "no" | "off") => {
            return Err(format!(
                "precision: cannot tell what `{}: {}` (line {}) turns on, to set it to {word}",
                k.path, k.shown, k.line
            ))
        }
        _ => false,
    };
    let off = format == Format::Trainguard || k.shown.eq_ignore_ascii_case("off");
    let new = match word {
        "bf16" if lightning => "bf16-mixed",
        "fp16" if lightning => "16-mixed",
        "no" if lightning => "32-true",
        "no" if off => "off",
        w => w,
    };
    Ok(Scalar::Str(new.into()))
}

fn change(t: &Turn, before: &Scalar, e: &Edit) -> KnobChange {
    let (key, line, old, new) = match e {
        Edit::Set(k, v) => (k.path.clone(), Some(k.line), k.shown.clone(), v),
        Edit::Add(key, v) => {
            // A precision key added was off: trainguard's word, a switch's false.
            let old = match (t.knob, *key) {
                (Knob::Precision, "mixed_precision") => "off".to_string(),
                (Knob::Precision, _) => "false".to_string(),
                _ => edit::shown(before),
            };
            (key.to_string(), None, old, v)
        }
    };
    KnobChange {
        knob: t.knob,
        key,
        line,
        old,
        new: edit::shown(new),
        why: t.why.clone(),
    }
}

/// `text` with the edits made: keys set first (JSON by the original spans),
/// then keys added.
fn apply(text: &str, tree: &Tree, edits: &[Edit]) -> Result<String, String> {
    let sets: Vec<KeyChange> = edits
        .iter()
        .filter_map(|e| match e {
            Edit::Set(k, v) => Some(KeyChange {
                path: k.path.clone(),
                line: k.line,
                entry: k.entry,
                value: v.clone(),
                why: String::new(),
            }),
            Edit::Add(..) => None,
        })
        .collect();
    let mut out = edit::apply(text, tree, &sets)?;
    for e in edits {
        if let Edit::Add(key, v) = e {
            if tree.top().any(|t| t.name == *key) {
                return Err(format!("`{key}` is in the file already; not added twice"));
            }
            out = edit::add(&out, tree.syntax, key, v)?;
        }
    }
    Ok(out)
}

/// Whether each key edited reads back as written.
fn took(again: &Input, edits: &[Edit]) -> Result<(), String> {
    let tree = Tree::read(again).map_err(|e| {
        format!("the edited config does not read back ({e:#}); nothing was changed")
    })?;
    for e in edits {
        let (path, v) = match e {
            Edit::Set(k, v) => (k.path.as_str(), v),
            Edit::Add(key, v) => (*key, v),
        };
        if !tree
            .entries
            .iter()
            .any(|x| x.path == path && x.shown == edit::shown(v))
        {
            return Err(format!(
                "the edited config does not read back with {path}: {}; nothing was changed",
                edit::shown(v)
            ));
        }
    }
    Ok(())
}
