//! The best trial, ready to run again: its config (best_config.yaml) and
//! its command (best_command.sh). A program that takes flags has no config
//! to hand over: its command line is what reproduces it. Both carry the
//! values its last attempt ran with (`auto_fix` may have changed some).

use crate::space::Space;
use crate::trial::{ParamValue, Trial};
use common::wire::run_dir::{SweepDir, TrialDir, BEST_CONFIG};
use common::wire::sweep::{BestCommand, Settings};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The best trial's config: the base with its values; for a program, its
/// `${config}` text, or without one its parameters as YAML.
pub(super) fn config_text(
    settings: &Settings,
    space: &Space,
    trial: &Trial,
) -> anyhow::Result<String> {
    if space.program.is_none() {
        return Ok(space.apply(&settings.base, &trial.params)?.to_yaml());
    }
    // auto_fix: the settings its last attempt ran with, so that the config
    // does not reproduce the failure its first attempt met.
    let mut note = String::new();
    if let Some(changes) = trial.user_attrs.get("auto_fix").and_then(Value::as_array) {
        note.push_str(
            "# auto_fix: the trial ran these changes (its last attempt's settings are below):\n",
        );
        for c in changes.iter().filter_map(Value::as_str) {
            note.push_str(&format!("#   {c}\n"));
        }
    }
    if let Some(used) = trial.user_attrs.get("config_used").and_then(Value::as_str) {
        if let Ok(text) = std::fs::read_to_string(used) {
            return Ok(format!("{note}{text}"));
        }
    }
    let values = values(space, trial);
    let text = match &settings.base_text {
        Some(base) => Space::trial_config_text(base, &settings.base_name, &values)?,
        None => {
            let map: serde_yaml::Mapping = space
                .program_params(&values)
                .into_iter()
                .map(|(k, v)| (k.into(), serde_yaml::to_value(v).unwrap_or_default()))
                .collect();
            serde_yaml::to_string(&map)?
        }
    };
    Ok(format!("{note}{text}"))
}

/// A program trial's values as its last attempt ran: the space's fixed
/// ones, its sampled ones, and what `auto_fix` changed (`effective_params`).
fn values(space: &Space, trial: &Trial) -> BTreeMap<String, ParamValue> {
    let mut values = space.search_space().fixed;
    values.extend(trial.params.clone());
    if let Some(eff) = trial
        .user_attrs
        .get("effective_params")
        .and_then(Value::as_object)
    {
        for (k, v) in eff {
            if let Some(p) = values.get(k).cloned() {
                values.insert(k.clone(), with_json(&p, v));
            }
        }
    }
    values
}

/// `v` (JSON) as a value of the kind `like` is.
fn with_json(like: &ParamValue, v: &Value) -> ParamValue {
    use crate::trial::Choice;
    match (like, v) {
        (ParamValue::Int(_), v) if v.is_i64() => ParamValue::Int(v.as_i64().unwrap_or_default()),
        (ParamValue::Float(_), v) if v.is_number() => {
            ParamValue::Float(v.as_f64().unwrap_or_default())
        }
        (_, Value::Bool(b)) => ParamValue::Choice(Choice::Bool(*b)),
        (_, v) if v.is_i64() => ParamValue::Choice(Choice::Int(v.as_i64().unwrap_or_default())),
        (_, Value::String(s)) => ParamValue::Choice(Choice::Str(s.clone())),
        _ => like.clone(),
    }
}

/// The best trial's command: a program's, the space's `command` expanded
/// with its values, in the directory it ran in, `${config}` being
/// best_config.yaml; our model's, `train --config best_config.yaml`. `dir`
/// is the sweep's directory (None: a database's study read without --out:
/// the files are named, not written).
pub(super) fn command(
    settings: &Settings,
    space: &Space,
    trial: &Trial,
    dir: Option<&Path>,
    train: &Path,
) -> anyhow::Result<BestCommand> {
    let dir = dir.map(|d| std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()));
    let config = match &dir {
        Some(d) => SweepDir::new(d).best_config(),
        None => PathBuf::from(BEST_CONFIG),
    };
    let config = config.display().to_string();
    let launch = crate::program::launch_dir(settings);
    let Some(program) = &space.program else {
        return Ok(BestCommand {
            cwd: launch.display().to_string(),
            argv: vec![train.display().to_string(), "--config".into(), config],
        });
    };
    let trial_dir = match &dir {
        Some(d) => SweepDir::new(d).trial(trial.number),
        None => TrialDir::new(format!("trials/{:04}", trial.number)),
    };
    let params = space.program_params(&values(space, trial));
    let uses_config = crate::program::uses_config(program.command.as_deref());
    let get = |k: &str| std::env::var(k).ok();
    let (cwd, argv) = crate::program::command_words(
        program,
        settings,
        &launch,
        &trial_dir,
        &params,
        uses_config.then_some(config.as_str()),
        &get,
    )?;
    Ok(BestCommand {
        cwd: cwd.display().to_string(),
        argv,
    })
}

/// `cd DIR && WORDS`, each word quoted for the shell where it needs it.
pub(super) fn command_line(c: &BestCommand) -> String {
    let words: Vec<String> = c.argv.iter().map(|w| sh_word(w)).collect();
    format!("cd {} && {}", sh_word(&c.cwd), words.join(" "))
}

/// best_command.sh: the command, with a header that says whose it is.
pub(super) fn script(c: &BestCommand, header: &str) -> String {
    let words: Vec<String> = c.argv.iter().map(|w| sh_word(w)).collect();
    format!(
        "#!/bin/sh\n# {header}\n# Its command, from the directory it ran in; its config is {BEST_CONFIG} beside this file.\ncd {} || exit\nexec {}\n",
        sh_word(&c.cwd),
        words.join(" ")
    )
}

/// A word as the shell reads it back: as it is when only safe characters
/// make it, else in single quotes.
fn sh_word(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_where_the_shell_needs_it() {
        assert_eq!(sh_word("--lr=0.001"), "--lr=0.001");
        assert_eq!(sh_word("/a b/c"), "'/a b/c'");
        assert_eq!(sh_word("it's"), r"'it'\''s'");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("{\"a\": 1}"), "'{\"a\": 1}'");
        let c = BestCommand {
            cwd: "/p q".into(),
            argv: vec!["python".into(), "train.py".into(), "--opt=a b".into()],
        };
        assert_eq!(command_line(&c), "cd '/p q' && python train.py '--opt=a b'");
        assert!(
            script(&c, "best").ends_with("cd '/p q' || exit\nexec python train.py '--opt=a b'\n")
        );
    }
}
