//! `--parallel auto` for a program sweep, told what limits a trial: a trial
//! too big for its own address-space limit (RLIMIT_AS, a real MemoryError)
//! while another trial runs beside it is not taken for crowding: no re-run,
//! no slot taken away, its evidence naming the limit.

use testkit::{ucmd, write};

/// Sleeps (so that trials overlap), then holds `mib` MiB under a limit of
/// what it maps plus 300 MiB, and reports.
const PROGRAM: &str = "import resource, sys, time\n\
mib = int(sys.argv[1].split('=')[1])\n\
pages = int(open('/proc/self/statm').read().split()[0])\n\
limit = pages * resource.getpagesize() + (300 << 20)\n\
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n\
time.sleep(1.0)\n\
b = bytearray(mib << 20)\n\
print('valid loss', 1.0 / mib, flush=True)\n";

#[test]
fn a_trial_over_its_own_limit_is_not_taken_for_crowding() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "big.py", PROGRAM);
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
