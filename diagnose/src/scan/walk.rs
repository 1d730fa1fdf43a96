//! The I/O of `cfgcheck --scan`: the paths named -> the Python files under
//! them -> each read and scanned, on every core, in a stable order.
//!
//! A directory gives its `*.py` files, below it but not in hidden
//! directories, `__pycache__`, virtual environments (a directory holding
//! `pyvenv.cfg`) or installed packages (`site-packages`, `dist-packages`):
//! those hold other people's code, whose own checkpointing and compile
//! modes would pair with the user's. A path named on the command line is
//! always scanned, whatever it is called (a file of any extension, or
//! `.venv/lib/python3.12/site-packages/torch` itself). Symbolic links to
//! files are read; links to directories are not followed (no loops).

use super::{FileScan, Scanned};
use common::bad_input;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use walkdir::{DirEntry, WalkDir};

/// Largest file scanned; a larger one is reported as not parsed (generated
/// code, data written out as Python).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Directory names never entered below a named path.
const SKIPPED_DIRS: [&str; 3] = ["__pycache__", "site-packages", "dist-packages"];

/// The files to scan under `paths` (each once, in the order named, a
/// directory's files by name), and the directories that could not be read,
/// as not parsed. A path that does not exist is bad usage (exit 2), before
/// anything is scanned.
pub fn files(paths: &[PathBuf]) -> anyhow::Result<(Vec<PathBuf>, Vec<Scanned>)> {
    for p in paths {
        std::fs::metadata(p).map_err(|e| bad_input!("--scan {}: {e}", p.display()))?;
    }
    let mut seen = HashSet::new();
    let mut files = vec![];
    let mut unreadable = vec![];
    for root in paths {
        if !root.is_dir() {
            if seen.insert(root.clone()) {
                files.push(root.clone());
            }
            continue;
        }
        let walk = WalkDir::new(root)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_type().is_dir() || !skipped(e));
        for entry in walk {
            match entry {
                Ok(e) if is_python(&e) => {
                    if seen.insert(e.path().to_path_buf()) {
                        files.push(e.into_path());
                    }
                }
                Ok(_) => {}
                Err(err) => unreadable.push(Scanned {
                    file: err
                        .path()
                        .map_or_else(|| root.display().to_string(), |p| p.display().to_string()),
                    scan: FileScan::NotParsed {
                        line: None,
                        reason: format!(
                            "cannot read: {}",
                            err.io_error()
                                .map_or_else(|| err.to_string(), |e| e.to_string())
                        ),
                    },
                }),
            }
        }
    }
    Ok((files, unreadable))
}

fn skipped(e: &DirEntry) -> bool {
    let name = e.file_name().to_string_lossy();
    name.starts_with('.')
        || SKIPPED_DIRS.contains(&name.as_ref())
        || e.path().join("pyvenv.cfg").exists()
}

fn is_python(e: &DirEntry) -> bool {
    let py = e.path().extension().is_some_and(|x| x == "py");
    py && (e.file_type().is_file() || (e.path_is_symlink() && e.path().is_file()))
}

/// Reads and scans each file, on up to `threads` threads (each with its own
/// parser); the results in the files' order. Only a parser that cannot be
/// made is an error (the tool broke); a file that cannot be read, is too
/// large, not UTF-8 or not Python is a result.
pub fn scan_all(files: &[PathBuf], threads: usize) -> anyhow::Result<Vec<Scanned>> {
    let next = AtomicUsize::new(0);
    let threads = threads.clamp(1, files.len().max(1));
    let per_thread: Vec<anyhow::Result<Vec<(usize, Scanned)>>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut parser = super::parser()?;
                    let mut done = vec![];
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else {
                            return Ok(done);
                        };
                        done.push((i, scan_file(&mut parser, path)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a scanner thread panicked")))
            })
            .collect()
    });
    let mut all = vec![];
    for r in per_thread {
        all.extend(r?);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, s)| s).collect())
}

fn scan_file(parser: &mut tree_sitter::Parser, path: &Path) -> Scanned {
    let file = path.display().to_string();
    let not = |reason: String| Scanned {
        file: file.clone(),
        scan: FileScan::NotParsed { line: None, reason },
    };
    match std::fs::metadata(path) {
        Err(e) => return not(format!("cannot read: {e}")),
        Ok(m) if !m.is_file() => return not("not a regular file".into()),
        Ok(m) if m.len() > MAX_FILE_BYTES => {
            return not(format!(
                "larger than {} MiB ({} bytes)",
                MAX_FILE_BYTES / (1024 * 1024),
                m.len()
            ))
        }
        Ok(_) => {}
    }
    match std::fs::read(path) {
        Ok(bytes) => Scanned {
            scan: super::scan(parser, &bytes),
            file,
        },
        Err(e) => not(format!("cannot read: {e}")),
    }
}
