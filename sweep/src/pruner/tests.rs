//! The pruners' tests: each rule against Optuna's and W&B's answers.

use super::*;
use crate::trial::{shared, TrialState};

fn trial(number: u64, state: TrialState, values: &[f64]) -> Trial {
    Trial {
        number,
        state,
        params: BTreeMap::new(),
        distributions: Default::default(),
        value: (state == TrialState::Complete).then(|| values.last().copied().unwrap_or(0.0)),
        intermediate: curve(values),
        user_attrs: Default::default(),
        system_attrs: Default::default(),
        datetime_start: None,
        datetime_complete: None,
        discarded: false,
    }
}

/// Steps 1, 2, ... as train's epochs.
fn curve(values: &[f64]) -> BTreeMap<u64, f64> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64 + 1, *v))
        .collect()
}

fn complete(curves: &[&[f64]]) -> Vec<Trial> {
    curves
        .iter()
        .enumerate()
        .map(|(i, c)| trial(i as u64, TrialState::Complete, c))
        .collect()
}

#[test]
fn numpy_percentile_cases() {
    // Values printed by numpy 2.4 for np.nanpercentile(a, 50).
    let inf = f64::INFINITY;
    assert_eq!(nanpercentile(&[1.0, 2.0, 3.0], 50.0), 2.0);
    assert_eq!(nanpercentile(&[0.1, 0.2], 50.0), 0.15000000000000002);
    assert_eq!(nanpercentile(&[1.0, f64::NAN], 50.0), 1.0);
    assert_eq!(nanpercentile(&[-inf, 1.0], 50.0), -inf);
    for nan in [
        &[f64::NAN][..],
        &[inf],
        &[1.0, inf],
        &[1.0, 3.0, inf, inf],
        &[-inf, inf],
    ] {
        assert!(nanpercentile(nan, 50.0).is_nan(), "{nan:?}");
    }
    assert_eq!(nanpercentile(&[1.0, 2.0, 3.0, 4.0], 25.0), 1.75);
    assert_eq!(nanpercentile(&[1.0, 2.0, 3.0, 4.0], 100.0), 4.0);
    assert_eq!(nanpercentile(&[1.0, 2.0, 3.0, 4.0], 0.0), 1.0);
}

#[test]
fn median_waits_for_five_completed_trials() {
    let m = PercentilePruner::median();
    let bad = curve(&[9.0]);
    let mut others = complete(&[&[1.0], &[1.0], &[1.0], &[1.0]]);
    // Pruned, failed and running trials do not count towards startup.
    others.push(trial(10, TrialState::Pruned, &[1.0]));
    others.push(trial(11, TrialState::Fail, &[1.0]));
    others.push(trial(12, TrialState::Running, &[1.0]));
    assert_eq!(
        m.decide(&bad, &shared(&others), Direction::Minimize),
        Decision::Continue
    );
    others.push(trial(13, TrialState::Complete, &[1.0]));
    assert!(m
        .decide(&bad, &shared(&others), Direction::Minimize)
        .is_prune());
}

#[test]
fn median_compares_the_best_so_far_with_the_median_at_the_last_step() {
    let m = PercentilePruner::median();
    let others = complete(&[
        &[5.0, 4.0, 3.0],
        &[5.0, 4.0, 3.0],
        &[6.0, 5.0, 4.0],
        &[6.0, 5.0, 4.0],
        &[7.0, 6.0, 5.0],
    ]);
    // Step 3's median is 4; this trial's best (3.5 at step 2) is better
    // than it even though its value at step 3 (9) is worse.
    let c = curve(&[6.0, 3.5, 9.0]);
    assert_eq!(
        m.decide(&c, &shared(&others), Direction::Minimize),
        Decision::Continue
    );
    let c = curve(&[6.0, 5.0, 4.5]);
    let d = m.decide(&c, &shared(&others), Direction::Minimize);
    assert!(
        matches!(&d, Decision::Prune(r) if r.contains("median 4 of the 5")),
        "{d:?}"
    );
    // Equal to the median: not worse, goes on.
    let c = curve(&[6.0, 5.0, 4.0]);
    assert_eq!(
        m.decide(&c, &shared(&others), Direction::Minimize),
        Decision::Continue
    );
    // Maximize: the same numbers read the other way.
    let c = curve(&[3.0, 3.5, 3.9]);
    assert!(m
        .decide(&c, &shared(&others), Direction::Maximize)
        .is_prune());
    let c = curve(&[4.0, 4.0, 4.1]);
    assert_eq!(
        m.decide(&c, &shared(&others), Direction::Maximize),
        Decision::Continue
    );
}

