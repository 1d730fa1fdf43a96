//! The config files a command names, and cfgcheck's findings on them: an
//! error fails the gate before the smoke runs. `config_findings` reads each
//! as cfgcheck does (`diagnose::any_config`: trainguard's, Hugging Face's,
//! Axolotl's or a project's own config, recognised from its keys).

use crate::rows::{Check, Form, Status};
use common::input;
use diagnose::any_config::{self, Format};
use diagnose::rules::{Finding, Severity, Target};
use std::path::{Path, PathBuf};

/// The config check: cfgcheck's findings on each config file the command
/// names; an error fails it (and the gate, before the smoke runs).
pub fn config_check(argv: &[String], target: &Target) -> Check {
    let id = "config";
    let files = config_files(argv);
    if files.is_empty() {
        return Form::Command.row(
            id,
            Status::Skip,
            "no YAML or JSON file named in the command",
            None,
        );
    }
    let (mut saw, mut errors, mut warned, mut checked) = (Vec::new(), Vec::new(), false, false);
    for f in &files {
        let name = f.display();
        match config_findings(f, target) {
            Findings::NotOurs => saw.push(format!(
                "{name}: not a config cfgcheck reads (no key its rules read): not checked"
            )),
            Findings::Refused(why) => {
                saw.push(why.clone());
                errors.push(format!("fix {name}: {why}"));
            }
            Findings::Checked(format, findings) => {
                checked = true;
                // trainguard's own configs are named as before; others with their format.
                let name = match format {
                    Format::Trainguard => name.to_string(),
                    f => format!("{name} ({})", f.as_str()),
                };
                let list = |s: Severity| -> Vec<String> {
                    findings
                        .iter()
                        .filter(|x| x.severity == s)
                        .map(|x| match x.line {
                            Some(l) => format!("{} (line {l})", x.id),
                            None => x.id.to_string(),
                        })
                        .collect()
                };
                let (e, w) = (list(Severity::Error), list(Severity::Warning));
                if let Some(first) = findings.iter().find(|x| x.severity == Severity::Error) {
                    errors.push(format!("{} (or `cfgcheck --fix {name}`)", first.fix));
                }
                warned |= !w.is_empty();
                saw.push(match (e.is_empty(), w.is_empty()) {
                    (true, true) => format!("{name}: no findings"),
                    (true, false) => format!("{name}: no errors; warnings: {}", w.join(", ")),
                    (false, true) => format!("{name}: errors: {}", e.join(", ")),
                    (false, false) => format!(
                        "{name}: errors: {}; warnings: {}",
                        e.join(", "),
                        w.join(", ")
                    ),
                });
            }
        }
    }
    let saw = saw.join("; ");
    if !errors.is_empty() {
        Form::Command.row(id, Status::Fail, saw, Some(errors.join("; ")))
    } else if warned {
        Form::Command.row(id, Status::Warn, saw, None)
    } else if checked {
        Form::Command.row(id, Status::Pass, saw, None)
    } else {
        Form::Command.row(id, Status::Skip, saw, None)
    }
}

/// The files the command names that are YAML or JSON (a word, or the value
/// of `--flag=FILE`), as given, each once.
pub fn config_files(argv: &[String]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for word in argv.iter().skip(1) {
        let word = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value,
            _ => word.as_str(),
        };
        let p = Path::new(word);
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if ["yaml", "yml", "json"].contains(&ext.to_ascii_lowercase().as_str())
            && p.is_file()
            && !files.iter().any(|f| f == p)
        {
            files.push(p.to_path_buf());
        }
    }
    files
}

/// cfgcheck's verdict on one config file.
pub enum Findings {
    /// Read as `format` (trainguard's schema, Hugging Face's, Axolotl's, a
    /// project's own nesting): the rules' findings.
    Checked(Format, Vec<Finding>),
    /// Recognised as trainguard's config, but it does not load (an unknown
    /// key, a bad value): an error, as cfgcheck words it (our schema stays
    /// strict).
    Refused(String),
    /// Not a config cfgcheck reads (not YAML or JSON, or none of the keys
    /// its rules read): not checked.
    NotOurs,
}

/// cfgcheck's findings on a config file named in the command, read as
/// `cfgcheck FILE` reads it (`diagnose::any_config::check`: the format
/// recognised from its keys).
pub fn config_findings(path: &Path, target: &Target) -> Findings {
    let Ok(input) = input::read(path) else {
        return Findings::NotOurs;
    };
    match any_config::check(&input, None, target) {
        Ok(c) => Findings::Checked(c.format, c.findings),
        Err(e) => match any_config::format_of(&input) {
            Ok(Format::Trainguard) => Findings::Refused(format!("{e:#}")),
            _ => Findings::NotOurs,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_are_the_yaml_and_json_words_that_exist() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let at = |p: &str| repo.join(p).display().to_string();
        let argv = vec![
            "python".to_string(),
            "main.py".into(),
            "--config".into(),
            at("configs/demo_cpu.yaml"),
            format!("--other={}", at("configs/gpus/t4.yaml")),
            at("nope.yaml"),
            at("configs/demo_cpu.yaml"),
            at("Cargo.toml"),
        ];
        assert_eq!(
            config_files(&argv),
            [
                PathBuf::from(at("configs/demo_cpu.yaml")),
                PathBuf::from(at("configs/gpus/t4.yaml"))
            ]
        );
    }

    #[test]
    fn our_keys_with_a_typo_stay_strict_and_other_configs_are_read_as_theirs() {
        let format = |text: &str| {
            any_config::format_of(&common::input::Input {
                name: "c.yaml".into(),
                text: text.into(),
            })
            .ok()
        };
        assert_eq!(
            format("epochs: 3\nbatch_size: 8\nlearnin_rate: 0.1\n"),
            Some(Format::Trainguard)
        );
        // A lone typo of ours is ours too: refused, never read loosely.
        assert_eq!(format("learnin_rate: 0.1\n"), Some(Format::Trainguard));
        assert_eq!(
            format("epochs: 3\nlr: 0.05\nfault: nan\n"),
            Some(Format::Generic)
        );
        assert_eq!(
            format(
                r#"{"per_device_train_batch_size": 8, "gradient_checkpointing": true, "torch_compile_mode": "reduce-overhead"}"#
            ),
            Some(Format::Hf)
        );
        assert_eq!(format("- a list\n"), None);
    }
}
