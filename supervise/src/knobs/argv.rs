//! Where a command line gives the program's own flags, read as argparse
//! reads them, and the edits that change one in the form it is written.
//!
//! The program's arguments start after its script (`python -u train.py`,
//! or the first word ending in `.py` after a launcher: `torchrun
//! --nproc_per_node 8 train.py`, `accelerate launch train.py`, `python -m
//! torch.distributed.run ... train.py`, a wrapper's `uv run train.py`),
//! after `python -m MODULE` (`uv run python -m pkg.train` too), or after
//! the executable (`./train.py`); they end at a bare `--` (after which argparse reads
//! everything as positional). A word is an option as argparse's
//! `_parse_optional` decides: it starts with `-`, is not `-` alone, not a
//! negative number and holds no space; a flag that takes a value takes the
//! next word only when that is not an option (`--output_dir --batch_size 8`:
//! argparse refuses the first and reads the second as a flag, so do we).

use super::help::{Defined, Flag, Form};

/// Where the program's own arguments are in `argv`: `start..end`.
pub fn program_args(argv: &[String]) -> std::ops::Range<usize> {
    let start = program_start(argv).min(argv.len());
    let end = argv[start..]
        .iter()
        .position(|w| w == "--")
        .map_or(argv.len(), |p| start + p);
    start..end
}

/// Launchers that run a script given after their own options.
const LAUNCHERS: [&str; 3] = ["torchrun", "accelerate", "deepspeed"];
const LAUNCHER_MODULES: [&str; 4] = [
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate.commands.launch",
    "deepspeed.launcher.runner",
];

fn program_start(argv: &[String]) -> usize {
    let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
    let mut i = 0;
    // `env A=1 python ...`
    if argv.first().is_some_and(|w| base(w) == "env") {
        i = 1;
        while argv
            .get(i)
            .is_some_and(|w| w.contains('=') || w.starts_with('-'))
        {
            i += 1;
        }
    }
    let Some(program) = argv.get(i) else {
        return argv.len();
    };
    let after_script = |from: usize| {
        argv.iter()
            .skip(from)
            .position(|w| w.ends_with(".py"))
            .map_or(from, |p| from + p + 1)
    };
    if LAUNCHERS.contains(&base(program).as_str()) {
        return after_script(i + 1);
    }
    // `python ...`, also under a wrapper (`uv run python`, `conda run -n x python`).
    let is_python = |w: &String| base(w).starts_with("python") && !w.ends_with(".py");
    let Some(python) = argv.iter().skip(i).position(is_python).map(|p| i + p) else {
        // An executable (`./train.py`), or a wrapper's script (`uv run t.py`).
        return after_script(i + 1);
    };
    let i = python;
    // The interpreter's options, then its script or `-m MODULE`.
    let mut j = i + 1;
    while let Some(w) = argv.get(j).filter(|w| w.starts_with('-') && w.len() > 1) {
        match w.as_str() {
            "-m" => {
                let module = argv.get(j + 1).map_or("", String::as_str);
                if LAUNCHER_MODULES.contains(&module) {
                    return after_script(j + 2);
                }
                return j + 2;
            }
            "-c" => return j + 2,
            "-W" | "-X" => j += 2,
            _ => j += 1,
        }
    }
    j + 1
}

/// Whether argparse reads `word` as an option rather than a value.
pub fn is_option(word: &str) -> bool {
    word.starts_with('-') && word != "-" && !is_negative_number(word) && !word.contains(' ')
}

/// argparse's `^-\d+$|^-\d*\.\d+$`.
fn is_negative_number(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('-') else {
        return false;
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    match rest.split_once('.') {
        None => !rest.is_empty() && digits(rest),
        Some((a, b)) => digits(a) && !b.is_empty() && digits(b),
    }
}

/// How one occurrence of a flag carries its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Carried {
    /// `--x=64`.
    Joined(String),
    /// `--x 64`: the value is the next word.
    Next(String),
    /// `-b64`: a short flag's value in the same word.
    Attached(String),
    /// `--x` alone.
    Bare,
}

/// One occurrence of a defined flag in a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    /// Its index in `Defined::flags`.
    pub flag: usize,
    /// The index of the flag's word in argv.
    pub at: usize,
    /// The name as written (an abbreviation argparse accepts included).
    pub written: String,
    pub carried: Carried,
    /// Written as the switch's `off` name (`--no-compile`).
    pub off: bool,
}

