//! `train run --exit-codes classes`: each way a command ends, brought about
//! for real (a MemoryError under RLIMIT_AS, torch's own label check and a
//! loss it makes NaN, a SIGKILL, a signal to train run), exits with its
//! class's code; without the flag the command's own code is passed on.
//! The CUDA classes (gpu-error 78, config 80: CUDA graphs with
//! checkpointing) need a GPU: their codes are checked on the pure mapping
//! (common's exit::classes).

use std::path::Path;
use std::process::{Command, Stdio};
use testkit::{wait_until, write};

const BIN: &str = env!("CARGO_BIN_EXE_train");

/// `train run [--exit-codes classes] --out r -- CMD` in `dir`: its exit code
/// and the class its summary says.
fn run(dir: &Path, classes: bool, extra: &[&str], cmd: &[&str]) -> (i32, String) {
    let mut c = Command::new(BIN);
    c.args(["run", "--quiet", "--out", "r"]).args(extra);
    if classes {
        c.args(["--exit-codes", "classes"]);
    }
    let out = c.arg("--").args(cmd).current_dir(dir).output().unwrap();
    let s = testkit::yaml(&std::fs::read(dir.join("r/summary.yaml")).unwrap());
    let class = s["class"].as_str().unwrap_or("-").to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{class} | {err}"))
}

fn check(cmd: &[&str], files: &[(&str, &str)], extra: &[&str], class: &str, code: i32) {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in files {
        write(tmp.path(), name, text);
    }
    let (got, said) = run(tmp.path(), true, extra, cmd);
    assert_eq!(got, code, "{said}");
    assert!(said.starts_with(&format!("{class} |")), "{said}");
    assert!(
        said.contains(&format!("train run: exit {code} (")),
        "{said}"
    );
}

#[test]
fn out_of_memory_is_75() {
    let py = testkit::python_arg();
    check(
        &[&py, "hold.py", "--rows=100", "--width=10"],
        &[("hold.py", &testkit::hold_rows_width(50, 0.1))],
        &[],
        "out-of-memory",
        75,
    );
}

#[test]
fn a_sigkill_is_76_and_without_the_flag_137() {
    let cmd = ["sh", "-c", "echo '{\"val_loss\": 1}'; kill -9 $$"];
    check(&cmd, &[], &[], "killed", 76);
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(run(tmp.path(), false, &[], &cmd).0, 137);
}

#[test]
fn labels_out_of_range_are_81() {
    let labels = "import torch\nimport torch.nn.functional as F\n\
                  loss = F.cross_entropy(torch.zeros(4, 3), torch.tensor([0, 1, 2, 7]))\n\
                  print(f'val_loss {loss.item()}')\n";
    let py = testkit::python_arg();
    check(
        &[&py, "labels.py"],
        &[("labels.py", labels)],
        &[],
        "label-out-of-range",
        81,
    );
}

#[test]
fn a_non_finite_loss_is_82() {
    // inf - inf: a NaN torch computes, reported as the run's metric.
    let nan = "import torch\ninf = torch.tensor([float('inf')])\n\
               for epoch in (1, 2):\n    loss = 1.0 / epoch if epoch == 1 else (inf - inf).item()\n\
               \x20   print(f'{{\"epoch\": {epoch}, \"val_loss\": {loss}}}', flush=True)\n";
    let py = testkit::python_arg();
    check(
        &[&py, "nan.py"],
        &[("nan.py", nan)],
        &[],
        "non-finite-loss",
        82,
    );
}

#[test]
fn a_timeout_is_83() {
    check(
        &["sleep", "30"],
        &[],
        &["--timeout", "1s", "--grace", "1s"],
        "timeout",
        83,
    );
}

#[test]
fn any_other_failure_is_84_and_without_the_flag_its_own_code() {
    let cmd = ["python3", "-c", "open('missing.csv')"];
    check(&cmd, &[], &[], "other", 84);
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(run(tmp.path(), false, &[], &cmd).0, 1);
}

/// train run stopped by `sig` while its command runs: its exit code.
fn stopped_by(sig: i32, classes: bool) -> i32 {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Command::new(BIN);
    c.args(["run", "--quiet", "--out", "r", "--grace", "1s"]);
    if classes {
        c.args(["--exit-codes", "classes"]);
    }
    let mut train = c
        .args(["--", "sh", "-c", "echo started; sleep 30"])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the command's first line", 20, || {
        std::fs::read_to_string(tmp.path().join("r/output.log"))
            .is_ok_and(|l| l.contains("started"))
    });
    // SAFETY: a signal to the train run this test started.
    unsafe {
        libc::kill(train.id() as i32, sig);
    }
    train.wait().unwrap().code().unwrap_or(-1)
}

#[test]
fn sigterm_is_a_preemption_77_and_ctrl_c_stays_130() {
    assert_eq!(stopped_by(libc::SIGTERM, true), 77);
    assert_eq!(stopped_by(libc::SIGINT, true), 130);
    assert_eq!(stopped_by(libc::SIGTERM, false), 130);
}
