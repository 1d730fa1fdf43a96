//! Python trials without paying `import torch` each time (issue 32): a
//! preload server is one `python` that imports the named modules once;
//! each trial is a fork of it that runs the program as `__main__`, as a
//! fresh `python script.py args..` would.
//!
//! Use: `Server::start(python, modules, env)` once (it returns when the
//! imports are done); for each trial `fits(argv)` (else run it fresh, and
//! say why once), then `spawn(Trial {argv, env, cwd, stdout, stderr})`
//! gives a `Forked {pid, exit}`: signal the group `-pid`, read
//! `/proc/pid`, and take the raw wait status from `exit` (the server, not
//! the caller, is the trial's parent). `fits` takes `[(env
//! (NAME=VALUE)*)?, python, (-u|-B)*, script, args..]` and `-m module` in
//! place of the script, where python is the server's interpreter (the same
//! path, or a name in its directory for the same file; a bare name is
//! looked up in our PATH).
//!
//! What a forked trial gets as a fresh process would: its own session and
//! process group (`setsid`: signal `-pid`), the signal handlers a fresh
//! python has (SIGINT raises KeyboardInterrupt, SIGPIPE ignored, the rest
//! default), its `sys.argv`, `os.environ` (the whole environment given),
//! working directory, `sys.path[0]` (the script's directory, the working
//! directory for `-m`, then the trial's `PYTHONPATH`), stdin `/dev/null`,
//! stdout and stderr on the descriptors given (stdout block-buffered on a
//! pipe, stderr line-buffered, both unbuffered with `-u` or
//! `PYTHONUNBUFFERED`), `oom_score_adj` 500 (`group::OOM_SCORE_ADJ`), and
//! torch's thread count from its `OMP_NUM_THREADS` (or `MKL_NUM_THREADS`).
//! It exits as python does: `SystemExit`'s code, an uncaught exception's
//! traceback and 1, killed by SIGINT after an uncaught KeyboardInterrupt;
//! non-daemon threads joined, atexit run, stdio flushed, then `os._exit`.
//! The program runs in a new `__main__` module (kept to the end, as
//! python keeps it: pickling its classes and its finalizers work); `-m`
//! and a directory or zip run by runpy's `_run_module_as_main`, as python
//! runs them. The imports' own weakref finalizers (torch's operator
//! libraries, 25 ms a trial) are not run at a trial's exit: they only undo
//! in-process registrations.
//!
//! What it shares with the server, unlike a fresh process:
//! - the imported modules' state as the imports left it: torch's default
//!   RNG (a fresh process starts it at the same fixed seed, so no change
//!   unless an import drew from it), numpy's global RNG (a fresh process
//!   seeds it from the OS: forked trials all start from the server's same
//!   state), Python's hash seed (`PYTHONHASHSEED`: one for all trials),
//!   the warnings filters and logging handlers the imports set.
//!   Nothing is reseeded: a trial that wants its own randomness seeds it.
//!   Python's `random` reseeds itself in a fork (its own at-fork hook).
//! - what is read only when python or a library starts: `-O`, `-X`, `-E`
//!   (such a command line runs fresh, see `fits`), `PYTHONHASHSEED`,
//!   `OPENBLAS_NUM_THREADS`, `LD_PRELOAD` and `LD_LIBRARY_PATH` for the
//!   libraries already loaded, all from the server's environment.
//! - `/proc/PID/environ` and `/proc/PID/cmdline` keep the server's (the
//!   trial's `os.environ` is set inside the process): find a trial by its
//!   pid, not by what it was started with.
//! - a module of the program's own directory whose name an import already
//!   took (`sys.modules`) is the imported one.
//! - memory: its pages are the server's until written (copy on write): its
//!   RSS counts the shared ones, as a fresh process counts its own copy.
//!
//! The server never initialises CUDA (`PYTORCH_NVML_BASED_CUDA_CHECK=1` in
//! its environment makes `torch.cuda.is_available()` ask NVML; an import
//! that initialised it anyway fails `start`): a trial's own
//! `CUDA_VISIBLE_DEVICES` takes effect when it first uses the GPU.
//!
//! Protocol (the client here, the server `server.py`, run as `python -c`,
//! embedded so that the wheel needs no file at run time): a Unix stream
//! socket pair, the server's end passed as a descriptor number. Client to
//! server: frames, a 4-byte big-endian length then that much JSON
//! (`{"id", "target", "module", "argv", "env", "cwd", "unbuffered",
//! "no_bytecode", "oom_score_adj"}`), the trial's stdout and stderr passed
//! with the frame's first bytes (SCM_RIGHTS; `libc::sendmsg`, no new
//! dependency: nix's socket feature would be one more build for 40 lines).
//! Server to client: JSON lines, `{"ready": {"pid", "python"}}` or
//! `{"failed": why}` once, then per request `{"id", "pid"}` or `{"id",
//! "error"}`, and once it ended `{"id", "status"}` (the raw wait status:
//! the server reaps its forks). At the socket's end (the client dropped or
//! dead) the server exits; running trials are left to their keepers.

mod argv;

