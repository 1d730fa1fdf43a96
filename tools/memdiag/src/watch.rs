//! `--watch`: one CSV row per GPU per sample, each row written whole and
//! flushed, so Ctrl-C (or SIGTERM) between rows never leaves a torn line. When
//! appending to an existing file, a torn last line left by an earlier crash is
//! cut off first.

use anyhow::Context;
use common::report::Report;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub const HEADER: &str = "time,index,used_mib,free_mib,utilization_gpu_pct";

pub struct Sample {
    pub index: u32,
    pub used_mib: Option<u64>,
    pub free_mib: Option<u64>,
    pub utilization_gpu_pct: Option<u32>,
}

/// The samples a saved report stands for (`--from FILE --watch`): the same
/// figures each time, which is what replaying a snapshot means.
pub fn samples_of(report: &Report) -> Vec<Sample> {
    report
        .gpus
        .iter()
        .map(|g| Sample {
            index: g.index,
            used_mib: g.memory.map(|m| m.used_mib),
            free_mib: g.memory.map(|m| m.free_mib),
            utilization_gpu_pct: g.utilization.map(|u| u.gpu_pct),
        })
        .collect()
}

pub struct Options<'a> {
    pub interval: Duration,
    pub count: Option<u64>,
    pub csv: Option<&'a Path>,
}

/// Samples until `count` samples were taken or the process is interrupted.
pub fn run(opts: &Options, mut take: impl FnMut() -> Vec<Sample>) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .context("cannot install the Ctrl-C handler")?;

    let mut out: Box<dyn Write> = match opts.csv {
        Some(path) => Box::new(open_log(path)?),
        None => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{HEADER}")?;
            stdout.flush()?;
            Box::new(stdout)
        }
    };
    let mut taken = 0u64;
    while !stop.load(Ordering::SeqCst) && opts.count.is_none_or(|n| taken < n) {
        let started = Instant::now();
        let time = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        for s in take() {
            // One write per row: a row is on disk whole or not at all.
            let row = format!(
                "{time},{},{},{},{}\n",
                s.index,
                cell(s.used_mib),
                cell(s.free_mib),
                cell(s.utilization_gpu_pct)
            );
            out.write_all(row.as_bytes())?;
            out.flush()?;
        }
        taken += 1;
        if opts.count.is_some_and(|n| taken >= n) {
            break;
        }
        // Sleep in short slices so Ctrl-C ends the loop promptly.
        while started.elapsed() < opts.interval && !stop.load(Ordering::SeqCst) {
            std::thread::sleep((opts.interval - started.elapsed()).min(Duration::from_millis(50)));
        }
    }
    Ok(())
}

/// An unreadable value is an empty cell, never 0.
fn cell<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// Opens the CSV log for appending: writes the header to a new or empty file,
/// checks it on an existing one, and cuts a torn last line.
fn open_log(path: &Path) -> anyhow::Result<File> {
    let name = path.display();
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| common::bad_input!("{name}: cannot open for appending: {e}"))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| common::bad_input!("{name}: cannot read the existing log: {e}"))?;
    if text.is_empty() {
        writeln!(file, "{HEADER}")?;
        return Ok(file);
    }
    if text.lines().next() != Some(HEADER) {
        return Err(common::bad_input!(
            "{name}: line 1: expected the header `{HEADER}`; not a memdiag watch log, refusing to append"
        ));
    }
    if !text.ends_with('\n') {
        let keep = text.rfind('\n').map_or(0, |i| i + 1);
        file.set_len(keep as u64)?;
        file.seek(SeekFrom::End(0))?;
        common::say!(
            "memdiag: {name}: cut a torn last line ({} bytes) left by an interrupted writer",
            text.len() - keep
        );
        if keep == 0 {
            writeln!(file, "{HEADER}")?;
        }
    }
    Ok(file)
}
