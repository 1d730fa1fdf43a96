//! `train run` around a job of several processes: torchrun (PyTorch's
//! launcher, from the test environment's torch) starting 2 ranks on the CPU
//! with gloo, each in a session of its own, as it starts them everywhere.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use testkit::wait_until;

const BIN: &str = env!("CARGO_BIN_EXE_train");

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

fn kill9(pid: i32) {
    // SAFETY: kill(2) on a pid the test started (directly or not).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// `train run -- torchrun 2 ranks` in `dir`, until both ranks have written
/// their pids and the sampler has seen the job's three processes: the
/// supervisor, the ranks' pids and the agent's.
fn start_job(dir: &Path) -> (Child, [i32; 2], i32) {
    std::fs::copy(
        testkit::repo_path("tools/train/tests/programs/gloo_ranks.py"),
        dir.join("ranks.py"),
    )
    .unwrap();
    let train = Command::new(BIN)
        .args(["run", "--out", "r", "--grace", "1s", "--quiet", "--"])
        .arg(testkit::python())
        .args([
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "ranks.py",
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = |rank: u32| -> Option<(i32, i32)> {
        let text = std::fs::read_to_string(dir.join(format!("rank{rank}.pid"))).ok()?;
        let (pid, parent) = text.trim().split_once(' ')?;
        Some((pid.parse().ok()?, parent.parse().ok()?))
    };
    wait_until("both ranks' pids", 120, || {
        pids(0).is_some() && pids(1).is_some()
    });
    let ((r0, agent), (r1, _)) = (pids(0).unwrap(), pids(1).unwrap());
    // A row of memory.csv written after the ranks started counts the agent
    // and both ranks: the supervisor has seen (and recorded) them.
    let seen_after = std::fs::read_to_string(dir.join("r/memory.csv"))
        .unwrap()
        .lines()
        .count();
    wait_until("a memory sample of the ranks", 20, || {
        std::fs::read_to_string(dir.join("r/memory.csv"))
            .unwrap()
            .lines()
            .skip(seen_after)
            .any(|l| l.split(',').nth(3).and_then(|n| n.parse::<u32>().ok()) >= Some(3))
    });
    assert!(alive(r0) && alive(r1) && alive(agent));
    (train, [r0, r1], agent)
}

#[test]
fn no_rank_outlives_its_agent_and_train_run_both_killed_minus_nine() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut train, ranks, agent) = start_job(tmp.path());
    // The agent first (the OOM killer's choice: the largest process), then
    // the supervisor, before it has seen the agent's end.
    kill9(agent);
    train.kill().unwrap();
    train.wait().unwrap();
    wait_until("both ranks to be ended by the keeper", 15, || {
        ranks.iter().all(|r| !alive(*r))
    });
}

#[test]
fn the_agent_killed_ends_the_job_and_its_ranks_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut train, ranks, agent) = start_job(tmp.path());
    kill9(agent);
    // train run sees the agent's end, and ends the ranks it left.
    let mut code = None;
    wait_until("train run to end", 20, || {
        code = train.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    assert_eq!(code, Some(Some(137)), "the agent's own end, passed on");
    assert!(
        ranks.iter().all(|r| !alive(*r)),
        "a rank outlived train run"
    );
}
