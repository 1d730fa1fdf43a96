use super::*;

fn r(list: &[(usize, f64, usize)]) -> BTreeMap<usize, (f64, usize)> {
    list.iter().map(|(k, r, n)| (*k, (*r, *n))).collect()
}

#[test]
fn the_number_at_once_follows_the_trials_per_hour_measured() {
    // Nothing measured yet: the cores' guess, within what fits.
    assert_eq!(choose(2, 4, &r(&[])).0, 2);
    assert_eq!(choose(6, 4, &r(&[])).0, 4);
    // The first trial alone measured: try more (at least the guess).
    assert_eq!(choose(1, 2, &r(&[(1, 1000.0, 1)])).0, 2);
    assert_eq!(choose(4, 8, &r(&[(1, 1000.0, 1)])).0, 4);
    // 2 at once not measured yet (one trial of two done): keep trying 2.
    assert_eq!(choose(1, 2, &r(&[(1, 1000.0, 1), (2, 900.0, 1)])).0, 2);
    // 2 at once slower: back to 1, for good.
    let (k, why) = choose(1, 2, &r(&[(1, 1000.0, 1), (2, 900.0, 2)]));
    assert_eq!(k, 1);
    assert!(why
        .unwrap()
        .contains("1 trial(s) at once (the fastest measured)"));
    // Within the margin counts as no better: the fewer.
    assert_eq!(choose(1, 3, &r(&[(1, 1000.0, 1), (2, 1020.0, 2)])).0, 1);
    // Faster: kept, and one more tried while memory allows.
    assert_eq!(choose(1, 3, &r(&[(1, 1000.0, 1), (2, 1500.0, 2)])).0, 3);
    assert_eq!(choose(1, 2, &r(&[(1, 1000.0, 1), (2, 1500.0, 2)])).0, 2);
    // Memory now allows fewer than was measured: what fits.
    assert_eq!(choose(1, 1, &r(&[(1, 1000.0, 1), (2, 1500.0, 2)])).0, 1);
}

use crate::trial::{Trial, TrialState};
use serde_json::Value;
use std::sync::Arc;

fn trial(number: u64, state: TrialState, attrs: &[(&str, f64)]) -> Arc<Trial> {
    Arc::new(Trial {
        number,
        state,
        params: BTreeMap::new(),
        distributions: Default::default(),
        value: None,
        intermediate: BTreeMap::new(),
        user_attrs: attrs
            .iter()
            .map(|(k, v)| ((*k).into(), Value::from(*v)))
            .collect(),
        system_attrs: Default::default(),
        datetime_start: None,
        datetime_complete: None,
        discarded: false,
    })
}

/// A study whose first trial ended: 2000 MiB of host PSS (300 MiB
/// anonymous), one core busy, `gpu` MiB on its GPU.
fn ended(gpu: f64) -> Study {
    Study {
        id: crate::journal::StudyId(0),
        name: "s".into(),
        direction: crate::trial::Direction::Minimize,
        trial_ids: Arc::default(),
        trials: Arc::new(vec![trial(
            0,
            TrialState::Complete,
            &[
                ("peak_host_pss_mib", 2000.0),
                ("peak_host_anon_mib", 300.0),
                ("cpu_cores", 1.0),
                ("peak_gpu_mib", gpu),
            ],
        )]),
        user_attrs: Default::default(),
        system_attrs: Default::default(),
        shared: false,
    }
}

fn gpu(index: u32, free_mib: u64) -> Gpu {
    Gpu {
        index,
        name: "H100".into(),
        total_mib: 81559,
        free_mib,
    }
}

fn on_gpus(indexes: &[u32]) -> Slots {
    let slots = indexes
        .iter()
        .map(|g| Slot {
            gpu: Some(*g),
            threads: None,
        })
        .collect();
    Slots::new(slots, false)
}

/// One revision on a 16-core host with `budget` MiB of host memory.
fn revise(slots: &mut Slots, study: &Study, running: &[Now], budget: f64, gpus: &[Gpu]) {
    replan(
        slots,
        &mut Largest::default(),
        &Peaks {
            study,
            running,
            memory_budget_mib: Some(budget),
            available_mib: 0.0,
            cores: 16,
            gpus: Some(gpus),
            packing: false,
        },
    );
}

