//! Exit codes shared by every tool (documented in README, "Exit codes").

use std::fmt;

/// Success; for checkers, nothing at error level was found.
pub const OK: u8 = 0;
/// The tool ran and found a problem (a failed check, an error finding).
pub const FOUND: u8 = 1;
/// Could not do the job: bad input, bad usage (clap uses 2 as well).
pub const BAD_INPUT: u8 = 2;
/// A GPU was required (`--require-gpu`) and none could be read.
pub const NO_GPU: u8 = 3;

/// An error that knows which exit code it maps to. Anything else that reaches
/// `cli::run` exits with `BAD_INPUT`'s neighbour, 1, as an unexpected failure.
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
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(BAD_INPUT, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// `bail!`-like shorthand for bad input: `return Err(bad_input!("{path}: ..."))`.
#[macro_export]
macro_rules! bad_input {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::exit::Failure::bad_input(format!($($arg)*)))
    };
}
