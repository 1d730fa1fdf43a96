//! Optuna's `JournalFileSymlinkLock`, which Optuna's and Rustuna's
//! writers take too (see the journal's module doc).

use super::uuid4;
use anyhow::{Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// Optuna's `JournalFileSymlinkLock` (see the module doc).
pub(super) struct SymlinkLock<'a> {
    path: &'a Path,
    released: bool,
}

impl<'a> SymlinkLock<'a> {
    pub(super) fn acquire(
        path: &'a Path,
        target: &Path,
        grace: Duration,
    ) -> Result<SymlinkLock<'a>> {
        const WARN_EVERY: Duration = Duration::from_secs(10);
        let mut sleep = Duration::from_millis(1);
        let mut last_change = Instant::now();
        let mut last_warning = Instant::now();
        let mut mtime = None;
        loop {
            match std::os::unix::fs::symlink(target, path) {
                Ok(()) => {
                    return Ok(SymlinkLock {
                        path,
                        released: false,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("taking the lock {}", path.display()))
                }
            }
            if last_warning.elapsed() > WARN_EVERY {
                common::say!(
                    "warning: it is taking longer than {}s to take the lock {}; retrying",
                    WARN_EVERY.as_secs(),
                    path.display()
                );
                last_warning = Instant::now();
            }
            // Through the link: the journal's mtime, which each write under
            // the lock moves. A dangling link has its own.
            let now_mtime = std::fs::metadata(path)
                .or_else(|_| std::fs::symlink_metadata(path))
                .and_then(|m| m.modified());
            let Ok(now_mtime) = now_mtime else {
                continue; // Let go meanwhile: retry at once.
            };
            if mtime != Some(now_mtime) {
                mtime = Some(now_mtime);
                last_change = Instant::now();
            }
            if last_change.elapsed() > grace {
                common::say!(
                    "warning: the lock {} has not been let go for {}s: breaking it",
                    path.display(),
                    grace.as_secs_f64()
                );
                last_warning = Instant::now();
                if release(path).is_ok() {
                    sleep = Duration::from_millis(1);
                }
                continue;
            }
            std::thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_secs(1));
        }
    }

    pub(super) fn release(mut self) -> Result<()> {
        self.released = true;
        release(self.path)
    }
}

impl Drop for SymlinkLock<'_> {
    fn drop(&mut self) {
        if !self.released {
            let _ = release(self.path);
        }
    }
}

/// Lets go of a lock as Optuna does: rename it to a unique name (only one
/// of several racing releasers can), then unlink that.
fn release(path: &Path) -> Result<()> {
    let mut renamed = path.as_os_str().to_owned();
    renamed.push(format!("{}.rename", uuid4()));
    std::fs::rename(path, &renamed)
        .with_context(|| format!("letting go of {}: did not possess the lock", path.display()))?;
    std::fs::remove_file(&renamed)
        .with_context(|| format!("removing {}", Path::new(&renamed).display()))
}

#[cfg(test)]
mod tests {
    use super::super::tests::*;
    use crate::trial::Direction;
    use std::time::{Duration, Instant};

    #[test]
    fn a_stale_lock_is_broken_after_the_grace_period() {
        let (d, j) = journal_with(&[]);
        let j = j.with_lock_grace(Duration::from_millis(300));
        // A lock left by a killed writer (as Optuna makes it: a symlink).
        std::os::unix::fs::symlink("journal.log", d.path().join("journal.log.lock")).unwrap();
        let t0 = Instant::now();
        j.create_study("s", Direction::Minimize).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(300));
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".lock"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
