//! How a supervised command ended, said in words: its exit status or
//! signal, why the supervisor ended it (if it did), the known-failure
//! catalogue (`diagnose::failures`, the one `cfgcheck --explain` reads
//! with) over its last output lines, and whether it reported a non-finite
//! metric. Pure: the caller brings what it saw.

use common::wire::failure::{Class, OomFigures};
use diagnose::failures;

/// The longest evidence kept.
pub const EVIDENCE_CHARS: usize = 500;

/// Why the supervisor ended the command.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    Timeout {
        limit_s: f64,
    },
    /// A failure line, then no progress for `grace_s` (`hang`).
    Hang {
        grace_s: f64,
    },
    Interrupted(String),
    Pruned(String),
}

/// What is known when the command has ended.
pub struct End<'a> {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stop: Option<&'a Stop>,
    /// Its last output lines, oldest first.
    pub tail: &'a [String],
    /// The first non-finite report of its objective, in words.
    pub non_finite: Option<&'a str>,
    pub reports: usize,
    /// The kernel's OOM killer struck in its memory cgroup while it ran
    /// (`oom_kills`), in words.
    pub oom_killed: Option<&'a str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Finished,
    Failed,
    Stopped,
    Pruned,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub status: Status,
    /// None when it finished.
    pub class: Option<Class>,
    pub evidence: String,
    /// The catalogue entry that matched, by id.
    pub known: Option<&'static str>,
    /// What to change, for a program (an environment variable or code).
    pub advice: Option<String>,
    /// An out-of-memory message's figures, read from its whole line.
    pub oom: Option<OomFigures>,
}

impl Verdict {
    /// An out-of-memory with more memory reserved but unallocated than it
    /// asked for: fragmentation, not size.
    pub fn fragmented(&self) -> bool {
        self.known == Some(common::wire::hazard::HazardId::AllocatorFragmentation.as_str())
    }

    fn new(status: Status, class: Option<Class>, evidence: String) -> Verdict {
        Verdict {
            status,
            class,
            evidence: evidence.chars().take(EVIDENCE_CHARS).collect(),
            known: None,
            advice: None,
            oom: None,
        }
    }
}

/// Judges a command's end; the advice in Hugging Face Trainer's words
/// (its flags, `num_labels`) when its output is a Trainer's.
pub fn judge(e: &End) -> Verdict {
    let mut v = judged(e);
    if v.status == Status::Failed {
        v = with_ranks(v, &tail(e));
    }
    let hf = v
        .known
        .and_then(|id| failures::KNOWN.iter().find(|k| k.id == id))
        .and_then(|k| k.hf_fix);
    if let Some(fix) = hf.filter(|_| e.tail.iter().any(|l| diagnose::explain::hugging_face(l))) {
        v.advice = Some(fix.to_string());
    }
    v
}

fn judged(e: &End) -> Verdict {
    let exited_0 = e.code == Some(0);
    if let (Some(stop), false) = (e.stop, exited_0) {
        return stopped(stop, e);
    }
    if exited_0 {
        return exited_zero(e);
    }
    let lines = tail(e);
    let how = match (e.code, e.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("killed by {}", signal_name(s)),
        (None, None) => "ended".to_string(),
    };
    by_output(&lines, &how).unwrap_or_else(|| unknown_failure(e, &lines, &how))
}

/// Its last output lines, their line ends trimmed.
fn tail<'a>(e: &End<'a>) -> Vec<&'a str> {
    e.tail.iter().map(|l| l.trim_end()).collect()
}

/// The failure the catalogue finds in its output, ended `how`.
fn by_output(lines: &[&str], how: &str) -> Option<Verdict> {
    failures::in_output(lines)
        .map(|(k, i)| known_failure(k, &crate::launcher::in_words(lines[i].trim()), how))
}

