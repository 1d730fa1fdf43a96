//! The preload server with the real Python and torch ($VIRTUAL_ENV/bin/python,
//! what the justfile exports): forked trials see what a fresh python would,
//! a trial that crashes fails alone, the server ends with its client.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;
use supervise::preload::{with_ours, Server, Trial};
use tempfile::TempDir;

/// One server with torch for the tests that share it (importing torch takes
/// seconds): the tests run one trial after another on it.
fn torch_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        Server::start(&testkit::python(), &["torch".into()], &[]).expect("starting the server")
    })
}

struct Ran {
    pid: u32,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn pipe() -> (File, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both are fresh descriptors nothing else owns.
    unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn words(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|s| s.to_string()).collect()
}

/// Runs `argv` in `cwd` on `server`, with our environment and `env` (the
/// shell's PYTHONUNBUFFERED left out: the trial's buffering is tested),
/// and waits for its end.
fn run(server: &Server, argv: &[String], cwd: &Path, env: &[(&str, &str)]) -> Ran {
    let (mut out, out_w) = pipe();
    let (mut err, err_w) = pipe();
    let set: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = with_ours(&set)
        .into_iter()
        .filter(|(k, _)| k != "PYTHONUNBUFFERED")
        .collect();
    let forked = server
        .spawn(Trial {
            argv: argv.to_vec(),
            env,
            cwd: cwd.to_path_buf(),
            stdout: out_w,
            stderr: err_w,
        })
        .expect("spawn");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let mut stdout = String::new();
    out.read_to_string(&mut stdout).unwrap();
    let stderr = reader.join().unwrap();
    let raw = forked.exit.recv().expect("the trial's status");
    Ran {
        pid: forked.pid,
        status: ExitStatus::from_raw(raw),
        stdout,
        stderr,
    }
}

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    testkit::write(dir, name, text)
}

fn python_argv(script: &Path, args: &[&str]) -> Vec<String> {
    let mut argv = vec![
        testkit::python().display().to_string(),
        script.display().to_string(),
    ];
    argv.extend(words(args));
    argv
}

/// A good trial: it prints a metric from a torch step and exits 0.
fn good_trial(server: &Server, dir: &Path) {
    let s = script(
        dir,
        "good.py",
        "import torch\nm = torch.nn.Linear(2, 1)\nloss = m(torch.ones(4, 2)).pow(2).mean()\nloss.backward()\nprint(f'loss={loss.item():.4f}')\n",
    );
    let r = run(server, &python_argv(&s, &[]), dir, &[]);
    assert_eq!(r.status.code(), Some(0), "{}", r.stderr);
    assert!(r.stdout.starts_with("loss="), "{:?}", r.stdout);
}

#[test]
fn a_trial_sees_what_a_fresh_python_would() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let s = script(
        dir.path(),
        "trial.py",
        r#"import os, signal, sys, torch
print("argv", sys.argv)
print("name", __name__)
print("env", os.environ.get("TRIAL_X"), "PYTORCH_NVML_BASED_CUDA_CHECK" in os.environ)
print("cwd", os.getcwd())
print("path0", sys.path[0])
print("session", os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid())
print("signals", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
      signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN)
print("stdin", repr(sys.stdin.read()))
print("buffering", sys.stdout.line_buffering, sys.stderr.line_buffering, sys.stdout.write_through)
print("oom", open("/proc/self/oom_score_adj").read().strip())
print("threads", torch.get_num_threads())
print("cuda", torch.cuda.is_initialized())
print("metric loss=0.25")
print("to stderr", file=sys.stderr)
sys.exit(3)
"#,
    );
    let r = run(
        server,
        &python_argv(&s, &["--lr", "0.01"]),
        &work,
        &[("TRIAL_X", "x y"), ("OMP_NUM_THREADS", "1")],
    );
    assert_eq!(r.status.code(), Some(3), "{}", r.stderr);
    let want = [
        format!("argv ['{}', '--lr', '0.01']", s.display()),
        "name __main__".into(),
        "env x y False".into(),
        format!("cwd {}", work.display()),
        format!("path0 {}", dir.path().canonicalize().unwrap().display()),
        "session True True".into(),
        "signals True True True True".into(),
        "stdin ''".into(),
        "buffering False True False".into(),
        "oom 500".into(),
        "threads 1".into(),
        "cuda False".into(),
        "metric loss=0.25".into(),
    ];
    assert_eq!(r.stdout.lines().collect::<Vec<_>>(), want, "{}", r.stderr);
    assert_eq!(r.stderr, "to stderr\n");
    assert_ne!(r.pid, server.pid());
}

