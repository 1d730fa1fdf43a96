//! Address-space budgets measured on the machine the tests run on, never
//! tuned on another: a test that decides something by a real memory limit
//! runs its sizes once each without the limit, each program reporting what
//! it needed past its limit point (tools/train/tests/programs/
//! address_space.py and examples/hf_trainer/train.py), and puts the budget
//! between those that must fit and those that must fail.

use std::path::Path;
use std::process::{Command, Stdio};

/// The variable naming the file a program writes its need to, without a
/// limit (address_space.py's PROBE).
pub const PROBE: &str = "ADDRESS_SPACE_PROBE";

/// The least room between what must fit and what must fail: a run's need
/// repeats to within 1 MiB once malloc has one arena, so 8 MiB on each
/// side of the budget is room to spare; a narrower window is not asserted.
pub const MIN_WINDOW_MIB: f64 = 16.0;

/// What one run needs past its limit point, in MiB; `exact` is false when
/// the process had mapped more before that point than after it, so the
/// figure only bounds the need from above.
#[derive(Debug, Clone, Copy)]
pub struct Need {
    pub mib: f64,
    pub exact: bool,
}

/// Runs `argv` in `dir` without its limit ($ADDRESS_SPACE_PROBE set, the
/// caller's variables that change a run removed): what it needed. Panics,
/// with its stderr, if it does not exit 0 or writes no need.
fn need(dir: &Path, name: &str, argv: &[String]) -> Need {
    let file = dir.join(format!("{name}.need.json"));
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(dir)
        .env(PROBE, &file)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    for k in crate::CALLER_ENV {
        cmd.env_remove(k);
    }
    let out = cmd.output().expect("the probe starts");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "probe {argv:?} failed: {err}");
    let text = std::fs::read(&file)
        .unwrap_or_else(|e| panic!("probe {argv:?} wrote no {}: {e}\n{err}", file.display()));
    let v = crate::json(&text);
    Need {
        mib: v["need_mib"].as_f64().expect("need_mib"),
        exact: v["exact"].as_bool().expect("exact"),
    }
}

/// The budget (whole MiB) halfway between the most a run in `fit` needs
/// and the least a run in `fail` needs, each measured once here (in
/// parallel), or why none can be set on this machine: a failing size whose
/// need is only bounded, or a window under `MIN_WINDOW_MIB`. The figures
/// are printed for the test's log either way.
pub fn calibrated_budget(
    dir: &Path,
    fit: &[Vec<String>],
    fail: &[Vec<String>],
) -> Result<u64, String> {
    let (fits, fails) = std::thread::scope(|s| {
        let run = |set: &'static str, argvs: &[Vec<String>]| {
            argvs
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let a = a.clone();
                    s.spawn(move || need(dir, &format!("{set}{i}"), &a))
                })
                .collect::<Vec<_>>()
        };
        let (f, x) = (run("fit", fit), run("fail", fail));
        let join = |h: Vec<std::thread::ScopedJoinHandle<'_, Need>>| {
            h.into_iter()
                .map(|h| h.join().expect("a probe"))
                .collect::<Vec<_>>()
        };
        (join(f), join(x))
    });
    eprintln!("address-space needs past the limit point, MiB: fit {fits:?}, fail {fails:?}");
    if let Some(n) = fails.iter().find(|n| !n.exact) {
        return Err(format!(
            "a size that must fail needed no more than it had mapped before its limit point ({:.1} MiB at most): its need cannot be told",
            n.mib
        ));
    }
    let most_fit = fits.iter().map(|n| n.mib).fold(0.0, f64::max);
    let least_fail = fails.iter().map(|n| n.mib).fold(f64::INFINITY, f64::min);
    if least_fail - most_fit < MIN_WINDOW_MIB {
        return Err(format!(
            "what must fit needs {most_fit:.1} MiB and what must fail {least_fail:.1}: under {MIN_WINDOW_MIB} MiB apart on this machine"
        ));
    }
    let budget = ((most_fit + least_fail) / 2.0).round() as u64;
    eprintln!("budget: {budget} MiB");
    Ok(budget)
}

/// `calibrated_budget` as a command line gives it, or None after saying on
/// stderr that the test is skipped and why: what a test calls before the
/// run it checks.
pub fn budget_or_skip(dir: &Path, fit: &[Vec<String>], fail: &[Vec<String>]) -> Option<String> {
    calibrated_budget(dir, fit, fail)
        .map(|b| b.to_string())
        .map_err(|why| eprintln!("SKIPPED: no address-space budget can be set here: {why}"))
        .ok()
}
