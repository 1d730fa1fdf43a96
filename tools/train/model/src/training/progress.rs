//! Where a run stands between steps: the epochs done, the best, the
//! micro-batch in use after out-of-memory recoveries, the memory peaks and
//! the streak of non-finite losses. Pure: the trainer owns one and the run
//! driver reads it when the run ends.

use common::wire::train::{Best, EpochRow, PeakMemory};

/// Non-finite losses in a row that end the run (single ones are skipped).
pub const NON_FINITE_LIMIT: u32 = 3;

#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// First epoch to run (1-based); > 1 after a resume.
    pub start_epoch: u32,
    pub best: Option<Best>,
    pub last: Option<EpochRow>,
    /// The micro-batch in use (None: whole batches).
    pub micro_batch: Option<u32>,
    pub peak: PeakMemory,
    non_finite_streak: u32,
}

impl Progress {
    /// A fresh run with the config's micro-batch.
    pub fn new(micro_batch: Option<u32>) -> Progress {
        Progress {
            start_epoch: 1,
            micro_batch,
            ..Progress::default()
        }
    }

    /// The micro-batch a batch of `batch` examples is split into: the one in
    /// use, never more than the batch. The one place it is computed: the
    /// step's split, the epoch row and validation's chunks agree.
    pub fn micro_batch_for(&self, batch: u32) -> u32 {
        self.micro_batch.map_or(batch, |m| m.min(batch))
    }

    /// A step's loss was not finite: true when that makes
    /// `NON_FINITE_LIMIT` in a row (the config diverges).
    pub fn non_finite_loss(&mut self) -> bool {
        self.non_finite_streak += 1;
        self.non_finite_streak >= NON_FINITE_LIMIT
    }

    /// A step's loss was finite: the streak starts over.
    pub fn finite_loss(&mut self) {
        self.non_finite_streak = 0;
    }

    /// Folds one epoch's peaks (MiB) and the allocator's counters into the
    /// run's.
    pub fn fold_peak(&mut self, allocated: f64, reserved: f64, alloc_retries: i64, ooms: i64) {
        let p = &mut self.peak;
        p.allocated_mib = Some(p.allocated_mib.map_or(allocated, |x| x.max(allocated)));
        p.reserved_mib = Some(p.reserved_mib.map_or(reserved, |x| x.max(reserved)));
        p.alloc_retries = Some(alloc_retries);
        p.ooms = Some(ooms);
    }
}

/// After an out-of-memory error at micro-batch `micro`: the next, half of it
/// rounded up, or None when it was 1 already (nothing left to split).
pub fn halved(micro: u32) -> Option<u32> {
    (micro > 1).then(|| micro.div_ceil(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_micro_batch_is_the_one_in_use_at_most_the_batch() {
        let whole = Progress::new(None);
        assert_eq!(whole.micro_batch_for(16), 16);
        assert_eq!(whole.micro_batch_for(5), 5, "a short last batch");
        let split = Progress::new(Some(4));
        assert_eq!(split.micro_batch_for(16), 4);
        assert_eq!(split.micro_batch_for(3), 3);
        assert_eq!(Progress::new(Some(32)).micro_batch_for(16), 16);
    }

    #[test]
    fn halving_rounds_up_and_stops_at_one() {
        assert_eq!(halved(16), Some(8));
        assert_eq!(halved(5), Some(3));
        assert_eq!(halved(3), Some(2));
        assert_eq!(halved(2), Some(1));
        assert_eq!(halved(1), None);
        assert_eq!(halved(0), None);
    }

    #[test]
    fn only_a_streak_of_non_finite_losses_ends_the_run() {
        let mut p = Progress::new(None);
        assert!(!p.non_finite_loss());
        assert!(!p.non_finite_loss());
        p.finite_loss();
        assert!(!p.non_finite_loss());
        assert!(!p.non_finite_loss());
        assert!(p.non_finite_loss(), "the third in a row");
    }

    #[test]
    fn peaks_keep_the_run_maximum_and_the_latest_counters() {
        let mut p = Progress::new(None);
        p.fold_peak(100.0, 200.0, 1, 0);
        p.fold_peak(50.0, 300.0, 2, 1);
        assert_eq!(p.peak.allocated_mib, Some(100.0));
        assert_eq!(p.peak.reserved_mib, Some(300.0));
        assert_eq!((p.peak.alloc_retries, p.peak.ooms), (Some(2), Some(1)));
    }
}
