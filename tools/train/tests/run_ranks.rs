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

/// The test program `name` (tools/train/tests/programs/) as `dir/as_name`.
fn program_in(dir: &Path, name: &str, as_name: &str) {
    std::fs::copy(
        testkit::repo_path("tools/train/tests/programs").join(name),
        dir.join(as_name),
    )
    .unwrap();
}

/// `train run -- torchrun 2 ranks` in `dir`, until both ranks have written
/// their pids and the sampler has seen the job's three processes: the
/// supervisor, the ranks' pids and the agent's.
fn start_job(dir: &Path, launcher: &[&str]) -> (Child, [i32; 2], i32) {
    program_in(dir, "gloo_ranks.py", "ranks.py");
    let train = Command::new(BIN)
        .args(["run", "--out", "r", "--grace", "1s", "--quiet", "--"])
        .args(launcher)
        .arg("ranks.py")
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
    // A sample of memory.csv taken after the ranks started counts the agent
    // and both ranks (the supervisor has seen and recorded them), with each
    // rank's own row beside the whole job's, all at one time.
    let csv = dir.join("r/memory.csv");
    let seen_after = memory_rows(&csv).len();
    let mut sample: Option<[Vec<String>; 3]> = None;
    wait_until("a memory sample of the job and of each rank", 20, || {
        let rows: Vec<_> = memory_rows(&csv).into_iter().skip(seen_after).collect();
        let row = |at: &str, rank: &str| rows.iter().find(|f| f[0] == at && f[5] == rank).cloned();
        sample = rows
            .iter()
            .filter(|f| whole_job(f))
            .find_map(|job| Some([job.clone(), row(&job[0], "0")?, row(&job[0], "1")?]));
        sample.is_some()
    });
    assert!(alive(r0) && alive(r1) && alive(agent));
    // Each rank's row: one process each, with torch loaded; together less
    // than the job, which has the agent too.
    let [job, r0_row, r1_row] = sample.unwrap();
    let mib = |f: &[String]| f[1].parse::<f64>().unwrap();
    assert!(
        r0_row[3] == "1" && r1_row[3] == "1",
        "{r0_row:?} {r1_row:?}"
    );
    assert!(
        mib(&r0_row) > 50.0 && mib(&r1_row) > 50.0,
        "{r0_row:?} {r1_row:?}"
    );
    assert!(
        mib(&r0_row) + mib(&r1_row) < mib(&job),
        "{r0_row:?} {r1_row:?} {job:?}"
    );
    (train, [r0, r1], agent)
}

/// memory.csv's whole lines (a sample's rows are written one by one, so
/// the last may be cut), each split into its six fields.
fn memory_rows(csv: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(csv)
        .unwrap_or_default()
        .split_inclusive('\n')
        .filter_map(|l| l.strip_suffix('\n'))
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>())
        .filter(|f| f.len() == 6)
        .collect()
}

/// Whether a row of memory.csv is the whole job's (no rank) and counts
/// the agent and both ranks.
fn whole_job(f: &[String]) -> bool {
    f[5].is_empty() && f[3].parse::<u32>().is_ok_and(|n| n >= 3)
}

/// torchrun's module form, from the test environment's Python.
fn torchrun() -> Vec<String> {
    let py = testkit::python().display().to_string();
    [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
    ]
    .iter()
    .map(|w| w.to_string())
    .fold(vec![py], |mut v, w| {
        v.push(w);
        v
    })
}

/// accelerate's launcher beside that Python. Its `--cpu` runs one process
/// (accelerate 1.15's multi-process CPU launch wants MPI); `--multi_gpu`
/// starts the ranks through torch.distributed.run, and a gloo script runs
/// them on the CPU.
fn accelerate() -> Vec<String> {
    let bin = testkit::python().with_file_name("accelerate");
    [
        bin.display().to_string().as_str(),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
    ]
    .map(String::from)
    .to_vec()
}

