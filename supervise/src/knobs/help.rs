//! The option flags a program defines, read from its `--help` as Python's
//! argparse prints it (Hugging Face's `HfArgumentParser` is an argparse
//! parser too): each entry's names, whether it takes a value, and its
//! default where the help shows one (`(default: 8)`: HF always,
//! argparse's `ArgumentDefaultsHelpFormatter` for flags with a help text).
//!
//! argparse prints an option entry as its invocation (`--x X, --y X`, at an
//! indent of 2) then its help, on the same line after two spaces or on the
//! next lines at the help column (at least 2 further to the right). Only
//! the help wraps (textwrap: at spaces, after a hyphen, and inside a word
//! longer than the line); the invocation never does.

/// How a flag is given on a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// No value (argparse's `store_true`, `store_false`, `count`): present
    /// means on. `off`: the flag that turns it off, where one is defined
    /// with it (`BooleanOptionalAction`'s `--no-x`).
    Switch { off: Option<String> },
    /// An optional value (`--x [X]`): HF's bool fields, which read
    /// `true`/`false` and take a bare `--x` as true.
    OptionalBool,
    /// A value (`--x X`); `choices` when the help lists them (`{no,fp16,bf16}`).
    Value { choices: Vec<String> },
}

/// One option the program defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    /// As printed, dashes included: long names first in the help's order
    /// (`--per_device_train_batch_size`, `--per-device-train-batch-size`),
    /// then short ones (`-b`), which a command may use but knobs never name.
    pub names: Vec<String>,
    pub form: Form,
    /// The text after `(default: ` in its help, as printed (`8`, `None`,
    /// `False`); from argparse, the default as `%(default)s` prints it.
    pub default: Option<String>,
    /// Its help text, wrapped lines joined ("" where it has none).
    pub help: String,
}

impl Flag {
    /// Its first long name (what is added to a command), else its first name.
    pub fn name(&self) -> &str {
        self.names
            .iter()
            .find(|n| n.starts_with("--"))
            .unwrap_or(&self.names[0])
    }

    pub fn long_names(&self) -> impl Iterator<Item = &str> {
        self.names
            .iter()
            .map(String::as_str)
            .filter(|n| n.starts_with("--"))
    }
}

/// The option flags of one program (its `--help`, or argparse itself).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defined {
    pub flags: Vec<Flag>,
    /// Its code calls or imports torch.utils.checkpoint: a bare
    /// `--checkpointing` switch there is activation checkpointing.
    pub checkpoints_in_code: bool,
}

impl Defined {
    /// Reads the option entries of `help`; text it cannot read as one is
    /// skipped (a program with no options, or no help, defines none here).
    pub fn parse(help: &str) -> Defined {
        let text = strip_ansi(help);
        let mut flags: Vec<Flag> = Vec::new();
        let mut entry: Option<(Flag, String)> = None;
        // Entries come under a section heading (`options:`), which keeps a
        // raw description's `  --x: ...` lines out.
        let mut in_section = false;
        for line in text.lines() {
            let body = line.trim_start_matches(' ');
            let indent = line.len() - body.len();
            if body.trim().is_empty() || indent == 0 || (1..=5).contains(&indent) {
                if let Some((flag, help)) = entry.take() {
                    push(&mut flags, flag, &help);
                }
            }
            if body.trim().is_empty() {
                continue;
            }
            if indent == 0 {
                in_section = body.trim_end().ends_with(':') && !body.starts_with("usage:");
            } else if indent <= 5 {
                if in_section {
                    entry = entry_line(body);
                }
            } else if let Some((_, help)) = entry.as_mut() {
                join_wrapped(help, body.trim());
            }
        }
        if let Some((flag, help)) = entry {
            push(&mut flags, flag, &help);
        }
        Defined {
            flags,
            checkpoints_in_code: false,
        }
    }

    /// The flag one of whose names is exactly `name` (dashes included).
    pub fn get(&self, name: &str) -> Option<&Flag> {
        self.flags
            .iter()
            .find(|f| f.names.iter().any(|n| n == name))
    }

    /// The flag with a long name that is `name` with `-` and `_` alike
    /// (`per-device-train-batch-size` finds `--per_device_train_batch_size`);
    /// `name` with or without its leading dashes.
    pub fn find(&self, name: &str) -> Option<&Flag> {
        self.position(name).map(|i| &self.flags[i])
    }

