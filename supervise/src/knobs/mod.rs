//! The knobs of a failed run's fix (`diagnose::knobs`) in the command's own
//! flags (issue 33): the flags its program defines, read from its `--help`
//! (`help`, and `read_help`, the one function here that runs anything);
//! where the command gives them, read as argparse reads it (`argv`); the
//! knobs they hold and the command with new values (`flags`, `edit`).
//! A flag the program does not define is never added.

pub mod argv;
mod edit;
pub mod flags;
pub mod help;
#[cfg(test)]
mod tests;

pub use argv::value_of;
pub use flags::{found, known_names, turn, FlagKnob, Source, PRECISION_PAIR};
pub use help::{Defined, Flag, Form};

use diagnose::keys::Scalar;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a caller lets a program print its help.
pub const HELP_TIMEOUT: Duration = Duration::from_secs(30);

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
        .args(&rest[start.saturating_sub(1)..])
        .env("COLUMNS", "1000")
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
    let [out, err] = readers.map(|r| r.recv_timeout(Duration::from_secs(1)).unwrap_or_default());
    if !ended {
        return None;
    }
    [out, err]
        .into_iter()
        .find(|text| !Defined::parse(text).is_empty())
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