/// A job of ranks whose launcher printed its error summary: the rank whose
/// (tagged) line says a known failure leads the evidence, else the rank
/// the launcher saw fail first, with its own end (the launcher's
/// ChildFailedError says nothing of it); the other ranks' ends follow as
/// what came after it.
fn with_ranks(mut v: Verdict, lines: &[&str]) -> Verdict {
    let Some((root, others)) = crate::launcher::error_summary(lines) else {
        return v;
    };
    let end = |r: &crate::launcher::RankEnd| match r.exitcode {
        c if c < 0 => format!("killed by {}", signal_name(-c)),
        c => format!("exit {c}"),
    };
    let pid = root.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
    // The rank whose line says the failure: the launcher observes the ends,
    // not their causes, and a rank still tearing down after its out of
    // memory can be observed after the rank whose collective it broke.
    let said = v
        .evidence
        .strip_prefix("rank ")
        .and_then(|r| r.split_once(':'))
        .and_then(|(n, _)| n.parse::<u32>().ok());
    if v.known.is_none() && matches!(v.class, Some(Class::Other) | Some(Class::Killed)) {
        v.class = Some(if root.exitcode < 0 {
            Class::Killed
        } else {
            Class::Other
        });
        v.evidence = format!(
            "rank {}{pid} {}: the launcher's first observed failure",
            root.rank,
            end(&root)
        );
        if root.exitcode == -libc::SIGKILL {
            v = with_known(v, failures::KNOWN.iter().find(|k| k.id == "killed"));
        }
    } else if said.is_none() {
        v.evidence = format!("rank {}: {}", root.rank, v.evidence);
    }
    let cause = said.filter(|_| v.known.is_some()).unwrap_or(root.rank);
    if root.rank != cause {
        v.evidence.push_str(&format!(
            "; rank {} failed after it ({}: the launcher's first observed failure)",
            root.rank,
            end(&root)
        ));
    }
    for o in others.iter().filter(|o| o.rank != cause) {
        // The launcher ends the others with SIGTERM (SIGKILL past its
        // grace); any other end was the rank's own.
        let how = match -o.exitcode {
            libc::SIGTERM | libc::SIGKILL => "ended by the launcher",
            _ => "failed",
        };
        v.evidence
            .push_str(&format!("; rank {} {how} after it ({})", o.rank, end(o)));
    }
    v
}

/// The supervisor ended it (and it did not exit 0 meanwhile).
fn stopped(stop: &Stop, e: &End) -> Verdict {
    match stop {
        Stop::Timeout { limit_s } => Verdict::new(
            Status::Failed,
            Some(Class::Timeout),
            format!(
                "ran past its time limit ({limit_s:.0} s): ended with SIGTERM to its process group{}",
                killed_after(e)
            ),
        ),
        Stop::Interrupted(why) => Verdict::new(
            Status::Stopped,
            Some(Class::Interrupted),
            format!("{why}{}", killed_after(e)),
        ),
        Stop::Pruned(why) => Verdict::new(Status::Pruned, None, why.clone()),
        Stop::Hang { grace_s } => {
            let how = format!(
                "then no output for {grace_s:.0} s: the job hung, ended with SIGTERM to all its \
                 processes{}",
                killed_after(e)
            );
            by_output(&tail(e), &how)
                .unwrap_or_else(|| Verdict::new(Status::Failed, Some(Class::Other), how))
        }
    }
}

/// Exit 0: finished, unless it reported a non-finite objective.
fn exited_zero(e: &End) -> Verdict {
    match e.non_finite {
        Some(what) => with_known(
            Verdict::new(
                Status::Failed,
                Some(Class::NonFiniteLoss),
                format!("it exited 0, but reported {what}"),
            ),
            failures::KNOWN
                .iter()
                .find(|k| k.class == Class::NonFiniteLoss),
        ),
        None => Verdict::new(
            Status::Finished,
            None,
            format!("exited 0 after {} report(s)", e.reports),
        ),
    }
}

