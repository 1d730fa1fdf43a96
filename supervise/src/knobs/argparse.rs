//! A Python program's flags read from argparse itself: the program run as
//! `__main__` under a small wrapper (argparse_dump.py) that stops at its
//! first parse of its own command line and prints every option of that
//! parser (its strings, default, type, action, nargs, choices, help) as
//! JSON. Defaults are then known exactly, also those a `--help` without
//! `(default: ...)` never shows (a plain argparse script's). The program
//! runs with `--help` where its arguments start, as `read_help` runs it: a
//! Hugging Face script that takes one JSON file otherwise reaches its
//! parser, and one that never parses with argparse (click) prints its help,
//! which the caller reads instead.

use super::help::{Defined, Flag, Form};
use super::program::{Main, Program};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const WRAPPER: &str = include_str!("argparse_dump.py");
/// What starts the wrapper's line among the program's own output.
const MARKER: &str = "@@trainguard-argparse@@";

/// What a run of the wrapper gave.
pub struct Ran {
    /// The parser's options, where the program reached it.
    pub parsed: Option<Parsed>,
    /// Its stdout and stderr: its help, where it printed one instead.
    pub out: [String; 2],
}

/// A parser's options, and the file of the program that defined it.
pub struct Parsed {
    pub defined: Defined,
    pub program: Option<PathBuf>,
}

/// Runs `argv`'s program `p` under the wrapper in `cwd`; None when it could
/// not start or ran past `timeout`.
pub fn run(argv: &[String], p: &Program, cwd: Option<&Path>, timeout: Duration) -> Option<Ran> {
    let mut cmd = Command::new(&p.python);
    cmd.args(["-c", WRAPPER, MARKER]);
    match &p.main {
        Main::Script(path) => cmd.arg(path),
        Main::Module(m) => cmd.args(["-m", m]),
    };
    cmd.arg("--help").args(&argv[p.args_at..]);
    let [stdout, stderr] = super::capture(cmd, cwd, timeout)?;
    Some(Ran {
        parsed: parsed(&stdout),
        out: [stdout, stderr],
    })
}

/// The wrapper's line in a program's stdout, read.
pub fn parsed(stdout: &str) -> Option<Parsed> {
    let line = stdout.lines().rev().find_map(|l| l.strip_prefix(MARKER))?;
    let dump: Value = serde_json::from_str(line).ok()?;
    let mut flags: Vec<Flag> = Vec::new();
    for f in dump["actions"].as_array()?.iter().filter_map(flag) {
        // A pre-parser's option the main parser defines too: the main one's.
        let known = |g: &Flag| g.names.iter().any(|n| f.names.contains(n));
        if !flags.iter().any(known) {
            flags.push(f);
        }
    }
    Some(Parsed {
        defined: Defined {
            flags,
            ..Defined::default()
        },
        program: dump["program"].as_str().map(PathBuf::from),
    })
}

/// An option as a flag; None for a positional argument.
fn flag(a: &Value) -> Option<Flag> {
    let text = |key: &str| a[key].as_str().map(str::to_string);
    let mut names: Vec<String> = a["option_strings"]
        .as_array()?
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    if names.is_empty() {
        return None;
    }
    // Long names first, as the help's reader keeps them.
    names.sort_by_key(|n| !n.starts_with("--"));
    let nargs = &a["nargs"];
    let form = match a["action"].as_str().unwrap_or_default() {
        "BooleanOptionalAction" => {
            let off = names
                .iter()
                .position(|n| n.starts_with("--no-"))
                .map(|i| names.remove(i));
            Form::Switch { off }
        }
        "_StoreTrueAction" | "_StoreFalseAction" | "_StoreConstAction" | "_AppendConstAction"
        | "_CountAction" | "_HelpAction" | "_VersionAction" => Form::Switch { off: None },
        _ if nargs.as_u64() == Some(0) => Form::Switch { off: None },
        // Hugging Face's bool fields: `--x [X]`, a bare `--x` is true.
        _ if nargs.as_str() == Some("?") && a["const"].as_str() == Some("True") => {
            Form::OptionalBool
        }
        _ => Form::Value {
            choices: a["choices"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        },
    };
    Some(Flag {
        names,
        form,
        default: text("default"),
        help: text("help").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrappers_line_as_flags() {
        let out = format!(
            "a line the program printed\n{MARKER}{}\n",
            serde_json::json!({"program": "/w/t.py", "actions": [
                {"option_strings": ["-h", "--help"], "default": null, "action": "_HelpAction", "nargs": 0, "const": null, "choices": null, "help": "show this help message and exit"},
                {"option_strings": [], "dest": "data", "default": "None", "action": "_StoreAction", "nargs": null, "const": null, "choices": null, "help": null},
                {"option_strings": ["-b", "--batch-size"], "default": "64", "action": "_StoreAction", "nargs": null, "const": null, "choices": null, "help": null},
                {"option_strings": ["--compile", "--no-compile"], "default": "True", "action": "BooleanOptionalAction", "nargs": 0, "const": null, "choices": null, "help": null},
                {"option_strings": ["--bf16"], "default": "False", "action": "_StoreAction", "nargs": "?", "const": "True", "choices": null, "help": "bf16"},
                {"option_strings": ["--mp"], "default": "no", "action": "_StoreAction", "nargs": null, "const": null, "choices": ["no", "bf16"], "help": null},
                {"option_strings": ["--ckpt"], "default": "False", "action": "_StoreTrueAction", "nargs": 0, "const": "True", "choices": null, "help": "memory"}
            ]})
        );
        let p = parsed(&out).unwrap();
        assert_eq!(p.program, Some(PathBuf::from("/w/t.py")));
        let forms: Vec<(&str, &Form, Option<&str>)> = p
            .defined
            .flags
            .iter()
            .map(|f| (f.name(), &f.form, f.default.as_deref()))
            .collect();
        let switch = Form::Switch { off: None };
        let compile = Form::Switch {
            off: Some("--no-compile".into()),
        };
        let value = Form::Value { choices: vec![] };
        let mp = Form::Value {
            choices: vec!["no".into(), "bf16".into()],
        };
        assert_eq!(
            forms,
            [
                ("--help", &switch, None),
                ("--batch-size", &value, Some("64")),
                ("--compile", &compile, Some("True")),
                ("--bf16", &Form::OptionalBool, Some("False")),
                ("--mp", &mp, Some("no")),
                ("--ckpt", &switch, Some("False")),
            ]
        );
        assert_eq!(p.defined.flags[1].names, ["--batch-size", "-b"]);
        assert_eq!(p.defined.flags[5].help, "memory");
        assert!(parsed("no marker here\n").is_none());
        assert!(parsed(&format!("{MARKER}{{not json")).is_none());
    }
}