fn no_rank_outlives_its_agent_and_train_run(launcher: &[String]) {
    let tmp = tempfile::tempdir().unwrap();
    let words: Vec<&str> = launcher.iter().map(String::as_str).collect();
    let (mut train, ranks, agent) = start_job(tmp.path(), &words);
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
fn no_rank_outlives_its_agent_and_train_run_both_killed_minus_nine() {
    no_rank_outlives_its_agent_and_train_run(&torchrun());
}

#[test]
fn no_rank_of_accelerate_launch_outlives_them_either() {
    no_rank_outlives_its_agent_and_train_run(&accelerate());
}

#[test]
fn the_agent_killed_ends_the_job_and_its_ranks_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let launcher = torchrun();
    let words: Vec<&str> = launcher.iter().map(String::as_str).collect();
    let (mut train, ranks, agent) = start_job(tmp.path(), &words);
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

/// `train run --hang-grace 4s -- torchrun 2 ranks gloo_oom.py MODE...` in
/// `dir`, started.
fn start_oom_job(dir: &Path, extra: &[&str], mode: &[&str]) -> Child {
    program_in(dir, "gloo_oom.py", "oom.py");
    Command::new(BIN)
        .args(["run", "--out", "r", "--grace", "2s", "--quiet"])
        .args(extra)
        .arg("--")
        .arg(testkit::python())
        .args([
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "oom.py",
        ])
        .args(mode)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_rank_that_catches_its_out_of_memory_and_waits_is_ended_within_the_grace() {
    let tmp = tempfile::tempdir().unwrap();
    let grace = 4.0;
    let extra = ["--hang-grace", "4s", "--exit-codes", "classes"];
    let mut train = start_oom_job(tmp.path(), &extra, &["hang"]);
    let log = tmp.path().join("r/output.log");
    wait_until("rank 1's out-of-memory", 120, || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("can't allocate memory"))
    });
    let failed = std::time::Instant::now();
    let mut status = None;
    wait_until("train run to end the hung job", 60, || {
        status = train.try_wait().unwrap();
        status.is_some()
    });
    // The hang grace, train's own 2 s and 10 s of room for a loaded machine:
    // a job nobody ended would run to the 60 s wait.
    let took = failed.elapsed().as_secs_f64();
    assert!(took <= grace + 12.0, "ended {took:.1} s after the failure");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut train.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.unwrap().code(), Some(75), "{err}");
    assert!(
        err.contains("then no output for 4 s: the job hangs"),
        "{err}"
    );
    let s = testkit::yaml(&std::fs::read(tmp.path().join("r/summary.yaml")).unwrap());
    assert_eq!(s["class"].as_str(), Some("out-of-memory"), "{s:?}");
    let evidence = s["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with("rank 1: ") && evidence.contains("the job hung"),
        "{evidence}"
    );
    // Each rank's own peak, torch loaded in each; the job's is larger.
    let peak = &s["legs"][0]["peak"];
    let rank = |r: usize| peak["ranks_host_pss_mib"][r].as_f64().unwrap();
    let job = peak["host_pss_mib"].as_f64().unwrap();
    assert!(rank(0) > 50.0 && rank(1) > 50.0, "{peak:?}");
    assert!(rank(0) < job && rank(1) < job, "{peak:?}");
    // No process of the job is left: each rank wrote nothing, so find them
    // by their directory (another test of this binary runs the same
    // command line).
    let left = procs_in(tmp.path());
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_rank_that_recovers_and_then_runs_quietly_past_the_grace_is_not_ended() {
    let tmp = tempfile::tempdir().unwrap();
    // Quiet for 8 s after its recovery, twice the grace.
    let mut train = start_oom_job(tmp.path(), &["--hang-grace", "4s"], &["recover", "8"]);
    let status = train.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut train.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    let log = std::fs::read_to_string(tmp.path().join("r/output.log")).unwrap();
    assert!(
        log.contains("can't allocate memory") && log.contains("val_loss 0.5"),
        "{log}"
    );
}

