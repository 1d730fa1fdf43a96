//! With `auto_fix: true`, a point the memory model predicts not to fit
//! starts with the fixes predicted to fit (the batch halved and the
//! accumulation doubled before its first attempt), so the attempts that
//! would run out of memory are not run. Real trials: a script whose
//! argparse flags are the batch, the accumulation and a width, holding
//! batch × width MiB under an address-space limit of its own (a real
//! MemoryError). The same grid with `memory_model: false` climbs the fixes
//! one failed attempt at a time.

use serde_json::Value;
use testkit::{python_arg as py, train_sweep_ok, write};

/// batch × width MiB under what it maps at start plus 900 MiB: 640 fits,
/// 1280 does not; held until the trial's sampler has seen it (its peak is
/// what the model learns). Its loss depends on the width and the effective
/// batch, not on how the batch is split.
fn program() -> String {
    format!(
        "import argparse, resource\n\
{}\
p = argparse.ArgumentParser()\n\
p.add_argument('--batch_size', type=int, default=8)\n\
p.add_argument('--gradient_accumulation_steps', type=int, default=1)\n\
p.add_argument('--width', type=int, default=80)\n\
a = p.parse_args()\n\
pages = int(open('/proc/self/statm').read().split()[0])\n\
limit = pages * resource.getpagesize() + (900 << 20)\n\
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n\
b = bytearray(b'\\x01') * ((a.batch_size * a.width) << 20)\n\
sampled(0.8)\n\
print('valid loss', 1.0 / (a.width * a.batch_size * a.gradient_accumulation_steps), flush=True)\n",
        testkit::SAMPLED_PY
    )
}

/// The grid's order: width slowest, the batch fastest; 6 of its 16 points
/// do not fit as sampled, the first of them (160 × 8) after 7 that do.
fn space(model: bool) -> String {
    format!(
        "program: hold.py\nmethod: grid\nmemory_model: {model}\n\
         metric: {{name: loss, regex: 'valid loss\\s+([0-9.e-]+)'}}\n\
         parameters:\n  width: {{values: [80, 160, 320, 640]}}\n  batch_size: {{values: [1, 2, 4, 8]}}\n\
         auto_fix: true\n"
    )
}

fn attempts(t: &Value) -> u64 {
    t["user_attrs"]["attempts"].as_u64().unwrap_or(1)
}

fn sweep(d: &std::path::Path, model: bool) -> (String, Vec<Value>) {
    let name = if model { "on" } else { "off" };
    write(d, &format!("{name}.yaml"), &space(model));
    let space = format!("{name}.yaml");
    let args = ["--space", &space, "--out", name, "--parallel", "1"];
    let (err, trials) = train_sweep_ok(d, &[&args[..], &["--interpreter", &py()]].concat(), name);
    (err, trials.as_array().unwrap().clone())
}

#[test]
fn points_predicted_not_to_fit_start_with_the_fix_predicted_to_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(d, "hold.py", &program());
    let (_, off) = sweep(d, false);
    let (err, on) = sweep(d, true);
    for trials in [&off, &on] {
        assert_eq!(trials.len(), 16);
        assert!(
            trials.iter().all(|t| t["state"] == "COMPLETE"),
            "{trials:?}\n{err}"
        );
    }
    let total = |ts: &[Value]| ts.iter().map(attempts).sum::<u64>();
    let (all_off, all_on) = (total(&off), total(&on));
    eprintln!("attempts in all: {all_off} without the model, {all_on} with it");
    // Without the model each point too big climbs one failed attempt at a
    // time: 10 more attempts than points.
    assert_eq!(all_off, 26, "{off:?}");
    let fitted: Vec<&Value> = on
        .iter()
        .filter(|t| t["user_attrs"]["fixed_before_start"].is_number())
        .collect();
    assert!(!fitted.is_empty(), "{err}");
    for t in &fitted {
        let a = &t["user_attrs"];
        let batch = a["effective_params"]["batch_size"].as_i64().unwrap();
        let accum = a["effective_params"]["gradient_accumulation_steps"]
            .as_i64()
            .unwrap();
        // batch × accumulation is what was sampled, and what ran fits.
        assert_eq!(batch * accum, t["params"]["batch_size"].as_i64().unwrap());
        assert!(batch * t["params"]["width"].as_i64().unwrap() <= 640, "{t}");
        assert!(
            a["predicted_as_sampled_mib"].as_f64().unwrap()
                > a["predicted_peak_mib"].as_f64().unwrap(),
            "{a}"
        );
        assert!(
            a["auto_fix"].as_array().is_some_and(|c| !c.is_empty()),
            "{a}"
        );
    }
    assert!(
        err.contains("as sampled, ")
            && err.contains("; starts with auto_fix's fixes, predicted to need "),
        "{err}"
    );
    // An attempt that ran out of memory before its fix is kept for the
    // model, with the values it ran.
    let legs: Vec<&Value> = on
        .iter()
        .filter_map(|t| t["user_attrs"]["ran_out_legs"].as_array())
        .flatten()
        .collect();
    assert!(
        !legs.is_empty() && legs.iter().all(|l| l["values"].is_object()),
        "{on:?}"
    );
    // The attempts after the first: at most half as many.
    assert!(
        (all_on - 16) * 2 <= all_off - 16,
        "attempts {all_on} with the model, {all_off} without: {on:?}"
    );
}