/// A failure the catalogue knows, from the line that says it.
fn known_failure(k: &'static failures::Known, line: &str, how: &str) -> Verdict {
    // "reserved but unallocated" at least what was asked: fragmentation,
    // not size (the same choice `cfgcheck --explain` makes).
    let oom = (k.class == Class::OutOfMemory).then(|| failures::oom_figures(line));
    let k = if oom.is_some_and(|f| f.fragmented()) {
        failures::KNOWN
            .iter()
            .find(|e| e.id == common::wire::hazard::HazardId::AllocatorFragmentation.as_str())
            .unwrap_or(k)
    } else {
        k
    };
    let mut v = with_known(
        Verdict::new(Status::Failed, Some(k.class), format!("{line} ({how})")),
        Some(k),
    );
    v.oom = oom;
    v
}

/// A failure no catalogue line names: a non-finite report, a signal, or
/// the last exception it printed.
fn unknown_failure(e: &End, lines: &[&str], how: &str) -> Verdict {
    if let Some(what) = e.non_finite {
        return with_known(
            Verdict::new(
                Status::Failed,
                Some(Class::NonFiniteLoss),
                format!("it reported {what}, then ended ({how})"),
            ),
            failures::KNOWN
                .iter()
                .find(|k| k.class == Class::NonFiniteLoss),
        );
    }
    if let (Some(libc::SIGKILL), Some(why)) = (e.signal, e.oom_killed) {
        return with_known(
            Verdict::new(
                Status::Failed,
                Some(Class::OutOfMemory),
                format!("killed by SIGKILL from the kernel's OOM killer: its memory cgroup's limit was reached ({why})"),
            ),
            failures::KNOWN.iter().find(|k| k.id == "host-out-of-memory"),
        );
    }
    if let Some(sig) = e.signal {
        let mut v = Verdict::new(
            Status::Failed,
            Some(Class::Killed),
            if sig == libc::SIGKILL {
                "killed by SIGKILL with no message: the kernel's OOM killer is the usual cause (dmesg | grep -i oom)".to_string()
            } else {
                format!(
                    "killed by {} with no known message{}",
                    signal_name(sig),
                    last_words(lines)
                )
            },
        );
        if sig == libc::SIGKILL {
            v = with_known(v, failures::KNOWN.iter().find(|k| k.id == "killed"));
        }
        return v;
    }
    Verdict::new(
        Status::Failed,
        Some(Class::Other),
        match exception(lines) {
            Some(line) => format!("{line} ({how})"),
            None if lines.iter().all(|l| l.trim().is_empty()) => {
                format!("{how} with no output")
            }
            None => format!("{how}{}", last_words(lines)),
        },
    )
}

fn with_known(mut v: Verdict, k: Option<&'static failures::Known>) -> Verdict {
    if let Some(k) = k {
        v.known = Some(k.id);
        v.advice = Some(k.program_fix.to_string());
    }
    v
}

/// ", then SIGKILL after the grace period" when it came to that.
fn killed_after(e: &End) -> &'static str {
    if e.signal == Some(libc::SIGKILL) {
        ", then SIGKILL after the grace period"
    } else {
        ""
    }
}

/// The last line that reads as a Python exception (`ValueError: ...`,
/// `torch.OutOfMemoryError: ...`, a bare `KeyboardInterrupt`), wherever it
/// stands: stdout and stderr arrive interleaved, so a traceback's lines are
/// not always last.
fn exception(lines: &[&str]) -> Option<String> {
    lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| is_exception(l))
        .map(String::from)
}

fn is_exception(line: &str) -> bool {
    let name = line.split(':').next().unwrap_or_default();
    let last = name.rsplit('.').next().unwrap_or_default();
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && ["Error", "Exception", "Interrupt", "Exit"]
            .iter()
            .any(|end| last.ends_with(end))
}

/// "; its last line: ..." when it printed anything.
fn last_words(lines: &[&str]) -> String {
    lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!("; its last line: {}", l.trim()))
        .unwrap_or_default()
}

pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGBUS => "SIGBUS".into(),
        s => format!("signal {s}"),
    }
}

#[cfg(test)]
mod tests;
