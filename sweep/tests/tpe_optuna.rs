//! TPE's math against Optuna's own: tests/tpe_optuna.py runs Optuna 5's
//! `_ParzenEstimator` (over one parameter and over several jointly),
//! `default_weights`, `default_gamma` and `_split_trials` (with and without
//! the running trials the constant liar adds) on fixed inputs, and the same
//! inputs go through ours. `bayes` is Optuna 5.0.0's default `TPESampler()`
//! (multivariate, constant liar) and `bayes: {variant: univariate}` Optuna
//! 4.x's, `TPESampler(multivariate=False, constant_liar=False)` in Optuna
//! 5: both samplers' knobs must be `TpeSampler::new`'s. Needs the project's
//! Python with optuna (`just setup`); without it this test fails rather
//! than skips, so a missing setup cannot pass for agreement.

use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use sweep::sampler::{
    default_gamma, default_weights, split_trials, split_with_liar, ParzenEstimator, ParzenParams,
    TpeSampler, TpeVariant,
};
use sweep::trial::{Choice, Direction, Distribution, Trial, TrialState};

fn optuna_reference() -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tpe_optuna.py");
    let out = Command::new(testkit::python())
        .arg(script)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e}; run just setup",
                testkit::python().display()
            )
        });
    assert!(
        out.status.success(),
        "tpe_optuna.py failed (optuna missing? run just setup):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("tpe_optuna.py prints JSON")
}

fn dist(v: &Value) -> Distribution {
    let f = |k: &str| v[k].as_f64().unwrap();
    let log = v["log"].as_bool().unwrap_or(false);
    match v["type"].as_str().unwrap() {
        "float" => Distribution::Float {
            low: f("low"),
            high: f("high"),
            log,
            step: v["step"].as_f64(),
        },
        "int" => Distribution::Int {
            low: f("low") as i64,
            high: f("high") as i64,
            log,
            step: f("step") as i64,
        },
        _ => Distribution::Categorical {
            choices: (0..v["n"].as_i64().unwrap()).map(Choice::Int).collect(),
        },
    }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn tpe_matches_optuna() {
    let r = optuna_reference();

    // Optuna 5's default TPESampler is `bayes`'s default variant.
    let ours = TpeSampler::new(0, TpeVariant::default());
    assert_eq!(ours.variant, TpeVariant::Multivariate);
    let default = &r["default"];
    assert_eq!(default["multivariate"], true, "{default}");
    assert_eq!(default["constant_liar"], true, "{default}");
    assert_eq!(default["group"], false, "{default}");
    assert_eq!(
        default["n_startup_trials"], ours.n_startup_trials,
        "{default}"
    );
    assert_eq!(
        default["n_ei_candidates"], ours.n_ei_candidates,
        "{default}"
    );

    // Optuna's univariate sampler as the script names it is ours, knob for
    // knob (the estimators' knobs are the default sampler's too).
    let ours = TpeSampler::new(0, TpeVariant::Univariate);
    let theirs = &r["sampler"];
    assert_eq!(theirs["multivariate"], false, "{theirs}");
    assert_eq!(theirs["constant_liar"], false, "{theirs}");
    assert_eq!(
        theirs["n_startup_trials"], ours.n_startup_trials,
        "{theirs}"
    );
    assert_eq!(theirs["n_ei_candidates"], ours.n_ei_candidates, "{theirs}");
    assert_eq!(theirs["prior_weight"], ours.parzen.prior_weight, "{theirs}");
    assert_eq!(
        theirs["consider_magic_clip"], ours.parzen.consider_magic_clip,
        "{theirs}"
    );
    assert_eq!(
        theirs["consider_endpoints"], ours.parzen.consider_endpoints,
        "{theirs}"
    );

    let mut checked = 0;
    for (i, case) in r["estimators"].as_array().unwrap().iter().enumerate() {
        let d = dist(&case["dist"]);
        let pe = ParzenEstimator::new(&d, &floats(&case["observations"]), &ParzenParams::default());
        for (x, want) in floats(&case["xs"])
            .into_iter()
            .zip(floats(&case["log_pdf"]))
        {
            let got = pe.log_pdf(x);
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "estimator {i} ({d:?}) at {x}: ours {got}, Optuna's {want}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40);

    for (i, case) in r["joint"].as_array().unwrap().iter().enumerate() {
        let dists: Vec<Distribution> = case["dists"].as_array().unwrap().iter().map(dist).collect();
        let rows: Vec<Vec<f64>> = case["observations"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        let columns: Vec<Vec<f64>> = (0..dists.len())
            .map(|j| rows.iter().map(|r| r[j]).collect())
            .collect();
        let dims: Vec<(&Distribution, &[f64])> = dists
            .iter()
            .zip(&columns)
            .map(|(d, c)| (d, c.as_slice()))
            .collect();
        let pe = ParzenEstimator::joint(&dims, &ParzenParams::default());
        for (x, want) in case["xs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(floats(&case["log_pdf"]))
        {
            let x = floats(x);
            let got = pe.log_pdf_joint(&x);
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "joint estimator {i} at {x:?}: ours {got}, Optuna's {want}"
            );
            checked += 1;
        }
    }
    assert!(checked > 50);

    for (n, want) in r["weights"].as_object().unwrap() {
        let got = default_weights(n.parse().unwrap());
        let want = floats(want);
        assert_eq!(got.len(), want.len(), "default_weights({n})");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() < 1e-15,
                "default_weights({n}): {got:?} vs {want:?}"
            );
        }
    }
    for (n, want) in r["gamma"].as_object().unwrap() {
        let n: usize = n.parse().unwrap();
        assert_eq!(
            default_gamma(n) as u64,
            want.as_u64().unwrap(),
            "gamma({n})"
        );
    }

    let trials: Vec<Trial> = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(number, t)| Trial {
            number: number as u64,
            state: match t["state"].as_str().unwrap() {
                "COMPLETE" => TrialState::Complete,
                "PRUNED" => TrialState::Pruned,
                "FAIL" => TrialState::Fail,
                _ => TrialState::Running,
            },
            params: BTreeMap::new(),
            distributions: Default::default(),
            value: t["value"].as_f64(),
            intermediate: t["intermediate"]
                .as_array()
                .unwrap()
                .iter()
                .map(|sv| (sv[0].as_u64().unwrap(), sv[1].as_f64().unwrap_or(f64::NAN)))
                .collect(),
            user_attrs: Default::default(),
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        })
        .collect();
    // Newest first, to check the split does not depend on the input's order.
    let reversed: Vec<std::sync::Arc<Trial>> = trials
        .iter()
        .rev()
        .cloned()
        .map(std::sync::Arc::new)
        .collect();
    for s in r["splits"].as_array().unwrap() {
        let direction = match s["direction"].as_str().unwrap() {
            "minimize" => Direction::Minimize,
            _ => Direction::Maximize,
        };
        let n_below = s["n_below"].as_u64().unwrap() as usize;
        let (below, above) = if s["liar"] == true {
            split_with_liar(&reversed, direction, n_below)
        } else {
            split_trials(&reversed, direction, n_below)
        };
        let numbers = |ts: Vec<&Trial>| -> Vec<u64> { ts.iter().map(|t| t.number).collect() };
        let want = |k: &str| -> Vec<u64> {
            s[k].as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .collect()
        };
        assert_eq!(
            (numbers(below), numbers(above)),
            (want("below"), want("above")),
            "{direction:?}, n_below {n_below}, liar {}",
            s["liar"]
        );
    }
}
