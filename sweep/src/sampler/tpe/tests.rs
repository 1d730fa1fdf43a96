//! The TPE sampler: its split, its startup, and what each variant draws.

use super::*;
use crate::trial::{shared, Choice};

pub(super) fn trial(number: u64, state: TrialState, value: Option<f64>, x: f64) -> Trial {
    Trial {
        number,
        state,
        params: [("x".to_string(), ParamValue::Float(x))].into(),
        value,
        ..Trial::default()
    }
}

fn x_dist() -> Distribution {
    Distribution::Float {
        low: -10.0,
        high: 10.0,
        log: false,
        step: None,
    }
}

#[test]
fn gamma_is_a_tenth_rounded_up_at_most_25() {
    let got: Vec<usize> = [0, 1, 10, 11, 20, 21, 249, 250, 251, 1000]
        .iter()
        .map(|&n| default_gamma(n))
        .collect();
    assert_eq!(got, vec![0, 1, 1, 2, 2, 3, 25, 25, 25, 25]);
}

#[test]
fn random_until_ten_finished_trials() {
    let tpe = TpeSampler::new(3, TpeVariant::Univariate);
    let random = RandomSampler::new(3);
    let d = x_dist();
    // Nine finished, plus failed and running ones that do not count.
    let mut trials: Vec<Trial> = (0..9)
        .map(|i| trial(i, TrialState::Complete, Some(i as f64), i as f64 - 4.0))
        .collect();
    trials.push(trial(9, TrialState::Fail, None, 0.0));
    trials.push(trial(10, TrialState::Running, None, 0.0));
    let at = |ts: &[Trial]| tpe.sample_param("x", &d, &shared(ts), Direction::Minimize, 11);
    assert_eq!(at(&trials), random.sample_param("x", &d, 11));
    trials.push(trial(11, TrialState::Pruned, None, 1.0));
    assert_ne!(at(&trials), random.sample_param("x", &d, 11));
}

#[test]
fn startup_is_a_quarter_of_a_small_cap_and_optunas_ten_from_40() {
    let got: Vec<usize> = [1, 2, 4, 5, 10, 20, 36, 37, 40, 1000]
        .iter()
        .map(|&cap| startup_for(cap))
        .collect();
    assert_eq!(got, vec![1, 1, 1, 2, 3, 5, 9, 10, 10, 10]);
    assert_eq!(startup_warning(40), None);
    let w = startup_warning(10).unwrap();
    assert!(
        w.contains("the first 3 are drawn at random") && w.contains("then 7 by TPE"),
        "{w}"
    );
    assert!(w.contains("would take all 10"), "{w}");
    assert!(startup_warning(20).unwrap().contains("take 10 of the 20"));
    assert!(startup_warning(1).unwrap().contains("is a random draw"));
}

#[test]
fn a_ten_trial_bayes_sweep_is_tpe_after_its_third_trial() {
    use crate::sampler::Method;
    let space = xy_space();
    let built =
        crate::sampler::build(Method::Bayes(TpeVariant::Multivariate), &space, 3, 10).unwrap();
    let random = RandomSampler::new(3);
    let trials: Vec<Trial> = bowl().into_iter().take(3).collect();
    let draw = |ts: &[Trial]| {
        built
            .sample(&space, &shared(ts), Direction::Minimize, 3)
            .unwrap()
    };
    // Two finished: still the random start-up.
    assert_eq!(
        draw(&trials[..2])["x"],
        random.sample_param("x", &x_dist(), 3)
    );
    // Three: TPE (Optuna's default of 10 would still draw at random).
    assert_ne!(draw(&trials)["x"], random.sample_param("x", &x_dist(), 3));
    let optuna_default = TpeSampler::new(3, TpeVariant::Multivariate);
    assert_eq!(
        optuna_default
            .sample(&space, &shared(&trials), Direction::Minimize, 3)
            .unwrap()["x"],
        random.sample_param("x", &x_dist(), 3)
    );
}

