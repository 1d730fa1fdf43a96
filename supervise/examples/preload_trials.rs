//! Runs N trials one after another through a preload server, for
//! bench/preload.py: the real server and client, timed.
//!
//! preload_trials --interpreter PY [--preload MODULE]... --trials N -- ARGV...
//!
//! `{i}` in ARGV becomes the trial's number. Prints one JSON line: the
//! server's start (imports), each trial's wall time in seconds and the
//! last line of its stdout. A trial
//! that fails ends it (exit 1) with the trial's stderr.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Instant;
use supervise::preload::{with_ours, Server, Trial};

fn main() {
    if let Err(e) = run() {
        eprintln!("preload_trials: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut interpreter, mut modules, mut trials) = (None, Vec::new(), 1u32);
    let mut argv = Vec::new();
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--interpreter" => interpreter = Some(PathBuf::from(value()?)),
            "--preload" => modules.push(value()?),
            "--trials" => trials = value()?.parse()?,
            "--" => {
                argv = args.by_ref().collect();
                break;
            }
            _ => anyhow::bail!("unknown argument {a} (see the example's comment)"),
        }
    }
    let interpreter = interpreter.ok_or_else(|| anyhow::anyhow!("--interpreter is required"))?;
    let t = Instant::now();
    let server = Server::start(&interpreter, &modules, &[])?;
    let start_s = t.elapsed().as_secs_f64();
    let cwd = std::env::current_dir()?;
    let mut times = Vec::new();
    let mut last_lines = Vec::new();
    for i in 0..trials {
        let t = Instant::now();
        let argv: Vec<String> = argv
            .iter()
            .map(|w| w.replace("{i}", &i.to_string()))
            .collect();
        let (mut out, out_w) = pipe()?;
        let (mut err, err_w) = pipe()?;
        let forked = server.spawn(Trial {
            argv,
            env: with_ours(&[]),
            cwd: cwd.clone(),
            stdout: out_w,
            stderr: err_w,
        })?;
        let errs = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut stdout = String::new();
        out.read_to_string(&mut stdout)?;
        let stderr = errs.join().unwrap_or_default();
        let status = forked.exit.recv()?;
        if status != 0 {
            anyhow::bail!("trial {i} ended with wait status {status}: {stderr}");
        }
        times.push(t.elapsed().as_secs_f64());
        last_lines.push(stdout.lines().last().unwrap_or_default().to_string());
    }
    println!(
        "{}",
        serde_json::json!({"start_s": start_s, "trials_s": times, "last_lines": last_lines})
    );
    Ok(())
}

fn pipe() -> anyhow::Result<(File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: both are fresh descriptors nothing else owns.
    Ok(unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
