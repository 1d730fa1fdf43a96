//! The process side of a trial: its process group, signals to it, the pid
//! file a later driver checks, and its log's last lines.

use crate::trial::ParamValue;
use common::config::Config;
use common::wire::run_dir::{self, TrialDir};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a process group gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(20);
/// How often a wait looks again.
pub const POLL: Duration = Duration::from_millis(200);

pub fn signal_group(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the process group the child leads (it was started
    // with process_group(0), so its pid is the group's id).
    unsafe {
        libc::kill(-(child.id() as i32), sig);
    }
}

/// The pid in a trial's pid file, if that process lives and runs that
/// trial: a train whose command line names the trial's directory, or a
/// program whose environment's TRAINGUARD_TRIAL_DIR is it (a pid reused by
/// another process is neither).
pub fn live_trial_pid(dir: &TrialDir) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(dir.pid())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let needle = dir.path().display().to_string();
    if String::from_utf8_lossy(&cmdline).contains(&needle) {
        return Some(pid);
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let ours = std::fs::canonicalize(dir.path()).ok()?;
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.strip_prefix(b"TRAINGUARD_TRIAL_DIR="))
        .any(|v| {
            std::fs::canonicalize(String::from_utf8_lossy(v).as_ref()).ok() == Some(ours.clone())
        })
        .then_some(pid)
}

/// SIGTERM to a process group, then SIGKILL if it is still there.
pub fn end_group(pid: i32) {
    // SAFETY: kill(2) with a process group id and signals; no memory involved.
    unsafe {
        libc::kill(-pid, libc::SIGTERM);
    }
    let t = Instant::now();
    while t.elapsed() < GRACE {
        // SAFETY: signal 0 only checks the group exists.
        if unsafe { libc::kill(-pid, 0) } != 0 {
            return;
        }
        std::thread::sleep(POLL);
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// The last lines of a trial's log, for a trial that left no summary.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "its log is empty".into()
    } else {
        format!("last lines of {}: {}", run_dir::TRIAL_LOG, tail.join(" | "))
    }
}

/// Seed 004's block before each trial.
pub fn print_block(
    number: u64,
    c: &Config,
    values: &BTreeMap<String, ParamValue>,
    retried_from: Option<u64>,
    runs_on: &str,
) {
    let rule = "=".repeat(80);
    let channels: Vec<String> = c.channels().iter().map(u32::to_string).collect();
    let mut lines = vec![
        rule.clone(),
        format!(
            "TRIAL {number} - Configuration:{}",
            retried_from.map_or(String::new(), |f| format!(
                " (again, for interrupted trial {f})"
            ))
        ),
        format!(
            "  Model: {} channels, {:?} head",
            channels.join("/"),
            c.architecture.name
        ),
        format!("  Batch size: {}", c.batch_size),
        format!("  Learning rate: {}", c.learning_rate),
        format!("  Dropout: {}", c.dropout),
    ];
    for (k, v) in values {
        if !["batch_size", "learning_rate", "dropout"].contains(&k.as_str()) {
            let text = serde_yaml::to_string(&v.to_yaml()).unwrap_or_default();
            lines.push(format!("  {k}: {}", text.trim()));
        }
    }
    lines.push(format!("  Runs on: {runs_on}"));
    lines.push(rule);
    common::say!("{}", lines.join("\n"));
}

/// Seed 004's block before a program trial: its parameters and command.
pub fn print_program_block(
    number: u64,
    values: &BTreeMap<String, ParamValue>,
    retried_from: Option<u64>,
    argv: &[String],
    runs_on: &str,
    launch_blocking: bool,
) {
    let rule = "=".repeat(80);
    let again = match (retried_from, launch_blocking) {
        (Some(f), true) => format!(" (again, for trial {f}, with CUDA_LAUNCH_BLOCKING=1)"),
        (Some(f), false) => format!(" (again, for trial {f})"),
        (None, _) => String::new(),
    };
    let mut lines = vec![
        rule.clone(),
        format!("TRIAL {number} - Configuration:{again}"),
    ];
    for (k, v) in values {
        let text = serde_yaml::to_string(&v.to_yaml()).unwrap_or_default();
        lines.push(format!("  {k}: {}", text.trim()));
    }
    lines.push(format!("  Command: {}", argv.join(" ")));
    lines.push(format!("  Runs on: {runs_on}"));
    lines.push(rule);
    common::say!("{}", lines.join("\n"));
}