#[test]
fn split_ranks_complete_then_pruned_by_progress() {
    let mut trials = vec![
        trial(0, TrialState::Complete, Some(3.0), 0.0),
        trial(1, TrialState::Complete, Some(1.0), 0.0),
        trial(2, TrialState::Pruned, None, 0.0),
        trial(3, TrialState::Pruned, None, 0.0),
        trial(4, TrialState::Pruned, None, 0.0),
        trial(5, TrialState::Fail, None, 0.0),
        trial(6, TrialState::Running, None, 0.0),
        trial(7, TrialState::Complete, Some(2.0), 0.0),
    ];
    trials[2].intermediate = [(0, 0.1), (1, 0.5)].into();
    trials[3].intermediate = [(0, 0.2), (1, 0.4)].into();
    trials[4].intermediate = [(0, 0.0)].into();
    let numbers = |v: Vec<&Trial>| v.iter().map(|t| t.number).collect::<Vec<_>>();
    let st = shared(&trials);
    let (b, a) = split_trials(&st, Direction::Minimize, 2);
    assert_eq!((numbers(b), numbers(a)), (vec![1, 7], vec![0, 2, 3, 4]));
    // Past the complete ones: the furthest pruned, the better value first.
    let st = shared(&trials);
    let (b, a) = split_trials(&st, Direction::Minimize, 4);
    assert_eq!((numbers(b), numbers(a)), (vec![0, 1, 3, 7], vec![2, 4]));
    let st = shared(&trials);
    let (b, a) = split_trials(&st, Direction::Maximize, 5);
    assert_eq!((numbers(b), numbers(a)), (vec![0, 1, 2, 3, 7], vec![4]));
    // Failed and running trials are on neither side.
    let st = shared(&trials);
    let (b, a) = split_trials(&st, Direction::Maximize, 100);
    assert_eq!((b.len(), a.len()), (6, 0));
}

#[test]
fn deterministic_and_drawn_towards_the_good_region() {
    // Minimise (x - 3)²: values near 3 are "below".
    let trials: Vec<Trial> = (0..40)
        .map(|i| {
            let x = -10.0 + 20.0 * (i as f64 * 0.618_034).fract();
            trial(i, TrialState::Complete, Some((x - 3.0).powi(2)), x)
        })
        .collect();
    let space = SearchSpace {
        params: vec![("x".into(), x_dist())],
        fixed: BTreeMap::new(),
    };
    for variant in [TpeVariant::Multivariate, TpeVariant::Univariate] {
        let tpe = TpeSampler::new(0, variant);
        let mut near = 0;
        for n in 40..90 {
            let p = tpe
                .sample(&space, &shared(&trials), Direction::Minimize, n)
                .unwrap();
            assert_eq!(
                p,
                tpe.sample(&space, &shared(&trials), Direction::Minimize, n)
                    .unwrap()
            );
            let ParamValue::Float(x) = p["x"] else {
                panic!("{p:?}")
            };
            near += usize::from((x - 3.0).abs() < 2.0);
        }
        // At random 4/20 of the range: TPE should do far better.
        assert!(
            near >= 35,
            "{variant:?}: {near} of 50 within 2 of the optimum"
        );
    }
}

#[test]
fn categorical_and_int_values_come_back_typed() {
    let choices = vec![Choice::Str("a".into()), Choice::Str("b".into())];
    let space = SearchSpace {
        params: vec![
            (
                "c".into(),
                Distribution::Categorical {
                    choices: choices.clone(),
                },
            ),
            (
                "k".into(),
                Distribution::Int {
                    low: 1,
                    high: 64,
                    log: true,
                    step: 1,
                },
            ),
        ],
        fixed: [("epochs".into(), ParamValue::Int(2))].into(),
    };
    let trials: Vec<Trial> = (0..12)
        .map(|i| {
            let mut t = trial(i, TrialState::Complete, Some(i as f64), 0.0);
            t.params = [
                (
                    "c".to_string(),
                    ParamValue::Choice(choices[(i % 2) as usize].clone()),
                ),
                ("k".to_string(), ParamValue::Int(1 << (i % 7))),
            ]
            .into();
            t
        })
        .collect();
    for variant in [TpeVariant::Multivariate, TpeVariant::Univariate] {
        let p = TpeSampler::new(1, variant)
            .sample(&space, &shared(&trials), Direction::Minimize, 12)
            .unwrap();
        assert!(matches!(&p["c"], ParamValue::Choice(Choice::Str(_))));
        let ParamValue::Int(k) = p["k"] else {
            panic!("{p:?}")
        };
        assert!((1..=64).contains(&k));
        assert_eq!(p["epochs"], ParamValue::Int(2));
    }
}

/// A trial at (x, y) in the space of [`xy_space`].
fn at_xy(number: u64, state: TrialState, value: Option<f64>, x: f64, y: f64) -> Trial {
    let mut t = trial(number, state, value, x);
    t.params.insert("y".into(), ParamValue::Float(y));
    t
}

