//! Exit codes shared by every tool (documented in docs/FORMATS.md, "Exit codes"), and
//! the error that carries one (uucore's `UError::code()` in spirit): a
//! failed check is told from a tool that broke.

use std::fmt;

/// Success; for checkers, nothing at error level was found.
pub const OK: u8 = 0;
/// The tool ran and found a problem (a failed check, an error finding).
pub const FOUND: u8 = 1;
/// Could not do the job: bad input, bad usage (clap uses 2 as well).
pub const BAD_INPUT: u8 = 2;
/// A GPU was required (`--require-gpu`) and none could be read.
pub const NO_GPU: u8 = 3;
/// The tool broke: an unexpected error such as an I/O failure or a bug; the
/// message says what. What `cli::run` returns for an error with no code.
pub const INTERNAL: u8 = 4;
/// This build of the tool was made without the part the job needs: `train`
/// built without libtorch (the pip wheel's) asked to train the seeds' model
/// (`train --config`, `--resume`, `bench`, `check-data`, a sweep without
/// `program`), or verify-fixes gating that trainer with such a train.
pub const NOT_IN_BUILD: u8 = 5;
/// `train sweep --storage`: the sweep's database could not be reached, or
/// stayed unreachable past `--db-patience`; its state is intact.
pub const UNREACHABLE: u8 = 6;
/// Stopped on request (SIGINT or SIGTERM), as shells report an interrupted
/// command: `train` between two steps, `train sweep` with its trials;
/// `--resume` continues either.
pub const STOPPED: u8 = 130;

/// An error that knows which exit code it maps to. Anything else that
/// reaches `cli::run` exits with [`INTERNAL`].
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
    /// Bad input or usage ([`BAD_INPUT`]).
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(BAD_INPUT, message)
    }
    /// The tool ran and found a problem ([`FOUND`]).
    pub fn found(message: impl Into<String>) -> Self {
        Self::new(FOUND, message)
    }
    /// A GPU was required and none could be read ([`NO_GPU`]).
    pub fn no_gpu(message: impl Into<String>) -> Self {
        Self::new(NO_GPU, message)
    }
    /// This build lacks what the job needs ([`NOT_IN_BUILD`]).
    pub fn not_in_build(message: impl Into<String>) -> Self {
        Self::new(NOT_IN_BUILD, message)
    }
    /// The exit code this failure maps to.
    pub fn code(&self) -> u8 {
        self.code
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The exit code of an error: the code of the first [`Failure`] in its
/// chain, else [`INTERNAL`] (the tool broke, it did not find a problem).
pub fn code_of(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|e| e.downcast_ref::<Failure>())
        .map_or(INTERNAL, Failure::code)
}

/// The one message for a job that needs libtorch, asked of a `train` built
/// without it (the wheel's): what asked, and how to get a train that has it.
/// `who` is the tool and the thing asked, e.g. "train --config".
pub fn no_libtorch(who: &str, train: &std::path::Path) -> anyhow::Error {
    anyhow::Error::new(Failure::not_in_build(format!(
        "{who} needs libtorch, and {} was built without it (the pip wheel's train: \
         `train run -- CMD`, program sweeps and `train info` only). Build the full train \
         from source: `just build` in a clone of the repository (Rust and a torch {} \
         environment; docs/guide/install.md, \"Install\")",
        train.display(),
        crate::torch_for_train!()
    )))
}

/// `bail!`-like shorthand for bad input: `return Err(bad_input!("{path}: ..."))`.
#[macro_export]
macro_rules! bad_input {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::exit::Failure::bad_input(format!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_without_a_code_is_internal_not_a_finding() {
        let io = anyhow::Error::new(std::io::Error::other("disk on fire"));
        assert_eq!(code_of(&io), INTERNAL);
        assert_eq!(code_of(&crate::bad_input!("x")), BAD_INPUT);
        let wrapped =
            anyhow::Error::new(Failure::found("a check failed")).context("while checking");
        assert_eq!(code_of(&wrapped), FOUND);
        assert_ne!(INTERNAL, FOUND);
    }

    #[test]
    fn a_train_without_libtorch_exits_5_and_says_how_to_get_one() {
        let err = no_libtorch("train --config", std::path::Path::new("/venv/bin/train"));
        assert_eq!(code_of(&err), NOT_IN_BUILD);
        let text = err.to_string();
        assert!(text.starts_with("train --config needs libtorch"), "{text}");
        assert!(
            text.contains("/venv/bin/train was built without it"),
            "{text}"
        );
        assert!(text.contains("just build"), "{text}");
    }
}
