//! When to save (how is `checkpoint`): after each epoch, the strategy says
//! whether to write the checkpoint and whether the epoch is a new best
//! (burn-train's checkpoint strategy, in small).

use common::wire::train::{Best, EpochRow};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub checkpoint: bool,
    pub new_best: bool,
}

pub trait SaveStrategy {
    fn after_epoch(&self, row: &EpochRow, best: Option<Best>) -> Decision;
}

/// A checkpoint every epoch (exact resume loses at most the epoch in
/// flight), and best.safetensors whenever the validation loss improves.
pub struct EveryEpochBestByValLoss;

impl SaveStrategy for EveryEpochBestByValLoss {
    fn after_epoch(&self, row: &EpochRow, best: Option<Best>) -> Decision {
        Decision {
            checkpoint: true,
            new_best: row.val_loss.is_finite() && best.is_none_or(|b| row.val_loss < b.val_loss),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::wire::Versioned;

    #[test]
    fn best_only_improves_and_never_on_nan() {
        let s = EveryEpochBestByValLoss;
        let row = |v: f64| EpochRow {
            val_loss: v,
            ..EpochRow::example()
        };
        let best = Some(Best {
            epoch: 1,
            val_loss: 0.5,
        });
        assert!(s.after_epoch(&row(0.4), best).new_best);
        assert!(!s.after_epoch(&row(0.5), best).new_best);
        assert!(!s.after_epoch(&row(f64::NAN), None).new_best);
        assert!(s.after_epoch(&row(9.0), None).new_best);
        assert!(s.after_epoch(&row(9.0), best).checkpoint);
    }
}