#[test]
fn median_nan_rules() {
    let m = PercentilePruner::median();
    let others = complete(&[&[1.0], &[1.0], &[1.0], &[f64::NAN], &[f64::NAN]]);
    // All NaN so far: pruned.
    let c = curve(&[f64::NAN]);
    assert!(m
        .decide(&c, &shared(&others), Direction::Minimize)
        .is_prune());
    // NaN among the completed values is ignored: median of [1, 1, 1].
    let c = curve(&[f64::NAN, 2.0]);
    let c1: BTreeMap<u64, f64> = [(1, 2.0)].into();
    assert!(m
        .decide(&c1, &shared(&others), Direction::Minimize)
        .is_prune());
    // No completed trial reached step 2: nothing to compare with.
    assert_eq!(
        m.decide(&c, &shared(&others), Direction::Minimize),
        Decision::Continue
    );
    // Every completed value at the step NaN: the median is NaN, go on.
    let nan: &[f64] = &[f64::NAN];
    let others = complete(&[nan; 5]);
    assert_eq!(
        m.decide(&c1, &shared(&others), Direction::Minimize),
        Decision::Continue
    );
    // No report yet: go on.
    assert_eq!(
        m.decide(&BTreeMap::new(), &shared(&others), Direction::Minimize),
        Decision::Continue
    );
}

#[test]
fn warmup_and_interval_as_optuna() {
    let p = PercentilePruner::new(50.0, 0, 2, 3, 1).unwrap();
    let others = complete(&[&[1.0; 12]]);
    let bad = |steps: &[u64]| -> BTreeMap<u64, f64> { steps.iter().map(|&s| (s, 9.0)).collect() };
    let d = |steps: &[u64]| {
        p.decide(&bad(steps), &shared(&others), Direction::Minimize)
            .is_prune()
    };
    // Steps before the warm-up (2) are never pruned.
    assert!(!d(&[0]) && !d(&[0, 1]));
    // Checks at 2, 5, 8, ...: the first report at or after each.
    assert!(d(&[0, 1, 2]));
    assert!(!d(&[0, 1, 2, 3]) && !d(&[0, 1, 2, 3, 4]));
    assert!(d(&[0, 1, 2, 3, 4, 5]));
    // 5 was skipped: 6 is the first report of its interval.
    assert!(d(&[0, 1, 2, 3, 4, 6]));
    assert!(!d(&[0, 1, 2, 3, 4, 6, 7]));
    assert!(PercentilePruner::new(101.0, 5, 0, 1, 1).is_err());
    assert!(PercentilePruner::new(50.0, 5, 0, 0, 1).is_err());
    assert!(PercentilePruner::new(50.0, 5, 0, 1, 0).is_err());
}

#[test]
fn n_min_trials_counts_reports_at_the_step() {
    let p = PercentilePruner::new(50.0, 1, 0, 1, 3).unwrap();
    let others = complete(&[&[1.0, 1.0], &[1.0, 1.0], &[1.0]]);
    assert!(p
        .decide(&curve(&[9.0]), &shared(&others), Direction::Minimize)
        .is_prune());
    assert_eq!(
        p.decide(&curve(&[9.0, 9.0]), &shared(&others), Direction::Minimize),
        Decision::Continue
    );
}

