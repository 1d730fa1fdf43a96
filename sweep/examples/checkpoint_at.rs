//! A journal's replay checkpoint as it stood at an earlier size, for the
//! join benchmark's worst case (a driver writes one each time the journal
//! has grown by a quarter, so a joining worker may find one that stands
//! for 80% of the journal): copies the journal's whole lines up to
//! `fraction` of its bytes to a temp file beside it, writes that copy's
//! checkpoint and moves it beside the journal, where it matches the
//! journal's first bytes. Prints the bytes and trials it stands for and
//! the seconds its write took.
//!
//!     checkpoint_at JOURNAL STUDY FRACTION

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use sweep::journal::Journal;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, name, fraction] = args.as_slice() else {
        anyhow::bail!("usage: checkpoint_at JOURNAL STUDY FRACTION");
    };
    let fraction: f64 = fraction.parse().context("FRACTION: a number in (0, 1]")?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let cut = (bytes.len() as f64 * fraction) as usize;
    let end = memchr::memrchr(b'\n', &bytes[..cut.min(bytes.len())]).map_or(0, |nl| nl + 1);
    let dir = Path::new(path).parent().unwrap_or(Path::new("."));
    let part = dir.join("checkpoint_at.part.log");
    std::fs::write(&part, &bytes[..end])?;
    let journal = Journal::open(&part)?;
    let trials = journal.load(name)?.context("no such study")?.trials.len();
    let t0 = std::time::Instant::now();
    journal.keep_checkpoint(true);
    let write_s = t0.elapsed().as_secs_f64();
    let made = PathBuf::from(format!("{}.checkpoint", part.display()));
    std::fs::rename(&made, format!("{path}.checkpoint"))
        .context("no checkpoint was written (the journal part is under 8 MiB?)")?;
    std::fs::remove_file(&part)?;
    println!(
        "{}",
        serde_json::json!({"journal_bytes": end, "trials": trials, "write_s": write_s})
    );
    Ok(())
}
