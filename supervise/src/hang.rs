//! A job left hanging by a failure: one rank of a torchrun job runs out of
//! memory, catches it (or dies without its launcher noticing), and the
//! other ranks wait in a collective until NCCL's timeout, up to hours. The
//! sign is a failure line (one the failures catalogue knows) followed by
//! no output for a grace period, and no progress since the failure.
//!
//! Progress is a metric reported at a later epoch or step than any before
//! the failure (for a failure on a tagged rank's line, `[rank N] `, than
//! that rank's own before it, or any line's: the launcher passes each
//! rank's lines on from its own file, not in the order written): the other ranks' last lines of the step that failed (they
//! run on until they block) are not progress, and the lines of a recovery
//! that trains on (a batch finder's smaller batch) are, so a job that
//! recovered and then runs quietly between its reports is not ended. Any
//! line restarts the grace. Never CPU time: NCCL and CUDA synchronisation
//! spin a core while they wait. Pure: the caller hands in the lines with
//! when they came and what was read from them, and asks at a time.

use common::wire::failure::Class;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a failure may be followed by silence before the job counts as
/// hung (`--hang-grace`): as given (0: off), else `DEFAULT_GRACE` for a
/// launcher's job of ranks and off for another command, whose quiet
/// stretches after a caught failure are its own business.
pub fn grace_for(given: Option<Duration>, argv: &[String]) -> Option<Duration> {
    match given {
        Some(g) => (!g.is_zero()).then_some(g),
        None => crate::launcher::of(argv).map(|_| DEFAULT_GRACE),
    }
}

/// `--hang-grace`'s default for a launcher's job: well inside NCCL's own
/// 10-minute timeout, far past a traceback's burst.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

impl Failed {
    /// Whether a report at `p` on a line of `rank` is past the failure.
    fn progress(&self, rank: Option<u32>, p: f64) -> bool {
        let past = |h: Option<f64>| h.is_none_or(|h| p > h);
        let own = self.rank.is_none() || rank == self.rank;
        (own && past(self.own_high)) || past(self.all_high)
    }
}

/// A failure seen and not yet followed by progress.
#[derive(Clone, Debug, PartialEq)]
pub struct Failed {
    pub class: Class,
    /// The line that said it (the first of its burst).
    pub line: String,
    /// The last line since: the silence counts from here.
    pub last: Instant,
    /// The rank that said it, where its line is tagged (`launcher::said_by`).
    rank: Option<u32>,
    /// The furthest epoch or step that rank reported before it (any rank's,
    /// for an untagged line).
    own_high: Option<f64>,
    /// The furthest any line reported before it.
    all_high: Option<f64>,
}

/// The watch over one command's lines.
#[derive(Debug)]
pub struct Watch {
    grace: Duration,
    failed: Option<Failed>,
    /// The furthest epoch or step reported so far, by the rank of the line
    /// (None: untagged lines).
    high: BTreeMap<Option<u32>, f64>,
}

impl Watch {
    pub fn new(grace: Duration) -> Watch {
        Watch {
            grace,
            failed: None,
            high: BTreeMap::new(),
        }
    }

