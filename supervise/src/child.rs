//! One supervised command, the only way a supervisor here runs one (a
//! `train run` command, a program trial, a trial of our own model, the
//! smoke run of verify-fixes): spawned in its own process group with a
//! keeper (`group`), its stdout and stderr read line by line as they come
//! (kept in its log as written, fed to its reader, the last lines kept for
//! the verdict), the rows it appends to its own metrics.csv read as they
//! grow, its exit reaped with the kernel's resource use (wait4). A Python
//! program a preload server fits is forked from that server instead
//! (`preload`): the same process group, keeper, pipes and bell; its exit
//! status comes from the server, its parent.
//!
//! Driven by events: each output line and the exit ring the supervisor's
//! bell (`events`). The exit is watched by a thread per child blocked in
//! waitid(WNOWAIT), which wakes without reaping, so the reaping (and its
//! rusage) stays here. A pidfd would need Linux 5.3 and the wheel promises
//! manylinux_2_28 systems (RHEL 8, Linux 4.18); a SIGCHLD handler would be
//! one process-wide owner of a signal that libraries also set.

use crate::events::Bell;
use crate::group;
use crate::hang;
use crate::lineage::Lineage;
use crate::preload::{Server, Trial};
use crate::readers::{CsvRows, Reader, Report};
use anyhow::Context;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many of the last output lines are kept for the verdict.
pub const TAIL_LINES: usize = 200;
/// A line is cut to this many bytes for the readers and the tail (the log
/// keeps it whole).
const MAX_LINE: usize = 64 * 1024;
/// How long the output of an ended command is read for before the workers
/// that still hold its pipes get SIGKILL.
const DRAIN: Duration = Duration::from_secs(1);

/// What to run and where its output goes.
#[derive(Clone)]
pub struct Spec {
    pub argv: Vec<String>,
    /// Its working directory (None: ours).
    pub cwd: Option<PathBuf>,
    /// Variables set for it, on top of ours.
    pub env: Vec<(String, String)>,
    /// Its stdout and stderr, as they came (appended to).
    pub log: PathBuf,
    /// Rows it may append (`$TRAINGUARD_METRICS_CSV`), read as they grow.
    pub own_metrics: Option<PathBuf>,
    /// Also pass its output to ours (stdout to stdout, stderr to stderr).
    pub echo: bool,
    /// Between SIGTERM and SIGKILL, for the keeper.
    pub grace: Duration,
    /// Rung on each output line and at the exit.
    pub bell: Bell,
    /// A preload server to fork it from (the caller checked that the
    /// server `fits` its argv); None: a fresh process.
    pub preload: Option<Arc<Server>>,
}

/// A running (or ended) supervised command.
pub struct Child {
    pid: u32,
    /// The exit status, once reaped.
    status: Option<ExitStatus>,
    /// The largest resident set of the command (and the descendants it
    /// waited for), from wait4, MiB.
    max_rss_mib: Option<f64>,
    /// Its CPU time, user and system (and the descendants it waited for),
    /// from wait4, seconds.
    cpu_seconds: Option<f64>,
    /// Told to the exit watcher when we stop caring (it then reaps).
    dropped: Arc<AtomicBool>,
    /// A forked trial's raw wait status, as its server reported it (None
    /// inside: the server ended first); None: our own child, reaped here.
    forked: Option<Arc<Mutex<Option<Option<i32>>>>>,
    /// Each output line, with when it came.
    lines: Receiver<(Instant, String)>,
    /// When its first output line came: its start-up's end.
    first_line: Option<Instant>,
    /// The pipes are read to their end.
    drained: bool,
    tail: VecDeque<String>,
    reader: Option<Reader>,
    /// Reports read while draining, for the next `poll`.
    pending: Vec<Report>,
    csv: Option<(PathBuf, u64, CsvRows)>,
    /// Its processes, in its group and outside (they hold the keeper).
    lineage: Arc<Lineage>,
    /// Asked to end: SIGKILL to its group at this time.
    kill_at: Option<Instant>,
    /// A failure followed by no progress, watched for (`watch_hangs`).
    hang: Option<hang::Watch>,
    pub started: Instant,
}

