//! A program sweep with `auto_fix: true`: a point whose batch does not fit
//! (a real out-of-memory: torch under an address-space limit) runs again in
//! the same trial with half the batch and twice the accumulation, and
//! COMPLETEs once; Optuna loads the journal with the attempts in the
//! trial's attributes, `--report` shows them, and best_config.yaml carries
//! the settings that ran.

use testkit::{ucmd, write};

/// Its batch at 16 MiB an example (mapped, never touched: no memory
/// used), under what it maps plus 768 MiB: 64 does not fit by 256 MiB, 32
/// fits with 256 to spare, whatever else the machine maps.
const PROGRAM: &str = "import argparse, json, resource, torch\n\
p = argparse.ArgumentParser()\n\
p.add_argument('--bsz', type=int, default=8)\n\
p.add_argument('--accum', type=int, default=1)\n\
p.add_argument('--lr', type=float, default=0.1)\n\
a = p.parse_args()\n\
pages = int(open('/proc/self/statm').read().split()[0])\n\
limit = pages * resource.getpagesize() + (768 << 20)\n\
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n\
for _ in range(a.accum):\n    torch.empty(a.bsz, 4 << 20)\n\
print(json.dumps({'loss': a.lr / (a.bsz * a.accum)}), flush=True)\n";

#[test]
fn a_point_out_of_memory_completes_once_at_the_batch_that_fits() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "prog.py", PROGRAM);
    write(
        d,
        "space.yaml",
        "program: prog.py\nmethod: grid\nmetric: {name: loss, goal: minimize}\n\
         parameters:\n  bsz: {values: [8, 64]}\n  accum: {value: 1}\n  lr: {value: 0.1}\n\
         auto_fix: true\nfix: {batch: bsz, accumulation: accum}\n",
    );
    let py = testkit::python().display().to_string();
    let r = ucmd("train")
        .args([
            "sweep",
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "1",
        ])
        .args(["--interpreter", &py])
        .current_dir(d)
        .run();
    let err = r.stderr_str();
    assert_eq!(r.code(), Some(0), "{err}");
    assert!(
        err.contains("trial 1 attempt 2: --bsz: 64 -> 32")
            && err.contains("trial 1 attempt 2: --accum: 1 -> 2"),
        "{err}"
    );
    // Optuna: two trials, both COMPLETE; the point keeps the value the
    // sampler asked for, its value is the attempt that finished.
    let trials = testkit::optuna_trials(&d.join("s"), "s");
    let t = trials.as_array().unwrap();
    assert_eq!(t.len(), 2, "{trials}");
    assert!(t.iter().all(|t| t["state"] == "COMPLETE"), "{trials}");
    assert_eq!(t[1]["params"]["bsz"], 64);
    assert_eq!(t[1]["value"].as_f64(), Some(0.1 / 64.0));
    let attrs = &t[1]["user_attrs"];
    assert_eq!(attrs["attempts"], 2, "{attrs}");
    assert_eq!(attrs["effective_params"]["bsz"], 32, "{attrs}");
    assert_eq!(attrs["effective_params"]["accum"], 2, "{attrs}");
    assert!(attrs["knobs"]["batch"].as_str().unwrap().starts_with("32 "));
    assert_eq!(t[0]["user_attrs"]["attempts"], 1);
    // Its summary: both attempts as legs.
    let s = testkit::yaml(&std::fs::read(d.join("s/trials/0001/run/summary.yaml")).unwrap());
    let legs = s["legs"].as_sequence().unwrap();
    assert_eq!(legs.len(), 2);
    assert_eq!(legs[0]["class"], "out-of-memory");
    assert_eq!(legs[1]["status"], "finished");
    // --report: the attempts, and best_config.yaml with what ran.
    let r = ucmd("train")
        .args(["sweep", "--report", "s", "--format", "json"])
        .current_dir(d)
        .run();
    r.code_is(0);
    let report = r.stdout_json();
    assert_eq!(report["trials"][1]["attempts"], 2, "{report}");
    assert!(report["trials"][1]["knobs"]["accumulation"]
        .as_str()
        .unwrap()
        .starts_with("2 "));
    let table = ucmd("train")
        .args(["sweep", "--report", "s", "--format", "table"])
        .current_dir(d)
        .run();
    assert!(
        table.stdout_str().contains("2: batch 32, accumulation 2"),
        "{}",
        table.stdout_str()
    );
    let best = std::fs::read_to_string(d.join("s/best_config.yaml")).unwrap();
    let y: serde_yaml::Value = serde_yaml::from_str(&best).unwrap();
    assert_eq!(
        (y["bsz"].as_i64(), y["accum"].as_i64()),
        (Some(32), Some(2)),
        "{best}"
    );
    assert!(best.contains("# auto_fix:"), "{best}");
}
