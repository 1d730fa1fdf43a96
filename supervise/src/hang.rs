//! A job left hanging by a failure: one rank of a torchrun job runs out of
//! memory, catches it (or dies without its launcher noticing), and the
//! other ranks wait in a collective until NCCL's timeout, up to hours. The
//! sign is a failure line (one the failures catalogue knows) followed by
//! no progress at all: no further line and no metric for a grace period.
//!
//! Progress is output, never CPU time: NCCL and CUDA synchronisation spin
//! a core while they wait. The lines of the failure's own report (a
//! traceback's frames, a chained exception, C++ frames) are not progress;
//! any other line is, and clears the failure: a batch finder that recovered
//! and then trains quietly is not ended. Pure: the caller hands in the
//! lines with when they came, and asks at a time.

use common::wire::failure::Class;
use std::time::{Duration, Instant};

/// A failure seen and not yet followed by progress.
#[derive(Clone, Debug, PartialEq)]
pub struct Failed {
    pub class: Class,
    /// The line that said it (the first of its burst).
    pub line: String,
    /// The last line of its report: the silence counts from here.
    pub last: Instant,
}

/// The watch over one command's lines.
#[derive(Debug)]
pub struct Watch {
    grace: Duration,
    failed: Option<Failed>,
}

impl Watch {
    pub fn new(grace: Duration) -> Watch {
        Watch {
            grace,
            failed: None,
        }
    }

    /// A line that came at `at`; `reported` whether a metric was read
    /// from it.
    pub fn line(&mut self, line: &str, at: Instant, reported: bool) {
        if reported {
            self.failed = None;
            return;
        }
        let class = diagnose::failures::find(line).map(|k| k.class);
        match (&mut self.failed, class) {
            (Some(f), Some(_)) => f.last = at,
            (None, Some(class)) => {
                self.failed = Some(Failed {
                    class,
                    line: line.trim().to_string(),
                    last: at,
                })
            }
            (Some(f), None) if of_a_report(line) => f.last = at,
            _ => self.failed = None,
        }
    }

    /// When the job counts as hung if nothing comes before.
    pub fn deadline(&self) -> Option<Instant> {
        self.failed.as_ref().map(|f| f.last + self.grace)
    }

    /// The failure that left the job without progress for the grace, at
    /// `now`.
    pub fn hung(&self, now: Instant) -> Option<&Failed> {
        self.failed.as_ref().filter(|f| now >= f.last + self.grace)
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }
}

/// A line of a failure's report rather than of the program's progress: a
/// traceback's frames and headings, C++ frames, a launcher's copy of them
/// (`[rank1]:` before them), blank lines.
fn of_a_report(line: &str) -> bool {
    let mut l = line.trim_end();
    // torchrun's --tee and its Root Cause block prefix each rank's lines.
    if let Some(rest) = l.strip_prefix("[rank").and_then(|r| r.split_once("]:")) {
        l = rest.1;
    }
    l.trim().is_empty()
        || l.starts_with(char::is_whitespace)
        || [
            "Traceback (most recent call last)",
            "During handling of the above exception",
            "The above exception was the direct cause",
            "Exception raised from",
            "frame #",
        ]
        .iter()
        .any(|p| l.trim_start().starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";

    #[test]
    fn a_failure_then_silence_is_a_hang_and_a_line_after_its_report_is_progress() {
        let t = Instant::now();
        let s = |secs: f64| t + Duration::from_secs_f64(secs);
        let mut w = Watch::new(Duration::from_secs(10));
        w.line("step 1 loss 0.5", s(0.0), true);
        assert_eq!(w.deadline(), None);
        w.line("Traceback (most recent call last):", s(1.0), false);
        w.line("  File \"train.py\", line 9, in <module>", s(1.0), false);
        w.line(OOM, s(1.1), false);
        // Its report goes on: the silence counts from its last line.
        w.line("[rank1]: Traceback (most recent call last):", s(1.5), false);
        w.line("[rank1]:   File \"train.py\", line 9", s(1.5), false);
        assert_eq!(w.deadline(), Some(s(11.5)));
        assert!(w.hung(s(11.4)).is_none());
        let f = w.hung(s(11.5)).unwrap();
        assert_eq!((f.class, f.line.as_str()), (Class::OutOfMemory, OOM));
        // Any other line: progress, the failure cleared.
        w.line("retrying with batch 16", s(1.6), false);
        assert_eq!(w.deadline(), None);
        assert!(w.hung(s(100.0)).is_none());
    }

    #[test]
    fn a_metric_is_progress() {
        let t = Instant::now();
        let mut w = Watch::new(Duration::from_secs(3));
        w.line(OOM, t, false);
        w.line("step 2 loss 0.4", t + Duration::from_millis(100), true);
        assert_eq!(w.deadline(), None);
    }
}