/// `slots` after one revision from no trial running, on a 16-core host
/// with `budget` MiB of host memory, packed by predicted peaks or not.
fn revised(
    mut slots: Slots,
    study: &Study,
    budget: f64,
    gpus: Option<&[Gpu]>,
    packing: bool,
) -> Slots {
    replan(
        &mut slots,
        &mut Largest::default(),
        &Peaks {
            study,
            running: &[],
            memory_budget_mib: Some(budget),
            available_mib: 0.0,
            cores: 16,
            gpus,
            packing,
        },
    );
    slots
}

#[test]
fn packed_by_predicted_peaks_the_cpu_slots_follow_the_smallest_trial() {
    // Trials of 200 and 800 MiB (150 and 700 anonymous) in 1000 MiB:
    // by the largest, one at a time; packed, as many as the smallest
    // allows (each start then checked against the room left).
    let small = [("peak_host_pss_mib", 200.0), ("peak_host_anon_mib", 150.0)];
    let big = [("peak_host_pss_mib", 800.0), ("peak_host_anon_mib", 700.0)];
    let mut study = ended(0.0);
    study.trials = Arc::new(vec![
        trial(0, TrialState::Complete, &small),
        trial(1, TrialState::Complete, &big),
    ]);
    let open = |packing| {
        let s = Slots::new(placement::cpu_slots(1, 16), false);
        revised(s, &study, 1000.0, None, packing).open()
    };
    assert_eq!((open(false), open(true)), (1, 5));
}

#[test]
fn packed_by_predicted_peaks_the_gpu_slots_follow_the_smallest_trial() {
    // GPU trials of 1000 and 4000 MiB on a GPU with 8000 MiB free: by
    // the largest, 8000 / (4000 x 1.15) = 1 at a time; packed, as many
    // as the smallest allows (6), each start checked by `admits`.
    let mut study = ended(1000.0);
    Arc::make_mut(&mut study.trials).push(trial(
        1,
        TrialState::Complete,
        &[("peak_host_pss_mib", 2000.0), ("peak_gpu_mib", 4000.0)],
    ));
    let open = |packing| {
        let s = revised(
            on_gpus(&[0]),
            &study,
            200000.0,
            Some(&[gpu(0, 8000)]),
            packing,
        );
        s.open_on(Some(0))
    };
    assert_eq!((open(false), open(true)), (1, 6));
}

#[test]
fn on_a_gpu_the_first_trial_runs_alone_until_it_ends() {
    let first = program_plan(&[gpu(0, 80000)], None, Some(200000.0));
    assert_eq!(first.slots.len(), 1);
    let mut s = Slots::new(first.slots, false);
    let mut study = ended(600.0);
    Arc::make_mut(&mut Arc::make_mut(&mut study.trials)[0]).state = TrialState::Running;
    let now = [Now {
        slot: 0,
        host_mib: Some(2000.0),
        gpu_mib: Some(600.0),
    }];
    revise(&mut s, &study, &now, 200000.0, &[gpu(0, 80000)]);
    assert_eq!((s.slots.len(), s.open()), (1, 1));
    // Ended, but the GPUs not read again (no trial ended this look):
    // the GPU slots stay as they are.
    let mut largest = Largest::default();
    replan(
        &mut s,
        &mut largest,
        &Peaks {
            study: &ended(600.0),
            running: &[],
            memory_budget_mib: Some(200000.0),
            available_mib: 0.0,
            cores: 16,
            gpus: None,
            packing: false,
        },
    );
    assert_eq!(s.open(), 1);
    assert_eq!(largest.gpu, Some(600.0));
}

#[test]
fn small_trials_on_a_large_gpu_open_as_many_slots_as_the_cores_hold() {
    let mut s = on_gpus(&[0]);
    revise(&mut s, &ended(600.0), &[], 200000.0, &[gpu(0, 81000)]);
    assert_eq!((s.open(), s.open_on(Some(0))), (16, 16));
    assert!(s.slots.iter().all(|s| s.threads == Some(1)));
    // Host memory binds: 2300 MiB the first, 345 each further.
    let mut s = on_gpus(&[0]);
    revise(&mut s, &ended(600.0), &[], 3000.0, &[gpu(0, 81000)]);
    assert_eq!(s.open(), 3);
}

