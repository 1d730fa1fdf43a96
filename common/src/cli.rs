//! The thin wrapper every binary's `main` goes through (ripgrep's shape):
//! run, print the error chain once as `tool: message` on stderr, map it to an
//! exit code (`exit::code_of`: the error's own code, else 4, the tool broke),
//! and treat a closed stdout (`memdiag | head`) as success.

use crate::exit;
use std::io::{self, Write};
use std::process::ExitCode;

/// Runs `body` and turns its outcome into the process exit code.
pub fn run(tool: &str, body: impl FnOnce() -> anyhow::Result<u8>) -> ExitCode {
    ExitCode::from(outcome(tool, body))
}

/// The exit code of `body`. A panic is a bug, or a stderr that cannot be
/// written (`eprintln!` panics when the disk holding the log is full):
/// either way the tool broke, 4, never Rust's own 101.
fn outcome(tool: &str, body: impl FnOnce() -> anyhow::Result<u8>) -> u8 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Err(_) => exit::INTERNAL,
        Ok(Ok(code)) => code,
        Ok(Err(err)) => {
            if is_broken_pipe(&err) {
                return exit::OK;
            }
            // Not eprintln!: a full disk under stderr must not turn a
            // documented code into a panic.
            let _ = writeln!(io::stderr(), "{tool}: {err:#}");
            exit::code_of(&err)
        }
    }
}

/// `eprintln!` that never panics: a message that cannot be written (stderr
/// on a full disk) is dropped and the tool goes on to its documented exit
/// code. Every message of every tool goes through it.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// True when the error chain holds an `io::ErrorKind::BrokenPipe`: the reader
/// of our stdout went away, which is how `| head` ends a pipeline.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || e.downcast_ref::<csv::Error>().is_some_and(
                |e| matches!(e.kind(), csv::ErrorKind::Io(io) if io.kind() == io::ErrorKind::BrokenPipe),
            )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_exits_4_and_an_error_its_own_code() {
        assert_eq!(
            super::outcome("t", || panic!("a bug")),
            crate::exit::INTERNAL
        );
        assert_eq!(
            super::outcome("t", || Err(crate::bad_input!("x: bad"))),
            crate::exit::BAD_INPUT
        );
        assert_eq!(super::outcome("t", || Ok(1)), 1);
    }
}