impl Child {
    /// Starts it. An argv whose program cannot be started is an error whose
    /// message names it (the caller's exit code 2 or 4 decides). `reader`:
    /// what reads reports from its lines (None: its lines are only logged).
    pub fn spawn(spec: &Spec, reader: Option<Reader>) -> anyhow::Result<Child> {
        let Some((program, args)) = spec.argv.split_first() else {
            anyhow::bail!("the command is empty");
        };
        // Appended to: the legs of a `--fallback` chain share one log.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)
            .with_context(|| format!("opening {}", spec.log.display()))?;
        let log = Arc::new(Mutex::new(log));
        let (pid, out, err, forked) = match &spec.preload {
            Some(server) => fork(server, spec)?,
            None => {
                let (pid, out, err) = start(program, args, spec)?;
                (pid, out, err, None)
            }
        };
        // From here on the pid is ours to reap (wait4), or its server's.
        let lineage = match Lineage::start(pid, spec.grace) {
            Ok(l) => Arc::new(l),
            Err(e) => {
                group::signal(pid, libc::SIGKILL);
                return Err(e);
            }
        };
        let (tx, lines) = mpsc::channel();
        let echo = |e| spec.echo.then_some(e);
        pump(
            out,
            log.clone(),
            tx.clone(),
            spec.bell.clone(),
            echo(Echo::Out),
        );
        pump(err, log, tx, spec.bell.clone(), echo(Echo::Err));
        let dropped = Arc::new(AtomicBool::new(false));
        let forked = match forked {
            Some(exit) => Some(watch_server_exit(exit, spec.bell.clone())),
            None => {
                watch_exit(pid, spec.bell.clone(), dropped.clone());
                None
            }
        };
        Ok(Child {
            pid,
            forked,
            status: None,
            max_rss_mib: None,
            cpu_seconds: None,
            dropped,
            lines,
            first_line: None,
            drained: false,
            tail: VecDeque::new(),
            reader,
            pending: Vec::new(),
            csv: spec.own_metrics.clone().map(|p| (p, 0, CsvRows::new())),
            lineage,
            kill_at: None,
            hang: None,
            started: Instant::now(),
        })
    }

    /// Its pid, which is also its process group's id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The reports in the lines that came since the last call, and in the
    /// rows appended to its own metrics.csv.
    pub fn poll(&mut self) -> Vec<Report> {
        let mut reports = std::mem::take(&mut self.pending);
        while let Ok(line) = self.lines.try_recv() {
            reports.extend(self.take(line));
        }
        if let Some((path, offset, rows)) = &mut self.csv {
            if let Some(appended) = read_from(path, offset) {
                reports.extend(rows.push(&appended));
            }
        }
        reports
    }