#[test]
fn each_gpu_counts_its_own_free_memory_and_what_our_trials_on_it_hold() {
    // GPU 1 shows 800 MiB free, but our trial there holds 2000 MiB
    // (counted in by start::gpus_counting): 2800 MiB / 2300 = 1 there;
    // 10000 / 2300 = 4 on GPU 0.
    let mut s = on_gpus(&[0, 1]);
    let now = |gpu_mib| {
        [Now {
            slot: 1,
            host_mib: Some(2000.0),
            gpu_mib: Some(gpu_mib),
        }]
    };
    let free = [gpu(0, 10000), gpu(1, 2800)];
    revise(&mut s, &ended(2000.0), &now(2000.0), 200000.0, &free);
    assert_eq!((s.open_on(Some(0)), s.open_on(Some(1))), (4, 1));
    // A running trial's peak past the recorded ones is the largest:
    // 2875 MiB a trial, 3 in GPU 0's 10000.
    revise(&mut s, &ended(2000.0), &now(2500.0), 200000.0, &free);
    assert_eq!((s.open_on(Some(0)), s.open_on(Some(1))), (3, 1));
}

#[test]
fn fewer_fitting_closes_free_slots_first_and_busy_ones_as_they_end() {
    let mut s = on_gpus(&[0]);
    revise(&mut s, &ended(2000.0), &[], 200000.0, &[gpu(0, 10000)]);
    assert_eq!(s.open(), 4);
    // Slots 0 and 1 busy; a larger GPU peak now fits one.
    let busy = |slot| Now {
        slot,
        host_mib: Some(2000.0),
        gpu_mib: Some(2000.0),
    };
    let study = ended(7000.0);
    revise(
        &mut s,
        &study,
        &[busy(0), busy(1)],
        200000.0,
        &[gpu(0, 6000)],
    );
    assert_eq!(s.closed, vec![false, false, true, true]);
    // Slot 1's trial ended: it closes too.
    revise(&mut s, &study, &[busy(0)], 200000.0, &[gpu(0, 8000)]);
    assert_eq!(s.closed, vec![false, true, true, true]);
    // More fit again: the closed slots open again before new ones.
    revise(&mut s, &ended(2000.0), &[], 200000.0, &[gpu(0, 12000)]);
    assert_eq!((s.slots.len(), s.open()), (5, 5));
}

#[test]
fn a_slot_crowding_took_stays_away_from_its_gpu_only() {
    let mut s = on_gpus(&[0]);
    let two = [gpu(0, 10000), gpu(1, 10000)];
    revise(&mut s, &ended(2000.0), &[], 200000.0, &two);
    assert_eq!((s.open_on(Some(0)), s.open_on(Some(1))), (4, 4));
    // A trial on GPU 0 ran out of memory beside another there.
    let on_0 = (0..s.slots.len()).rfind(|i| s.slots[*i].gpu == Some(0));
    s.close(on_0.unwrap());
    revise(&mut s, &ended(2000.0), &[], 200000.0, &two);
    assert_eq!((s.open_on(Some(0)), s.open_on(Some(1))), (3, 4));
    assert_eq!(s.crowded_on(Some(0)), 1);
}

#[test]
fn a_gpu_peak_past_every_gpus_free_memory_keeps_one_on_the_first() {
    let mut s = on_gpus(&[1, 0]);
    revise(
        &mut s,
        &ended(9000.0),
        &[],
        200000.0,
        &[gpu(1, 20000), gpu(0, 30000)],
    );
    assert_eq!((s.open_on(Some(1)), s.open_on(Some(0))), (1, 2));
    // A larger peak: GPU 1 has no room, GPU 0 one.
    revise(
        &mut s,
        &ended(20000.0),
        &[],
        200000.0,
        &[gpu(1, 20000), gpu(0, 30000)],
    );
    assert_eq!((s.open_on(Some(1)), s.open_on(Some(0))), (0, 1));
    // None has room: the first GPU keeps one.
    revise(
        &mut s,
        &ended(40000.0),
        &[],
        200000.0,
        &[gpu(1, 20000), gpu(0, 30000)],
    );
    assert_eq!((s.open_on(Some(1)), s.open_on(Some(0))), (1, 0));
}