impl Occurrence {
    pub fn value(&self) -> Option<&str> {
        match &self.carried {
            Carried::Joined(v) | Carried::Next(v) | Carried::Attached(v) => Some(v),
            Carried::Bare => None,
        }
    }
}

/// The defined flags `argv` gives, in order.
pub fn scan(argv: &[String], defined: &Defined) -> Vec<Occurrence> {
    let range = program_args(argv);
    let mut found = Vec::new();
    let mut i = range.start;
    while i < range.end {
        let word = &argv[i];
        let at = i;
        i += 1;
        if !is_option(word) {
            continue;
        }
        let (name, joined) = match word.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (word.as_str(), None),
        };
        let Some((flag, off)) = resolve(defined, name) else {
            if let Some(o) = attached(defined, word, at) {
                found.push(o);
            }
            continue;
        };
        let next = argv[i..range.end].first().filter(|w| !is_option(w));
        // An optional bool takes the next word only when it is a bool: a
        // command that runs has no other there (argparse would refuse it),
        // and a positional after `--bf16` stays one.
        let takes_next = match &defined.flags[flag].form {
            Form::Switch { .. } => false,
            Form::OptionalBool => next.is_some_and(|w| super::flags::hf_bool(w).is_some()),
            Form::Value { .. } => true,
        };
        let carried = match (joined, next) {
            (Some(v), _) => Carried::Joined(v),
            (None, Some(v)) if takes_next => {
                i += 1;
                Carried::Next(v.clone())
            }
            _ => Carried::Bare,
        };
        found.push(Occurrence {
            flag,
            at,
            written: name.to_string(),
            carried,
            off,
        });
    }
    found
}

/// `-b64`: a short flag that takes a value, with it.
fn attached(defined: &Defined, word: &str, at: usize) -> Option<Occurrence> {
    let short = word
        .get(..2)
        .filter(|s| !s.ends_with('-') && word.len() > 2)?;
    let flag = defined
        .flags
        .iter()
        .position(|f| matches!(f.form, Form::Value { .. }) && f.names.iter().any(|n| n == short))?;
    Some(Occurrence {
        flag,
        at,
        written: short.to_string(),
        carried: Carried::Attached(word[2..].to_string()),
        off: false,
    })
}

/// The flag `name` stands for: exactly one of its names, a switch's `off`
/// name, or (argparse's `allow_abbrev`) the start of exactly one flag's
/// long names.
fn resolve(defined: &Defined, name: &str) -> Option<(usize, bool)> {
    let flags = &defined.flags;
    if let Some(i) = flags.iter().position(|f| f.names.iter().any(|n| n == name)) {
        return Some((i, false));
    }
    let is_off = |f: &Flag| matches!(&f.form, Form::Switch { off: Some(o) } if o == name);
    if let Some(i) = flags.iter().position(is_off) {
        return Some((i, true));
    }
    if !name.starts_with("--") || name.len() < 3 {
        return None;
    }
    let mut starts = flags
        .iter()
        .enumerate()
        .filter(|(_, f)| f.long_names().any(|n| n.starts_with(name)));
    match (starts.next(), starts.next()) {
        (Some((i, _)), None) => Some((i, false)),
        _ => None,
    }
}

/// The value the last `--x V` or `--x=V` gives, for `--x` any of `names`
/// (as written, dashes included); None when no such flag carries one.
pub fn value_of(argv: &[String], names: &[&str]) -> Option<String> {
    let range = program_args(argv);
    let words = &argv[range];
    let mut value = None;
    for (i, word) in words.iter().enumerate() {
        if let Some((n, v)) = word.split_once('=') {
            if is_option(word) && names.contains(&n) {
                value = Some(v.to_string());
            }
        } else if names.contains(&word.as_str()) {
            if let Some(v) = words.get(i + 1).filter(|w| !is_option(w)) {
                value = Some(v.clone());
            }
        }
    }
    value
}

/// Where a flag added to `argv` goes: at the end of the program's
/// arguments (before a bare `--`).
pub fn insert_at(argv: &[String]) -> usize {
    program_args(argv).end
}

/// `--x V` to add, or `--x=V` when V would read as an option.
pub fn flag_words(name: &str, value: &str) -> Vec<String> {
    if is_option(value) || value.is_empty() {
        vec![format!("{name}={value}")]
    } else {
        vec![name.to_string(), value.to_string()]
    }
}
