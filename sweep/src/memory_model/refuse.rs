//! Whether a point runs: its prediction against the memory it would run
//! in (pure; the driver reads the machine).
//!
//! The rule: a point is refused (not run, recorded as failed with class
//! `predicted-out-of-memory`) only when the fit stands on at least
//! `MIN_TO_REFUSE` trials and `MIN_FREE` residual degrees of freedom (its
//! spread is measured, not guessed), and either
//! - the low end of the point's interval is above the room it would run in
//!   (`Room`: a limit the sweep can read), or
//! - by the same fit it needs at least what a point that ran out of memory
//!   needs (`RanOut`, `Fit::at_least`; the same point again, or one larger
//!   in what moves memory): it does not fit either, whatever the limit
//!   was (an address-space limit counts virtual memory, which the model's
//!   PSS peaks do not show).
//!
//! Otherwise it runs, and teaches the model.

use super::{Predicted, RanOut};

/// Trials (measured and out-of-memory) a fit needs before it may refuse a
/// point: with fewer, one odd trial moves the whole fit.
pub const MIN_TO_REFUSE: usize = 5;
/// Residual degrees of freedom a fit needs before it may refuse a point:
/// with fewer, its interval's width is not yet measured.
pub const MIN_FREE: usize = 2;

/// Memory a point would run in, and what limits it, in words that follow
/// its number of MiB ("MiB of host memory available").
#[derive(Debug, Clone, PartialEq)]
pub struct Room {
    pub mib: f64,
    pub what: String,
}

impl Room {
    /// The tightest of `rooms` (None: none known).
    pub fn smallest(rooms: impl IntoIterator<Item = Room>) -> Option<Room> {
        rooms
            .into_iter()
            .filter(|r| r.mib.is_finite() && r.mib > 0.0)
            .min_by(|a, b| a.mib.total_cmp(&b.mib))
    }
}

/// Why a point was refused: the limit its interval is above, in MiB, and
/// in words that follow what it is predicted to need.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub limit_mib: f64,
    pub why: String,
}

impl Predicted {
    /// Whether the fit behind it stands on enough to refuse a point.
    pub fn may_refuse(&self) -> bool {
        self.trials >= MIN_TO_REFUSE && self.free >= MIN_FREE
    }
}

/// Whether the point predicted `p` is refused, against `room` and the
/// point that `ran_out` of memory it needs at least as much as; None: it
/// runs.
pub fn refusal(p: &Predicted, room: Option<&Room>, ran_out: Option<RanOut>) -> Option<Refusal> {
    if !p.may_refuse() {
        return None;
    }
    let room = room
        .filter(|r| r.mib.is_finite() && r.mib > 0.0 && p.at.low_mib > r.mib)
        .map(|r| Refusal {
            limit_mib: r.mib,
            why: format!("more than the {:.0} MiB {}", r.mib, r.what),
        });
    room.or_else(|| {
        ran_out.map(|o| Refusal {
            limit_mib: o.need_mib,
            why: format!(
                "at least what trial {}'s point needs (about {:.0} MiB by the same model), and trial {} ran out of memory",
                o.number, o.need_mib, o.number
            ),
        })
    })
}

/// The margin a fixed point's predicted peak keeps below its limits
/// (`fits_as_fixed`): the interval's floor, about 5%.
pub const FIXED_MARGIN: f64 = 1.05;