#[test]
fn a_rank_killed_by_a_signal_is_named_with_it_and_the_others_as_its_consequence() {
    let tmp = tempfile::tempdir().unwrap();
    let abort = "import os, time\nimport torch.distributed as dist\n\
                 dist.init_process_group('gloo')\n\
                 if dist.get_rank() == 1:\n    time.sleep(0.5)\n    os.abort()\n\
                 time.sleep(60)\n";
    testkit::write(tmp.path(), "abort.py", abort);
    let out = Command::new(BIN)
        .args(["run", "--out", "r", "--grace", "2s", "--quiet", "--"])
        .arg(testkit::python())
        .args(["-m", "torch.distributed.run", "--standalone"])
        .args(["--nproc_per_node", "2", "abort.py"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let s = testkit::yaml(&std::fs::read(tmp.path().join("r/summary.yaml")).unwrap());
    assert_eq!(s["class"].as_str(), Some("killed"), "{err}");
    let evidence = s["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with("rank 1 (pid ")
            && evidence.contains(") killed by SIGABRT: the launcher's first observed failure; rank 0 ended by the launcher after it (killed by SIGTERM)"),
        "{evidence}"
    );
}

/// The processes whose working directory is `dir`, with their command
/// lines.
fn procs_in(dir: &Path) -> Vec<(i32, String)> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            (std::fs::read_link(e.path().join("cwd")).ok()? == dir && alive(pid)).then_some(())?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .collect()
}

/// A program sweep whose trials are jobs of 2 ranks each (its `command`
/// runs them through torchrun), its launchers then its driver killed -9
/// while two such jobs run: each trial's keeper ends the ranks.
#[test]
fn a_sweep_of_jobs_of_ranks_killed_minus_nine_leaves_no_rank() {
    let tmp = tempfile::tempdir().unwrap();
    program_in(tmp.path(), "gloo_ranks.py", "ranks.py");
    testkit::write(
        tmp.path(),
        "space.yaml",
        "program: ranks.py
method: grid
metric: {name: loss, goal: minimize}
parameters:
  lr: {values: [0.01, 0.02, 0.03, 0.04]}
command:
  - ${env}
  - ${interpreter}
  - -m
  - torch.distributed.run
  - --standalone
  - --nproc_per_node
  - '2'
  - ${program}
  - ${args}
",
    );
    let mut driver = Command::new(BIN)
        .args([
            "sweep",
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "2",
        ])
        .arg("--interpreter")
        .arg(testkit::python())
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ranks = || {
        procs_in(tmp.path())
            .into_iter()
            .filter(|(_, c)| c.contains("-u ranks.py"))
            .count()
    };
    wait_until("two jobs' four ranks", 120, || ranks() == 4);
    // Each trial's lineage has recorded its ranks (for its keeper) once its
    // sampler has written two whole-job rows of them: one may be older.
    let rows = |t: &str| memory_rows(&tmp.path().join(format!("s/trials/{t}/run/memory.csv")));
    let seen = [rows("0000").len(), rows("0001").len()];
    wait_until("each trial's sampler to see its ranks twice", 30, || {
        ["0000", "0001"]
            .iter()
            .zip(seen)
            .all(|(t, n)| rows(t).iter().skip(n).filter(|f| whole_job(f)).count() >= 2)
    });
    assert_eq!(ranks(), 4);
    // The launchers first (a live one ends its ranks on the keeper's
    // SIGTERM), then the driver.
    for (pid, _) in procs_in(tmp.path())
        .into_iter()
        .filter(|(_, c)| c.contains("torch.distributed.run"))
    {
        kill9(pid);
    }
    driver.kill().unwrap();
    driver.wait().unwrap();
    wait_until("every launcher and rank to end", 30, || {
        procs_in(tmp.path()).is_empty()
    });
}

/// `ddp_mlp.py`'s final loss, as `--auto-fix` ran it (the summary) or as a
/// run of its own prints it.
fn final_loss_of(stdout: &str) -> f64 {
    let line = stdout.lines().find(|l| l.contains("final_loss")).unwrap();
    testkit::json(line.as_bytes())["final_loss"]
        .as_f64()
        .unwrap()
}

#[test]
fn an_out_of_memory_on_one_rank_is_fixed_on_all_and_ends_as_a_run_started_so() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let script = testkit::repo_path("tools/train/tests/programs/ddp_mlp.py");
    // Rank 1 alone runs out of host memory, at the second epoch, at batch
    // 64; 32 x 2 fits: the budget between what each needs here.
    let job_in = |budget: &str, extra: &[&str]| -> Vec<String> {
        let mut v = torchrun();
        v.push(script.display().to_string());
        v.extend(["--memory-budget-mib", budget].map(String::from));
        v.extend(extra.iter().map(|w| w.to_string()));
        v
    };
    let fit = [job_in("1", &["--batch-size", "32", "--grad-accum", "2"])];
    let Some(budget) = testkit::budget::budget_or_skip(d, &fit, &[job_in("1", &[])]) else {
        return;
    };
    let job = |extra: &[&str]| job_in(&budget, extra);
    let out = Command::new(BIN)
        .args(["run", "--auto-fix", "--quiet", "--out", "r"])
        .args(["--metric", "final_loss", "--"])
        .args(job(&[]))
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let s = testkit::yaml(&std::fs::read(d.join("r/summary.yaml")).unwrap());
    let legs = s["legs"].as_sequence().unwrap();
    assert_eq!(legs.len(), 2, "{s:?}");
    assert_eq!(legs[0]["class"].as_str(), Some("out-of-memory"), "{s:?}");
    let first = legs[0]["evidence"].as_str().unwrap();
    // Rank 0's end follows as a consequence, whichever end the launcher
    // saw first (on a loaded machine, rank 0's broken all-reduce).
    assert!(
        first.starts_with("rank 1: RuntimeError: ")
            && first.contains("can't allocate memory")
            && (first.contains("; rank 0 ended by the launcher after it")
                || first.contains("; rank 0 failed after it"))
            && !first.contains("rank 1 ended"),
        "{first}"
    );
    // Each rank's lines tagged by the launcher, the metric read through
    // the tag.
    assert!(
        s["ranks"]["lines"]
            .as_str()
            .unwrap()
            .starts_with("tagged [rank N] by the launcher (--tee 3 added"),
        "{s:?}"
    );
    assert_eq!(
        s["ranks"]["world_size"].as_str(),
        Some("2 (--nproc_per_node 2)")
    );
    let log = std::fs::read_to_string(d.join("r/output.log")).unwrap();
    assert!(log.contains("\n[rank 0] {\"epoch\": 1, "), "{log}");
    assert!(log.contains("\n[rank 1] [rank1]: RuntimeError: "), "{log}");
    // One change of the flags every rank reads: the second leg's command.
    let changed: Vec<&str> = legs[1]["changed"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        changed[0].starts_with("--batch-size: not given (default 64) -> 32")
            && changed[1].starts_with("--grad-accum: not given (default 1) -> 2")
            && changed[0].ends_with("so batch x accumulation x world size stays 128)"),
        "{changed:?}"
    );
    assert_eq!(
        s["auto_fix"]["effective_batch"].as_str(),
        Some("128 (per-device batch 32 x accumulation 2 x world size 2, --nproc_per_node 2)")
    );
    // The run that finished is a fresh one at 32 x 2 on both ranks.
    let fresh = job(&["--batch-size", "32", "--grad-accum", "2"]);
    let out = Command::new(&fresh[0])
        .args(&fresh[1..])
        .current_dir(d)
        .output()
        .unwrap();
    let want = final_loss_of(&String::from_utf8_lossy(&out.stdout));
    let got = s["last"]["value"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    // Not the loss at the settings it failed with (without the budget).
    let unfixed = job(&[]);
    let out = Command::new(&unfixed[0])
        .args(&unfixed[1..unfixed.len() - 2])
        .current_dir(d)
        .output()
        .unwrap();
    let before = final_loss_of(&String::from_utf8_lossy(&out.stdout));
    assert!((got - before).abs() > 1e-3, "{got} vs {before}");
}

#[test]
fn auto_fix_says_how_the_launchers_restarts_combine_and_its_own_tee_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("ok.py"), "print('loss 0.5')\n").unwrap();
    let mut job = torchrun();
    job[5] = "1".into(); // --nproc_per_node 1
                         // Its own --tee: the lines are left as the launcher gives them.
    job.extend(["--max-restarts", "2", "-t", "1", "ok.py"].map(String::from));
    let out = Command::new(BIN)
        .args(["run", "--auto-fix", "--quiet", "--out", "r", "--"])
        .args(&job)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the launcher's --max-restarts 2 runs a failed job again with the same settings, up to 2 times")
            && err.contains("happens 3 times a leg (--max-restarts 0: fixed at the first)"),
        "{err}"
    );
    let s = testkit::yaml(&std::fs::read(tmp.path().join("r/summary.yaml")).unwrap());
    assert_eq!(
        s["ranks"]["lines"].as_str(),
        Some("untagged: the command chooses where its ranks' output goes (--tee or --redirects): left as it is")
    );
    let log = std::fs::read_to_string(tmp.path().join("r/output.log")).unwrap();
    assert!(log.contains("\n[default0]:loss 0.5"), "{log}");
}

