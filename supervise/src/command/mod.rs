//! A sweep trial's command line from the space's `command` (or W&B's
//! default) and the trial's parameters, with W&B's macros as its agent
//! expands them. Read from wandb/wandb (0.31): wandb/wandb_agent.py,
//! `Agent._command_run`, and wandb/sdk/launch/sweeps/utils.py,
//! `create_sweep_command` and `create_sweep_command_args`:
//! - `${envvar:NAME}` is replaced anywhere in an item, first (NAME of
//!   `[A-Z0-9_]`; an unset variable gives NAME itself);
//! - then an item that is all one macro, `${...}`, becomes its list of
//!   arguments (`${args}` with no parameters becomes none); any other item
//!   is passed as written;
//! - `${env}` is `/usr/bin/env` (not Windows), `${interpreter}` `python`
//!   (ours: the caller's), `${program}` the space's program;
//! - `${args}` `--k=v`, `${args_no_hyphens}` `k=v`, `${args_append_hydra}`
//!   `+k=v`, `${args_override_hydra}` `++k=v`, `${args_no_equals}` `--k`
//!   `v`, `${args_no_boolean_flags}` `--k` for true, nothing for false, else
//!   `--k=v`; v is Python's `str` of the value (python.rs);
//! - `${args_json}` one argument, `json.dumps` of the parameters;
//!   `${args_json_file}` the path of a file holding that text.
//!
//! Where W&B passes a mistake on silently, this refuses it (bad input, so
//! the space check exits 2 before any trial): an unknown macro (W&B drops
//! the item) and a macro inside a longer item (W&B passes `--lr=${args}` to
//! the program as written). trainguard adds `${config}`: the path of the
//! trial's config file.

mod python;

use serde_json::Value;

/// W&B's default command (`DEFAULT_SWEEP_COMMAND`).
pub const DEFAULT: [&str; 4] = ["${env}", "${interpreter}", "${program}", "${args}"];

/// What the macros expand to for one trial.
pub struct Context<'a> {
    /// The trial's parameters, in the order W&B gives them to the agent
    /// (the space's order); a nested dict's keys in serde_json's map order.
    pub params: &'a [(String, Value)],
    pub program: &'a str,
    /// The `python` on PATH, or `--interpreter`.
    pub interpreter: &'a str,
    /// Where the caller writes [`args_json`] when [`uses_args_json_file`].
    pub args_json_file: &'a str,
    /// The trial's config file; `${config}` without one is an error.
    pub config: Option<&'a str>,
    /// The environment `${envvar:NAME}` reads.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The macros, for messages.
const MACROS: [&str; 14] = [
    "${env}",
    "${interpreter}",
    "${program}",
    "${args}",
    "${args_no_hyphens}",
    "${args_no_boolean_flags}",
    "${args_no_equals}",
    "${args_json}",
    "${args_json_file}",
    "${args_append_hydra}",
    "${args_override_hydra}",
    "${envvar:NAME}",
    "${config}",
    "${resume}",
];

/// The trial's argv: `command`, or W&B's default when it is absent or empty
/// (as the agent's `command or DEFAULT_SWEEP_COMMAND`), its macros expanded.
pub fn expand(command: Option<&[String]>, ctx: &Context) -> anyhow::Result<Vec<String>> {
    let default: Vec<String> = DEFAULT.iter().map(|s| s.to_string()).collect();
    let command = match command {
        Some(c) if !c.is_empty() => c,
        _ => &default,
    };
    let mut argv = Vec::new();
    for item in command {
        let item = envvars(item, ctx.env);
        match whole_macro(&item) {
            Some(name) => argv.extend(macro_args(name, ctx)?),
            None => {
                if let Some(inside) = macro_inside(&item) {
                    return Err(common::bad_input!(
                        "command: `{item}`: a macro is expanded only as a whole item of the command list (as W&B's agent does); `{inside}` inside a longer item would reach the program as written; make it an item of its own"
                    ));
                }
                argv.push(item);
            }
        }
    }
    Ok(argv)
}

