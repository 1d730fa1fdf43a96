//! One supervised command: spawned in its own process group, its stdout and
//! stderr read line by line as they come (kept in its log as written, fed
//! to the readers, the last lines kept for the verdict), the rows it appends
//! to its own metrics.csv read as they grow, and its process group signalled
//! as a whole. Polled, never blocking: the sweep driver watches many at once.
//!
//! With a keeper (`train run`), a `sh` in a process group of its own holds
//! the read end of a pipe whose write end only this process has: when this
//! process dies in any way (kill -9 too) the pipe closes, and the keeper
//! sends the command's group SIGTERM, then SIGKILL after the grace period,
//! so no orphan keeps the GPU (Ray's users report exactly that: ray#23971).
//! PR_SET_PDEATHSIG would reach only the direct child, not its workers.

use crate::readers::{CsvRows, Reader, Report};
use anyhow::Context;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How many of the last output lines are kept for the verdict.
pub const TAIL_LINES: usize = 200;
/// A line is cut to this many bytes for the readers and the tail (the log
/// keeps it whole).
const MAX_LINE: usize = 64 * 1024;

/// What to run and where its output goes.
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
    /// End its group if this process dies (see the module's comment).
    pub keeper: bool,
    /// Between SIGTERM and SIGKILL, for the keeper.
    pub grace: Duration,
}

/// A running (or ended) supervised command.
pub struct Child {
    child: std::process::Child,
    lines: Receiver<String>,
    pumps: Vec<JoinHandle<()>>,
    tail: VecDeque<String>,
    reader: Reader,
    csv: Option<(PathBuf, u64, CsvRows)>,
    keeper: Option<(std::process::Child, ChildStdin)>,
    pub started: Instant,
}

impl Child {
    /// Starts it. An argv whose program cannot be started is an error whose
    /// message names it (the caller's exit code 2 or 4 decides).
    pub fn spawn(spec: &Spec, reader: Reader) -> anyhow::Result<Child> {
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
        first_for_the_oom_killer(&mut cmd);
        let mut child = cmd.spawn().map_err(|e| {
            common::bad_input!(
                "cannot start {program:?}: {e} (the command is {:?})",
                spec.argv
            )
        })?;
        let (tx, lines) = mpsc::channel();
        let mut pumps = Vec::new();
        if let Some(out) = child.stdout.take() {
            pumps.push(pump(
                out,
                log.clone(),
                tx.clone(),
                spec.echo.then_some(Echo::Out),
            ));
        }
        if let Some(err) = child.stderr.take() {
            pumps.push(pump(err, log, tx, spec.echo.then_some(Echo::Err)));
        }
        let keeper = if spec.keeper {
            Some(keeper(child.id(), spec.grace)?)
        } else {
            None
        };
        Ok(Child {
            child,
            lines,
            pumps,
            tail: VecDeque::new(),
            reader,
            csv: spec.own_metrics.clone().map(|p| (p, 0, CsvRows::new())),
            keeper,
            started: Instant::now(),
        })
    }

    /// Its pid, which is also its process group's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The reports in the lines that came since the last call, and in the
    /// rows appended to its own metrics.csv.
    pub fn poll(&mut self) -> Vec<Report> {
        let mut reports = Vec::new();
        while let Ok(line) = self.lines.try_recv() {
            reports.extend(self.reader.line(&line));
            if self.tail.len() == TAIL_LINES {
                self.tail.pop_front();
            }
            self.tail.push_back(line);
        }
        if let Some((path, offset, rows)) = &mut self.csv {
            if let Some(appended) = read_from(path, offset) {
                reports.extend(rows.push(&appended));
            }
        }
        reports
    }

    /// Sends a signal to its whole process group.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the group the child leads (process_group(0)
        // made its pid the group's id); no memory is involved.
        unsafe {
            libc::kill(-(self.child.id() as i32), sig);
        }
    }

    /// Whether its process group still has a member (its workers may
    /// outlive it).
    pub fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks that the group exists.
        unsafe { libc::kill(-(self.child.id() as i32), 0) == 0 }
    }

    /// Its exit status once it has ended. Then the output still in the
    /// pipes is read to its end (its workers may hold them open: those get
    /// SIGKILL after a second), so the last lines are in the tail.
    pub fn try_wait(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        let Some(status) = self.child.try_wait()? else {
            return Ok(None);
        };
        let t = Instant::now();
        while self.pumps.iter().any(|p| !p.is_finished()) {
            if t.elapsed() > Duration::from_secs(1) {
                self.signal(libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in self.pumps.drain(..) {
            let _ = p.join();
        }
        Ok(Some(status))
    }

    /// Its line reader (the W&B run summary it kept).
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// Its last output lines, oldest first (call `poll` first).
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}

impl Drop for Child {
    /// The keeper goes when the supervisor is done with the command: the
    /// caller ends the group first (a dropped, still running command is
    /// ended by the keeper's own rule, as if the supervisor had died).
    fn drop(&mut self) {
        if let Some((mut keeper, stdin)) = self.keeper.take() {
            if self.child.try_wait().ok().flatten().is_some() && !self.group_alive() {
                let _ = keeper.kill();
            }
            drop(stdin);
            let _ = keeper.wait();
        }
    }
}

/// The score the kernel's OOM killer adds to a supervised command (and its
/// children, which inherit it): when memory runs out under a shared limit
/// (a cgroup, the host), the command goes before its supervisor, which
/// then records why, rather than the supervisor (whose libtorch makes it
/// the larger process at first) and every trial with it.
pub const OOM_SCORE_ADJ: &[u8] = b"500";

/// Makes `cmd`'s process the OOM killer's first choice over ours (any
/// process may raise its own score; lowering needs privileges).
pub fn first_for_the_oom_killer(cmd: &mut Command) {
    // SAFETY: between fork and exec only async-signal-safe calls: open,
    // write and close on a constant path, no allocation.
    unsafe {
        cmd.pre_exec(|| {
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY);
            if fd >= 0 {
                libc::write(fd, OOM_SCORE_ADJ.as_ptr().cast(), OOM_SCORE_ADJ.len());
                libc::close(fd);
            }
            Ok(())
        });
    }
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
    tx: Sender<String>,
    echo: Option<Echo>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(&mut from);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
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
            if tx.send(String::from_utf8_lossy(cut).into_owned()).is_err() {
                return;
            }
        }
    })
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

/// The keeper of process group `pgid` (see the module's comment): its
/// stdin is a pipe only we write to; at its end it ends the group.
fn keeper(pgid: u32, grace: Duration) -> anyhow::Result<(std::process::Child, ChildStdin)> {
    let script = format!(
        "while read -r _; do :; done; kill -TERM -{pgid} 2>/dev/null || exit 0; \
         i=0; while [ $i -lt {} ] && kill -0 -{pgid} 2>/dev/null; do sleep 0.1; i=$((i+1)); done; \
         kill -KILL -{pgid} 2>/dev/null; exit 0",
        (grace.as_secs_f64() * 10.0).ceil() as u64
    );
    let mut keeper = Command::new("/bin/sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the keeper (/bin/sh) that ends the command if train dies")?;
    let stdin = keeper.stdin.take().context("the keeper's stdin")?;
    Ok((keeper, stdin))
}
