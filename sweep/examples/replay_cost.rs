//! The time of a journal's whole replay, what a worker joining a large
//! study waits for before anything else (issue 44): `rounds` fresh replays
//! of the file (each a new `Journal`, no cache), each timed in wall time
//! and in this process's CPU (the reading thread's included), printing one
//! JSON line:
//!
//!     replay_cost JOURNAL STUDY [rounds]
//!     {"trials": 50000, "wall_ms": [...], "cpu_ms": [...]}

use anyhow::{Context, Result};
use std::time::Instant;
use sweep::journal::Journal;

/// This process's CPU time so far (user + system), in milliseconds.
fn cpu_ms() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, name, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: replay_cost JOURNAL STUDY [rounds]");
    };
    let rounds: usize = rest.first().map_or(Ok(5), |r| r.parse())?;
    let (mut wall, mut cpu, mut trials) = (Vec::new(), Vec::new(), 0);
    for _ in 0..rounds {
        let (t0, c0) = (Instant::now(), cpu_ms());
        let study = Journal::open(std::path::Path::new(path))?
            .into_study(name)?
            .context("no such study")?;
        wall.push(t0.elapsed().as_secs_f64() * 1000.0);
        cpu.push(cpu_ms() - c0);
        trials = study.trials.len();
        // Left for the process's exit, as `train sweep` leaves it.
        std::mem::forget(study);
    }
    println!(
        "{}",
        serde_json::json!({"trials": trials, "wall_ms": wall, "cpu_ms": cpu})
    );
    Ok(())
}