    fn take(&mut self, (at, line): (Instant, String)) -> Vec<Report> {
        self.first_line.get_or_insert(at);
        let reports = match &mut self.reader {
            Some(r) => r.line(&line),
            None => Vec::new(),
        };
        if let Some(h) = self.hang.as_mut() {
            let positions: Vec<f64> = reports.iter().filter_map(|r| r.at).collect();
            h.line(&line, at, &positions);
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
        reports
    }

    /// From now on (lines not yet polled included), a failure line followed
    /// by no further output for `grace` counts as a hang (`hung`).
    pub fn watch_hangs(&mut self, grace: Duration) {
        self.hang = Some(hang::Watch::new(grace));
    }

    /// The failure that left it without progress for the grace, if any
    /// (call `poll` first), and the grace.
    pub fn hung(&self) -> Option<(&hang::Failed, Duration)> {
        let h = self.hang.as_ref()?;
        h.hung(Instant::now()).map(|f| (f, h.grace()))
    }

    /// When it will count as hung if nothing comes before.
    pub fn hang_deadline(&self) -> Option<Instant> {
        self.hang.as_ref().and_then(hang::Watch::deadline)
    }

    /// Its processes, for the memory sampler (which records those it
    /// sees outside the group).
    pub fn lineage(&self) -> Arc<Lineage> {
        self.lineage.clone()
    }

    /// Sends a signal to its whole process group, and to its processes
    /// seen outside it.
    pub fn signal(&self, sig: i32) {
        self.lineage.signal(sig);
    }

    /// Ends it: SIGTERM to its group now, SIGKILL after `grace` (`try_wait`
    /// sends it). A second call keeps the first deadline.
    pub fn terminate(&mut self, grace: Duration) {
        if self.kill_at.is_none() && self.status.is_none() {
            self.signal(libc::SIGTERM);
            self.kill_at = Some(Instant::now() + grace);
        }
    }

    /// When the supervisor must look again though nothing rang: the end of
    /// a grace period.
    pub fn deadline(&self) -> Option<Instant> {
        self.kill_at.filter(|_| self.status.is_none())
    }

    /// Whether its process group still has a member, or one of its
    /// processes seen outside it still runs.
    pub fn group_alive(&self) -> bool {
        self.lineage.alive()
    }

    /// Its exit status once it has ended (never blocks on a running
    /// command). Then the output still in its pipes is read to the end: its
    /// workers may hold them open, and get SIGKILL after a second.
    pub fn try_wait(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        if self.kill_at.is_some_and(|t| Instant::now() >= t) && self.status.is_none() {
            self.signal(libc::SIGKILL);
        }
        if let (None, Some(slot)) = (self.status, &self.forked) {
            let reported = slot.lock().map(|s| *s).unwrap_or(None);
            match reported {
                None => return Ok(None),
                Some(Some(raw)) => self.status = Some(ExitStatus::from_raw(raw)),
                // The server died before it: end what is left of the trial
                // (its keeper would), and say killed.
                Some(None) => {
                    self.signal(libc::SIGKILL);
                    self.status = Some(ExitStatus::from_raw(libc::SIGKILL));
                }
            }
        }
        if self.status.is_none() {
            let mut raw = 0;
            // SAFETY: a zeroed rusage is valid; wait4 only writes to the two
            // out-parameters.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: as above; the pid is our child, reaped only here.
            let got = unsafe { libc::wait4(self.pid as i32, &mut raw, libc::WNOHANG, &mut usage) };
            if got == 0 {
                return Ok(None);
            }
            if got < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    return Ok(None);
                }
                return Err(e).with_context(|| format!("waiting for pid {}", self.pid));
            }
            self.status = Some(ExitStatus::from_raw(raw));
            // ru_maxrss is in KiB on Linux.
            self.max_rss_mib = Some(usage.ru_maxrss as f64 / 1024.0);
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            self.cpu_seconds = Some(secs(usage.ru_utime) + secs(usage.ru_stime));
        }
        self.drain();
        Ok(self.status)
    }

    /// Reads the pipes to their end, waiting on the lines as they come.
    fn drain(&mut self) {
        let until = Instant::now() + DRAIN;
        let mut killed = false;
        while !self.drained {
            let wait = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(wait.max(Duration::from_millis(1))) {
                Ok(line) => {
                    let r = self.take(line);
                    self.pending.extend(r);
                }
                Err(RecvTimeoutError::Disconnected) => self.drained = true,
                Err(RecvTimeoutError::Timeout) if !killed => {
                    self.signal(libc::SIGKILL);
                    killed = true;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// The largest resident set the kernel saw (after the exit): a floor
    /// under the sampled peak, which a short command may end before.
    pub fn max_rss_mib(&self) -> Option<f64> {
        self.max_rss_mib
    }

    /// Its CPU seconds (user and system), once reaped by wait4; None for a
    /// command forked from a preload server (its parent reaps it).
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.cpu_seconds
    }

    /// Its line reader (the W&B run summary it kept).
    pub fn reader(&self) -> Option<&Reader> {
        self.reader.as_ref()
    }

    /// When its first output line came (call `poll` first).
    pub fn first_line(&self) -> Option<Instant> {
        self.first_line
    }

    /// Its last output lines, oldest first (call `poll` first).
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}

impl Drop for Child {
    /// The keeper goes when the supervisor is done with the command: the
    /// caller ends its processes first. A command dropped while one of them
    /// still runs is ended by the keeper's own rule, as if the supervisor
    /// had died (once the sampler too lets go of its lineage); the exit
    /// watcher reaps it.
    fn drop(&mut self) {
        // Only a child never reaped: its pid cannot be another's yet.
        if self.status.is_none() {
            self.dropped.store(true, Ordering::SeqCst);
        }
        if self.status.is_some() && !self.group_alive() {
            self.lineage.release();
        }
    }
}

/// Starts the command as our own child: its pid and the read ends of its
/// stdout and stderr.
fn start(program: &str, args: &[String], spec: &Spec) -> anyhow::Result<(u32, File, File)> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: signalled as a whole, and Ctrl-C in the
        // terminal reaches the supervisor only, which ends it in order.
        .process_group(0);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| {
        common::bad_input!(
            "cannot start {program:?}: {e} (the command is {:?})",
            spec.argv
        )
    })?;
    group::first_for_the_oom_killer(child.id());
    let out = child.stdout.take().context("the command's stdout")?;
    let err = child.stderr.take().context("the command's stderr")?;
    Ok((
        child.id(),
        File::from(OwnedFd::from(out)),
        File::from(OwnedFd::from(err)),
    ))
}