#[test]
fn a_sweep_trial_whose_job_hangs_after_a_ranks_failure_is_ended_within_the_grace() {
    let tmp = tempfile::tempdir().unwrap();
    program_in(tmp.path(), "gloo_oom.py", "oom.py");
    testkit::write(
        tmp.path(),
        "space.yaml",
        "program: oom.py
method: grid
metric: {name: val_loss, goal: minimize}
parameters:
  lr: {values: [0.01]}
command: ['${interpreter}', -m, torch.distributed.run, --standalone, --nproc_per_node, '2', '${program}', hang]
",
    );
    let started = std::time::Instant::now();
    let extra = ["--hang-grace", "4s", "--trial-timeout", "60"];
    let (_, err) = sweep_in(Path::new(BIN), tmp.path(), &extra);
    // Without the grace the job would wait on its all-reduce for gloo's
    // 30-minute timeout, here until the trial's 60 s timeout.
    assert!(started.elapsed().as_secs() < 60, "{err}");
    assert!(
        err.contains("train sweep: trial 0: rank 1: ")
            && err.contains("then no output for 4 s: the job hangs: ending it"),
        "{err}"
    );
    let s =
        testkit::yaml(&std::fs::read(tmp.path().join("s/trials/0000/run/summary.yaml")).unwrap());
    assert_eq!(s["class"].as_str(), Some("out-of-memory"), "{s:?}");
    assert!(
        s["evidence"].as_str().unwrap().contains("the job hung"),
        "{s:?}"
    );
    // The trial's threads shared between its ranks.
    let env_set = format!("{:?}", s["env_set"]);
    assert!(env_set.contains("split between its 2 ranks)"), "{env_set}");
    assert!(procs_in(tmp.path()).is_empty());
}

