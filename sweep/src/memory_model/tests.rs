use super::*;
use serde_json::json;

fn params(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// A deterministic spread in [-1, 1) (a trial's noise, the same each run).
fn jitter(i: usize) -> f64 {
    let x = (i as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// A synthetic law: 30 MiB x batch x hidden^0.8 / 100, x1.5 for adam,
/// the learning rate without bearing, each trial `noise` off at most.
fn law(batch: f64, hidden: f64, adam: bool) -> f64 {
    30.0 * batch * hidden.powf(0.8) / 100.0 * if adam { 1.5 } else { 1.0 }
}

fn point(i: usize) -> (Map<String, Value>, f64) {
    let batch = [4.0, 8.0, 16.0, 32.0, 64.0][i % 5];
    let hidden = [64.0, 128.0, 256.0, 512.0][(i / 5) % 4];
    let adam = i % 3 == 0;
    let lr = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1][i % 7];
    let p = params(json!({
        "batch_size": batch as i64, "hidden": hidden as i64,
        "optimizer": if adam { "adam" } else { "sgd" }, "lr": lr,
    }));
    (p, law(batch, hidden, adam))
}

fn effect(fit: &Fit, name: &str) -> f64 {
    fit.effects()
        .into_iter()
        .find(|(t, _)| t.to_string() == name)
        .map(|(_, c)| c)
        .unwrap_or_else(|| panic!("no term {name}: {:?}", fit.effects()))
}

#[test]
fn the_powers_of_a_log_linear_law_are_found_and_the_learning_rate_has_none() {
    let mut m = MemoryModel::default();
    for i in 0..60 {
        let (p, peak) = point(i);
        m.add_measured(&p, peak * (1.0 + 0.03 * jitter(i)));
    }
    let fit = m.fit().unwrap();
    assert!(
        (effect(&fit, "ln batch_size") - 1.0).abs() < 0.03,
        "{:?}",
        fit.effects()
    );
    assert!(
        (effect(&fit, "ln hidden") - 0.8).abs() < 0.03,
        "{:?}",
        fit.effects()
    );
    assert!(effect(&fit, "ln lr").abs() < 0.02, "{:?}", fit.effects());
    let adam = effect(&fit, "optimizer=adam") - effect(&fit, "optimizer=sgd");
    assert!((adam - 1.5f64.ln()).abs() < 0.03, "{adam}");
    assert!(fit.spread() < 1.05, "{}", fit.spread());
    // A point it never saw: within 5%, inside its interval.
    let p = params(json!({"batch_size": 128, "hidden": 1024, "optimizer": "adam", "lr": 0.05}));
    let want = law(128.0, 1024.0, true);
    let got = fit.predict(&p);
    assert!(
        (got.peak_mib / want - 1.0).abs() < 0.05,
        "{got:?} against {want}"
    );
    assert!(
        got.low_mib < want && want < got.high_mib,
        "{got:?} against {want}"
    );
}

#[test]
fn the_sums_give_the_same_fit_in_any_order() {
    let (mut a, mut b) = (MemoryModel::default(), MemoryModel::default());
    for i in 0..40 {
        let (p, peak) = point(i);
        a.add_measured(&p, peak * (1.0 + 0.1 * jitter(i)));
        let (p, peak) = point(39 - i);
        b.add_measured(&p, peak * (1.0 + 0.1 * jitter(39 - i)));
    }
    let probe = point(7).0;
    let (x, y) = (
        a.fit().unwrap().predict(&probe),
        b.fit().unwrap().predict(&probe),
    );
    assert!((x.peak_mib / y.peak_mib - 1.0).abs() < 1e-9, "{x:?} {y:?}");
    assert!((x.high_mib / y.high_mib - 1.0).abs() < 1e-9, "{x:?} {y:?}");
}

#[test]
fn out_of_memory_points_lift_the_region_they_ran_out_in() {
    // Small batches all cost the same (the model's weights dominate), so
    // the measured trials alone say the batch has no bearing.
    let mut m = MemoryModel::default();
    for (i, batch) in [1, 2, 4, 1, 2, 4].into_iter().enumerate() {
        m.add_measured(
            &params(json!({ "batch_size": batch })),
            40.0 * (1.0 + 0.02 * jitter(i)),
        );
    }
    let big = params(json!({"batch_size": 128}));
    let before = m.fit().unwrap().predict(&big);
    assert!(before.peak_mib < 60.0, "{before:?}");
    // Two trials at 64 and 128 ran out of memory under 100 MiB.
    m.add_censored(&params(json!({"batch_size": 64})), 100.0);
    m.add_censored(&params(json!({"batch_size": 128})), 100.0);
    assert_eq!(m.trials(), 8);
    let fit = m.fit().unwrap();
    let after = fit.predict(&big);
    assert!(after.peak_mib >= 100.0, "{after:?}");
    // The small ones stay where they were measured.
    let small = fit.predict(&params(json!({"batch_size": 2})));
    assert!((small.peak_mib / 40.0 - 1.0).abs() < 0.35, "{small:?}");
}

#[test]
fn a_censored_point_the_fit_already_puts_above_its_limit_does_not_pull_it_down() {
    let mut m = MemoryModel::default();
    for b in [1, 2, 4, 8, 16] {
        m.add_measured(&params(json!({ "batch_size": b })), 10.0 * b as f64);
    }
    let alone = m.fit().unwrap().predict(&params(json!({"batch_size": 64})));
    // 64 would need 640 MiB; it ran out under 200: no new information.
    m.add_censored(&params(json!({"batch_size": 64})), 200.0);
    let with = m.fit().unwrap().predict(&params(json!({"batch_size": 64})));
    assert!(
        (with.peak_mib / alone.peak_mib - 1.0).abs() < 0.01,
        "{alone:?} {with:?}"
    );
    assert!((with.peak_mib / 640.0 - 1.0).abs() < 0.01, "{with:?}");
}

#[test]
fn the_interval_holds_most_new_trials_of_a_noisy_law() {
    let mut m = MemoryModel::default();
    for i in 0..80 {
        let (p, peak) = point(i);
        m.add_measured(&p, peak * (1.0 + 0.15 * jitter(i)));
    }
    let fit = m.fit().unwrap();
    let inside = (1000..1200)
        .filter(|&i| {
            let (p, peak) = point(i);
            let got = fit.predict(&p);
            let seen = peak * (1.0 + 0.15 * jitter(i));
            got.low_mib <= seen && seen <= got.high_mib
        })
        .count();
    assert!(inside >= 180, "{inside} of 200 inside");
    // And it is an interval, not everything: no wider than 1.5x each way.
    let got = fit.predict(&point(3).0);
    assert!(got.high_mib / got.peak_mib < 1.5, "{got:?}");
}

#[test]
fn what_has_no_bearing_is_left_out_and_what_is_not_positive_enters_as_itself() {
    let mut m = MemoryModel::default();
    m.set_scale("shift", Scale::Linear);
    for (i, shift) in [-2.0f64, -1.0, 0.0, 1.0, 2.0].into_iter().enumerate() {
        let p = params(json!({
            "shift": shift, "tags": ["a"], "note": null, "flag": i % 2 == 0,
        }));
        m.add_measured(&p, 100.0 * (0.1 * shift).exp());
    }
    // A peak that is not a peak teaches nothing.
    m.add_measured(&params(json!({"shift": 5.0})), 0.0);
    m.add_measured(&params(json!({"shift": 5.0})), f64::NAN);
    m.add_censored(&params(json!({"shift": 5.0})), -1.0);
    assert_eq!(m.trials(), 5);
    let fit = m.fit().unwrap();
    let names: Vec<String> = fit.effects().iter().map(|(t, _)| t.to_string()).collect();
    assert!(names.contains(&"shift".to_string()), "{names:?}");
    assert!(names.contains(&"flag=true".to_string()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.contains("tags") || n.contains("note")),
        "{names:?}"
    );
    assert!((effect(&fit, "shift") - 0.1).abs() < 0.01, "{names:?}");
    assert!(!names.contains(&"ln shift".to_string()), "{names:?}");
    // Undeclared, the first value decides: a width first seen at 0 is
    // linear; a batch first seen positive is a log term, and its 0 later
    // gives that row no term of it.
    let mut m = MemoryModel::default();
    m.add_measured(&params(json!({"width": 0, "batch": 4})), 10.0);
    m.add_measured(&params(json!({"width": 3, "batch": 0})), 20.0);
    m.add_measured(&params(json!({"width": 6, "batch": 8})), 40.0);
    let fit = m.fit().unwrap();
    let names: Vec<String> = fit.effects().iter().map(|(t, _)| t.to_string()).collect();
    assert_eq!(names, ["ln batch", "width"], "{names:?}");
}

#[test]
fn no_fit_before_a_measured_trial_and_an_unseen_value_counts_nothing() {
    let mut m = MemoryModel::default();
    assert!(m.fit().is_none());
    m.add_censored(&params(json!({"batch_size": 8})), 100.0);
    assert!(m.fit().is_none(), "a censored point alone has no scale");
    m.add_measured(&params(json!({"batch_size": 8, "opt": "sgd"})), 50.0);
    let fit = m.fit().unwrap();
    let p = fit.predict(&params(json!({"batch_size": 8, "opt": "lion"})));
    assert!(p.peak_mib.is_finite() && p.peak_mib > 0.0, "{p:?}");
}

#[test]
fn the_inverse_of_a_small_matrix() {
    let a = vec![vec![4.0, 2.0], vec![2.0, 3.0]];
    let inv = invert_spd(&a).unwrap();
    let want = [[3.0 / 8.0, -2.0 / 8.0], [-2.0 / 8.0, 4.0 / 8.0]];
    for i in 0..2 {
        for j in 0..2 {
            assert!((inv[i][j] - want[i][j]).abs() < 1e-12, "{inv:?}");
        }
    }
    assert!(invert_spd(&[vec![0.0]]).is_none());
}

mod learn {
    use super::super::*;
    use crate::trial::{Choice, ParamValue, Trial, TrialState};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn trial(state: TrialState, batch: i64, attrs: Value) -> Trial {
        Trial {
            number: 0,
            state,
            params: BTreeMap::from([
                ("batch_size".to_string(), ParamValue::Int(batch)),
                ("lr".to_string(), ParamValue::Float(0.01)),
                (
                    "opt".to_string(),
                    ParamValue::Choice(Choice::Str("adam".into())),
                ),
            ]),
            distributions: Default::default(),
            value: None,
            intermediate: BTreeMap::new(),
            user_attrs: crate::trial::attrs_of(&attrs),
            system_attrs: Default::default(),
            datetime_start: None,
            datetime_complete: None,
            discarded: false,
        }
    }

    #[test]
    fn each_end_teaches_what_it_can() {
        use TrialState::*;
        let host = |t: &Trial| lesson(t, Resource::Host);
        let done = trial(
            Complete,
            8,
            json!({"peak_host_pss_mib": 900.0, "peak_gpu_mib": 2100.0}),
        );
        assert_eq!(host(&done), Lesson::Measured(900.0));
        assert_eq!(lesson(&done, Resource::Gpu), Lesson::Measured(2100.0));
        let oom = trial(
            Fail,
            64,
            json!({"peak_gpu_mib": 7000.0, "error_class": "out-of-memory"}),
        );
        assert_eq!(lesson(&oom, Resource::Gpu), Lesson::Above(7000.0));
        assert_eq!(host(&oom), Lesson::Nothing, "no host peak recorded");
        let pruned = trial(Pruned, 8, json!({"peak_host_pss_mib": 850.0}));
        assert_eq!(host(&pruned), Lesson::Measured(850.0));
        let nan = trial(
            Fail,
            8,
            json!({"peak_host_pss_mib": 870.0, "error_class": "non-finite-loss"}),
        );
        assert_eq!(host(&nan), Lesson::Measured(870.0));
        for class in ["interrupted", "killed", "timeout"] {
            let t = trial(
                Fail,
                8,
                json!({"peak_host_pss_mib": 100.0, "error_class": class}),
            );
            assert_eq!(host(&t), Lesson::Nothing, "{class}");
        }
        let running = trial(Running, 8, json!({"peak_host_pss_mib": 100.0}));
        assert_eq!(host(&running), Lesson::Nothing);
        // Our own trainer's trials on the CPU record no peak of either.
        assert_eq!(host(&trial(Complete, 8, json!({}))), Lesson::Nothing);
    }

    #[test]
    fn a_trial_ran_with_the_values_auto_fix_gave_it() {
        let t = trial(
            TrialState::Complete,
            64,
            json!({"effective_params": {"batch_size": 16, "gradient_accumulation_steps": 4}}),
        );
        let ran = ran_with(&t);
        assert_eq!(ran["batch_size"], json!(16));
        assert_eq!(ran["gradient_accumulation_steps"], json!(4));
        assert_eq!(ran["lr"], json!(0.01));
        assert_eq!(ran["opt"], json!("adam"));
    }

    #[test]
    fn a_study_of_trials_teaches_the_batch_s_power() {
        let mut m = MemoryModel::default();
        for (i, b) in [2i64, 4, 8, 16, 32].into_iter().enumerate() {
            let t = trial(
                TrialState::Complete,
                b,
                json!({ "peak_gpu_mib": 500.0 + 100.0 * b as f64 + i as f64 }),
            );
            assert!(m.observe(&t, Resource::Gpu));
            assert!(!m.observe(&t, Resource::Host), "no host peak");
        }
        let oom = trial(
            TrialState::Fail,
            256,
            json!({"peak_gpu_mib": 9000.0, "error_class": "out-of-memory"}),
        );
        assert!(m.observe(&oom, Resource::Gpu));
        let fit = m.fit().unwrap();
        assert_eq!(fit.trials, 6);
        let mut p = ran_with(&oom);
        assert!(fit.predict(&p).peak_mib > 9000.0, "{:?}", fit.predict(&p));
        p.insert("batch_size".into(), json!(8));
        let small = fit.predict(&p).peak_mib;
        assert!((small / 1300.0 - 1.0).abs() < 0.3, "{small}");
    }

    #[test]
    fn the_learner_counts_each_finished_trial_once_and_predicts_after_three() {
        let mut l = Learner::default();
        let mut trials: Vec<Trial> = [2i64, 4, 8]
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                let mut t = trial(
                    TrialState::Complete,
                    b,
                    json!({ "peak_host_pss_mib": 100.0 * b as f64 }),
                );
                t.number = i as u64;
                t
            })
            .collect();
        // The first still running while later ones ended (out of order):
        // it is learned once it ends.
        trials[0].state = TrialState::Running;
        l.update(&crate::trial::shared(&trials));
        trials[0].state = TrialState::Complete;
        l.update(&crate::trial::shared(&trials));
        let all = l.predict(&values_of(&trials[0].params), Resource::Host);
        assert_eq!(all.map(|p| p.trials), Some(3), "{all:?}");
        let mut l = Learner::default();
        trials[2].state = TrialState::Running;
        let point = values_of(&trials[0].params);
        l.update(&crate::trial::shared(&trials));
        l.update(&crate::trial::shared(&trials));
        assert_eq!(l.predict(&point, Resource::Host), None, "2 measured");
        trials[2].state = TrialState::Complete;
        l.update(&crate::trial::shared(&trials));
        let p = l.predict(&point, Resource::Host).unwrap();
        assert_eq!(p.trials, 3, "each once: {p:?}");
        assert!((p.at.peak_mib / 200.0 - 1.0).abs() < 0.01, "{p:?}");
        assert_eq!(l.predict(&point, Resource::Gpu), None, "no GPU peaks");
        assert!(
            p.words().starts_with("200 MiB of host memory (")
                && p.words().ends_with("from 3 trial(s))"),
            "{}",
            p.words()
        );
        assert_eq!(p.attrs()[0], ("predicted_peak_mib", json!(200.0)));
    }

    /// `ran_out` answers what looking at every trial that ran out of
    /// memory answers (the smallest need among those the point needs at
    /// least as much as), from the list ranked once a fit.
    #[test]
    fn the_ranked_out_of_memory_points_answer_as_all_of_them_would() {
        let mut trials = Vec::new();
        for i in 0..300u64 {
            let b = 1 + (i * 37 % 64) as i64;
            let peak = 50.0 * b as f64 * (1.0 + 0.05 * ((i * 13 % 7) as f64 - 3.0) / 3.0);
            // The larger batches sometimes run out, the smaller never.
            let oom = i % 4 == 0 && b >= 20;
            let attrs = match oom {
                true => json!({ "peak_host_pss_mib": peak * 0.8, "error_class": "out-of-memory" }),
                false => json!({ "peak_host_pss_mib": peak }),
            };
            let state = if oom {
                TrialState::Fail
            } else {
                TrialState::Complete
            };
            let mut t = trial(state, b, attrs);
            t.number = i;
            trials.push(t);
        }
        let mut l = Learner::default();
        l.update(&crate::trial::shared(&trials));
        let fit = l.fit(Resource::Host).unwrap().clone();
        let outs: Vec<(u64, Map<String, Value>)> = trials
            .iter()
            .filter(|t| t.state == TrialState::Fail)
            .map(|t| (t.number, values_of(&t.params)))
            .collect();
        let mut found = 0;
        for b in 1..=64i64 {
            let mut point = values_of(&trials[1].params);
            point.insert("batch_size".into(), json!(b));
            let every = outs
                .iter()
                .filter(|(_, out)| fit.at_least(&point, out))
                .map(|(number, out)| (*number, fit.predict(out).peak_mib))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let ranked = l.ran_out(&point, Resource::Host);
            assert_eq!(ranked.map(|r| r.number), every.map(|e| e.0), "batch {b}");
            if let (Some(r), Some(e)) = (ranked, every) {
                assert!((r.need_mib / e.1 - 1.0).abs() < 1e-9);
                found += 1;
            }
        }
        assert!(
            found > 10 && found < 64,
            "{found} points needed at least an out-of-memory one"
        );
        let least = outs
            .iter()
            .map(|(n, out)| (*n, fit.predict(out).peak_mib))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        assert_eq!(
            l.least_ran_out(Resource::Host).map(|r| r.number),
            least.map(|e| e.0)
        );
    }
}