/// Forks the command from a preload server: its pid, the read ends of its
/// stdout and stderr, and where its exit status will come from.
fn fork(server: &Server, spec: &Spec) -> anyhow::Result<(u32, File, File, Option<Receiver<i32>>)> {
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let cwd = match &spec.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("the current directory")?,
    };
    let forked = server.spawn(Trial {
        argv: spec.argv.clone(),
        env: crate::preload::with_ours(&spec.env),
        cwd,
        stdout: out_w,
        stderr: err_w,
    })?;
    Ok((
        forked.pid,
        File::from(out_r),
        File::from(err_r),
        Some(forked.exit),
    ))
}

/// A pipe, both ends closed on exec (the server passes the write end on).
fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("a pipe for a forked trial");
    }
    // SAFETY: both are new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A thread that waits for a forked trial's status from its server and
/// rings the bell.
fn watch_server_exit(exit: Receiver<i32>, bell: Bell) -> Arc<Mutex<Option<Option<i32>>>> {
    let slot = Arc::new(Mutex::new(None));
    let s = slot.clone();
    std::thread::spawn(move || {
        let raw = exit.recv().ok();
        if let Ok(mut s) = s.lock() {
            *s = Some(raw);
        }
        bell.ring();
    });
    slot
}

/// A thread that blocks until `pid` has exited, without reaping it (the
/// `Child` reaps, with its rusage), and rings the bell. A `Child` dropped
/// before the exit is reaped here, so it leaves no zombie.
fn watch_exit(pid: u32, bell: Bell, dropped: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        loop {
            // SAFETY: a zeroed siginfo is valid; waitid writes only to it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above, on our own child.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        if dropped.load(Ordering::SeqCst) {
            // SAFETY: reaping our own ended child; no memory is involved.
            unsafe {
                libc::waitpid(pid as i32, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
        bell.ring();
    });
}

#[derive(Clone, Copy)]
enum Echo {
    Out,
    Err,
}

/// A thread that copies one pipe into the log (and our own stream) and
/// sends each line to the poller.
fn pump(
    mut from: impl Read + Send + 'static,
    log: Arc<Mutex<File>>,
    tx: Sender<(Instant, String)>,
    bell: Bell,
    echo: Option<Echo>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(&mut from);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                // The sender goes with the thread: the last one closes the
                // lines, which `drain` waits for; the bell says so.
                Ok(0) | Err(_) => {
                    drop(tx);
                    bell.ring();
                    return;
                }
                Ok(_) => {}
            }
            if let Ok(mut f) = log.lock() {
                let _ = f.write_all(&buf);
            }
            match echo {
                // A closed stdout (`train run ... | head`) is not an error.
                Some(Echo::Out) => {
                    let _ = std::io::stdout().lock().write_all(&buf);
                }
                Some(Echo::Err) => {
                    let _ = std::io::stderr().lock().write_all(&buf);
                }
                None => {}
            }
            let cut = &buf[..buf.len().min(MAX_LINE)];
            let line = String::from_utf8_lossy(cut).into_owned();
            if tx.send((Instant::now(), line)).is_err() {
                return;
            }
            bell.ring();
        }
    });
}

/// The bytes appended to `path` since `offset` (None: not there yet, or
/// nothing new).
fn read_from(path: &PathBuf, offset: &mut u64) -> Option<Vec<u8>> {
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    if len < *offset {
        // Truncated and written anew: read it from the start.
        *offset = 0;
    }
    if len == *offset {
        return None;
    }
    f.seek(SeekFrom::Start(*offset)).ok()?;
    let mut bytes = Vec::new();
    f.take(len - *offset).read_to_end(&mut bytes).ok()?;
    *offset += bytes.len() as u64;
    Some(bytes)
}
