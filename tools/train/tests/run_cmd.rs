//! `train run -- CMD` as a user runs it: real commands (sh, Python, and the
//! repo's real PyTorch script examples/own_script/main.py where the failure
//! needs torch: a real host out-of-memory under RLIMIT_AS), read back from
//! the run directory it leaves.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use testkit::{wait_until, write};

const BIN: &str = env!("CARGO_BIN_EXE_train");

fn train_run(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("run").args(args).current_dir(cwd);
    for k in testkit::CALLER_ENV {
        cmd.env_remove(k);
    }
    cmd.output().unwrap()
}

fn summary(dir: &Path) -> serde_yaml::Value {
    testkit::yaml(&std::fs::read(dir.join("summary.yaml")).unwrap())
}

fn script() -> String {
    testkit::repo_path("examples/own_script/main.py")
        .display()
        .to_string()
}

use testkit::python_arg as py;

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

/// Whether a child of `parent` is the keeper of process group `pgid` (the
/// `sh` whose script ends it: group::Keeper).
fn keeper_of(parent: u32, pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .any(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, r)| r.split(' ').nth(1)?.parse().ok());
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(parent)
                && String::from_utf8_lossy(&cmd).contains(&format!("kill -TERM -{pgid};"))
        })
}

#[test]
fn a_plain_command_is_read_and_its_exit_code_passed_on() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = "import json,sys\n\
for e in (1, 2, 3):\n    print(f'Epoch {e}/3 | Train Loss: {1/e:.4f} | Val Loss: {2/e:.4f} | LR: 0.001 | Time: 0.10s', flush=True)\n    print(json.dumps({'epoch': e, 'acc': 0.5 + e / 10}), flush=True)\n\
print('ValueError: the data ran out', file=sys.stderr)\nsys.exit(3)\n";
    write(tmp.path(), "p.py", prog);
    let out = train_run(
        tmp.path(),
        &["--out", "r", "--quiet", "--", "python3", "p.py"],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&tmp.path().join("r"));
    assert_eq!(s["schema"], "program-summary/v1");
    assert_eq!(s["status"], "failed");
    assert_eq!(s["best"]["metric"], "val_loss");
    assert_eq!(s["best"]["value"].as_f64(), Some(0.6667));
    assert_eq!(s["best"]["step"].as_u64(), Some(3));
    assert_eq!(s["legs"][0]["exit_code"].as_i64(), Some(3));
    assert!(
        s["evidence"]
            .as_str()
            .unwrap()
            .contains("ValueError: the data ran out"),
        "{s:?}"
    );
    let rows = std::fs::read_to_string(tmp.path().join("r/metrics.csv")).unwrap();
    assert!(
        rows.starts_with("seconds,leg,metric,step,value\n"),
        "{rows}"
    );
    assert_eq!(
        rows.lines().filter(|l| l.contains(",acc,")).count(),
        3,
        "{rows}"
    );
    let log = std::fs::read_to_string(tmp.path().join("r/output.log")).unwrap();
    assert!(log.contains("Epoch 3/3") && log.contains("the data ran out"));
    assert!(out.stdout.is_empty(), "--quiet keeps the output in the log");
}

