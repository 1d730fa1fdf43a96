//! `--parallel auto` for a program sweep: trials at once from the measured
//! peak, a crowded trial (a real OOM kill under a memory cgroup) run again
//! alone; and told what limits a trial: a trial too big for its own
//! address-space limit (RLIMIT_AS, a real MemoryError) while another trial
//! runs beside it is not taken for crowding: no re-run, no slot taken away,
//! its evidence naming the limit.

use serde_json::Value;
use std::process::Command;
use testkit::{optuna_trials, ucmd, write};

const BIN: &str = env!("CARGO_BIN_EXE_train");

use testkit::train_sweep as sweep;

use testkit::python_arg as py;

use testkit::user_attr as attr;

/// Sleeps (so that trials overlap) until its trial's sampler has seen its
/// limit, then tries to hold `mib` MiB under a limit of what it maps plus
/// 300 MiB, and reports.
fn program() -> String {
    format!(
        "import resource, sys, time\n\
{}\
mib = int(sys.argv[1].split('=')[1])\n\
pages = int(open('/proc/self/statm').read().split()[0])\n\
limit = pages * resource.getpagesize() + (300 << 20)\n\
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n\
time.sleep(1.0)\n\
sampled(0)\n\
b = bytearray(mib << 20)\n\
print('valid loss', 1.0 / mib, flush=True)\n",
        testkit::SAMPLED_PY
    )
}

#[test]
fn a_trial_over_its_own_limit_is_not_taken_for_crowding() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "big.py", &program());
    write(
        d,
        "space.yaml",
        "program: big.py\nmethod: grid\nmetric: {name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}\n\
         parameters:\n  mib: {values: [10, 11, 2000, 12, 13]}\n",
    );
    let py = testkit::python().display().to_string();
    let r = ucmd("train")
        .args(["sweep", "--space", "space.yaml", "--out", "s"])
        .args(["--memory-budget", "4000", "--interpreter", &py])
        .current_dir(d)
        .run();
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    assert!(err.contains("2 trial(s) at once ("), "{err}");
    assert!(!err.contains("from now on"), "taken for crowding: {err}");
    let trials = testkit::optuna_trials(&d.join("s"), "s");
    let t = trials.as_array().unwrap();
    assert_eq!(t.len(), 5, "re-run as if crowded: {trials}");
    let big: Vec<&serde_json::Value> = t.iter().filter(|t| t["params"]["mib"] == 2000).collect();
    assert_eq!(big.len(), 1);
    let a = &big[0]["user_attrs"];
    assert_eq!(big[0]["state"], "FAIL");
    assert_eq!(a["error_class"], "out-of-memory", "{a}");
    assert!(a["address_limit_mib"].as_f64().is_some(), "{a}");
    assert!(
        a["error_message"].as_str().unwrap().contains("RLIMIT_AS"),
        "{a}"
    );
    assert!(a.get("rerun").is_none(), "{a}");
}

/// `--parallel auto` for a program whose peak is known: each trial holds
/// `hold_mib` of host memory. The first trial runs alone; from its measured
/// peak, a 1400 MiB budget fits two at once and not three (each about 490
/// MiB, 560 with the headroom: two need about 1120, three 1670), whatever
/// the interpreter's own few MiB come to and however many cores there are. Then, under a real memory
/// cgroup of 1300 MiB around the whole sweep (the driver included), two
/// trials of 700 MiB fit alone but not together: the kernel's OOM killer
/// ends one while they share the host, and it runs again one at a time.
#[test]
fn parallel_auto_follows_the_measured_peak_and_reruns_a_crowded_trial() {
    let p = tempfile::tempdir().unwrap();
    write(
        p.path(),
        "hold.py",
        "import sys, time\nmib = int(sys.argv[1].split('=')[1])\nb = bytearray(b'\\x01') * (mib << 20)\n\
for e in (1, 2):\n    time.sleep(1.0)\n    print(f'Epoch {e}/2 | Train Loss: 1.0 | Val Loss: {1.0 / mib:.6f} | LR: 0.1 | Time: 0.5s', flush=True)\n",
    );
    write(
        p.path(),
        "space.yaml",
        "program: hold.py\nmethod: grid\nmetric: {name: val_loss}\nparameters:\n  hold_mib: {values: [480, 481, 482, 483]}\n",
    );
    let out = sweep(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "a",
            "--memory-budget",
            "1400",
            "--interpreter",
            &py(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("the first trial runs alone"), "{err}");
    assert!(
        err.contains("; 2 trial(s) at once ("),
        "the peak (~490 MiB) fits 2 in 1400 MiB, not 3: {err}"
    );
    // Each trial records the trials at once when it started, what auto's
    // trials per hour are counted by: the first alone, then two.
    let at_once: Vec<u64> = optuna_trials(&p.path().join("a"), "a")
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["user_attrs"]["at_once"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(at_once, [1, 2, 2, 2], "{err}");
    assert!(
        err.contains("auto, measured: 1 at once ")
            && err.contains("2 trial(s) at once (trying more"),
        "{err}"
    );

    // A real shared limit: a memory cgroup (v1) around the driver.
    let cg = std::path::Path::new("/sys/fs/cgroup/memory")
        .join(format!("trainguard-test-{}", std::process::id()));
    std::fs::create_dir(&cg)
        .expect("this test needs a writable memory cgroup (v1) at /sys/fs/cgroup/memory (root)");
    std::fs::write(
        cg.join("memory.limit_in_bytes"),
        (1300u64 << 20).to_string(),
    )
    .unwrap();
    write(
        p.path(),
        "crowd.yaml",
        "program: hold.py\nmethod: grid\nmetric: {name: val_loss}\nparameters:\n  hold_mib: {values: [100, 700, 701]}\n",
    );
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec {BIN} sweep --space crowd.yaml --out c --memory-budget 4000 --interpreter {}",
        cg.display(),
        py()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .current_dir(p.path())
        .output()
        .unwrap();
    // Its last processes may still be leaving.
    testkit::wait_until("the test's cgroup to be removed", 10, || {
        std::fs::remove_dir(&cg).is_ok()
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let trials = optuna_trials(&p.path().join("c"), "c");
    let trials = trials.as_array().unwrap();
    let crowded: Vec<&Value> = trials
        .iter()
        .filter(|t| attr(t, "rerun").starts_with("crowded"))
        .collect();
    assert!(
        !crowded.is_empty(),
        "no trial was crowded out: {trials:?}\n{err}"
    );
    assert!(
        err.contains("from now on (a trial ran out of memory while it shared it)"),
        "{err}"
    );
    // Every grid point finished in the end, alone.
    let done = trials.iter().filter(|t| t["state"] == "COMPLETE").count();
    assert_eq!(done, 3, "{trials:?}\n{err}");
    assert!(trials
        .iter()
        .any(|t| t["user_attrs"]["retried_from"].is_u64()));
}