/// `dir/bin/train`, a copy of train beside a `memdiag` that replays a
/// report of `n` GPUs (memdiag's own H100 profile, once a GPU): a sweep
/// reads the GPUs from the memdiag beside it. No GPU here: what is tested
/// is the placement on the report, not a GPU.
fn train_seeing_gpus(dir: &Path, n: u32) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let out = Command::new(testkit::bin("memdiag"))
        .args(["--from", "h100", "--format", "json"])
        .output()
        .unwrap();
    let mut report = testkit::json(&out.stdout);
    let one = report["gpus"][0].clone();
    let gpus = report["gpus"].as_array_mut().unwrap();
    gpus.clear();
    for i in 0..n {
        let mut g = one.clone();
        g["index"] = i.into();
        gpus.push(g);
    }
    testkit::write(dir, "gpus.json", &report.to_string());
    let memdiag = testkit::write(
        &bin,
        "memdiag",
        &format!(
            "#!/bin/sh\nexec {} --from {} \"$@\"\n",
            testkit::bin("memdiag").display(),
            dir.join("gpus.json").display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&memdiag, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(BIN, bin.join("train")).unwrap();
    bin.join("train")
}

/// `TRAIN sweep --space space.yaml --out s EXTRA --interpreter PYTHON` in
/// `dir`: its exit code and stderr.
fn sweep_in(train: &Path, dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(train)
        .args(["sweep", "--space", "space.yaml", "--out", "s"])
        .args(extra)
        .arg("--interpreter")
        .arg(testkit::python())
        .current_dir(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err)
}

fn devices_space(dir: &Path, nproc: &str, extra: &str) {
    program_in(dir, "gloo_devices.py", "devices.py");
    testkit::write(
        dir,
        "space.yaml",
        &format!(
            "program: devices.py
method: grid
metric: {{name: loss, goal: minimize}}
parameters:
  lr: {{values: [0.01, 0.02]}}
command: ['${{interpreter}}', -m, torch.distributed.run, --standalone, --nproc_per_node, '{nproc}', '${{program}}']
{extra}"
        ),
    );
}

/// A sweep whose trials are jobs of 2 ranks, on a machine of 5 GPUs (as
/// memdiag's report says): the GPUs in groups of 2, each trial given a
/// group through CUDA_VISIBLE_DEVICES, the fifth GPU unused.
#[test]
fn trials_of_two_ranks_are_each_given_a_group_of_two_gpus() {
    let tmp = tempfile::tempdir().unwrap();
    let train = train_seeing_gpus(tmp.path(), 5);
    devices_space(tmp.path(), "2", "");
    let (code, err) = sweep_in(&train, tmp.path(), &["--parallel", "2"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("each trial starts 2 ranks (--nproc_per_node 2): the 5 GPU(s) in 2 group(s) of 2 (0,1; 2,3)")
            && err.contains("GPU(s) 4 left unused: fewer than the 2 a trial needs")
            && err.contains("round-robin over 2 group(s) of GPUs")
            && err.contains("Runs on: GPUs 0,1"),
        "{err}"
    );
    let mut given = Vec::new();
    for t in ["0000", "0001"] {
        let log =
            std::fs::read_to_string(tmp.path().join(format!("s/trials/{t}/train.log"))).unwrap();
        let devices = ["0,1", "2,3"]
            .into_iter()
            .find(|d| log.contains(&format!("[rank 0] devices {d}\n")))
            .unwrap_or_else(|| panic!("{log}"));
        assert!(
            log.contains(&format!("[rank 1] devices {devices}\n")),
            "{log}"
        );
        given.push(devices);
    }
    given.sort();
    assert_eq!(given, ["0,1", "2,3"], "two trials at once, a group each");
}

/// More ranks a trial than GPUs: refused at the start with both numbers;
/// the space's `ranks_per_trial` and the command disagreeing, too.
#[test]
fn more_ranks_a_trial_than_gpus_is_refused_at_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let train = train_seeing_gpus(tmp.path(), 3);
    devices_space(tmp.path(), "4", "");
    let (code, err) = sweep_in(&train, tmp.path(), &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("each trial starts 4 ranks (--nproc_per_node 4) and memdiag sees 3 GPU(s)"),
        "{err}"
    );
    assert!(!tmp.path().join("s").exists(), "nothing started");
    devices_space(tmp.path(), "2", "ranks_per_trial: 3\n");
    let (code, err) = sweep_in(&train, tmp.path(), &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("ranks_per_trial: 3, but the command starts 2 ranks (--nproc_per_node 2): give one number"),
        "{err}"
    );
}
