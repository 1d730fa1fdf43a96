//! A supervised command's processes wherever they went: its process group,
//! and each descendant seen outside it, kept by pid and start time.
//!
//! A launcher such as torchrun starts each rank in a session of its own,
//! outside the command's group, so a signal to the group misses the ranks;
//! and when the launcher dies first (the kernel's OOM killer picks the
//! largest process) its ranks are re-parented to init, no longer anyone's
//! descendants. So the processes outside the group that the memory sampler
//! sees are recorded here: signals to the command reach them, the command
//! is alive while one of them is, and each is handed to the keeper
//! (`group::Keeper`), which ends them with the group if the supervisor
//! dies. A process that escapes the group and is orphaned before a sample
//! sees it (the first ones come within 5, 30, 100 and 250 ms of the start,
//! then one every period) is not known.
//!
//! Not a child subreaper: that would make every orphan of every command
//! (a daemon a library double-forks) a zombie of this process for it to
//! reap, and the recorded pids already find the orphans.

use crate::group::{self, Keeper};
use crate::memory;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// One command's processes: its group (its pid) and those recorded.
pub struct Lineage {
    root: u32,
    state: Mutex<State>,
}

struct State {
    /// Pid to start time: the processes seen outside the group.
    known: BTreeMap<u32, u64>,
    /// None once released.
    keeper: Option<Keeper>,
}

impl Lineage {
    /// Starts the keeper of the command `root` (its pid and group, just
    /// started). On an error the caller ends the group itself.
    pub fn start(root: u32, grace: Duration) -> anyhow::Result<Lineage> {
        Ok(Lineage {
            root,
            state: Mutex::new(State {
                known: BTreeMap::new(),
                keeper: Some(Keeper::start(root, grace)?),
            }),
        })
    }

    /// The command's pid, also its process group's id.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// The command's processes now (for the sampler): its group, the
    /// processes recorded that still live, and all their descendants.
    /// Those outside the group not yet known are recorded, and handed to
    /// the keeper.
    pub fn tree(&self) -> Vec<u32> {
        let procs = memory::snapshot();
        let Ok(mut st) = self.state.lock() else {
            return memory::tree_in(&procs, &[self.root]);
        };
        st.known
            .retain(|pid, start| procs.get(pid).is_some_and(|p| p.start == *start));
        let roots: Vec<u32> = std::iter::once(self.root)
            .chain(st.known.keys().copied())
            .collect();
        let pids = memory::tree_in(&procs, &roots);
        for pid in &pids {
            let Some(p) = procs.get(pid) else { continue };
            if p.pgrp != self.root && !st.known.contains_key(pid) {
                st.known.insert(*pid, p.start);
                if let Some(k) = st.keeper.as_mut() {
                    k.record(*pid, p.start);
                }
            }
        }
        pids
    }

    /// The recorded processes that are still the ones recorded.
    pub fn strays(&self) -> Vec<u32> {
        let Ok(st) = self.state.lock() else {
            return Vec::new();
        };
        st.known
            .iter()
            .filter(|(pid, start)| still(**pid, **start))
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// `sig` to the command's group and to each recorded process.
    pub fn signal(&self, sig: i32) {
        group::signal(self.root, sig);
        for pid in self.strays() {
            // SAFETY: kill(2) on one process, checked to be the one
            // recorded a moment ago.
            unsafe {
                libc::kill(pid as i32, sig);
            }
        }
    }

    /// Whether any of the command's processes remains.
    pub fn alive(&self) -> bool {
        group::alive(self.root) || !self.strays().is_empty()
    }

    /// The command has ended with all its processes: the keeper goes
    /// without a signal. Otherwise (or never called) dropping the lineage
    /// ends what is left by the keeper's own rule, as if the supervisor
    /// had died.
    pub fn release(&self) {
        if let Some(k) = self.state.lock().ok().and_then(|mut s| s.keeper.take()) {
            k.release();
        }
    }
}

/// Whether `pid` is still the process that started at `start` (a zombie
/// has ended).
fn still(pid: u32, start: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| memory::parse_stat(&t))
        .is_some_and(|p| p.start == start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
        let t = Instant::now();
        while !ready() {
            assert!(t.elapsed() < Duration::from_secs(15), "waited for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| memory::parse_stat(&t))
            .is_some()
    }

    /// `sh` in a process group of its own that starts `sleep 300` in a
    /// session of its own (as torchrun starts a rank), with its lineage,
    /// once that has recorded the sleep as a stray: the sh, its lineage,
    /// the sleep. Its pid is in the file before its setsid(2), while it is
    /// still in the sh's group, so the wait is for the recording itself.
    fn job_with_a_stray() -> (std::process::Child, Lineage, u32) {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("stray");
        let sh = Command::new("sh")
            .args(["-c", "setsid sleep 300 & echo $! > \"$0\"; wait"])
            .arg(&file)
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let lineage = Lineage::start(sh.id(), Duration::from_secs(2)).unwrap();
        let mut stray = 0;
        wait_until("the stray's pid", || {
            stray = std::fs::read_to_string(&file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            stray != 0 && lineage.tree().contains(&stray) && lineage.strays() == [stray]
        });
        (sh, lineage, stray)
    }

    /// A process in a session of its own whose parent is SIGKILLed first:
    /// signals reach it while the supervisor lives, and the keeper ends it
    /// when the supervisor goes.
    #[test]
    fn a_process_outside_the_group_is_followed_after_its_parent_dies() {
        let (mut sh, lineage, stray) = job_with_a_stray();
        assert_eq!(lineage.strays(), vec![stray]);
        sh.kill().unwrap();
        sh.wait().unwrap();
        // Its parent gone, the stray is still the command's.
        assert!(alive(stray) && lineage.alive());
        assert!(lineage.tree().contains(&stray));
        // The supervisor gone (its lineage dropped unreleased): the keeper
        // ends it.
        drop(lineage);
        wait_until("the stray to end", || !alive(stray));
    }

    #[test]
    fn a_signal_reaches_the_recorded_processes_and_a_release_ends_nothing() {
        let (mut sh, lineage, stray) = job_with_a_stray();
        lineage.signal(libc::SIGKILL);
        sh.wait().unwrap();
        wait_until("both to end", || !alive(stray) && !lineage.alive());
        lineage.release();
        drop(lineage);
    }
}
