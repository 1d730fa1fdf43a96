//! Handing the seeds' model to `train-model`, train's libtorch half: the
//! binary beside this one (the source build has it; the pip wheel does not).
//! `train` replaces itself with it (exec), so the pid a sweep or a user
//! signals, the arguments /proc/PID/cmdline shows (a trial's directory) and
//! the exit code stay the ones of the `train` they started.

use std::ffi::OsString;
use std::path::PathBuf;

/// The binary's name, beside `train`.
pub const BINARY: &str = "train-model";

/// `train`'s own path (what a sweep starts its trials with).
pub fn me() -> anyhow::Result<PathBuf> {
    std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find train's own executable: {e}"))
}

/// `train-model` beside this `train`, when there is one.
pub fn binary() -> Option<PathBuf> {
    let path = me().ok()?.parent()?.join(BINARY);
    path.is_file().then_some(path)
}

/// Replaces this process with `train-model` and this process's arguments;
/// without one beside `train`, the error says what needs libtorch (`who`),
/// exit 5.
pub fn exec(who: &str) -> anyhow::Error {
    let Some(model) = binary() else {
        return match me() {
            Ok(train) => common::exit::no_libtorch(who, &train),
            Err(e) => e,
        };
    };
    use std::os::unix::process::CommandExt;
    // argv[0] stays the one `train` was started with: the process reads as
    // the train it is to `ps` and to a user's `pkill -f`.
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("train"));
    let e = std::process::Command::new(&model)
        .arg0(arg0)
        .args(args)
        .exec();
    anyhow::anyhow!("cannot start {}: {e}", model.display())
}