fn xy_space() -> SearchSpace {
    SearchSpace {
        params: vec![("x".into(), x_dist()), ("y".into(), x_dist())],
        fixed: BTreeMap::new(),
    }
}

fn xy(p: &BTreeMap<String, ParamValue>) -> (f64, f64) {
    match (&p["x"], &p["y"]) {
        (ParamValue::Float(x), ParamValue::Float(y)) => (*x, *y),
        _ => panic!("{p:?}"),
    }
}

#[test]
fn multivariate_draws_stay_in_bounds_of_every_kind() {
    let choices = vec![Choice::Str("a".into()), Choice::Int(3), Choice::Null];
    let space = SearchSpace {
        params: vec![
            ("f".into(), x_dist()),
            (
                "lr".into(),
                Distribution::Float {
                    low: 1e-5,
                    high: 1e-1,
                    log: true,
                    step: None,
                },
            ),
            (
                "q".into(),
                Distribution::Float {
                    low: 0.0,
                    high: 1.05,
                    log: false,
                    step: Some(0.1),
                },
            ),
            (
                "k".into(),
                Distribution::Int {
                    low: 2,
                    high: 11,
                    log: false,
                    step: 3,
                },
            ),
            (
                "c".into(),
                Distribution::Categorical {
                    choices: choices.clone(),
                },
            ),
            (
                "one".into(),
                Distribution::Categorical {
                    choices: vec![Choice::Int(7)],
                },
            ),
        ],
        fixed: BTreeMap::new(),
    };
    let tpe = TpeSampler::new(5, TpeVariant::Multivariate);
    let mut trials: Vec<Trial> = Vec::new();
    for n in 0..60 {
        let p = tpe
            .sample(&space, &shared(&trials), Direction::Minimize, n)
            .unwrap();
        let f = |k: &str| match &p[k] {
            ParamValue::Float(v) => *v,
            other => panic!("{k}: {other:?}"),
        };
        assert!((-10.0..=10.0).contains(&f("f")), "{p:?}");
        assert!((1e-5..=1e-1).contains(&f("lr")), "{p:?}");
        let q = f("q");
        assert!(
            (0.0..=1.0).contains(&q) && ((q * 10.0).round() - q * 10.0).abs() < 1e-9,
            "{p:?}"
        );
        assert!(matches!(p["k"], ParamValue::Int(2 | 5 | 8 | 11)), "{p:?}");
        assert!(
            matches!(&p["c"], ParamValue::Choice(c) if choices.contains(c)),
            "{p:?}"
        );
        assert_eq!(p["one"], ParamValue::Choice(Choice::Int(7)));
        let value = (f("f") - 1.0).powi(2) + f("lr").log10().abs() + q;
        let mut t = trial(n, TrialState::Complete, Some(value), 0.0);
        t.params = p;
        // Every fourth trial still running: the liar's kernels too must
        // keep the draws in range.
        if n % 4 == 3 {
            t.state = TrialState::Running;
            t.value = None;
        }
        trials.push(t);
    }
}

/// The good trials lie on the diagonal, at (-5, -5) and (5, 5), the bad
/// ones at the other two corners: per parameter both halves look alike
/// (each value near -5 or 5), only the pairs tell them apart.
fn corners() -> Vec<Trial> {
    let mut trials = Vec::new();
    for i in 0..40u64 {
        let jitter = (i as f64 * 0.618_034).fract() * 0.4 - 0.2;
        let (x, y, value) = match i % 10 {
            0 => (-5.0, -5.0, 0.0),
            5 => (5.0, 5.0, 0.0),
            k if k % 2 == 0 => (-5.0, 5.0, 10.0),
            _ => (5.0, -5.0, 10.0),
        };
        trials.push(at_xy(
            i,
            TrialState::Complete,
            Some(value),
            x + jitter,
            y - jitter,
        ));
    }
    trials
}

#[test]
fn multivariate_keeps_what_was_good_together() {
    let trials = corners();
    let on_diagonal = |variant| {
        let tpe = TpeSampler::new(0, variant);
        (40..100)
            .filter(|&n| {
                let (x, y) = xy(&tpe
                    .sample(&xy_space(), &shared(&trials), Direction::Minimize, n)
                    .unwrap());
                x * y > 0.0
            })
            .count()
    };
    let joint = on_diagonal(TpeVariant::Multivariate);
    let apart = on_diagonal(TpeVariant::Univariate);
    // Drawn jointly nearly every proposal is a good corner's; each
    // parameter on its own, l/g is alike at -5 and 5, and how the signs
    // pair up owes nothing to which pairs were good.
    assert!(joint >= 54, "multivariate: {joint} of 60 on the diagonal");
    assert!(apart <= 42, "univariate: {apart} of 60 on the diagonal");
}

