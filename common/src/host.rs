//! Facts about this machine and this process's stdin that several tools need.

use crate::gpus;
use crate::input;
use crate::report::Report;
use std::io::IsTerminal;
use std::path::Path;

/// MemTotal from /proc/meminfo, in MiB (None off Linux).
pub fn ram_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024)
}

/// True when stdin is a pipe or a file: something was sent. A terminal, or
/// /dev/null as CI and cron give, means nothing was.
pub fn stdin_has_data() -> bool {
    use std::os::unix::fs::FileTypeExt;
    !std::io::stdin().is_terminal()
        && std::fs::metadata("/dev/stdin")
            .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_file())
}

/// The target GPU report of cfgcheck and verify-fixes: `--gpu NAME|FILE`
/// when given (a built-in profile or a file, `gpus::read`), else memdiag's
/// report piped on stdin, else none.
pub fn target_report(gpu: Option<&Path>) -> anyhow::Result<Option<Report>> {
    if let Some(value) = gpu {
        return Ok(Some(Report::parse(&gpus::read(value)?)?));
    }
    if !stdin_has_data() {
        return Ok(None);
    }
    let input = input::read_from("<stdin>", std::io::stdin().lock())?;
    if input.text.trim().is_empty() {
        return Ok(None);
    }
    Ok(Some(Report::parse(&input)?))
}

/// The bytes free to an unprivileged user on the filesystem holding `path`
/// (statvfs(3)); None when it cannot be asked.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs(3) fills the zeroed struct from a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// This machine's host name (the kernel's), as memdiag reports it and a
/// sweep records which machine runs a trial.
pub fn name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// When process `pid` started, in clock ticks since boot (field 22 of
/// /proc/PID/stat): with the pid, it names one process even after the pid
/// is reused. None if there is no such process.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod process_tests {
    #[test]
    fn this_process_has_a_start_time_and_a_dead_pid_has_none() {
        let me = std::process::id();
        let start = super::process_start(me).unwrap();
        assert_eq!(super::process_start(me), Some(start));
        assert_eq!(super::process_start(u32::MAX - 1), None);
        assert!(super::name().is_some());
    }

    #[test]
    fn the_current_directory_has_free_space_and_a_bad_path_has_none() {
        assert!(super::free_bytes(std::path::Path::new(".")).is_some());
        assert_eq!(
            super::free_bytes(std::path::Path::new("/no/such/dir")),
            None
        );
        assert_eq!(super::free_bytes(std::path::Path::new("a\0b")), None);
    }
}
