//! The knobs of a failed run's fix (`diagnose::knobs`) in the command's own
//! flags (issue 33): the flags its program defines, read from its argparse
//! parser itself where it is a Python program that reaches one
//! (`program`, `argparse`), else from its `--help` (`help`); `read_flags`
//! and `read_help` are the functions here that run anything. Where the
//! command gives them, read as argparse reads it (`argv`); the knobs they
//! hold and the command with new values (`flags`, `edit`). A flag the
//! program does not define is never added.

mod argparse;
pub mod argv;
mod edit;
pub mod flags;
pub mod help;
pub mod program;
#[cfg(test)]
mod tests;

pub use argv::value_of;
pub use flags::{
    found, known_names, turn, FlagKnob, Source, CHECKPOINTING_SWITCHES, PRECISION_PAIR,
};
pub use help::{Defined, Flag, Form};

use diagnose::keys::Scalar;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a caller lets a program print its help (or reach its parser).
pub const HELP_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a program's flags were read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// Its argparse parser, at its first parse of its command line.
    Argparse,
    /// Its `--help` text; why argparse itself was not read.
    Help(String),
}

impl ReadFrom {
    /// In words, for the run's account.
    pub fn words(&self) -> String {
        match self {
            ReadFrom::Argparse => "argparse: the program's own parser, read where it parses its command line (defaults exact)".into(),
            ReadFrom::Help(why) => format!("--help: its text ({why}); a default it does not print is not known"),
        }
    }
}

/// A program's flags, and where they were read from.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramFlags {
    pub defined: Defined,
    pub from: ReadFrom,
}

/// The flags `argv`'s program defines: from argparse where it is a Python
/// program that reaches its parser, else from its `--help`; with whether
/// its code checkpoints activations (its main file scanned). None when
/// neither lists an option flag.
pub fn read_flags(argv: &[String], cwd: Option<&Path>, timeout: Duration) -> Option<ProgramFlags> {
    let Some(p) = program::of(argv, cwd) else {
        let help = read_help(argv, cwd, timeout)?;
        let why = "the command's Python interpreter and program are not known".to_string();
        return Some(ProgramFlags {
            defined: Defined::parse(&help),
            from: ReadFrom::Help(why),
        });
    };
    let script = match &p.main {
        program::Main::Script(path) => Some(path.clone()),
        program::Main::Module(_) => None,
    };
    let ran = argparse::run(argv, &p, cwd, timeout)?;
    let (mut defined, from, file) = match ran.parsed {
        Some(parsed) => (
            parsed.defined,
            ReadFrom::Argparse,
            parsed.program.or(script),
        ),
        None => {
            let text = ran
                .out
                .into_iter()
                .find(|t| !Defined::parse(t).is_empty())?;
            let why = "it never called argparse's parse_args on its command line".to_string();
            (Defined::parse(&text), ReadFrom::Help(why), script)
        }
    };
    if defined.is_empty() {
        return None;
    }
    defined.checkpoints_in_code = file.is_some_and(|f| checkpoints(&f));
    Some(ProgramFlags { defined, from })
}

/// Whether the Python file at `path` (as seen from here) checkpoints
/// activations (`diagnose::scan`).
fn checkpoints(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| diagnose::scan::checkpoints_activations(&bytes))
}

/// `argv` with `--help` where its program's arguments start (argparse
/// prints its help and exits there, before it reads a value it would
/// refuse), run in `cwd` with stdin from /dev/null, our environment, and
/// `COLUMNS` wide so that argparse does not wrap the help (a wrapped
/// default can be cut inside a word). Its stdout, else its stderr, when
/// either lists an option flag; None when it cannot start, runs past
/// `timeout` (its process group is killed), or lists none.
pub fn read_help(argv: &[String], cwd: Option<&Path>, timeout: Duration) -> Option<String> {
    let start = argv::program_args(argv).start;
    let (program, rest) = argv.split_first()?;
    let mut cmd = Command::new(program);
    cmd.args(&rest[..start.saturating_sub(1)])
        .arg("--help")
        .args(&rest[start.saturating_sub(1)..]);
    capture(cmd, cwd, timeout)?
        .into_iter()
        .find(|text| !Defined::parse(text).is_empty())
}

/// `cmd`'s stdout and stderr, run in `cwd` with stdin from /dev/null and
/// `COLUMNS` wide, in a process group of its own; None when it cannot
/// start or runs past `timeout` (its group is killed).
fn capture(mut cmd: Command, cwd: Option<&Path>, timeout: Duration) -> Option<[String; 2]> {
    cmd.env("COLUMNS", "1000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().ok()?;
    let pgid = child.id();
    let readers = [
        reader(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        reader(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ];
    let started = Instant::now();
    let ended = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => break false,
        }
    };
    // Whatever it started goes too, so the pipes close.
    crate::group::signal(pgid, libc::SIGKILL);
    let _ = child.wait();
    // A worker that left the group may hold a pipe: not waited for.
    let out = readers.map(|r| r.recv_timeout(Duration::from_secs(1)).unwrap_or_default());
    ended.then_some(out)
}

/// A pipe read to its end on a thread of its own.
fn reader(pipe: Option<Box<dyn Read + Send>>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

/// `argv` with `--NAME VALUE` (`name` with or without its dashes, `-` and
/// `_` alike) set: changed where the command gives it, else added; None
/// when the program defines no such flag taking a value (`--resume_from_checkpoint PATH`
/// only for a program that has it).
pub fn with_flag(
    argv: &[String],
    defined: &Defined,
    name: &str,
    value: &str,
) -> Option<Vec<String>> {
    let i = defined.position(name)?;
    if !matches!(defined.flags[i].form, Form::Value { .. }) {
        return None;
    }
    let mut out = argv.to_vec();
    edit::set(&mut out, defined, i, &Scalar::Str(value.to_string())).ok()?;
    Some(out)
}
