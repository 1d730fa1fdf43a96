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

/// `train run --exit-codes classes`: how the command ended, as a code a
/// scheduler can act on (a Kubernetes Job's `podFailurePolicy`, a Slurm
/// epilog's requeue). Outside 1-6, 130 and 128+N, so never mistaken for a
/// tool's own code or a signal's: 75-78 a repeat may succeed (75 is
/// sysexits' EX_TEMPFAIL), 80-84 a repeat cannot fix. Listed in
/// docs/FORMATS.md, "Exit codes".
pub mod classes {
    use crate::wire::failure::Class;
    use crate::wire::program::ProgramStatus;

    /// One code: its number, its name, whether repeating the run may
    /// succeed, and what ends with it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Code {
        pub code: u8,
        pub name: &'static str,
        pub retriable: bool,
        pub means: &'static str,
    }

    pub const OUT_OF_MEMORY: Code = Code {
        code: 75,
        name: "out-of-memory",
        retriable: true,
        means:
            "out of memory (after the last fix, with --auto-fix): again where more memory is free",
    };
    pub const KILLED: Code = Code {
        code: 76,
        name: "killed",
        retriable: true,
        means:
            "SIGKILL from outside (the kernel's OOM killer, an operator), or the CUDA allocator \
                broken for the rest of the process: a new process may run",
    };
    pub const PREEMPTED: Code = Code {
        code: 77,
        name: "preempted",
        retriable: true,
        means: "train run got SIGTERM (a scheduler's preemption or a node drain) and ended the \
                command; Ctrl-C stays 130",
    };
    pub const GPU_ERROR: Code = Code {
        code: 78,
        name: "gpu-error",
        retriable: true,
        means: "a CUDA error that is neither out of memory nor a device-side assert (a faulty \
                device among them): again on another GPU",
    };
    pub const CONFIG: Code = Code {
        code: 80,
        name: "config",
        retriable: false,
        means: "a failure the settings cause and no fix was left for (CUDA graphs replayed with \
                gradient checkpointing)",
    };
    pub const DATA: Code = Code {
        code: 81,
        name: "data",
        retriable: false,
        means: "labels out of range, or a device-side assert",
    };
    pub const NON_FINITE: Code = Code {
        code: 82,
        name: "non-finite-loss",
        retriable: false,
        means: "the loss became NaN or infinite",
    };
    pub const TIMEOUT: Code = Code {
        code: 83,
        name: "timeout",
        retriable: false,
        means: "ran past train run's --timeout",
    };
    pub const FAILED: Code = Code {
        code: 84,
        name: "failed",
        retriable: false,
        means: "any other failure: the command's own error (a bug, a missing file)",
    };

    /// Every code, in number order.
    pub const ALL: [Code; 9] = [
        OUT_OF_MEMORY,
        KILLED,
        PREEMPTED,
        GPU_ERROR,
        CONFIG,
        DATA,
        NON_FINITE,
        TIMEOUT,
        FAILED,
    ];

    /// The code of a run that ended as `status` and `class`, stopped by
    /// `signal` when it was stopped: 0 finished, 130 stopped by Ctrl-C or
    /// SIGHUP, else one of `ALL`.
    pub fn of_end(status: ProgramStatus, class: Option<Class>, signal: Option<i32>) -> u8 {
        let code = match status {
            ProgramStatus::Finished => return super::OK,
            ProgramStatus::Stopped | ProgramStatus::Pruned => {
                return match signal {
                    Some(libc::SIGTERM) => PREEMPTED.code,
                    _ => super::STOPPED,
                };
            }
            ProgramStatus::Failed => match class.unwrap_or(Class::Other) {
                Class::OutOfMemory | Class::PredictedOutOfMemory => OUT_OF_MEMORY,
                Class::Killed | Class::AllocatorBroken | Class::Interrupted => KILLED,
                Class::CudaError => GPU_ERROR,
                Class::CudaGraphPointer => CONFIG,
                Class::LabelOutOfRange | Class::DeviceSideAssert => DATA,
                Class::NonFiniteLoss => NON_FINITE,
                Class::Timeout => TIMEOUT,
                Class::Other => FAILED,
            },
        };
        code.code
    }
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
    fn the_class_codes_are_apart_from_every_other_code() {
        use crate::wire::failure::Class;
        use crate::wire::program::ProgramStatus as S;
        use classes::*;
        for c in ALL {
            assert!(!(1..=6).contains(&c.code) && c.code < 129, "{c:?}");
            assert_eq!(c.retriable, c.code < 80, "{c:?}");
        }
        let mut codes: Vec<u8> = ALL.iter().map(|c| c.code).collect();
        codes.dedup();
        assert_eq!(codes.len(), ALL.len());
        // Every class has a code.
        for class in Class::ALL {
            let code = of_end(S::Failed, Some(class), None);
            assert!(ALL.iter().any(|c| c.code == code), "{class:?}");
        }
        assert_eq!(of_end(S::Failed, Some(Class::OutOfMemory), None), 75);
        assert_eq!(of_end(S::Failed, None, None), FAILED.code);
        assert_eq!(of_end(S::Finished, None, None), OK);
        // SIGTERM is a preemption, Ctrl-C a person's stop.
        assert_eq!(
            of_end(S::Stopped, Some(Class::Interrupted), Some(libc::SIGTERM)),
            77
        );
        assert_eq!(
            of_end(S::Stopped, Some(Class::Interrupted), Some(libc::SIGINT)),
            STOPPED
        );
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