#[test]
fn a_module_and_options_as_python_runs_them() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    script(
        dir.path(),
        "mod_trial.py",
        "import sys, os\nprint(sys.argv[0], sys.argv[1:], sys.path[0] == os.getcwd(), sys.path[1], sys.stdout.write_through, sys.dont_write_bytecode, os.environ['EXTRA'])\n",
    );
    let argv = vec![
        "/usr/bin/env".to_string(),
        "EXTRA=1".into(),
        testkit::python().display().to_string(),
        "-u".into(),
        "-B".into(),
        "-m".into(),
        "mod_trial".into(),
        "a".into(),
    ];
    assert_eq!(server.fits(&argv), Ok(()));
    let r = run(server, &argv, dir.path(), &[("PYTHONPATH", "/trial/lib")]);
    assert_eq!(r.status.code(), Some(0), "{}", r.stderr);
    let file = dir.path().canonicalize().unwrap().join("mod_trial.py");
    assert_eq!(
        r.stdout,
        format!("{} ['a'] True /trial/lib True True 1\n", file.display())
    );
}

#[test]
fn a_trial_that_crashes_fails_alone() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    let cases: [(&str, &str); 5] = [
        (
            // No core file: a fork of the server would write hundreds of MiB.
            "segfault.py",
            "import ctypes, resource\nresource.setrlimit(resource.RLIMIT_CORE, (0, 0))\nctypes.string_at(0)\n",
        ),
        ("exit3.py", "import os\nprint('bye', flush=True)\nos._exit(3)\n"),
        ("raises.py", "def f():\n    raise ValueError('bad lr')\nf()\n"),
        (
            // Real memory exhaustion: the address space capped 1 GiB over
            // what the trial (torch included) maps already.
            "oom.py",
            "import resource, torch\nsize = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\nresource.setrlimit(resource.RLIMIT_AS, (size + 2**30, size + 2**30))\nx = torch.ones(2**31, dtype=torch.uint8)\n",
        ),
        ("interrupted.py", "raise KeyboardInterrupt\n"),
    ];
    for (name, text) in cases {
        let s = script(dir.path(), name, text);
        let r = run(server, &python_argv(&s, &[]), dir.path(), &[]);
        match name {
            "segfault.py" => assert_eq!(r.status.signal(), Some(libc::SIGSEGV), "{}", r.stderr),
            "exit3.py" => {
                assert_eq!(r.status.code(), Some(3));
                assert_eq!(r.stdout, "bye\n");
            }
            "raises.py" => {
                assert_eq!(r.status.code(), Some(1));
                let want = format!(
                    "Traceback (most recent call last):\n  File \"{}\", line 3, in <module>\n",
                    s.display()
                );
                assert!(r.stderr.starts_with(&want), "{}", r.stderr);
                assert!(r.stderr.ends_with("ValueError: bad lr\n"), "{}", r.stderr);
            }
            "oom.py" => {
                assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
                assert!(r.stderr.contains("can't allocate memory"), "{}", r.stderr);
            }
            _ => assert_eq!(r.status.signal(), Some(libc::SIGINT), "{}", r.stderr),
        }
        good_trial(server, dir.path());
    }
}

#[test]
fn a_missing_script_fails_as_python_says() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    let r = run(
        server,
        &python_argv(&dir.path().join("nope.py"), &[]),
        dir.path(),
        &[],
    );
    assert_eq!(r.status.code(), Some(2));
    assert!(r.stderr.contains("can't open file"), "{}", r.stderr);
    assert!(r.stderr.contains("nope.py': [Errno 2]"), "{}", r.stderr);
    let py = testkit::python().display().to_string();
    let r = run(server, &words(&[&py, "-m", "no_such_mod"]), dir.path(), &[]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(r.stderr, format!("{py}: No module named no_such_mod\n"));
}

#[test]
fn sigterm_to_the_group_ends_a_trial() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    let s = script(
        dir.path(),
        "sleeps.py",
        "import time\nprint('up', flush=True)\ntime.sleep(60)\n",
    );
    let (out, out_w) = pipe();
    let (_err, err_w) = pipe();
    let forked = server
        .spawn(Trial {
            argv: python_argv(&s, &[]),
            env: with_ours(&[]),
            cwd: dir.path().to_path_buf(),
            stdout: out_w,
            stderr: err_w,
        })
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut first).unwrap();
    assert_eq!(first, "up\n");
    // SAFETY: kill(2) on the trial's own group.
    assert_eq!(
        unsafe { libc::kill(-(forked.pid as i32), libc::SIGTERM) },
        0
    );
    let status = ExitStatus::from_raw(forked.exit.recv().unwrap());
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn fits_refuses_what_it_cannot_fork() {
    let server = torch_server();
    let py = testkit::python().display().to_string();
    assert_eq!(server.fits(&words(&[&py, "train.py"])), Ok(()));
    let why = server.fits(&words(&["/bin/sh", "run.sh"])).unwrap_err();
    assert!(
        why.contains("/bin/sh is not the preloaded interpreter"),
        "{why}"
    );
    // The venv's python is a link to its base python: the same file, another
    // interpreter (its own sys.prefix, no torch).
    let base = std::fs::canonicalize(testkit::python()).unwrap();
    assert_ne!(base, testkit::python());
    let base = base.display().to_string();
    let why = server.fits(&words(&[&base, "t.py"])).unwrap_err();
    assert!(why.contains("not the preloaded interpreter"), "{why}");
    let python3 = testkit::python().with_file_name("python3");
    assert_eq!(
        server.fits(&words(&[&python3.display().to_string(), "t.py"])),
        Ok(())
    );
    let why = server.fits(&words(&[&py, "-O", "t.py"])).unwrap_err();
    assert!(why.contains("-O"), "{why}");
}

