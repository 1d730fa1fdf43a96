//! `train run`'s exit code: the command's own (the default), or with
//! `--exit-codes classes` how it ended (common's `exit::classes`).

use common::exit::classes;
use common::wire::program::{ProgramLeg, ProgramStatus, ProgramSummary};
use supervise::events::Interrupter;

/// What `train run` exits with (`--exit-codes`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum ExitCodes {
    Command,
    Classes,
}

/// The command's exit code, as a shell gives it (128+N for signal N);
/// 130 when train run was stopped.
pub(super) fn exit_code(leg: &ProgramLeg) -> u8 {
    if leg.status == ProgramStatus::Stopped {
        return common::exit::STOPPED;
    }
    match (leg.exit_code, leg.signal) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => common::exit::FOUND,
    }
}

/// `--exit-codes classes`: how the run ended as a code, said on stderr.
pub(super) fn class_code(summary: &ProgramSummary, stop: &Interrupter) -> u8 {
    let code = classes::of_end(summary.status, summary.class, stop.signal());
    if let Some(c) = classes::ALL.iter().find(|c| c.code == code) {
        let repeat = if c.retriable { "may" } else { "cannot" };
        common::say!(
            "train run: exit {code} ({}: a repeat {repeat} succeed)",
            c.name
        );
    }
    code
}
