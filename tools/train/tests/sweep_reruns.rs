//! `train sweep` runs a program trial again where a new process can help:
//! a device-side assert once with `CUDA_LAUNCH_BLOCKING=1` (so its error
//! names the kernel), a broken CUDA allocator in a new process a bounded
//! number of times; real scripts that fail that way, read back by Optuna.

use serde_json::Value;
use testkit::python_arg as py;
use testkit::user_attr as attr;
use testkit::{train_sweep_ok, write};

/// A directory holding the repo's script as `main.py`, as a user's
/// project does.
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        testkit::repo_path("examples/own_script/main.py"),
        tmp.path().join("main.py"),
    )
    .unwrap();
    tmp
}

/// A trial that fails with a device-side assert runs once more with
/// CUDA_LAUNCH_BLOCKING=1, so its error names the kernel (seed 004 paid for
/// it on every trial). A CPU cannot assert on a device: the program prints
/// the message seed 004 got (quoted in diagnose/src/failures.rs).
#[test]
fn a_device_side_assert_is_run_again_once_with_launch_blocking() {
    let p = project();
    write(
        p.path(),
        "assert.py",
        "import os, sys\nprint('CUDA_LAUNCH_BLOCKING=' + os.environ.get('CUDA_LAUNCH_BLOCKING', 'unset'), flush=True)\n\
print('torch.AcceleratorError: CUDA error: device-side assert triggered', file=sys.stderr)\nsys.exit(1)\n",
    );
    write(
        p.path(),
        "space.yaml",
        "program: assert.py\nmethod: grid\nmetric: {name: val_loss}\nparameters:\n  lr: {values: [0.1]}\n",
    );
    let (err, trials) = train_sweep_ok(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "d",
            "--interpreter",
            &py(),
        ],
        "d",
    );
    let t = trials.as_array().unwrap();
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(attr(&t[0], "error_class"), "device-side-assert");
    assert_eq!(attr(&t[0], "rerun"), "CUDA_LAUNCH_BLOCKING=1");
    assert_eq!(t[1]["user_attrs"]["retried_from"], 0);
    assert_eq!(attr(&t[1], "rerun"), "-", "once only");
    let log = |n: &str| {
        std::fs::read_to_string(p.path().join("d/trials").join(n).join("train.log")).unwrap()
    };
    assert!(log("0000").contains("CUDA_LAUNCH_BLOCKING=unset"));
    assert!(log("0001").contains("CUDA_LAUNCH_BLOCKING=1"));
    assert!(err.contains("with CUDA_LAUNCH_BLOCKING=1"), "{err}");
}

/// pytorch#188008: with expandable segments, a mapping that failed part-way
/// leaves every later allocation of the process failing an internal assert;
/// a new process is the fix. A CPU cannot break CUDA's allocator: the
/// program prints the assert's real text (torch 2.14.0, as the issue quotes
/// it) and exits 1, `once` on its first run only, `always` on every run.
/// The first runs again and completes; the second runs again twice, then
/// counts as its point's failure.
#[test]
fn a_broken_allocator_is_run_again_in_a_new_process_a_bounded_number_of_times() {
    let p = project();
    write(
        p.path(),
        "broken.py",
        r#"import os, sys
mode = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--mode="))
mark = "broke-" + mode
if mode == "always" or not os.path.exists(mark):
    open(mark, "w").close()
    print("step 40", flush=True)
    print('RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at "c10/cuda/CUDACachingAllocator.cpp":487, please report a bug to PyTorch.', file=sys.stderr)
    sys.exit(1)
print('{"epoch": 1, "val_loss": 0.5}', flush=True)
"#,
    );
    write(
        p.path(),
        "space.yaml",
        "program: broken.py\nmethod: grid\nmetric: {name: val_loss}\nparameters:\n  mode: {values: [once, always]}\n",
    );
    let (err, trials) = train_sweep_ok(
        p.path(),
        &[
            "--space",
            "space.yaml",
            "--out",
            "d",
            "--interpreter",
            &py(),
        ],
        "d",
    );
    let runs = |mode: &str| -> Vec<&Value> {
        trials
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["params"]["mode"] == mode)
            .collect()
    };
    let once = runs("once");
    assert_eq!(once.len(), 2, "{once:?}\n{err}");
    assert_eq!(attr(once[0], "error_class"), "allocator-broken");
    assert!(
        attr(once[0], "rerun").starts_with("allocator-broken: ")
            && attr(once[0], "rerun").ends_with("(1 of 2)"),
        "{}",
        attr(once[0], "rerun")
    );
    assert!(
        attr(once[0], "advice").starts_with("restart your script in a new process")
            && attr(once[0], "advice").contains("a smaller batch will not help")
    );
    assert!(attr(once[0], "error_message").contains("!handles_.at(i) INTERNAL ASSERT FAILED"));
    assert_eq!(once[1]["state"], "COMPLETE", "{once:?}");
    assert_eq!(once[1]["value"].as_f64(), Some(0.5));
    assert_eq!(once[1]["user_attrs"]["retried_from"], once[0]["number"]);
    let always = runs("always");
    let reruns: Vec<&str> = always.iter().map(|t| attr(t, "rerun")).collect();
    assert_eq!(always.len(), 3, "{reruns:?}\n{err}");
    assert!(always
        .iter()
        .all(|t| t["state"] == "FAIL" && attr(t, "error_class") == "allocator-broken"));
    assert!(
        reruns[0].ends_with("(1 of 2)") && reruns[1].ends_with("(2 of 2)"),
        "{reruns:?}"
    );
    assert_eq!(reruns[2], "-", "bounded: the third failure is the point's");
    for t in &always[1..] {
        assert_eq!(t["user_attrs"]["retried_from"], always[0]["number"]);
    }
}
