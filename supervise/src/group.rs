//! A supervised command's process group from the outside: signals to the
//! whole group, its end (SIGTERM, grace, SIGKILL), the keeper that ends it
//! when the supervisor dies, the OOM killer's order, and the pid file a
//! later supervisor finds it by.
//!
//! The keeper: a `sh` in a process group of its own holds the read end of
//! a pipe whose write end only the supervisor has. When the supervisor dies
//! in any way (kill -9 too) the pipe closes, and the keeper sends the
//! command's group SIGTERM, then SIGKILL after the grace period, so no
//! orphan keeps the GPU (Ray's users report exactly that: ray#23971). The
//! command's processes outside its group (a launcher's ranks, each in a
//! session of its own) reach the keeper through the same pipe as they are
//! seen, one `PID START` line each (`lineage`), and are ended with it.
//! PR_SET_PDEATHSIG would reach only the direct child, not its workers, and
//! a fork server's trial is not our child at all.

use anyhow::Context;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Sends `sig` to process group `pgid`.
pub fn signal(pgid: u32, sig: i32) {
    // SAFETY: kill(2) on a process group; no memory is involved.
    unsafe {
        libc::kill(-(pgid as i32), sig);
    }
}

/// Whether process group `pgid` still has a member (a command's workers may
/// outlive it).
pub fn alive(pgid: u32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    unsafe { libc::kill(-(pgid as i32), 0) == 0 }
}

