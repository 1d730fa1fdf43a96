//! How a run or a trial failed, as summary.yaml's `error_class`, a sweep's
//! trials and `cfgcheck --explain` (cfgcheck-explain/v1) record it: the
//! class, and the figures of an out-of-memory message. Telling a class from
//! a message is the known-failures catalogue's (`diagnose::failures`).

use serde::{Deserialize, Serialize};

/// A failure's class; its kebab-case name is what every file records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    OutOfMemory,
    CudaGraphPointer,
    DeviceSideAssert,
    CudaError,
    NonFiniteLoss,
    /// A class label outside the model's classes (IndexError "Target N is
    /// out of bounds" on the CPU; a device-side assert on a GPU).
    LabelOutOfRange,
    Killed,
    /// The CUDA caching allocator broken for the rest of the process: with
    /// expandable segments, a mapping that failed part-way leaves every
    /// later allocation failing an internal assert (pytorch#188008). Only a
    /// new process recovers; a smaller batch does not.
    AllocatorBroken,
    /// A sweep's trial that ran past `--trial-timeout`.
    Timeout,
    /// A sweep's trial whose driver stopped (Ctrl-C) or died while it ran.
    Interrupted,
    /// A sweep's point not run: its memory model's prediction, interval
    /// and all, is above the memory it would run in.
    PredictedOutOfMemory,
    Other,
}

impl Class {
    /// Every class, in the order docs/FORMATS.md, "Failure classes" lists
    /// them.
    pub const ALL: [Class; 12] = [
        Class::OutOfMemory,
        Class::CudaGraphPointer,
        Class::DeviceSideAssert,
        Class::CudaError,
        Class::NonFiniteLoss,
        Class::LabelOutOfRange,
        Class::Killed,
        Class::AllocatorBroken,
        Class::Timeout,
        Class::Interrupted,
        Class::PredictedOutOfMemory,
        Class::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::OutOfMemory => "out-of-memory",
            Class::CudaGraphPointer => "cuda-graph-pointer",
            Class::DeviceSideAssert => "device-side-assert",
            Class::CudaError => "cuda-error",
            Class::NonFiniteLoss => "non-finite-loss",
            Class::LabelOutOfRange => "label-out-of-range",
            Class::Killed => "killed",
            Class::AllocatorBroken => "allocator-broken",
            Class::Timeout => "timeout",
            Class::Interrupted => "interrupted",
            Class::PredictedOutOfMemory => "predicted-out-of-memory",
            Class::Other => "other",
        }
    }

    /// Failures a different config can avoid (the fallback chain's cue):
    /// memory, CUDA graphs, and a loss that keeps diverging.
    pub fn config_caused(self) -> bool {
        matches!(
            self,
            Class::OutOfMemory | Class::CudaGraphPointer | Class::NonFiniteLoss
        )
    }
}

/// The figures of a PyTorch out-of-memory message, in MiB (read by
/// `diagnose::failures::oom_figures`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OomFigures {
    pub tried_mib: Option<f64>,
    pub total_mib: Option<f64>,
    pub free_mib: Option<f64>,
    pub allocated_mib: Option<f64>,
    pub reserved_unallocated_mib: Option<f64>,
}

impl OomFigures {
    /// Fragmentation, not size: the failed allocation would have fit in the
    /// memory PyTorch reserved but left unallocated, had it been contiguous.
    pub fn fragmented(&self) -> bool {
        match (self.reserved_unallocated_mib, self.tried_mib) {
            (Some(r), Some(t)) => r >= t && r > 0.0,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_serialise_as_their_names() {
        for c in Class::ALL {
            assert_eq!(serde_yaml::to_string(&c).unwrap().trim(), c.as_str());
        }
    }

    #[test]
    fn config_caused_failures_are_the_fallback_cues() {
        assert!(Class::OutOfMemory.config_caused());
        assert!(Class::CudaGraphPointer.config_caused());
        assert!(!Class::DeviceSideAssert.config_caused());
        assert!(!Class::Killed.config_caused());
        // A new process fixes it, not another config.
        assert!(!Class::AllocatorBroken.config_caused());
    }
}