/// Whether a point with auto-fix's fixes made before its start, predicted
/// `p`, fits: its predicted peak, with `FIXED_MARGIN`, below the room and
/// below the least need of the points that ran out of memory (`least`).
/// Unlike a refusal, which loses the point and so wants its whole interval
/// above a limit, this picks how many rungs to climb: one too few costs a
/// failed attempt, one too many only a smaller batch with the same
/// batch x accumulation. Points that ran out are held against it by need,
/// not by `Fit::at_least`: a knob with no bearing (the accumulation) would
/// otherwise make the same point look uncertain.
pub fn fits_as_fixed(p: &Predicted, room: Option<&Room>, least: Option<RanOut>) -> bool {
    let need = p.at.peak_mib * FIXED_MARGIN;
    room.is_none_or(|r| !(r.mib.is_finite() && r.mib > 0.0) || need <= r.mib)
        && least.is_none_or(|o| need < o.need_mib)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_model::{Prediction, Resource};

    fn predicted(low: f64, trials: usize, free: usize) -> Predicted {
        Predicted {
            resource: Resource::Host,
            at: Prediction {
                peak_mib: low * 1.2,
                low_mib: low,
                high_mib: low * 1.4,
            },
            trials,
            free,
        }
    }

    fn room(mib: f64) -> Room {
        Room {
            mib,
            what: "of host memory available".into(),
        }
    }

    #[test]
    fn a_point_is_refused_only_when_its_whole_interval_is_above_the_room() {
        let r = refusal(&predicted(1200.0, 8, 4), Some(&room(1000.0)), None).unwrap();
        assert_eq!(r.limit_mib, 1000.0);
        assert_eq!(r.why, "more than the 1000 MiB of host memory available");
        // Its low end below the room: it may fit, so it runs.
        assert_eq!(
            refusal(&predicted(900.0, 8, 4), Some(&room(1000.0)), None),
            None
        );
        // Nothing known to measure it against.
        assert_eq!(refusal(&predicted(9e9, 8, 4), None, None), None);
    }

    #[test]
    fn a_young_model_refuses_nothing() {
        let huge = predicted(1e6, 8, 4);
        assert!(refusal(&huge, Some(&room(10.0)), None).is_some());
        for (trials, free) in [(MIN_TO_REFUSE - 1, 4), (8, MIN_FREE - 1)] {
            let p = predicted(1e6, trials, free);
            assert_eq!(refusal(&p, Some(&room(10.0)), None), None, "{p:?}");
        }
    }

    #[test]
    fn a_point_that_needs_what_one_that_ran_out_of_memory_needs_is_refused() {
        let oom = RanOut {
            number: 7,
            need_mib: 800.0,
        };
        let r = refusal(&predicted(700.0, 8, 4), Some(&room(5000.0)), Some(oom)).unwrap();
        assert_eq!(r.limit_mib, 800.0);
        assert!(
            r.why.starts_with("at least what trial 7's point needs"),
            "{}",
            r.why
        );
        // The room, when the point is above it, is the reason given.
        let r = refusal(&predicted(6000.0, 8, 4), Some(&room(5000.0)), Some(oom)).unwrap();
        assert_eq!(r.limit_mib, 5000.0);
        // A young model refuses nothing, whatever ran out.
        assert_eq!(refusal(&predicted(700.0, 4, 1), None, Some(oom)), None);
    }

    #[test]
    fn a_fixed_point_fits_by_its_predicted_peak_below_both_limits() {
        let p = predicted(1000.0, 8, 4); // peak 1200
        let oom = |need_mib| RanOut {
            number: 3,
            need_mib,
        };
        assert!(fits_as_fixed(&p, None, None));
        assert!(fits_as_fixed(&p, Some(&room(1300.0)), Some(oom(1300.0))));
        // Within the margin of the room, or of what a point that ran out
        // needs: not yet.
        assert!(!fits_as_fixed(&p, Some(&room(1240.0)), None));
        assert!(!fits_as_fixed(&p, None, Some(oom(1250.0))));
        // A young model still picks its rungs: nothing here refuses.
        assert!(fits_as_fixed(
            &predicted(1000.0, 2, 0),
            Some(&room(1300.0)),
            None
        ));
    }

    #[test]
    fn the_tightest_room_is_taken_and_empty_readings_are_not_rooms() {
        let rooms = [room(3000.0), room(0.0), room(f64::NAN), room(1200.0)];
        assert_eq!(Room::smallest(rooms).unwrap().mib, 1200.0);
        assert_eq!(Room::smallest(Vec::new()), None);
    }
}
