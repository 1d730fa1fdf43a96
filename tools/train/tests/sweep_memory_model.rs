//! The sweep's memory model (sweep::memory_model) on peaks a real sweep
//! measured: a program sweep whose trials hold rows × width MiB, each
//! trial's PSS peak as the supervisor recorded it in the journal, read back
//! by Optuna. Each trial held out in turn, the model fitted on the others
//! predicts it: the median error at most 15%, and an out-of-memory trial
//! (a real MemoryError under its own RLIMIT_AS) lifts the prediction of
//! its point above what it reached. The sweep itself predicts each trial's
//! peak once 3 have been measured, in its block and its record.

use serde_json::{Map, Value};
use sweep::memory_model::MemoryModel;
use testkit::{optuna_trials, python_arg as py, train_sweep as sweep, train_sweep_ok, write};

fn params_of(t: &Value) -> Map<String, Value> {
    t["params"].as_object().unwrap().clone()
}

fn peak(t: &Value) -> f64 {
    t["user_attrs"]["peak_host_pss_mib"].as_f64().unwrap()
}

/// Each trial held out in turn, predicted by the model fitted on the
/// others: the median of |predicted / measured - 1|, and all of them.
fn held_out(trials: &[&Value]) -> (f64, Vec<f64>) {
    let mut errors: Vec<f64> = (0..trials.len())
        .map(|out| {
            let mut m = MemoryModel::default();
            for (i, t) in trials.iter().enumerate() {
                if i != out {
                    m.add_measured(&params_of(t), peak(t));
                }
            }
            let got = m.fit().unwrap().predict(&params_of(trials[out])).peak_mib;
            (got / peak(trials[out]) - 1.0).abs()
        })
        .collect();
    errors.sort_by(f64::total_cmp);
    (errors[errors.len() / 2], errors)
}

#[test]
fn held_out_trials_of_a_real_sweep_are_predicted_within_15_percent() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // rows × width MiB under an address limit of its start plus 1200 MiB.
    write(d, "hold.py", &testkit::hold_rows_width(1200, 1.2));
    write(
        d,
        "space.yaml",
        "program: hold.py\nmethod: grid\nmetric: {name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}\n\
         parameters:\n  rows: {values: [1, 2, 4]}\n  width: {values: [40, 80, 160, 320]}\n",
    );
    let (err, trials) = train_sweep_ok(
        d,
        &[
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "1",
            "--interpreter",
            &py(),
        ],
        "s",
    );
    let trials = trials.as_array().unwrap();
    assert_eq!(trials.len(), 12, "{err}");
    // 4 × 320 MiB cannot be held under 1200 MiB more than the start.
    let (ooms, fitted): (Vec<&Value>, Vec<&Value>) = trials
        .iter()
        .partition(|t| t["user_attrs"]["error_class"] == "out-of-memory");
    assert_eq!(ooms.len(), 1, "{trials:?}");
    // From the fourth trial on (3 measured), each trial's block and its
    // record give its predicted peak, and the interval holds its low end
    // below the high one.
    assert!(err.contains("  Predicted peak: "), "{err}");
    let predicted: Vec<&Value> = trials
        .iter()
        .filter(|t| t["user_attrs"]["predicted_peak_mib"].is_number())
        .collect();
    assert_eq!(predicted.len(), 9, "{trials:?}");
    for t in &predicted {
        let a = &t["user_attrs"];
        assert_eq!(a["predicted_of"], "host-pss", "{a}");
        let (low, high) = (
            a["predicted_low_mib"].as_f64().unwrap(),
            a["predicted_high_mib"].as_f64().unwrap(),
        );
        assert!(
            low <= a["predicted_peak_mib"].as_f64().unwrap() && low <= high,
            "{a}"
        );
    }
    let (median, errors) = held_out(&fitted);
    eprintln!("median held-out error {median:.3}");
    let seen: Vec<(String, f64)> = fitted
        .iter()
        .map(|t| (t["params"].to_string(), peak(t)))
        .collect();
    assert!(
        median <= 0.15,
        "median error {median:.3}: {errors:?}\n{seen:?}"
    );
    // The report puts predicted beside measured, and the model's error.
    let report = sweep(d, &["--report", "s", "--format", "json"]);
    assert_eq!(report.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let m = &report["memory_model"];
    assert_eq!(
        m["trials"], 8,
        "9 predicted, less the out-of-memory one: {m}"
    );
    let error = m["median_error"].as_f64().unwrap();
    eprintln!("median error of the sweep's own predictions {error:.3}");
    assert!(error.is_finite() && error >= 0.0, "{m}");
    let rows = report["trials"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .filter(|r| r["predicted_of"] == "host-pss")
            .count(),
        9
    );
    // The trial that ran out of memory: censored at the peak it reached,
    // its point is predicted above that, and above the largest that fitted.
    let mut m = MemoryModel::default();
    for t in &fitted {
        m.add_measured(&params_of(t), peak(t));
    }
    let oom = ooms[0];
    let reached = oom["user_attrs"]["peak_host_pss_mib"]
        .as_f64()
        .unwrap_or(1.0);
    assert!(m.add_censored(&params_of(oom), reached));
    let got = m.fit().unwrap().predict(&params_of(oom));
    let largest = fitted.iter().map(|t| peak(t)).fold(0.0, f64::max);
    assert!(
        got.peak_mib > reached.max(largest),
        "{got:?}, reached {reached}, largest {largest}"
    );
}