#[test]
fn bad_usage_exits_2_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = train_run(
        tmp.path(),
        &[
            "--out", "r", "--", "python3", "m.py", "--config", "{config}",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no --config"));
    assert!(!tmp.path().join("r").exists());
    let out = train_run(tmp.path(), &["--out", "r", "--", "no-such-program-xyz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot start \"no-such-program-xyz\""));
    let out = train_run(
        tmp.path(),
        &[
            "--out",
            "r",
            "--metric",
            "loss",
            "--metric-regex",
            "loss (\\d+) (\\d+)",
            "--",
            "true",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 capture groups"));
}

/// Hugging Face's Trainer prints `eval_loss` in dict lines, never
/// `val_loss`: with no --metric it is found; a --metric never reported is
/// said, with the metrics that were, and the exit code stays the command's.
#[test]
fn the_metric_is_found_without_a_flag_and_a_missing_one_is_said() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = r#"
for e in (1, 2, 3):
    print({'loss': 1.0 / e, 'grad_norm': 0.5, 'learning_rate': 1e-4, 'epoch': float(e)}, flush=True)
    print({'eval_loss': 2.0 / e + (e == 3), 'eval_runtime': 0.1, 'epoch': float(e)}, flush=True)
"#;
    write(tmp.path(), "hf.py", prog);
    let out = train_run(
        tmp.path(),
        &["--out", "found", "--quiet", "--", "python3", "hf.py"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("never reported"), "{err}");
    let s = summary(&tmp.path().join("found"));
    assert_eq!(s["metric"]["name"], "eval_loss", "{s:?}");
    assert_eq!(s["metric"]["how"], "found", "{s:?}");
    assert_eq!(s["metric"]["reported"], true, "{s:?}");
    assert_eq!(s["best"]["metric"], "eval_loss", "{s:?}");
    assert_eq!(s["best"]["value"].as_f64(), Some(1.0), "{s:?}");
    assert_eq!(s["best"]["step"].as_u64(), Some(2), "{s:?}");
    let out = train_run(
        tmp.path(),
        &[
            "--out", "named", "--quiet", "--metric", "val_loss", "--", "python3", "hf.py",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("--metric val_loss was never reported")
            && err.contains("it reported loss, grad_norm, learning_rate, eval_loss, eval_runtime: choose one, e.g. --metric loss"),
        "{err}"
    );
    let s = summary(&tmp.path().join("named"));
    assert_eq!(s["metric"]["name"], "val_loss", "{s:?}");
    assert_eq!(s["metric"]["how"], "given", "{s:?}");
    assert_eq!(s["metric"]["reported"], false, "{s:?}");
    assert_eq!(s["metric"]["seen"][3], "eval_loss", "{s:?}");
    assert!(s["best"].is_null(), "{s:?}");
    // The fix said for a script that prints no metric works as typed.
    write(tmp.path(), "plain.py", "print('val loss: 0.41')\n");
    let out = train_run(
        tmp.path(),
        &["--out", "none", "--quiet", "--", "python3", "plain.py"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let fix = err
        .split("e.g. ")
        .nth(1)
        .and_then(|r| r.lines().next())
        .unwrap_or_else(|| panic!("no fix in {err}"));
    // As a shell reads it, quotes and all.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{BIN} run --out fixed --quiet {fix} -- python3 plain.py"
        ))
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{fix}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&tmp.path().join("fixed"));
    assert_eq!(s["best"]["value"].as_f64(), Some(0.41), "{fix}: {s:?}");
}

#[test]
fn a_timeout_ends_the_group_even_when_it_ignores_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let out = train_run(
        tmp.path(),
        &[
            "--out",
            "r",
            "--timeout",
            "1s",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            "trap '' TERM; echo started; sleep 30",
        ],
    );
    let s = summary(&tmp.path().join("r"));
    assert_eq!(s["class"], "timeout", "{s:?}");
    assert_eq!(
        s["legs"][0]["signal"].as_i64(),
        Some(9),
        "SIGKILL after the grace"
    );
    assert_eq!(out.status.code(), Some(137));
    assert!(s["legs"][0]["seconds"].as_f64().unwrap() < 10.0);
}

#[test]
fn killed_minus_nine_leaves_no_process_of_its_command() {
    let tmp = tempfile::tempdir().unwrap();
    // The command's own child (a worker) is what outlives a plain kill.
    let cmd = "sleep 300 & echo $! > worker.pid; echo $$ > leader.pid; \
               echo 'Epoch 1/9 | Train Loss: 1.0 | Val Loss: 1.0 | LR: 0.1 | Time: 1s'; wait";
    let mut train = Command::new(BIN)
        .args([
            "run", "--out", "r", "--grace", "1s", "--quiet", "--", "sh", "-c", cmd,
        ])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_of = |name: &str| -> Option<i32> {
        std::fs::read_to_string(tmp.path().join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    wait_until("the command's pids", 20, || {
        pid_of("worker.pid").is_some() && pid_of("leader.pid").is_some()
    });
    let (worker, leader) = (pid_of("worker.pid").unwrap(), pid_of("leader.pid").unwrap());
    assert!(alive(worker) && alive(leader));
    // The keeper starts just after the command: killed before it, train
    // would leave the command behind (a window of milliseconds after the
    // start that no test asserts over).
    wait_until("train's keeper of the command's group", 20, || {
        keeper_of(train.id(), leader)
    });
    train.kill().unwrap(); // SIGKILL
    train.wait().unwrap();
    wait_until("the command's process group to be gone", 15, || {
        !alive(worker) && !alive(leader)
    });
}

#[test]
fn ctrl_c_stops_the_command_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let mut train = Command::new(BIN)
        .args([
            "run",
            "--out",
            "r",
            "--quiet",
            "--",
            "sh",
            "-c",
            "echo up > up; sleep 60",
        ])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the command to start", 20, || {
        tmp.path().join("up").exists()
    });
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: a signal to the child we started.
    unsafe { libc::kill(train.id() as i32, libc::SIGTERM) };
    let status = train.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let s = summary(&tmp.path().join("r"));
    assert_eq!(s["status"], "stopped", "{s:?}");
    assert_eq!(s["class"], "interrupted");
}

/// Seed 000's chain for any script: A fails with the CUDA-graph message
/// (recorded; a CPU cannot produce it), B runs out of host memory for real
/// (torch under RLIMIT_AS), C finishes.
#[test]
fn the_fallback_chain_runs_a_script_from_config_to_config() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "a.yaml",
        "epochs: 2\nfault: cuda-graph\nfault_epoch: 1\n",
    );
    write(
        d,
        "b.yaml",
        "epochs: 2\nfault: oom\nfault_epoch: 1\nmemory_limit_mib: 1500\n",
    );
    write(d, "c.yaml", "epochs: 2\n");
    let out = train_run(
        d,
        &[
            "--out",
            "r",
            "--quiet",
            "--config",
            "a.yaml",
            "--fallback",
            "b.yaml",
            "--fallback",
            "c.yaml",
            "--",
            &py(),
            &script(),
            "--config",
            "{config}",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let s = summary(&d.join("r"));
    let legs = s["legs"].as_sequence().unwrap();
    let got: Vec<(&str, &str, &str)> = legs
        .iter()
        .map(|l| {
            (
                l["config"].as_str().unwrap(),
                l["status"].as_str().unwrap(),
                l["class"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("a.yaml", "failed", "cuda-graph-pointer"),
            ("b.yaml", "failed", "out-of-memory"),
            ("c.yaml", "finished", "-"),
        ],
        "{err}"
    );
    assert!(legs[1]["evidence"]
        .as_str()
        .unwrap()
        .contains("can't allocate memory"));
    // One run's advice: its model and batch, not a sweep's --parallel.
    let advice = legs[1]["advice"].as_str().unwrap();
    assert!(
        advice.contains("a smaller model") && !advice.contains("--parallel"),
        "{advice}"
    );
    assert!(err.contains("takes over"), "{err}");
    assert_eq!(s["status"], "finished");
    assert_eq!(s["best"]["metric"], "val_loss");
    let log = std::fs::read_to_string(d.join("r/output.log")).unwrap();
    // Each leg's output under its marker, the first's too.
    assert!(log.starts_with("==> train run: leg 1: "), "{log}");
    assert!(log.contains("\n\n==> train run: leg 2: "), "{log}");
    assert!(log.contains("==> train run: leg 3"), "{log}");
    for f in ["memory.csv", "memory-2.csv", "memory-3.csv"] {
        assert!(d.join("r").join(f).exists(), "{f}");
    }
}

/// A command over its memory cgroup's limit (v1, 200 MiB around `train
/// run`) gets SIGKILL from the kernel's OOM killer, with no message: the
/// cgroup's OOM-kill count rose while it ran, so it is an out-of-memory,
/// not a plain kill.
#[test]
fn a_sigkill_from_the_kernels_oom_killer_is_an_out_of_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let cg =
        Path::new("/sys/fs/cgroup/memory").join(format!("trainguard-run-{}", std::process::id()));
    std::fs::create_dir(&cg)
        .expect("this test needs a writable memory cgroup (v1) at /sys/fs/cgroup/memory (root)");
    std::fs::write(cg.join("memory.limit_in_bytes"), (200u64 << 20).to_string()).unwrap();
    // Swap would let it go on: none for this cgroup, where the kernel allows.
    let _ = std::fs::write(cg.join("memory.swappiness"), "0");
    let hog = "import time\nb = []\nfor i in range(64):\n    b.append(bytearray(b'\\x01') * (16 << 20))\n    print(f'{{\"val_loss\": {i}}}', flush=True)\n";
    write(tmp.path(), "hog.py", hog);
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec {BIN} run --quiet --out r -- {} hog.py",
        cg.display(),
        py()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    wait_until("the test's cgroup to be removed", 10, || {
        std::fs::remove_dir(&cg).is_ok()
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{err}");
    let s = summary(&tmp.path().join("r"));
    assert_eq!(s["class"].as_str(), Some("out-of-memory"), "{s:?} {err}");
    let evidence = s["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("kernel's OOM killer") && evidence.contains("oom_kill 0 -> 1"),
        "{evidence}"
    );
}
