//! The thin wrapper every binary's `main` goes through (ripgrep's shape):
//! run, print the error chain once as `tool: message` on stderr, map it to an
//! exit code (`exit::code_of`: the error's own code, else 4, the tool broke),
//! and treat a closed stdout (`memdiag | head`) as success.

use crate::exit;
use std::io;
use std::process::ExitCode;

/// Runs `body` and turns its outcome into the process exit code.
pub fn run(tool: &str, body: impl FnOnce() -> anyhow::Result<u8>) -> ExitCode {
    match body() {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::from(exit::OK);
            }
            let code = exit::code_of(&err);
            eprintln!("{tool}: {err:#}");
            ExitCode::from(code)
        }
    }
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
