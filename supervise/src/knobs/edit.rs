//! One defined flag of a command set to a value, in the form the command
//! writes it (`--x 64` -> `--x 32`, `--x=64` -> `--x=32`), else added in
//! the form the program expects.

use super::argv::{self, Carried, Occurrence};
use super::flags::{as_bool, given, scalar};
use super::help::{Defined, Flag, Form};
use diagnose::keys::Scalar;

/// Sets flag `i` of `defined` in `argv` to `value`.
pub fn set(
    argv: &mut Vec<String>,
    defined: &Defined,
    i: usize,
    value: &Scalar,
) -> Result<(), String> {
    let occ: Vec<Occurrence> = argv::scan(argv, defined)
        .into_iter()
        .filter(|o| o.flag == i)
        .collect();
    let flag = &defined.flags[i];
    match &flag.form {
        Form::Value { choices } => set_value(argv, flag, choices, &occ, value),
        Form::OptionalBool => set_optional_bool(argv, flag, &occ, bool_of(value, flag.name())?),
        Form::Switch { off } => set_switch(argv, flag, off, &occ, bool_of(value, flag.name())?),
    }
}

/// Adds `words` at the end of the program's arguments.
fn add(argv: &mut Vec<String>, words: Vec<String>) {
    let at = argv::insert_at(argv);
    argv.splice(at..at, words);
}

fn set_value(
    argv: &mut Vec<String>,
    flag: &Flag,
    choices: &[String],
    occ: &[Occurrence],
    value: &Scalar,
) -> Result<(), String> {
    let hint = occ
        .last()
        .and_then(Occurrence::value)
        .or(flag.default.as_deref());
    let text = text_of(value, hint).ok_or_else(|| {
        format!(
            "{} takes a value; {value:?} is not one to write",
            flag.name()
        )
    })?;
    if !choices.is_empty() && !choices.contains(&text) {
        return Err(format!(
            "{} takes one of {}, not {text}",
            flag.name(),
            choices.join(", ")
        ));
    }
    if occ.is_empty() {
        add(argv, argv::flag_words(flag.name(), &text));
    }
    // From the last, so that the indexes before a removed word hold.
    for o in occ.iter().rev() {
        match &o.carried {
            Carried::Next(_) if !argv::is_option(&text) => argv[o.at + 1] = text.clone(),
            Carried::Next(_) => {
                argv[o.at] = format!("{}={text}", o.written);
                argv.remove(o.at + 1);
            }
            Carried::Joined(_) | Carried::Bare => argv[o.at] = format!("{}={text}", o.written),
            Carried::Attached(_) => argv[o.at] = format!("{}{text}", o.written),
        }
    }
    Ok(())
}

fn set_optional_bool(
    argv: &mut Vec<String>,
    flag: &Flag,
    occ: &[Occurrence],
    b: bool,
) -> Result<(), String> {
    // HF reads any spelling: the command's, else `true`.
    let text = bool_text(b, occ.last().and_then(Occurrence::value));
    if occ.is_empty() {
        let now = flag.default.as_deref().map(scalar);
        if now.as_ref().and_then(as_bool) != Some(b) {
            add(argv, vec![flag.name().to_string(), text]);
        }
        return Ok(());
    }
    for o in occ.iter().rev() {
        match &o.carried {
            Carried::Next(_) => argv[o.at + 1] = text.clone(),
            Carried::Joined(_) | Carried::Attached(_) => {
                argv[o.at] = format!("{}={text}", o.written)
            }
            Carried::Bare if b => {}
            Carried::Bare => argv.insert(o.at + 1, text.clone()),
        }
    }
    Ok(())
}

fn set_switch(
    argv: &mut Vec<String>,
    flag: &Flag,
    off: &Option<String>,
    occ: &[Occurrence],
    b: bool,
) -> Result<(), String> {
    let shown = flag
        .default
        .as_deref()
        .map(scalar)
        .and_then(|s| as_bool(&s));
    // A store_true switch is off unless its help says otherwise; a switch
    // with an off flag may be on by default, so it is given.
    let default = shown.unwrap_or(false);
    let now = occ.last().map_or(default, |o| {
        as_bool(&given(&flag.form, o)).unwrap_or(default)
    });
    if now == b {
        return Ok(());
    }
    for o in occ.iter().rev() {
        argv.remove(o.at);
    }
    if shown == Some(b) || (default == b && off.is_none()) {
        return Ok(());
    }
    let word = match (b, off) {
        (true, _) => flag.name().to_string(),
        (false, Some(off)) => off.clone(),
        (false, None) => {
            return Err(format!(
                "{} is a switch that is on by default (its --help: default {}), and the program defines no flag that turns it off",
                flag.name(),
                flag.default.as_deref().unwrap_or("True")
            ))
        }
    };
    add(argv, vec![word]);
    Ok(())
}

fn bool_of(value: &Scalar, name: &str) -> Result<bool, String> {
    match value {
        Scalar::Bool(b) => Ok(*b),
        other => Err(format!("{name} is on or off; {other:?} is neither")),
    }
}

/// A value written for a value-taking flag; a bool in the style of the
/// value it replaces (`True`, `1`, `true`).
fn text_of(value: &Scalar, hint: Option<&str>) -> Option<String> {
    match value {
        Scalar::Int(n) => Some(n.to_string()),
        Scalar::Str(s) => Some(s.clone()),
        Scalar::Bool(b) => Some(bool_text(*b, hint)),
        Scalar::Null | Scalar::Other => None,
    }
}

fn bool_text(b: bool, hint: Option<&str>) -> String {
    let word = match hint {
        Some("True" | "False") => ["False", "True"],
        Some("0" | "1") => ["0", "1"],
        _ => ["false", "true"],
    };
    word[usize::from(b)].to_string()
}
