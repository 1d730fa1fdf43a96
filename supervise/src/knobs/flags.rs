//! The knobs a command's own flags hold (`found`) and the command with new
//! values for them (`turn`), on the flags its program defines.
//!
//! A knob is held by the first flag the program defines among its known
//! names (`-` and `_` alike), or by the user's own name for it (`--knob
//! batch=bsz`: `--bsz`), which replaces the known names: a name the user
//! gave that the program does not define holds nothing here (it may be a
//! config key). Precision is a pair of bool flags (HF's `--bf16`,
//! `--fp16`) or one flag taking a value (`--mixed_precision bf16`,
//! Lightning's `--precision bf16-mixed`). Checkpointing is also a bare
//! `--checkpointing` or `--grad-ckpt` switch about gradients
//! ([`CHECKPOINTING_SWITCHES`]).

use super::argv::{self, Occurrence};
use super::help::{Defined, Form};
use diagnose::keys::Scalar;
use diagnose::knobs::{Found, Knob, Turn};

/// The flag names that hold `knob`, in the order they are looked for
/// (Precision: the value-taking ones; see [`PRECISION_PAIR`]).
pub fn known_names(knob: Knob) -> &'static [&'static str] {
    match knob {
        Knob::Batch => &[
            "per_device_train_batch_size",
            "train_batch_size",
            "batch_size",
            "micro_batch_size",
            "bs",
        ],
        Knob::Accumulation => &[
            "gradient_accumulation_steps",
            "grad_accum_steps",
            "accumulate_grad_batches",
            "grad_accum",
            "accum_steps",
        ],
        Knob::Checkpointing => &[
            "gradient_checkpointing",
            "grad_checkpointing",
            "activation_checkpointing",
        ],
        Knob::CompileMode => &["torch_compile_mode", "compile_mode"],
        Knob::Precision => &["mixed_precision", "precision"],
    }
}

/// HF's precision switches, looked for before the value-taking names.
pub const PRECISION_PAIR: [&str; 2] = ["bf16", "fp16"];

/// Names that hold checkpointing only as a switch (store_true, or
/// `--x/--no-x`) whose help speaks of gradients, activations,
/// recomputation or memory, or in a program whose code uses
/// torch.utils.checkpoint: elsewhere "checkpointing" is saving checkpoints.
pub const CHECKPOINTING_SWITCHES: [&str; 2] = ["checkpointing", "grad_ckpt"];

/// Words of a help text about activation checkpointing.
const ABOUT_ACTIVATIONS: [&str; 4] = ["gradient", "activation", "recomput", "memory"];

/// The flags that hold a knob: indexes into `Defined::flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    One(usize),
    /// bf16 and fp16 (at least one defined).
    Pair(Option<usize>, Option<usize>),
}

/// Where a knob's value now comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The command gives the flag.
    Command,
    /// The program's default, as its `--help` shows it.
    Default,
    /// Neither: the help shows no default.
    Unknown,
}

/// A knob one of the command's flags holds.
#[derive(Clone, Debug, PartialEq)]
pub struct FlagKnob {
    /// `place`: the flag as the command writes it, else as the program
    /// names it (`--bf16/--fp16` for the pair).
    pub found: Found,
    /// The program's names of the flags that hold it (two for the pair).
    pub flags: Vec<String>,
    pub source: Source,
}

fn holder(defined: &Defined, knob: Knob, user: &[(Knob, String)]) -> Option<Holder> {
    let mut users = user.iter().filter(|(k, _)| *k == knob).peekable();
    if users.peek().is_some() {
        return users
            .find_map(|(_, name)| defined.position(name))
            .map(Holder::One);
    }
    if knob == Knob::Precision {
        let [bf16, fp16] = PRECISION_PAIR.map(|n| defined.position(n));
        let is_bool = |i: &usize| !matches!(defined.flags[*i].form, Form::Value { .. });
        let (bf16, fp16) = (bf16.filter(is_bool), fp16.filter(is_bool));
        if bf16.is_some() || fp16.is_some() {
            return Some(Holder::Pair(bf16, fp16));
        }
    }
    let known = known_names(knob).iter().find_map(|n| defined.position(n));
    if known.is_some() || knob != Knob::Checkpointing {
        return known.map(Holder::One);
    }
    CHECKPOINTING_SWITCHES
        .iter()
        .filter_map(|n| defined.position(n))
        .find(|i| activation_switch(defined, &defined.flags[*i]))
        .map(Holder::One)
}

/// A switch, off unless given, that checkpoints activations by its help or
/// by the program's code.
fn activation_switch(defined: &Defined, flag: &super::help::Flag) -> bool {
    let off_by_default = flag.default.as_deref().is_none_or(|d| d != "True");
    let help = flag.help.to_lowercase();
    matches!(flag.form, Form::Switch { .. })
        && off_by_default
        && (defined.checkpoints_in_code || ABOUT_ACTIVATIONS.iter().any(|w| help.contains(w)))
}