/// Minimise (x - 3)² + (y + 2)²: 30 finished trials spread over the range.
pub(super) fn bowl() -> Vec<Trial> {
    (0..30)
        .map(|i| {
            let x = -10.0 + 20.0 * (i as f64 * 0.618_034).fract();
            let y = -10.0 + 20.0 * (i as f64 * 0.414_214).fract();
            let v = (x - 3.0).powi(2) + (y + 2.0).powi(2);
            at_xy(i, TrialState::Complete, Some(v), x, y)
        })
        .collect()
}

#[test]
fn constant_liar_steers_away_from_running_trials() {
    let space = xy_space();
    for variant in [TpeVariant::Multivariate, TpeVariant::Univariate] {
        let tpe = TpeSampler::new(2, variant);
        let mut trials = bowl();
        let first = tpe
            .sample(&space, &shared(&trials), Direction::Minimize, 30)
            .unwrap();
        // Another worker runs exactly that point: trial 30 is drawn again
        // (same number, same candidates).
        let (x, y) = xy(&first);
        trials.push(at_xy(31, TrialState::Running, None, x, y));
        let again = tpe
            .sample(&space, &shared(&trials), Direction::Minimize, 30)
            .unwrap();
        match variant {
            TpeVariant::Multivariate => assert_ne!(again, first, "the liar left the running point"),
            TpeVariant::Univariate => assert_eq!(again, first, "univariate ignores running trials"),
        }
    }
}