#[test]
fn hyperband_bands_as_wandb_computes_them() {
    let h = Hyperband::from_min_iter(3, 3.0, true).unwrap();
    assert_eq!(&h.bands[..5], &[3, 9, 27, 81, 243]);
    assert!(h.bands.iter().all(|&b| b as f64 <= MAX_BAND));
    // W&B's docs: max_iter 27, s 2 -> 27/3 = 9, 9/3 = 3.
    let h = Hyperband::from_max_iter(27, 2, 3.0, true).unwrap();
    assert_eq!(h.bands, vec![3, 9]);
    // Truncated, sorted, and cut where the band drops below 1.
    let h = Hyperband::from_max_iter(10, 5, 2.0, true).unwrap();
    assert_eq!(h.bands, vec![1, 2, 5]);
    let h = Hyperband::from_min_iter(2, 1.5, true).unwrap();
    assert_eq!(&h.bands[..4], &[2, 3, 4, 6]);
    assert!(Hyperband::from_max_iter(2, 3, 3.0, true).is_err());
    assert!(Hyperband::from_max_iter(27, 0, 3.0, true).is_err());
    assert!(Hyperband::from_min_iter(0, 3.0, true).is_err());
    assert!(Hyperband::from_min_iter(1, 1.0, true).is_err());
    assert!(Hyperband::from_min_iter(1, f64::NAN, true).is_err());
}

#[test]
fn hyperband_docstring_example() {
    // hyperband_stop_runs' docstring runs: max_iter 5, eta 2, s 2 ->
    // bands [1, 2]. Band 1: all 10 -> threshold sorted[⌊5/2⌋] = 10.
    // Band 2: [9, 10, 8, 7, 6] -> sorted[2] = 8. Strict: b (10 at 2)
    // stops; c (8) ties the threshold and goes on; d (7) goes on.
    let h = Hyperband::from_max_iter(5, 2, 2.0, true).unwrap();
    let a = trial(0, TrialState::Complete, &[10.0, 9.0]);
    let b = trial(1, TrialState::Running, &[10.0, 10.0]);
    let c = trial(2, TrialState::Running, &[10.0, 8.0, 8.0]);
    let d = trial(3, TrialState::Running, &[10.0, 7.0, 7.0]);
    let e = trial(4, TrialState::Complete, &[10.0, 6.0, 6.0]);
    let all = [a, b, c, d, e];
    let judge = |i: usize| {
        let others: Vec<Trial> = all
            .iter()
            .filter(|t| t.number != i as u64)
            .cloned()
            .collect();
        h.decide(&all[i].intermediate, &shared(&others), Direction::Minimize)
    };
    let d1 = judge(1);
    assert!(
        matches!(&d1, Decision::Prune(r) if r.contains("band 2") && r.contains("threshold 8")),
        "{d1:?}"
    );
    assert_eq!(judge(2), Decision::Continue);
    assert_eq!(judge(3), Decision::Continue);
    // Not strict: b's best so far (10) is still worse than 8.
    let loose = Hyperband {
        strict: false,
        ..h.clone()
    };
    let others: Vec<Trial> = all.iter().filter(|t| t.number != 1).cloned().collect();
    assert!(loose
        .decide(&all[1].intermediate, &shared(&others), Direction::Minimize)
        .is_prune());
}

#[test]
fn hyperband_top_third_at_each_band() {
    // min_iter 2, eta 3: bands 2, 6, 18, ... Nine runs reached band 2
    // with values 1..=9 at iteration 2: threshold sorted[⌊9/3⌋] = 4.
    let h = Hyperband::from_min_iter(2, 3.0, true).unwrap();
    let others: Vec<Trial> = (1..=8)
        .map(|v| trial(v, TrialState::Complete, &[0.0, v as f64]))
        .collect();
    let judge = |c: &[f64]| h.decide(&curve(c), &shared(&others), Direction::Minimize);
    assert_eq!(judge(&[0.0]), Decision::Continue, "before the first band");
    // This run is the ninth: its 9 is worse than 4.
    assert!(judge(&[0.0, 9.0]).is_prune());
    // With 4.5 the sorted values are 1..4, 4.5, 5.., threshold 4: stop.
    assert!(judge(&[0.0, 4.5]).is_prune());
    assert_eq!(judge(&[0.0, 3.5]), Decision::Continue);
    // Judged at band 2 until band 6: the value at iteration 2 decides
    // (strict), whatever comes after.
    assert!(judge(&[0.0, 9.0, 0.1, 0.1]).is_prune());
    assert_eq!(judge(&[0.0, 3.0, 50.0]), Decision::Continue);
    // Maximize: negated, so the best are the largest; the fourth largest
    // of the nine is the threshold. With 8.5: 8.5, 8, 7, 6 -> 6.
    assert_eq!(
        judge_max(&h, &shared(&others), &[0.0, 8.5]),
        Decision::Continue
    );
    // 5.5 is itself the fourth largest (8, 7, 6, 5.5): it goes on.
    assert_eq!(
        judge_max(&h, &shared(&others), &[0.0, 5.5]),
        Decision::Continue
    );
    // 4.5: 8, 7, 6, 5 -> threshold 5; 4.5 is worse.
    assert!(judge_max(&h, &shared(&others), &[0.0, 4.5]).is_prune());
}

