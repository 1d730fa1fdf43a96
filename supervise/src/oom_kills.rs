//! The memory cgroup a command runs in: the kernel's OOM-killer count (a
//! command killed by SIGKILL while that count rose was killed for memory,
//! an out-of-memory, not by someone's `kill -9`; cgroup v1 keeps it in
//! `memory.oom_control` as `oom_kill N`, Linux 4.13+, v2 in
//! `memory.events`), and its limit (v1 `memory.limit_in_bytes`, v2
//! `memory.max`), which a sweep's memory model measures points against.

use std::path::PathBuf;

/// The count of one cgroup, read when the command started.
#[derive(Debug)]
pub struct Counter {
    file: PathBuf,
    at_start: u64,
}

impl Counter {
    /// The counter of the memory cgroup `pid` is in (None: no memory
    /// cgroup, or no count to read).
    pub fn of(pid: u32) -> Option<Counter> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let file = file_of(&text, ["memory.oom_control", "memory.events"])?;
        let at_start = read(&file)?;
        Some(Counter { file, at_start })
    }

    /// The evidence, when the count rose since the start.
    pub fn rose(&self) -> Option<String> {
        let now = read(&self.file)?;
        (now > self.at_start).then(|| {
            format!(
                "{}: oom_kill {} -> {now}",
                self.file.display(),
                self.at_start
            )
        })
    }
}

/// The memory limit of the cgroup `pid` is in, MiB; None: no memory
/// cgroup, or no limit (`max`, or v1's huge "unlimited" number).
pub fn limit_mib(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let file = file_of(&text, ["memory.limit_in_bytes", "memory.max"])?;
    let bytes: u64 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    // v1 writes "no limit" as the largest page-aligned i64.
    (bytes < 1 << 60).then(|| bytes as f64 / (1024.0 * 1024.0))
}

/// The cgroup file `[v1 name, v2 name]` of the memory cgroup, from
/// /proc/PID/cgroup's lines: v1's memory controller line
/// (`N:memory:/path`, or with other controllers joined by commas), else
/// v2's unified line (`0::/path`).
fn file_of(proc_cgroup: &str, [v1_name, v2_name]: [&str; 2]) -> Option<PathBuf> {
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            return Some(
                PathBuf::from("/sys/fs/cgroup/memory")
                    .join(path)
                    .join(v1_name),
            );
        }
        if controllers.is_empty() {
            v2 = Some(PathBuf::from("/sys/fs/cgroup").join(path).join(v2_name));
        }
    }
    v2
}

/// The `oom_kill N` line's N.
fn read(file: &PathBuf) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_found_for_cgroup_v1_and_v2() {
        let file_of = |t| file_of(t, ["memory.oom_control", "memory.events"]);
        let v1 = "12:pids:/\n9:memory:/trainguard-test\n0::/\n";
        assert_eq!(
            file_of(v1).unwrap(),
            PathBuf::from("/sys/fs/cgroup/memory/trainguard-test/memory.oom_control")
        );
        let joined = "4:cpu,memory:/a/b\n";
        assert_eq!(
            file_of(joined).unwrap(),
            PathBuf::from("/sys/fs/cgroup/memory/a/b/memory.oom_control")
        );
        let v2 = "0::/user.slice/sweep\n";
        assert_eq!(
            file_of(v2).unwrap(),
            PathBuf::from("/sys/fs/cgroup/user.slice/sweep/memory.events")
        );
        assert_eq!(file_of("3:pids:/\n"), None);
    }

    #[test]
    fn the_limit_is_read_or_none() {
        // This process's own: a number of MiB where a limit is set, None
        // where none is; never 0 or the v1 "unlimited" sentinel.
        if let Some(l) = limit_mib(std::process::id()) {
            assert!(l > 0.0 && l < (1u64 << 40) as f64, "{l}");
        }
        assert_eq!(limit_mib(u32::MAX), None);
    }
}