pub use argv::{check_module, classify, Target};

use anyhow::Context;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server's code.
const SERVER_PY: &str = include_str!("server.py");
/// The server's last stderr lines kept for messages.
const STDERR_LINES: usize = 20;

/// A running preload server: its python process and control socket.
/// Dropping it ends the server (not the trials it forked).
pub struct Server {
    process: Child,
    interpreter: PathBuf,
    socket: Mutex<UnixStream>,
    pending: Arc<Mutex<HashMap<u64, Pending>>>,
    next_id: Mutex<u64>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// A trial to fork.
pub struct Trial {
    pub argv: Vec<String>,
    /// Its whole environment (`with_ours` adds ours under it).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Its stdout and stderr (the write ends of the caller's pipes):
    /// `spawn` closes them here once the trial has its own.
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// A forked trial.
pub struct Forked {
    /// Its pid, its process group's and its session's id.
    pub pid: u32,
    /// Its raw wait status (`ExitStatus::from_raw`) once it ended; a
    /// disconnected channel if the server died first (the trial, then
    /// orphaned, is its keeper's to end).
    pub exit: Receiver<i32>,
}

struct Pending {
    reply: Option<Sender<Result<u32, String>>>,
    exit: Sender<i32>,
}

/// Our environment with `set` on top: a whole environment for `Trial::env`.
pub fn with_ours(set: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .collect();
    env.extend(set.iter().cloned());
    env
}

impl Server {
    /// Starts `interpreter` importing `modules` (an entry may name a
    /// submodule, e.g. `transformers.trainer`: transformers 5 imports
    /// lazily), with `env` on top of ours; returns once they are imported.
    /// A module that cannot be imported is a bad-input error naming it.
    pub fn start(
        interpreter: &Path,
        modules: &[String],
        env: &[(String, String)],
    ) -> anyhow::Result<Server> {
        for m in modules {
            check_module(m).map_err(|e| common::bad_input!("preload: {e}"))?;
        }
        let (ours, theirs) = UnixStream::pair().context("a socket pair for the preload server")?;
        let fd = theirs.as_raw_fd();
        let mut cmd = Command::new(interpreter);
        cmd.arg("-c")
            .arg(SERVER_PY)
            .arg(fd.to_string())
            .args(modules)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Ctrl-C in the terminal reaches the driver only: the server
            // lives to report the trials' ends while it ends them.
            .process_group(0);
        // SAFETY: between fork and exec only fcntl(2) on a descriptor we
        // own: the server's end of the socket stays open across exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut process = cmd
            .spawn()
            .map_err(|e| common::bad_input!("cannot start {}: {e}", interpreter.display()))?;
        drop(theirs);
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(err) = process.stderr.take() {
            keep_tail(err, stderr.clone());
        }
        let mut lines = BufReader::new(ours.try_clone()?);
        let mut first = String::new();
        lines.read_line(&mut first)?;
        let said: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
        if said.get("ready").is_none() {
            let _ = process.wait();
            let why = match said.get("failed").and_then(Value::as_str) {
                Some(why) => why.to_string(),
                None => format!(
                    "it ended while importing {}: {}",
                    modules.join(", "),
                    last_lines(&stderr)
                ),
            };
            return Err(common::bad_input!(
                "preload: {}: {why}",
                interpreter.display()
            ));
        }
        let pending = Arc::new(Mutex::new(HashMap::new()));
        let p = pending.clone();
        std::thread::spawn(move || read_replies(lines, p));
        Ok(Server {
            process,
            interpreter: std::path::absolute(interpreter)?,
            socket: Mutex::new(ours),
            pending,
            next_id: Mutex::new(0),
            stderr,
        })
    }

    /// The server's pid (its own process group's id).
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Whether `argv` is a Python program this server can run forked (see
    /// `classify`), else why not, for the caller to say once (the trial
    /// then runs fresh).
    pub fn fits(&self, argv: &[String]) -> Result<(), String> {
        self.target(argv).map(|_| ())
    }

    fn target(&self, argv: &[String]) -> Result<Target, String> {
        classify(argv, &|w| same_interpreter(w, &self.interpreter))
    }

    /// Forks a trial and returns once it runs. `t.stdout` and `t.stderr`
    /// are closed here: the caller's read ends see EOF once the trial (and
    /// whatever inherited them) is gone.
    pub fn spawn(&self, t: Trial) -> anyhow::Result<Forked> {
        let target = self
            .target(&t.argv)
            .map_err(|why| anyhow::anyhow!("cannot run {:?} forked: {why}", t.argv))?;
        if !t.cwd.is_dir() {
            // As Command::spawn: refused here, not a traceback in the trial.
            anyhow::bail!(
                "cannot run {:?} in {}: not a directory",
                t.argv,
                t.cwd.display()
            );
        }
        let mut env: serde_json::Map<String, Value> =
            t.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        for (k, v) in &target.env {
            env.insert(k.clone(), json!(v));
        }
        let id = {
            let mut n = self
                .next_id
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            *n += 1;
            *n
        };
        let request = json!({
            "id": id,
            "target": target.target,
            "module": target.module,
            "argv": target.sys_argv(),
            "env": env,
            "cwd": t.cwd,
            "unbuffered": target.unbuffered,
            "no_bytecode": target.no_bytecode,
            "oom_score_adj": String::from_utf8_lossy(crate::group::OOM_SCORE_ADJ),
        });
        let (reply_tx, reply) = mpsc::channel();
        let (exit_tx, exit) = mpsc::channel();
        self.pending
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .insert(
                id,
                Pending {
                    reply: Some(reply_tx),
                    exit: exit_tx,
                },
            );
        let body = serde_json::to_vec(&request)?;
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend(body);
        {
            let mut socket = self
                .socket
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            send_with_fds(
                &mut socket,
                &frame,
                &[t.stdout.as_raw_fd(), t.stderr.as_raw_fd()],
            )
            .with_context(|| format!("the preload server is gone: {}", self.last_lines()))?;
        }
        drop((t.stdout, t.stderr));
        match reply.recv() {
            Ok(Ok(pid)) => Ok(Forked { pid, exit }),
            Ok(Err(e)) => Err(anyhow::anyhow!("the preload server could not fork: {e}")),
            Err(_) => Err(anyhow::anyhow!(
                "the preload server ended: {}",
                self.last_lines()
            )),
        }
    }

    /// Whether the server still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.process.try_wait(), Ok(None))
    }