    /// A line that came at `at`, with the positions (epoch or step) of
    /// the reports read from it.
    pub fn line(&mut self, line: &str, at: Instant, positions: &[f64]) {
        let furthest = positions.iter().copied().reduce(f64::max);
        let rank = crate::launcher::said_by(line).0;
        // A failure on the line wins over a report on it: ranks started
        // with `python -u` write a line and its newline apart, so two
        // ranks' lines can come glued together.
        let failure = diagnose::failures::find(line).map(|k| k.class);
        let all_high = self.high.values().copied().reduce(f64::max);
        match (&mut self.failed, failure) {
            (None, Some(class)) => {
                // Tagged ranks' lines come through the launcher one rank's
                // file at a time, not in the order written: a rank is
                // measured against its own progress.
                let own_high = match rank {
                    Some(_) => self.high.get(&rank).copied(),
                    None => all_high,
                };
                self.failed = Some(Failed {
                    class,
                    line: line.trim().to_string(),
                    last: at,
                    rank,
                    own_high,
                    all_high,
                })
            }
            // Progress: reported past where the job (or the failed rank)
            // was when it failed.
            (Some(f), None) if furthest.is_some_and(|p| f.progress(rank, p)) => self.failed = None,
            (Some(f), _) => f.last = at,
            (None, None) => {}
        }
        if let Some(p) = furthest {
            let h = self.high.entry(rank).or_insert(p);
            *h = h.max(p);
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

#[cfg(test)]
mod tests {
    use super::*;

    const OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB";

    #[test]
    fn a_failure_then_silence_is_a_hang_and_a_later_step_is_progress() {
        let t = Instant::now();
        let s = |secs: f64| t + Duration::from_secs_f64(secs);
        let mut w = Watch::new(Duration::from_secs(10));
        w.line("rank 1: step 1 loss 0.5", s(0.0), &[1.0]);
        assert_eq!(w.deadline(), None);
        w.line("Traceback (most recent call last):", s(1.0), &[]);
        w.line(OOM, s(1.1), &[]);
        // The other rank's line of the same step, then its last words:
        // not progress, but the silence counts from the last line.
        w.line("rank 0: step 1 loss 0.5", s(1.3), &[1.0]);
        w.line("rank 1: caught it, waiting", s(1.5), &[]);
        assert_eq!(w.deadline(), Some(s(11.5)));
        assert!(w.hung(s(11.4)).is_none());
        let f = w.hung(s(11.5)).unwrap();
        assert_eq!((f.class, f.line.as_str()), (Class::OutOfMemory, OOM));
        // A later step: progress, the failure cleared.
        w.line("rank 1: step 2 loss 0.4", s(3.0), &[2.0]);
        assert_eq!(w.deadline(), None);
        assert!(w.hung(s(100.0)).is_none());
    }

    #[test]
    fn a_failure_before_any_report_is_cleared_by_the_first() {
        let t = Instant::now();
        let mut w = Watch::new(Duration::from_secs(3));
        w.line(OOM, t, &[]);
        w.line("val_loss 0.4", t, &[1.0]);
        assert_eq!(w.deadline(), None);
        // Another rank's report glued to the failure: still a failure.
        w.line(
            &format!("rank 0: step 2 val_loss 1.0rank 1: {OOM}"),
            t,
            &[2.0],
        );
        assert!(w.deadline().is_some());
    }

    #[test]
    fn a_tagged_rank_is_measured_against_its_own_progress() {
        let s = |x: f64| Instant::now() + Duration::from_secs_f64(x);
        let t0 = s(0.0);
        let mut w = Watch::new(Duration::from_secs(4));
        // The launcher's tail of rank 0's file came first: its step 2
        // before rank 1's failure at step 2.
        w.line("[rank 0] step 1 loss 0.5", t0, &[1.0]);
        w.line("[rank 0] step 2 loss 0.4", t0, &[2.0]);
        w.line("[rank 1] step 1 loss 0.5", t0, &[1.0]);
        w.line(&format!("[rank 1] {OOM}"), t0, &[]);
        // Rank 0's further lines of step 2 are not progress.
        w.line("[rank 0] step 2 loss 0.4", t0, &[2.0]);
        assert!(w.deadline().is_some());
        // Rank 1 recovered and reports step 2: past its own step 1.
        w.line("[rank 1] step 2 loss 0.4", t0, &[2.0]);
        assert_eq!(w.deadline(), None);
        // Untagged (torch's own prefix on error lines only): the job's
        // furthest step is the measure, as before.
        let mut w = Watch::new(Duration::from_secs(4));
        w.line("step 2 loss 0.4", t0, &[2.0]);
        w.line(&format!("[rank1]: {OOM}"), t0, &[]);
        w.line("step 2 loss 0.4", t0, &[2.0]);
        assert!(w.deadline().is_some());
        w.line("step 3 loss 0.3", t0, &[3.0]);
        assert_eq!(w.deadline(), None);
    }
}