/// The text of `${args_json}`, which the `${args_json_file}` file holds.
pub fn args_json(params: &[(String, Value)]) -> String {
    // Written by hand: a serde_json Map would sort the keys; W&B keeps the
    // parameters' order.
    let mut out = String::from("{");
    for (i, (k, v)) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        python::json_dumps(&Value::String(k.clone()), &mut out);
        out.push_str(": ");
        python::json_dumps(v, &mut out);
    }
    out.push('}');
    out
}

/// Whether the trial needs its `${args_json_file}` written: W&B writes it
/// when an item of the command is exactly that macro.
pub fn uses_args_json_file(command: Option<&[String]>) -> bool {
    command.is_some_and(|c| c.iter().any(|i| i == "${args_json_file}"))
}

/// `${envvar:NAME}` anywhere in an item, replaced by the variable's value,
/// or by NAME when it is unset (W&B's `create_sweep_command`).
fn envvars(item: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    const OPEN: &str = "${envvar:";
    let mut out = String::new();
    let mut rest = item;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        if after[name_len..].starts_with('}') {
            let name = &after[..name_len];
            out.push_str(&rest[..at]);
            out.push_str(&env(name).unwrap_or_else(|| name.to_string()));
            rest = &after[name_len + 1..];
        } else {
            out.push_str(&rest[..at + OPEN.len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The macro's name when the item is one macro (`${args}` -> `args`), as the
/// agent tests it: starts with `${`, ends with `}`.
fn whole_macro(item: &str) -> Option<&str> {
    item.strip_prefix("${")?.strip_suffix('}')
}

/// A known macro inside a longer item.
fn macro_inside(item: &str) -> Option<&'static str> {
    MACROS
        .iter()
        .find(|m| **m != "${envvar:NAME}" && item.contains(**m))
        .copied()
}

fn macro_args(name: &str, ctx: &Context) -> anyhow::Result<Vec<String>> {
    let each = |f: &dyn Fn(&str, &Value) -> Vec<String>| -> Vec<String> {
        ctx.params.iter().flat_map(|(k, v)| f(k, v)).collect()
    };
    let s = python::str_of;
    Ok(match name {
        "env" => vec!["/usr/bin/env".into()],
        "interpreter" => vec![ctx.interpreter.into()],
        "program" => vec![ctx.program.into()],
        "args" => each(&|k, v| vec![format!("--{k}={}", s(v))]),
        "args_no_hyphens" => each(&|k, v| vec![format!("{k}={}", s(v))]),
        "args_append_hydra" => each(&|k, v| vec![format!("+{k}={}", s(v))]),
        "args_override_hydra" => each(&|k, v| vec![format!("++{k}={}", s(v))]),
        "args_no_equals" => each(&|k, v| vec![format!("--{k}"), s(v)]),
        "args_no_boolean_flags" => each(&|k, v| match v {
            Value::Bool(true) => vec![format!("--{k}")],
            Value::Bool(false) => vec![],
            v => vec![format!("--{k}={}", s(v))],
        }),
        "args_json" => vec![args_json(ctx.params)],
        "args_json_file" => vec![ctx.args_json_file.into()],
        // A directory kept across the trial's attempts (auto_fix), put in
        // as the fixer's word and replaced as each attempt runs.
        "resume" => vec![crate::autofix::RESUME_WORD.into()],
        "config" => match ctx.config {
            Some(path) => vec![path.into()],
            None => {
                return Err(common::bad_input!(
                    "command: `${{config}}` needs a config: give the sweep --config BASE.yaml (each trial gets it with its parameters applied)"
                ))
            }
        },
        other => {
            let hint = if other.starts_with("envvar:") {
                " (${envvar:NAME} takes a NAME of upper-case letters, digits and _)"
            } else {
                ""
            };
            return Err(common::bad_input!(
                "command: unknown macro `${{{other}}}`{hint}; the macros are {}",
                MACROS.join(", ")
            ));
        }
    })
}

#[cfg(test)]
mod tests;

/// The argv as a shell would show it (for logs and messages: words of
/// plain characters as they are, others single-quoted).
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