    /// [`Defined::find`]'s flag, as its index in `flags`.
    pub fn position(&self, name: &str) -> Option<usize> {
        let want = bare(name);
        self.flags
            .iter()
            .position(|f| f.long_names().any(|n| bare(n) == want))
    }

    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }
}

/// A flag's name without its leading dashes, `-` read as `_`.
pub fn bare(name: &str) -> String {
    name.trim_start_matches('-').replace('-', "_")
}

/// Keeps an entry unless one of its names came before (a launcher that runs
/// the program several times prints its help several times).
fn push(flags: &mut Vec<Flag>, mut flag: Flag, help: &str) {
    if flags
        .iter()
        .any(|f| f.names.iter().any(|n| flag.names.contains(n)))
    {
        return;
    }
    flag.default = default_of(help);
    flag.help = help.to_string();
    flags.push(flag);
}

/// An entry's first line: an option's invocation, and the start of its
/// help; None for a positional argument or text that is not an entry.
fn entry_line(body: &str) -> Option<(Flag, String)> {
    let (invocation, help) = match body.find("  ") {
        Some(i) => (&body[..i], body[i..].trim()),
        None => (body.trim_end(), ""),
    };
    let mut long = Vec::new();
    let mut short = Vec::new();
    let mut metavar = "";
    for part in invocation.split(", ") {
        let (name, rest) = part.split_once(' ').unwrap_or((part, ""));
        let valid = name.len() >= 2
            && name.starts_with('-')
            && name != "--"
            && !name.contains('=')
            && name[1..].chars().all(|c| !c.is_whitespace() && c != ',');
        if !valid {
            return None;
        }
        if name.starts_with("--") {
            long.push(name.to_string());
        } else {
            short.push(name.to_string());
        }
        // Python 3.13 prints the metavar after the last name only.
        if !rest.trim().is_empty() {
            metavar = rest.trim();
        }
    }
    let form = form_of(metavar, &mut long);
    long.extend(short);
    let flag = Flag {
        names: long,
        form,
        default: None,
        help: String::new(),
    };
    Some((flag, help.to_string()))
}

/// The form a metavar shows; a `BooleanOptionalAction`'s `--no-x` is taken
/// out of `names` as the switch's `off`.
fn form_of(metavar: &str, names: &mut Vec<String>) -> Form {
    if metavar.is_empty() {
        let off = names.iter().position(|n| {
            let rest = n.strip_prefix("--no-").or_else(|| n.strip_prefix("--no_"));
            rest.is_some_and(|r| names.iter().any(|m| m.strip_prefix("--") == Some(r)))
        });
        return Form::Switch {
            off: off.map(|i| names.remove(i)),
        };
    }
    let single = !metavar.contains(' ');
    if single && metavar.starts_with('[') && metavar.ends_with(']') {
        let inner = &metavar[1..metavar.len() - 1];
        if let Some(choices) = choices_of(inner) {
            return Form::Value { choices };
        }
        return Form::OptionalBool;
    }
    let first = metavar.split(' ').next().unwrap_or(metavar);
    Form::Value {
        choices: choices_of(first).unwrap_or_default(),
    }
}

/// `{no,fp16,bf16}` as its choices.
fn choices_of(word: &str) -> Option<Vec<String>> {
    let inner = word.strip_prefix('{')?.strip_suffix('}')?;
    Some(inner.split(',').map(String::from).collect())
}

/// Adds a wrapped help line: textwrap broke a hyphenated word after its
/// hyphen (`reduce-` / `overhead`), else at a space.
fn join_wrapped(help: &mut String, line: &str) {
    let after_hyphen = help.ends_with('-')
        && help[..help.len() - 1]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
    if !help.is_empty() && !after_hyphen {
        help.push(' ');
    }
    help.push_str(line);
}

/// The last `(default: X)` of a help text: X up to its closing parenthesis.
fn default_of(help: &str) -> Option<String> {
    let start = help.rfind("(default:")? + "(default:".len();
    let rest = &help[start..];
    let mut depth = 1;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(rest[..i].trim().to_string());
                }
            }
            _ => {}
        }
    }
    None
}

/// Without terminal colour codes (Python 3.14's argparse colours its help
/// when `FORCE_COLOR` is set).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