/// Holds `mib` MiB for 1.5 s, and until its trial's sampler has seen it.
fn sleeper() -> String {
    format!(
        "import sys, time\n\
{}\
mib = int(sys.argv[1].split('=')[1])\n\
b = bytearray(b'\\x01') * (mib << 20)\n\
time.sleep(1.5)\n\
sampled(0)\n\
print('valid loss', 1.0 / mib, flush=True)\n",
        testkit::SAMPLED_PY
    )
}

#[test]
fn trials_are_packed_by_their_predicted_peaks() {
    // Points of 100 and 400 MiB in a budget of 700 MiB: by the largest
    // peak one at a time; packed by prediction, two small ones or a small
    // and a big one share, two big ones never do.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "sleeper.py", &sleeper());
    write(
        d,
        "space.yaml",
        "program: sleeper.py\nmethod: random\nmetric: {name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}\n\
         parameters:\n  mib: {values: [100, 400]}\n",
    );
    let out = sweep(
        d,
        &[
            "--space",
            "space.yaml",
            "--out",
            "p",
            "--trials",
            "12",
            "--seed",
            "2",
            "--memory-budget",
            "700",
            "--interpreter",
            &py(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("placement: packed by each point's predicted peak: up to "),
        "{err}"
    );
    let trials = optuna_trials(&d.join("p"), "p");
    let trials = trials.as_array().unwrap();
    assert_eq!(trials.len(), 12);
    let mib = |t: &Value| t["params"]["mib"].as_i64().unwrap();
    let span = |t: &Value| {
        (
            t["start"].as_f64().unwrap(),
            t["complete"].as_f64().unwrap(),
        )
    };
    let overlap = |a: &Value, b: &Value| {
        let ((s1, e1), (s2, e2)) = (span(a), span(b));
        s1 < e2 && s2 < e1
    };
    let mut shared = 0;
    for (i, a) in trials.iter().enumerate() {
        assert_eq!(a["state"], "COMPLETE", "{a}\n{err}");
        for b in &trials[i + 1..] {
            if overlap(a, b) {
                shared += 1;
                assert!(
                    mib(a) + mib(b) < 800,
                    "two big trials at once: {a} {b}\n{err}"
                );
            }
        }
    }
    assert!(
        shared > 0,
        "no two trials ever ran at once: {trials:?}\n{err}"
    );
}

#[test]
fn a_hugging_face_trainer_sweeps_peaks_are_predicted_within_15_percent() {
    // examples/hf_trainer/train.py (transformers' Trainer, a wide MLP on
    // the CPU) over its hidden layer's width and the batch: each trial
    // held out in turn, the model fitted on the others predicts its PSS
    // peak (torch and transformers' own few hundred MiB included).
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let script =
        std::fs::read_to_string(testkit::repo_path("examples/hf_trainer/train.py")).unwrap();
    write(d, "train.py", &script);
    write(
        d,
        "space.yaml",
        "program: train.py\nmethod: grid\nmetric: {name: final_loss}\nworking_dir: trial\n\
         parameters:\n  hidden_size: {values: [65536, 262144, 1048576]}\n\
         \x20\x20per_device_train_batch_size: {values: [8, 16, 32]}\n  max_steps: {value: 16}\n\
         \x20\x20output_dir: {value: out}\n  report_to: {value: none}\n",
    );
    let (err, trials) = train_sweep_ok(
        d,
        &[
            "--space",
            "space.yaml",
            "--out",
            "s",
            "--parallel",
            "1",
            "--interpreter",
            &py(),
        ],
        "s",
    );
    let trials: Vec<&Value> = trials.as_array().unwrap().iter().collect();
    assert_eq!(trials.len(), 9, "{err}");
    let (median, errors) = held_out(&trials);
    let seen: Vec<(String, f64)> = trials
        .iter()
        .map(|t| (t["params"].to_string(), peak(t)))
        .collect();
    eprintln!("Trainer sweep: median held-out error {median:.3}: {errors:?}\n{seen:?}");
    assert!(
        median <= 0.15,
        "median error {median:.3}: {errors:?}\n{seen:?}"
    );
}