/// The knobs `argv`'s program holds in its flags, in [`Knob::ALL`]'s
/// order, each with its value now: the command's, else the help's default
/// (`Scalar::Null` for `None`), else None. Precision reads as `no`, `fp16`
/// or `bf16` where its value means one.
pub fn found(defined: &Defined, argv: &[String], user: &[(Knob, String)]) -> Vec<FlagKnob> {
    let occ = argv::scan(argv, defined);
    Knob::ALL
        .into_iter()
        .filter_map(|knob| {
            let h = holder(defined, knob, user)?;
            Some(match h {
                Holder::One(i) => one(defined, &occ, knob, i),
                Holder::Pair(b, f) => pair(defined, &occ, b, f),
            })
        })
        .collect()
}

pub(super) fn last(occ: &[Occurrence], flag: usize) -> Option<&Occurrence> {
    occ.iter().rev().find(|o| o.flag == flag)
}

fn one(defined: &Defined, occ: &[Occurrence], knob: Knob, i: usize) -> FlagKnob {
    let flag = &defined.flags[i];
    let at = last(occ, i);
    let (value, source) = match (at, &flag.default) {
        (Some(o), _) => (Some(given(&flag.form, o)), Source::Command),
        (None, Some(d)) => (Some(scalar(d)), Source::Default),
        (None, None) => (None, Source::Unknown),
    };
    let value = match (knob, value) {
        (Knob::Precision, Some(Scalar::Str(s))) => Some(Scalar::Str(precision_word(&s))),
        (Knob::Precision, Some(Scalar::Int(n))) => {
            Some(Scalar::Str(precision_word(&n.to_string())))
        }
        (_, v) => v,
    };
    FlagKnob {
        found: Found {
            knob,
            place: at.map_or(flag.name(), |o| &o.written).to_string(),
            value,
        },
        flags: vec![flag.name().to_string()],
        source,
    }
}

fn pair(defined: &Defined, occ: &[Occurrence], b: Option<usize>, f: Option<usize>) -> FlagKnob {
    let state = |i: Option<usize>| -> (Option<bool>, Source) {
        let Some(i) = i else {
            return (Some(false), Source::Default);
        };
        let flag = &defined.flags[i];
        match (last(occ, i), &flag.default) {
            (Some(o), _) => (as_bool(&given(&flag.form, o)), Source::Command),
            (None, Some(d)) => (as_bool(&scalar(d)), Source::Default),
            (None, None) if matches!(flag.form, Form::Switch { .. }) => {
                (Some(false), Source::Default)
            }
            (None, None) => (None, Source::Unknown),
        }
    };
    let ((bv, bs), (fv, fs)) = (state(b), state(f));
    let value = match (bv, fv) {
        (Some(true), _) => Some("bf16"),
        (_, Some(true)) => Some("fp16"),
        (Some(false), Some(false)) => Some("no"),
        _ => None,
    };
    let source = if bs == Source::Command || fs == Source::Command {
        Source::Command
    } else if value.is_some() {
        Source::Default
    } else {
        Source::Unknown
    };
    let flags: Vec<String> = [b, f]
        .into_iter()
        .flatten()
        .map(|i| defined.flags[i].name().to_string())
        .collect();
    FlagKnob {
        found: Found {
            knob: Knob::Precision,
            place: flags.join("/"),
            value: value.map(|v| Scalar::Str(v.into())),
        },
        flags,
        source,
    }
}

/// What an occurrence gives: a switch's presence, an optional bool's
/// value (bare: true), a value's text typed.
pub(super) fn given(form: &Form, o: &Occurrence) -> Scalar {
    match (form, o.value()) {
        (Form::Switch { .. }, _) => Scalar::Bool(!o.off),
        (Form::OptionalBool, None) => Scalar::Bool(true),
        (Form::OptionalBool, Some(v)) => hf_bool(v).map_or_else(|| scalar(v), Scalar::Bool),
        (Form::Value { .. }, Some(v)) => scalar(v),
        (Form::Value { .. }, None) => Scalar::Null,
    }
}

/// A value's text typed: a whole number, a bool as Python prints one,
/// `None`, else the text.
pub fn scalar(text: &str) -> Scalar {
    match text {
        "None" => Scalar::Null,
        "true" | "True" => Scalar::Bool(true),
        "false" | "False" => Scalar::Bool(false),
        t => t
            .parse()
            .map_or_else(|_| Scalar::Str(t.into()), Scalar::Int),
    }
}

/// HF's `string_to_bool`.
pub(super) fn hf_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "t" | "y" | "1" => Some(true),
        "no" | "false" | "f" | "n" | "0" => Some(false),
        _ => None,
    }
}

pub(super) fn as_bool(s: &Scalar) -> Option<bool> {
    match s {
        Scalar::Bool(b) => Some(*b),
        Scalar::Int(n) => Some(*n != 0),
        Scalar::Null => Some(false),
        _ => None,
    }
}