fn judge_max(h: &Hyperband, others: &[Arc<Trial>], c: &[f64]) -> Decision {
    h.decide(&curve(c), others, Direction::Maximize)
}

#[test]
fn hyperband_counts_finite_values_and_every_state() {
    let h = Hyperband::from_min_iter(1, 2.0, true).unwrap();
    // A failed run's first value counts in band 1's threshold.
    let others = vec![
        trial(0, TrialState::Fail, &[1.0]),
        trial(1, TrialState::Pruned, &[2.0]),
    ];
    // [1, 2, 3]: threshold sorted[⌊3/2⌋] = 2; 3 > 2: stop.
    assert!(h
        .decide(&curve(&[3.0]), &shared(&others), Direction::Minimize)
        .is_prune());
    // NaN is dropped: the run has reported no value yet.
    assert_eq!(
        h.decide(&curve(&[f64::NAN]), &shared(&others), Direction::Minimize),
        Decision::Continue
    );
    // [NaN, 1.5]: one finite value, 1.5 at band 1; threshold 1.5.
    assert_eq!(
        h.decide(
            &curve(&[f64::NAN, 1.5]),
            &shared(&others),
            Direction::Minimize
        ),
        Decision::Continue
    );
    // Alone: the run is its own threshold.
    assert_eq!(
        h.decide(&curve(&[100.0]), &[], Direction::Minimize),
        Decision::Continue
    );
}

/// Kept across the looks of a growing study (trials finishing out of
/// order, in every state, NaN values, both goals, strict or not): the
/// same decisions as hyperband's `decide` on all the others.
#[test]
fn hyperband_kept_decides_as_it_does_afresh() {
    let mut seed = 11u64;
    let mut next = |m: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    for (strict, direction) in [(true, Direction::Minimize), (false, Direction::Maximize)] {
        let h = Hyperband::from_min_iter(1, 3.0, strict).unwrap();
        let mut kept = Kept::default();
        let mut trials: Vec<Trial> = Vec::new();
        let mut decided = 0;
        for round in 0..120 {
            // A new trial, running; some running ones report or end.
            trials.push(trial(round, TrialState::Running, &[]));
            for t in trials.iter_mut().filter(|t| !t.state.is_finished()) {
                if next(3) > 0 {
                    let v = match next(10) {
                        0 => f64::NAN,
                        n => n as f64 + next(100) as f64 / 100.0,
                    };
                    let step = t.intermediate.len() as u64 + 1;
                    t.intermediate.insert(step, v);
                }
                if next(6) == 0 {
                    t.state = [TrialState::Complete, TrialState::Pruned, TrialState::Fail]
                        [next(3) as usize];
                }
            }
            let study = shared(&trials);
            for me in study.iter().filter(|t| !t.state.is_finished()) {
                let others: Vec<Arc<Trial>> = study
                    .iter()
                    .filter(|t| t.number != me.number)
                    .cloned()
                    .collect();
                let fresh = h.decide(&me.intermediate, &others, direction);
                let kept = h.decide_kept(&me.intermediate, &study, me.number, &mut kept, direction);
                assert_eq!(kept, fresh, "round {round}, trial {}", me.number);
                decided += usize::from(fresh.is_prune());
            }
        }
        assert!(decided > 10, "the test prunes some: {decided}");
    }
}