    fn last_lines(&self) -> String {
        last_lines(&self.stderr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.end();
    }
}

impl Server {
    /// Ends the server as dropping it does, and says how it ended: exit
    /// code 0 when it saw its socket close and left by itself.
    pub fn close(mut self) -> Option<std::process::ExitStatus> {
        self.end()
    }

    /// Its socket closes, so the server exits; killed if it has not within
    /// five seconds.
    fn end(&mut self) -> Option<std::process::ExitStatus> {
        if let Ok(s) = self.socket.lock() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let t = Instant::now();
        loop {
            match self.process.try_wait() {
                Ok(None) if t.elapsed() <= Duration::from_secs(5) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = self.process.kill();
                    return self.process.wait().ok();
                }
                Ok(Some(status)) => return Some(status),
                Err(_) => return None,
            }
        }
    }
}

/// Hands each server line to the request it answers.
fn read_replies(lines: BufReader<UnixStream>, pending: Arc<Mutex<HashMap<u64, Pending>>>) {
    for line in lines.lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = v.get("id").and_then(Value::as_u64) else {
            continue;
        };
        let Ok(mut pending) = pending.lock() else {
            return;
        };
        if let Some(status) = v.get("status").and_then(Value::as_i64) {
            if let Some(p) = pending.remove(&id) {
                let _ = p.exit.send(status as i32);
            }
            continue;
        }
        let reply = match (v.get("pid").and_then(Value::as_u64), v.get("error")) {
            (Some(pid), _) => Ok(pid as u32),
            (None, e) => Err(e.and_then(Value::as_str).unwrap_or("no reason").to_string()),
        };
        let failed = reply.is_err();
        if let Some(p) = pending.get_mut(&id) {
            if let Some(tx) = p.reply.take() {
                let _ = tx.send(reply);
            }
        }
        if failed {
            pending.remove(&id);
        }
    }
    // The server is gone: every waiting request and trial learns it (their
    // senders dropped).
    if let Ok(mut p) = pending.lock() {
        p.clear();
    }
}

/// A thread that keeps the server's last stderr lines in `tail`.
fn keep_tail(err: std::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if let Ok(mut t) = tail.lock() {
                if t.len() == STDERR_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    });
}

fn last_lines(tail: &Mutex<VecDeque<String>>) -> String {
    let lines: Vec<String> = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    if lines.is_empty() {
        "it said nothing".into()
    } else {
        lines.join("\n")
    }
}

/// Whether `word` (as a command's first word, or after env) names the
/// server's interpreter: the same path, or a name in the same directory
/// for the same file (a venv's python and python3). A bare name is looked
/// up in our PATH.
fn same_interpreter(word: &str, ours: &Path) -> bool {
    let path = if word.contains('/') {
        PathBuf::from(word)
    } else {
        match which(word) {
            Some(p) => p,
            None => return false,
        }
    };
    let Ok(path) = std::path::absolute(path) else {
        return false;
    };
    if path == ours {
        return true;
    }
    path.parent() == ours.parent()
        && matches!(
            (std::fs::canonicalize(&path), std::fs::canonicalize(ours)),
            (Ok(a), Ok(b)) if a == b
        )
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Writes `bytes` to `socket`, `fds` passed with the first of them.
fn send_with_fds(socket: &mut UnixStream, bytes: &[u8], fds: &[i32]) -> std::io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    // u64s: the control buffer aligned as cmsghdr needs.
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the header points at `control`, large enough for one
    // cmsghdr with `fds` (CMSG_SPACE), which outlives the sendmsg call;
    // `iov` points at `bytes`, read only.
    let sent = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<i32>(), fds.len());
        libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    socket.write_all(&bytes[sent as usize..])
}