#[test]
fn parallel_draws_spread_with_the_liar() {
    // Eight workers draw one after the other, none finished: with the liar
    // each sees the others' points as bad and the batch spreads out.
    let space = xy_space();
    let spread = |variant| {
        let tpe = TpeSampler::new(4, variant);
        let mut trials = bowl();
        let mut points = Vec::new();
        for n in 30..38 {
            let (x, y) = xy(&tpe
                .sample(&space, &shared(&trials), Direction::Minimize, n)
                .unwrap());
            trials.push(at_xy(n, TrialState::Running, None, x, y));
            points.push((x, y));
        }
        let mut closest = f64::INFINITY;
        for (i, a) in points.iter().enumerate() {
            for b in &points[i + 1..] {
                closest = closest.min(((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt());
            }
        }
        closest
    };
    let (liar, none) = (
        spread(TpeVariant::Multivariate),
        spread(TpeVariant::Univariate),
    );
    assert!(
        liar > none,
        "closest pair: {liar} with the liar, {none} without"
    );
}

#[test]
fn running_trials_neither_end_the_startup_nor_count_in_gamma() {
    let tpe = TpeSampler::new(3, TpeVariant::Multivariate);
    let random = RandomSampler::new(3);
    let space = xy_space();
    let mut trials: Vec<Trial> = bowl().into_iter().take(9).collect();
    for n in 9..14 {
        trials.push(at_xy(n, TrialState::Running, None, 0.0, 0.0));
    }
    let p = tpe
        .sample(&space, &shared(&trials), Direction::Minimize, 14)
        .unwrap();
    assert_eq!(p["x"], random.sample_param("x", &x_dist(), 14));
    assert_eq!(p["y"], random.sample_param("y", &x_dist(), 14));
    // One more finished: TPE, its below set the best gamma(10) = 1.
    trials.push(at_xy(14, TrialState::Complete, Some(0.0), 3.0, -2.0));
    let st = shared(&trials);
    let (below, above) = split_with_liar(&st, Direction::Minimize, default_gamma(10));
    assert_eq!(below.iter().map(|t| t.number).collect::<Vec<_>>(), vec![14]);
    assert_eq!(above.len(), 9 + 5 - 1 + 1);
    assert_ne!(
        tpe.sample(&space, &shared(&trials), Direction::Minimize, 15)
            .unwrap()["x"],
        random.sample_param("x", &x_dist(), 15)
    );
}

#[test]
fn an_optuna_workers_running_draw_is_a_lie_too() {
    // An Optuna worker shares a running trial's multivariate draw as the
    // system attribute tpe:relative_params:N before setting its params.
    let space = xy_space();
    let tpe = TpeSampler::new(2, TpeVariant::Multivariate);
    let mut with_params = bowl();
    with_params.push(at_xy(30, TrialState::Running, None, 3.1, -2.2));
    let mut racing = bowl();
    let mut t = at_xy(30, TrialState::Running, None, 0.0, 0.0);
    t.params.clear();
    t.system_attrs.insert(
        "tpe:relative_params:0".into(),
        serde_json::json!("{\"x\": 3.1, "),
    );
    t.system_attrs.insert(
        "tpe:relative_params:1".into(),
        serde_json::json!("\"y\": -2.2}"),
    );
    racing.push(t.clone());
    let got = |ts: &[Trial]| {
        tpe.sample(&space, &shared(ts), Direction::Minimize, 31)
            .unwrap()
    };
    assert_eq!(got(&racing), got(&with_params));
    // A torn chunk (workers racing) reads as no draw, as in Optuna.
    t.system_attrs.remove("tpe:relative_params:1");
    let mut torn = bowl();
    torn.push(t);
    assert_eq!(got(&torn), got(&bowl()));
}

pub(super) fn out_of_memory(number: u64, x: f64) -> Trial {
    failed_as(number, x, "out-of-memory")
}

pub(super) fn failed_as(number: u64, x: f64, class: &str) -> Trial {
    let mut t = trial(number, TrialState::Fail, None, x);
    t.user_attrs
        .insert("error_class".into(), serde_json::json!(class));
    t
}

#[test]
fn out_of_memory_trials_are_above_and_count_as_observations() {
    let mut trials: Vec<Trial> = (0..5)
        .map(|i| trial(i, TrialState::Complete, Some(-(i as f64)), i as f64))
        .collect();
    trials.push(out_of_memory(5, 9.0));
    trials.push(trial(6, TrialState::Fail, None, 8.0));
    // A point the memory model refused is one too.
    trials.push(failed_as(7, 9.5, "predicted-out-of-memory"));
    let st = shared(&trials);
    let (below, above) = split_trials(&st, Direction::Minimize, 10);
    let numbers = |ts: &[&Trial]| ts.iter().map(|t| t.number).collect::<Vec<_>>();
    assert_eq!(
        numbers(&below),
        [0, 1, 2, 3, 4],
        "never below, however many are asked"
    );
    assert_eq!(numbers(&above), [5, 7], "a plain failure is still left out");
    assert_eq!(trials.iter().filter(|t| usable(t)).count(), 7);
}

#[test]
fn the_search_moves_away_from_where_memory_ran_out() {
    // The value improves towards x = 10, but from x = 6 every trial ran
    // out of memory: without them TPE draws near the best (x about 6), with
    // them it draws there less.
    let mut fitted: Vec<Trial> = (0..12)
        .map(|i| {
            let x = i as f64 * 0.5;
            trial(i, TrialState::Complete, Some(-x), x)
        })
        .collect();
    let blind = fitted.clone();
    for (k, x) in [6.0, 6.5, 7.0, 7.5, 8.0, 9.0].into_iter().enumerate() {
        fitted.push(out_of_memory(12 + k as u64, x));
    }
    let d = x_dist();
    let share = |trials: &[Trial], variant| {
        let tpe = TpeSampler::new(7, variant);
        let over = (100..400)
            .filter(
                |&n| match tpe.sample_param("x", &d, &shared(trials), Direction::Minimize, n) {
                    ParamValue::Float(x) => x >= 6.0,
                    _ => false,
                },
            )
            .count();
        over as f64 / 300.0
    };
    let (without, with) = (
        share(&blind, TpeVariant::Univariate),
        share(&fitted, TpeVariant::Univariate),
    );
    eprintln!("univariate: {with} with, {without} without");
    assert!(
        with < 0.5 * without,
        "{with} of draws at x >= 6 with, {without} without"
    );
    // The joint variant splits the same way.
    let space = SearchSpace {
        params: vec![("x".to_string(), d.clone())],
        fixed: BTreeMap::new(),
    };
    let tpe = TpeSampler::new(7, TpeVariant::Multivariate);
    let over = |trials: &[Trial]| {
        (100..400)
            .filter(|&n| {
                match tpe.sample_joint(&space, &shared(trials), Direction::Minimize, n)["x"] {
                    ParamValue::Float(x) => x >= 6.0,
                    _ => false,
                }
            })
            .count()
    };
    let (a, b) = (over(&blind), over(&fitted));
    eprintln!("joint: {b} with, {a} without, of 300");
    assert!(
        b * 2 < a,
        "{b} of 300 joint draws at x >= 6 with, {a} without"
    );
}
