//! A request to stop, handed to the loop (burn-train's
//! `TrainingInterrupter`): train's SIGINT/SIGTERM handler sets it, the loop
//! reads it before each step, and a test can set it in-process. The loop
//! stops before its next step, so the run ends with its summary and a
//! checkpoint of its last whole epoch. (A sweep stops a pruned trial this
//! way.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A cloneable handle: every clone sets and reads the same request.
#[derive(Clone, Debug, Default)]
pub struct Interrupter(Arc<AtomicBool>);

impl Interrupter {
    pub fn new() -> Interrupter {
        Interrupter::default()
    }

    /// Asks the loop to stop; true when a stop had been asked already (a
    /// second signal, which ends the process at once).
    pub fn stop(&self) -> bool {
        self.0.swap(true, Ordering::SeqCst)
    }

    pub fn should_stop(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_clone_sees_the_request_and_a_second_one_says_so() {
        let i = Interrupter::new();
        let handler = i.clone();
        assert!(!i.should_stop());
        assert!(!handler.stop(), "the first request");
        assert!(i.should_stop());
        assert!(handler.stop(), "a second request");
        assert!(i.should_stop());
    }
}