#[test]
fn the_server_ends_with_its_client() {
    let server = Server::start(&testkit::python(), &["json".into()], &[]).unwrap();
    let pid = server.pid() as i32;
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0);
    let dir = TempDir::new().unwrap();
    let s = script(
        dir.path(),
        "pg.py",
        "import os\nprint(os.getpgrp(), os.getppid())\n",
    );
    let r = run(&server, &python_argv(&s, &[]), dir.path(), &[]);
    let (pgrp, ppid) = r.stdout.trim().split_once(' ').unwrap();
    assert_eq!(ppid, pid.to_string());
    assert_ne!(pgrp, pid.to_string(), "a trial is in its own group");
    // Exit code 0: it left by itself when its socket closed (not killed
    // after the grace dropping gives it); reaped, so gone.
    let status = server.close().expect("its status");
    assert_eq!(status.code(), Some(0));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, 0) }, -1);
}

#[test]
fn a_module_that_does_not_import_is_named() {
    let err = Server::start(&testkit::python(), &["no_such_module_xyz".into()], &[])
        .err()
        .expect("an error");
    let msg = format!("{err:#}");
    let want = format!("preload: {}: cannot import no_such_module_xyz: ModuleNotFoundError: No module named 'no_such_module_xyz'", testkit::python().display());
    assert_eq!(msg, want);
    let code = err.downcast_ref::<common::exit::Failure>().map(|f| f.code);
    assert_eq!(code, Some(common::exit::BAD_INPUT));
}

#[test]
fn a_trial_holds_no_other_trials_pipes() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    let s = script(
        dir.path(),
        "waits.py",
        "import time\nprint('up', flush=True)\ntime.sleep(60)\n",
    );
    let spawn = || {
        let (out, out_w) = pipe();
        let (_, err_w) = pipe();
        let forked = server
            .spawn(Trial {
                argv: python_argv(&s, &[]),
                env: with_ours(&[]),
                cwd: dir.path().to_path_buf(),
                stdout: out_w,
                stderr: err_w,
            })
            .unwrap();
        (forked, out)
    };
    let (a, a_out) = spawn();
    let (b, b_out) = spawn();
    // Each trial is in its own group once it prints: a kill before that
    // (a loaded machine) found no group, and the trial slept on.
    let up = |out| {
        let mut out = std::io::BufReader::new(out);
        let mut first = String::new();
        std::io::BufRead::read_line(&mut out, &mut first).unwrap();
        assert_eq!(first, "up\n");
        out
    };
    let (mut a_out, _b_out) = (up(a_out), up(b_out));
    let (tx, eof) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = a_out.read_to_string(&mut s);
        let _ = tx.send(());
    });
    // SAFETY: kill(2) on the trials' own groups.
    unsafe { libc::kill(-(a.pid as i32), libc::SIGKILL) };
    let ended = eof.recv_timeout(std::time::Duration::from_secs(20));
    unsafe { libc::kill(-(b.pid as i32), libc::SIGKILL) };
    assert!(
        ended.is_ok(),
        "the first trial's stdout stayed open while the second ran"
    );
    assert_eq!(
        ExitStatus::from_raw(a.exit.recv().unwrap()).signal(),
        Some(libc::SIGKILL)
    );
    assert_eq!(
        ExitStatus::from_raw(b.exit.recv().unwrap()).signal(),
        Some(libc::SIGKILL)
    );
}

/// Threads joined, atexit handlers and weakref finalizers run, in the order
/// a fresh python runs them (compared with one).
#[test]
fn a_trial_ends_as_a_fresh_python_does() {
    let server = torch_server();
    let dir = TempDir::new().unwrap();
    let s = script(
        dir.path(),
        "ends.py",
        r#"import atexit, threading, time, weakref, torch
class Thing: pass
thing = Thing()
weakref.finalize(thing, print, "finalized")
import pickle; assert pickle.loads(pickle.dumps(thing)).__class__.__name__ == "Thing"
atexit.register(print, "atexit ran")
threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
print("main end")
"#,
    );
    let forked = run(server, &python_argv(&s, &[]), dir.path(), &[]);
    let fresh = std::process::Command::new(testkit::python())
        .arg(&s)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(forked.status.code(), Some(0), "{}", forked.stderr);
    assert_eq!(
        forked.stdout,
        "main end\nthread done\natexit ran\nfinalized\n"
    );
    assert_eq!(forked.stdout, String::from_utf8_lossy(&fresh.stdout));
}
