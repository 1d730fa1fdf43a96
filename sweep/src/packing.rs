//! Program trials packed on the CPU by each point's predicted peak (the
//! memory model's), not by the largest peak measured: the number of slots
//! follows the smallest peak measured (`measured::on_cpu`), and a point
//! starts only when what it is predicted to need fits in what the trials
//! running leave, so small points share the host and a big one waits for
//! room and runs alone. Pure: the driver reads the machine.

use crate::placement::MEASURED_HEADROOM;

/// A running trial as packing counts it: what it holds now, and what it
/// was predicted to need at most (None: not predicted).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    pub now_mib: Option<f64>,
    pub predicted_mib: Option<f64>,
}

/// What a trial is kept room for: its predicted peak's high end, else
/// the largest peak measured with placement's headroom; never less than
/// it holds now.
fn reserve(h: &Held, largest_mib: f64) -> f64 {
    let most = h.predicted_mib.unwrap_or(largest_mib * MEASURED_HEADROOM);
    most.max(h.now_mib.unwrap_or(0.0))
}

/// Whether a point predicted to need `need_mib` at most (None: not
/// predicted, the largest peak counts) starts now, with `running` in
/// `room_mib` (the host memory for our trials: `--memory-budget`, or what
/// is available plus what they hold). Alone, it always starts.
pub fn admits(need_mib: Option<f64>, room_mib: f64, running: &[Held], largest_mib: f64) -> bool {
    if running.is_empty() {
        return true;
    }
    let need = need_mib.unwrap_or(largest_mib * MEASURED_HEADROOM);
    let held: f64 = running.iter().map(|h| reserve(h, largest_mib)).sum();
    need <= room_mib - held
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(now: f64, predicted: Option<f64>) -> Held {
        Held {
            now_mib: Some(now),
            predicted_mib: predicted,
        }
    }

    #[test]
    fn small_points_share_and_a_big_one_waits_for_room() {
        // 1000 MiB for our trials; points of 200 and 800 MiB (high ends).
        let small = [held(150.0, Some(220.0))];
        assert!(admits(Some(220.0), 1000.0, &small, 800.0));
        assert!(admits(Some(220.0), 1000.0, &[small[0]; 3], 800.0));
        assert!(!admits(Some(220.0), 1000.0, &[small[0]; 4], 800.0));
        // A big one beside a small one does not fit; alone it starts.
        assert!(!admits(Some(850.0), 1000.0, &small, 800.0));
        assert!(admits(Some(850.0), 1000.0, &[], 800.0));
    }

    #[test]
    fn what_is_not_predicted_counts_at_the_largest_peak() {
        // A running trial without a prediction is kept 800 x 1.15.
        let blind = [Held {
            now_mib: Some(10.0),
            predicted_mib: None,
        }];
        assert!(!admits(Some(100.0), 1000.0, &blind, 800.0));
        assert!(admits(Some(60.0), 1000.0, &blind, 800.0));
        // A point without one needs the largest peak.
        assert!(!admits(None, 1000.0, &[held(100.0, Some(100.0))], 800.0));
        // A trial holding more than predicted is counted at what it holds.
        assert!(!admits(
            Some(300.0),
            1000.0,
            &[held(800.0, Some(200.0))],
            800.0
        ));
    }
}
