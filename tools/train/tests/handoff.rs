//! How `train` hands the seeds' model to `train-model`: with one beside it,
//! by becoming it (same pid, same arguments); without one (the pip wheel's
//! shape, here the source build's own `train` linked alone into a
//! directory), what needs libtorch exits 5 with one message before anything
//! is written, and what does not works as in the full build.

use std::path::{Path, PathBuf};
use testkit::UCommand;

/// This build's `train`, alone in a fresh directory (a hard link where the
/// filesystem allows one: the binary is large).
fn lone_train(dir: &Path) -> PathBuf {
    let alone = dir.join("train");
    let built = env!("CARGO_BIN_EXE_train");
    if std::fs::hard_link(built, &alone).is_err() {
        std::fs::copy(built, &alone).unwrap();
    }
    alone
}

/// A scratch directory on the target's filesystem, so the link works.
fn scratch() -> tempfile::TempDir {
    let target = Path::new(env!("CARGO_BIN_EXE_train")).parent().unwrap();
    tempfile::tempdir_in(target).unwrap()
}

#[test]
fn what_needs_libtorch_exits_5_naming_the_command() {
    let tmp = scratch();
    let train = lone_train(tmp.path());
    let config = testkit::repo_path("configs/demo_cpu.yaml");
    let out = tmp.path().join("never");
    let cases: [(&[&str], &str); 4] = [
        (
            &["--config", "CFG", "--out", "OUT"],
            "train --config (the built-in model)",
        ),
        (&["--resume", "OUT"], "train --resume (the built-in model)"),
        (
            &["bench", "--config", "CFG", "--save", "OUT"],
            "train bench",
        ),
        (&["check-data", "--config", "CFG"], "train check-data"),
    ];
    for (args, who) in cases {
        let args = args.iter().map(|a| match *a {
            "CFG" => config.as_os_str(),
            "OUT" => out.as_os_str(),
            a => std::ffi::OsStr::new(a),
        });
        UCommand::new(&train)
            .args(args)
            .run()
            .code_is(5)
            .stderr_contains(&format!("{who} needs libtorch"))
            .stderr_contains(&format!("{} was built without it", train.display()));
        assert!(!out.exists(), "{who}: nothing written");
    }
}

#[test]
fn info_says_not_in_this_build_and_run_works() {
    let tmp = scratch();
    let train = lone_train(tmp.path());
    let info = UCommand::new(&train).arg("info").run();
    info.success();
    assert_eq!(
        info.stdout_yaml()["libtorch"].as_str(),
        Some("not in this build")
    );
    let run = tmp.path().join("run");
    UCommand::new(&train)
        .args(["run", "--out"])
        .arg(&run)
        .args(["--", "true"])
        .run()
        .success();
    assert!(run.join("summary.yaml").exists());
    // Usage errors are still train's own, exit 2, without train-model.
    UCommand::new(&train).args(["--config"]).run().code_is(2);
}

/// The source build: `train --config` becomes `train-model` in the same
/// process, with the same arguments, so a sweep's pid file and its reading
/// of /proc/PID/cmdline (a trial's directory) still find the trial.
#[cfg(feature = "libtorch")]
#[test]
fn train_becomes_train_model_in_the_same_process() {
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let train = env!("CARGO_BIN_EXE_train");
    let mut child = Command::new(train)
        .arg("--config")
        .arg(testkit::repo_path("configs/demo_cpu.yaml"))
        .arg("--out")
        .arg(&out)
        .args(["--device", "cpu"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Its exe and its command line read together, while it lives.
    let mut args: Vec<String> = Vec::new();
    testkit::wait_until("train's pid running train-model", 60, || {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        args = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        !args.is_empty() && exe.is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "train-model"))
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(args[0], train, "argv[0] is still train's: {args:?}");
    assert!(args.contains(&out.display().to_string()), "{args:?}");
}