/// A precision value as `no`, `fp16` or `bf16` (Lightning's `16-mixed`,
/// `bf16-mixed`, `32-true` too); other text as it is.
fn precision_word(v: &str) -> String {
    match v.to_ascii_lowercase().as_str() {
        "bf16" | "bf16-mixed" | "bf16-true" | "bf16_mixed" => "bf16".into(),
        "fp16" | "16" | "16-mixed" | "16-true" | "half" => "fp16".into(),
        "no" | "none" | "32" | "32-true" | "fp32" | "64" | "64-true" => "no".into(),
        _ => v.into(),
    }
}

/// `argv` with each of `turns` applied to the flags that hold its knob.
/// Err, in the user's words, when a knob is held by no flag the program
/// defines (nothing is ever added that it does not define) or a flag
/// cannot take the value.
pub fn turn(
    argv: &[String],
    defined: &Defined,
    turns: &[Turn],
    user: &[(Knob, String)],
) -> Result<Vec<String>, String> {
    let mut out = argv.to_vec();
    for t in turns {
        let Some(h) = holder(defined, t.knob, user) else {
            return Err(not_defined(t.knob, user));
        };
        match (h, t.knob) {
            (Holder::Pair(b, f), _) => set_pair(&mut out, defined, b, f, &t.value)?,
            (Holder::One(i), Knob::Precision) => {
                let word = precision_value(defined, &out, i, &t.value)?;
                super::edit::set(&mut out, defined, i, &Scalar::Str(word))?;
            }
            (Holder::One(i), _) => super::edit::set(&mut out, defined, i, &t.value)?,
        }
    }
    Ok(out)
}

fn not_defined(knob: Knob, user: &[(Knob, String)]) -> String {
    let users: Vec<String> = user
        .iter()
        .filter(|(k, _)| *k == knob)
        .map(|(_, n)| n.clone())
        .collect();
    let names: Vec<String> = if !users.is_empty() {
        users
    } else if knob == Knob::Precision {
        PRECISION_PAIR
            .iter()
            .chain(known_names(knob))
            .map(|n| n.to_string())
            .collect()
    } else if knob == Knob::Checkpointing {
        known_names(knob)
            .iter()
            .chain(&CHECKPOINTING_SWITCHES)
            .map(|n| n.to_string())
            .collect()
    } else {
        known_names(knob).iter().map(|n| n.to_string()).collect()
    };
    let flags: Vec<String> = names
        .iter()
        .map(|n| format!("--{}", n.trim_start_matches('-')))
        .collect();
    format!(
        "the program defines no flag for {} (its --help lists none of {}), so none is added",
        knob.as_str(),
        flags.join(", ")
    )
}

fn precision_word_of(v: &Scalar) -> Result<&str, String> {
    match v {
        Scalar::Str(s) if ["no", "fp16", "bf16"].contains(&s.as_str()) => Ok(s),
        other => Err(format!("precision must be no, fp16 or bf16, not {other:?}")),
    }
}

fn set_pair(
    argv: &mut Vec<String>,
    defined: &Defined,
    b: Option<usize>,
    f: Option<usize>,
    value: &Scalar,
) -> Result<(), String> {
    let word = precision_word_of(value)?;
    let (on, missing) = match word {
        "bf16" => (b, "--bf16"),
        "fp16" => (f, "--fp16"),
        _ => (None, ""),
    };
    if word != "no" && on.is_none() {
        return Err(format!(
            "the program defines no {missing} flag (its --help), so none is added"
        ));
    }
    for i in [b, f].into_iter().flatten() {
        super::edit::set(argv, defined, i, &Scalar::Bool(Some(i) == on))?;
    }
    Ok(())
}

/// The word a value-taking precision flag spells `value` as: its own
/// choice that means it, else Lightning's spelling where its value now is
/// one, else `no`/`fp16`/`bf16`.
fn precision_value(
    defined: &Defined,
    argv: &[String],
    i: usize,
    value: &Scalar,
) -> Result<String, String> {
    let word = precision_word_of(value)?;
    let flag = &defined.flags[i];
    if let Form::Value { choices } = &flag.form {
        if !choices.is_empty() {
            let pick = choices.iter().find(|c| c.as_str() == word);
            return pick
                .or_else(|| choices.iter().find(|c| precision_word(c) == word))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "{} takes one of {}, none of which means {word}",
                        flag.name(),
                        choices.join(", ")
                    )
                });
        }
    }
    let occ = argv::scan(argv, defined);
    let now = last(&occ, i)
        .and_then(Occurrence::value)
        .map(str::to_string)
        .or_else(|| flag.default.clone())
        .unwrap_or_default();
    let lightning = now.ends_with("-mixed") || now.ends_with("-true") || now == "16" || now == "32";
    Ok(match (lightning, word) {
        (true, "bf16") => "bf16-mixed".into(),
        (true, "fp16") => "16-mixed".into(),
        (true, _) => "32-true".into(),
        (false, w) => w.into(),
    })
}