/// SIGTERM to a group that is not our child (a trial left by a driver that
/// died), then SIGKILL if it is still there after `grace`. It cannot be
/// waited for, so its members are looked at every 100 ms.
pub fn end(pgid: u32, grace: Duration) {
    signal(pgid, libc::SIGTERM);
    let t = Instant::now();
    while t.elapsed() < grace {
        if !alive(pgid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(pgid, libc::SIGKILL);
}

/// The score the kernel's OOM killer adds to a supervised command (and its
/// children, which inherit it): when memory runs out under a shared limit
/// (a cgroup, the host), the command goes before its supervisor, which
/// then records why, rather than the supervisor and every trial with it.
pub const OOM_SCORE_ADJ: &[u8] = b"500";

/// Makes the process `pid` (our child, just started) the OOM killer's
/// first choice over ours (any process may raise a score; lowering needs
/// privileges). Written from outside rather than by a hook between fork
/// and exec, so that the command starts by posix_spawn (vfork), not fork:
/// a fork write-protects every page of this process, each then faulted in
/// again, which made starting a trial cost in proportion to the study a
/// sweep's driver holds. The command's own children inherit the score,
/// but for one it forks in the microseconds between its exec and this
/// write.
pub fn first_for_the_oom_killer(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/oom_score_adj"), OOM_SCORE_ADJ);
}

/// The keeper of process group `pgid` (see the module's comment). Dropping
/// it without `release` ends the group, as the supervisor's death would.
pub struct Keeper {
    sh: std::process::Child,
    pipe: Option<ChildStdin>,
}

impl Keeper {
    pub fn start(pgid: u32, grace: Duration) -> anyhow::Result<Keeper> {
        // `live` prints the recorded processes that are still the ones
        // recorded: not a zombie, the same start time (field 22 of
        // /proc/PID/stat, the 20th after the command's last `) `).
        let script = format!(
            "ps=; while read -r p s; do ps=\"$ps $p:$s\"; done; \
             live() {{ for e in $ps; do p=${{e%%:*}}; read -r st < /proc/$p/stat || continue; \
             st=${{st##*) }}; set -- $st; [ \"$1\" != Z ] && [ \"${{20}}\" = \"${{e#*:}}\" ] && echo $p; done; }}; \
             kill -TERM -{pgid}; l=$(live); [ -z \"$l\" ] || kill -TERM $l; \
             i=0; while [ $i -lt {} ]; do {{ kill -0 -{pgid} || [ -n \"$(live)\" ]; }} || exit 0; \
             sleep 0.1; i=$((i+1)); done; \
             kill -KILL -{pgid}; l=$(live); [ -z \"$l\" ] || kill -KILL $l; exit 0",
            (grace.as_secs_f64() * 10.0).ceil() as u64
        );
        let mut sh = Command::new("/bin/sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting the keeper (/bin/sh) that ends the command if train dies")?;
        let pipe = Some(sh.stdin.take().context("the keeper's stdin")?);
        Ok(Keeper { sh, pipe })
    }

    /// Hands the keeper one of the command's processes outside its group,
    /// by pid and start time, to end with the group.
    pub fn record(&mut self, pid: u32, start: u64) {
        use std::io::Write;
        if let Some(p) = self.pipe.as_mut() {
            // A keeper already gone (EPIPE) has nothing left to end.
            let _ = writeln!(p, "{pid} {start}");
        }
    }

    /// The command's group has ended: the keeper goes without a signal.
    pub fn release(mut self) {
        let _ = self.sh.kill();
        self.pipe = None;
        let _ = self.sh.wait();
    }
}

impl Drop for Keeper {
    /// A command dropped while its group runs is ended by the keeper's own
    /// rule, as if the supervisor had died; then the keeper is reaped.
    fn drop(&mut self) {
        if self.pipe.take().is_some() {
            let _ = self.sh.wait();
        }
    }
}

/// Writes the pid file of a trial's process: its pid and /proc's start
/// time, so a later supervisor tells it from another process given the
/// same pid (and finds a fork server's trial, whose /proc/PID/environ and
/// cmdline are the server's).
pub fn write_pid_file(path: &Path, pid: u32) -> anyhow::Result<()> {
    let start = common::host::process_start(pid)
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    common::files::write_atomic(path, format!("{pid}{start}\n").as_bytes())
}

/// The pid in a pid file, if that process still lives and is the one that
/// was written: same start time, or (a file with no start time, written
/// before it had one) `same` says so.
pub fn live_pid(path: &Path, same: impl Fn(u32) -> bool) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut words = text.split_whitespace();
    let pid: u32 = words.next()?.parse().ok()?;
    // A zombie has ended: it only waits for a parent to read its status.
    if zombie(pid) {
        return None;
    }
    let now = common::host::process_start(pid)?;
    match words.next().and_then(|w| w.parse::<u64>().ok()) {
        Some(start) => (start == now).then_some(pid),
        None => same(pid).then_some(pid),
    }
}

/// Whether `pid` has ended and waits to be reaped (state Z in /proc).
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = &s[s.rfind(')')? + 1..];
            after.split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_file_names_its_process_and_not_one_that_reuses_the_pid() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("pid");
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        write_pid_file(&file, child.id()).unwrap();
        assert_eq!(live_pid(&file, |_| false), Some(child.id()));
        // Another start time: another process with the same pid.
        let text = std::fs::read_to_string(&file).unwrap();
        let (pid, start) = text.trim().split_once(' ').unwrap();
        let start: u64 = start.parse().unwrap();
        std::fs::write(&file, format!("{pid} {}\n", start + 1)).unwrap();
        assert_eq!(live_pid(&file, |_| true), None);
        // An old file (no start time) asks `same`.
        std::fs::write(&file, format!("{pid}\n")).unwrap();
        assert_eq!(live_pid(&file, |_| false), None);
        assert_eq!(live_pid(&file, |_| true), Some(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(live_pid(&file, |_| true), None);
    }

    #[test]
    fn a_dropped_keeper_ends_the_group_and_a_released_one_does_not() {
        for release in [false, true] {
            let mut c = Command::new("sleep")
                .arg("30")
                .process_group(0)
                .spawn()
                .unwrap();
            let k = Keeper::start(c.id(), Duration::from_secs(5)).unwrap();
            if release {
                k.release();
                std::thread::sleep(Duration::from_millis(300));
                assert!(c.try_wait().unwrap().is_none(), "released: still runs");
                c.kill().unwrap();
                c.wait().unwrap();
            } else {
                drop(k);
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGTERM));
            }
        }
    }
}
