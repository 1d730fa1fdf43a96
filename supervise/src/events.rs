//! What wakes a supervisor's loop, instead of sleeping between looks: a
//! `Bell` rung by whatever happened (a line of a child's output, a child's
//! exit, Ctrl-C), and the `Waiter` its loop blocks on until a ring or its
//! next deadline (a grace period's end, a timeout). The stop request itself
//! is the `Interrupter` (burn-train's shape): one per process, set by the
//! one signal handler its binary installs, handed to what must stop.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Rings the loop awake; cheap to clone into every thread that has news.
#[derive(Clone, Debug)]
pub struct Bell(Sender<()>);

/// The loop's side of its bell.
#[derive(Debug)]
pub struct Waiter(Receiver<()>);

/// A new bell and the waiter it wakes.
pub fn bell() -> (Bell, Waiter) {
    let (tx, rx) = mpsc::channel();
    (Bell(tx), Waiter(rx))
}

impl Bell {
    pub fn ring(&self) {
        // The loop is gone: nobody to wake.
        let _ = self.0.send(());
    }
}

impl Waiter {
    /// Blocks until a ring or `deadline` (None: a ring only), then takes
    /// every ring that came meanwhile, so one look serves them all.
    pub fn until(&self, deadline: Option<Instant>) {
        let first = match deadline {
            Some(d) => match self
                .0
                .recv_timeout(d.saturating_duration_since(Instant::now()))
            {
                Err(RecvTimeoutError::Timeout) => return,
                other => other.map_err(|_| ()),
            },
            None => self.0.recv().map_err(|_| ()),
        };
        // Every bell dropped: nothing can ring again, so do not block.
        if first.is_err() {
            return;
        }
        while self.0.try_recv().is_ok() {}
    }
}

/// A request to stop, shared by every clone: the signal handler sets it,
/// loops read it, and each loop's bell is rung when it is set.
#[derive(Clone, Debug, Default)]
pub struct Interrupter {
    asked: Arc<AtomicBool>,
    /// The signal that asked first (0: none, or asked by a call).
    signal: Arc<AtomicI32>,
    bells: Arc<Mutex<Vec<Bell>>>,
}

impl Interrupter {
    pub fn new() -> Interrupter {
        Interrupter::default()
    }

    /// The process's interrupter: SIGINT, SIGTERM and SIGHUP set it; a
    /// second signal ends the process at once with `second_exit` (what is
    /// on disk is whole at every moment). Install once per binary.
    pub fn install(second_exit: i32) -> Interrupter {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let i = Interrupter::new();
        let handler = i.clone();
        // signal-hook's handler only writes to a pipe; this thread reads it.
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            std::thread::spawn(move || {
                for sig in signals.forever() {
                    let _ =
                        handler
                            .signal
                            .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                    if handler.stop() {
                        std::process::exit(second_exit);
                    }
                }
            });
        }
        i
    }

    /// The signal that asked for the stop first (SIGINT, SIGTERM, SIGHUP);
    /// None when none did.
    pub fn signal(&self) -> Option<i32> {
        Some(self.signal.load(Ordering::SeqCst)).filter(|s| *s != 0)
    }

    /// What asked for the stop, in a message's words.
    pub fn asked_by(&self) -> &'static str {
        match self.signal() {
            Some(libc::SIGTERM) => "SIGTERM",
            Some(libc::SIGHUP) => "SIGHUP",
            _ => "Ctrl-C",
        }
    }

    /// Asks for a stop and rings every loop; true when a stop had been
    /// asked already.
    pub fn stop(&self) -> bool {
        let again = self.asked.swap(true, Ordering::SeqCst);
        if let Ok(bells) = self.bells.lock() {
            for b in bells.iter() {
                b.ring();
            }
        }
        again
    }

    pub fn should_stop(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    /// Rings `bell` when a stop is asked (at once if it was).
    pub fn wake(&self, bell: &Bell) {
        if let Ok(mut bells) = self.bells.lock() {
            bells.push(bell.clone());
        }
        if self.should_stop() {
            bell.ring();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ring_wakes_the_waiter_before_its_deadline() {
        let (bell, wait) = bell();
        let b = bell.clone();
        let t = Instant::now();
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            b.ring();
        });
        wait.until(Some(t + Duration::from_secs(30)));
        assert!(t.elapsed() < Duration::from_secs(20));
        ringer.join().unwrap();
    }

    /// Rung three times before a wait (no thread whose timing could split
    /// the rings between two waits): one wake, and the next wait runs to its
    /// deadline.
    #[test]
    fn rings_before_a_wait_coalesce_into_one_wake() {
        let (bell, wait) = bell();
        for _ in 0..3 {
            bell.ring();
        }
        let t = Instant::now();
        wait.until(Some(t + Duration::from_secs(30)));
        assert!(t.elapsed() < Duration::from_secs(20));
        let t = Instant::now();
        wait.until(Some(t + Duration::from_millis(30)));
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_stop_rings_every_bell_and_a_second_one_says_so() {
        let i = Interrupter::new();
        let (bell, wait) = bell();
        i.wake(&bell);
        assert!(!i.should_stop());
        let handler = i.clone();
        assert!(!handler.stop(), "the first request");
        assert!(i.should_stop());
        wait.until(None);
        assert!(handler.stop(), "a second request");
        // A bell added after the stop is rung at once.
        let (late, late_wait) = super::bell();
        i.wake(&late);
        late_wait.until(None);
    }
}
