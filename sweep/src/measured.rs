//! `--parallel` for a program sweep, which has no estimate: with a number,
//! that many slots (round-robin over the GPUs); with `auto`, the first trial
//! runs alone and, from its measured peak on, the slots follow
//! `placement::measured` with the largest peak so far, revised as peaks
//! come in (the decision printed with its numbers each time it changes).
//! On the CPU the number at once is then decided by what was measured: the
//! trials per hour at each number tried (`choose`), starting from the
//! cores a trial keeps busy and trying one more while that was the fastest,
//! within what memory and the cores' count allow.

use crate::journal::Study;
use crate::placement::{self, Gpu, Measured, Plan, Slot};
use crate::slots::Slots;
use std::collections::BTreeMap;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The slots a program sweep starts with.
pub fn program_plan(gpus: &[Gpu], parallel: Option<u32>, budget_mib: Option<f64>) -> Plan {
    match parallel {
        None => placement::measured(&Measured {
            peak_mib: None,
            gpu_peak_mib: None,
            copy_mib: None,
            cores_busy: None,
            host_mib: budget_mib.unwrap_or_else(available_mib),
            cores: cores(),
            gpus: gpus.to_vec(),
        }),
        Some(k) if gpus.is_empty() => Plan {
            slots: placement::cpu_slots(k, cores()),
            why: vec![format!(
                "--parallel {k}: {k} program trial(s) at once on the CPU"
            )],
        },
        Some(k) => Plan {
            slots: (0..k as usize)
                .map(|i| Slot {
                    gpu: Some(gpus[i % gpus.len()].index),
                    threads: None,
                })
                .collect(),
            why: vec![format!(
                "--parallel {k}: {k} program trial(s) at once, round-robin over {} GPU(s)",
                gpus.len()
            )],
        },
    }
}

/// The host memory available now (MemAvailable), MiB.
pub fn available_mib() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// What a revision of the slots reads: the peaks the storage recorded,
/// the running trials' peaks now, the largest peak so far.
pub(crate) struct Peaks<'a> {
    pub study: &'a Study,
    pub running: &'a [f64],
    /// The running trials' slots.
    pub busy: &'a [usize],
    pub memory_budget_mib: Option<f64>,
}

/// Revises the slots from the peaks measured so far (the finished trials'
/// and the running ones' now); `largest` keeps the largest peak seen. Only
/// the CPU side is revised as trials run; on GPUs the first plan's devices
/// stay.
pub(crate) fn replan(slots: &mut Slots, largest: &mut Option<f64>, p: &Peaks) {
    let recorded = p.study.trials.iter().filter_map(|t| {
        t.user_attrs
            .get("peak_host_pss_mib")
            .and_then(|v| v.as_f64())
    });
    let peak = recorded
        .chain(p.running.iter().copied())
        .chain(*largest)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    // Nothing finished yet: the first trial runs alone until it ends.
    let finished = p.study.trials.iter().any(|t| t.state.is_finished());
    if peak.is_none() || !finished || slots.slots.iter().any(|s| s.gpu.is_some()) {
        return;
    }
    *largest = peak;
    let ours: f64 = p.running.iter().sum();
    let host = p
        .memory_budget_mib
        .unwrap_or_else(|| available_mib() + ours);
    // The most any finished trial had: what a copy adds, the cores it
    // keeps busy.
    let most = |key: &str| {
        p.study
            .trials
            .iter()
            .filter_map(|t| t.user_attrs.get(key).and_then(|v| v.as_f64()))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let plan_with = |cores_busy| {
        placement::measured(&Measured {
            peak_mib: peak,
            gpu_peak_mib: None,
            copy_mib: most("peak_host_anon_mib"),
            cores_busy,
            host_mib: host,
            cores: cores(),
            gpus: Vec::new(),
        })
    };
    // The cores a trial keeps busy give the first guess; memory and the
    // cores' count the most; the trials per hour measured at each number
    // at once decide.
    let plan = plan_with(most("cpu_cores"));
    let upper = plan_with(None).slots.len();
    let (chosen, rated) = choose(plan.slots.len(), upper, &rates(p.study));
    let open = slots.open();
    // A slot taken away for crowding stays away.
    let want = chosen.saturating_sub(slots.crowded_on(None)).max(1);
    if want == open {
        return;
    }
    // Once trials per hour decide, their line says why; before, the plan's.
    let why = match &rated {
        Some(r) => std::slice::from_ref(r),
        None => &plan.why[..],
    };
    for w in why {
        common::say!("train sweep: placement: {w}");
    }
    // Each trial gets its share of the cores (a trial started from now on).
    let threads = placement::cpu_slots(want as u32, cores())[0].threads;
    for s in &mut slots.slots {
        s.threads = threads;
    }
    if want > open {
        for _ in open..want {
            slots.add(Slot { gpu: None, threads });
        }
    } else {
        // Close free slots first; a busy one closes when its trial ends.
        let mut extra = open - want;
        for i in (0..slots.slots.len()).rev() {
            if extra > 0 && !slots.closed[i] && !p.busy.contains(&i) {
                slots.closed[i] = true;
                extra -= 1;
            }
        }
    }
}

/// Trials per hour at each number of trials at once, from the COMPLETE
/// trials that recorded both (`at_once` when they started, their
/// `seconds`): k / the median seconds, with how many trials measured it.
pub(crate) fn rates(study: &Study) -> BTreeMap<usize, (f64, usize)> {
    let mut seconds: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for t in study
        .trials
        .iter()
        .filter(|t| t.state == crate::trial::TrialState::Complete)
    {
        let k = t.user_attrs.get("at_once").and_then(|v| v.as_u64());
        let s = t.user_attrs.get("seconds").and_then(|v| v.as_f64());
        if let (Some(k), Some(s)) = (k, s.filter(|s| *s > 0.0)) {
            seconds.entry(k as usize).or_default().push(s);
        }
    }
    seconds
        .into_iter()
        .filter(|(k, _)| *k > 0)
        .map(|(k, mut s)| {
            s.sort_by(f64::total_cmp);
            let median = s[s.len() / 2];
            (k, (k as f64 * 3600.0 / median, s.len()))
        })
        .collect()
}

/// A number at once must beat a smaller one by this much to be kept.
const BETTER_BY: f64 = 1.03;

/// How many trials at once, and why when it was the rates that decided:
/// the fastest number measured (k measured once k trials ran at it); while
/// the fastest is the largest measured, the next is tried (at least
/// `guess`, the cores' first answer), never past `upper`.
pub(crate) fn choose(
    guess: usize,
    upper: usize,
    rates: &BTreeMap<usize, (f64, usize)>,
) -> (usize, Option<String>) {
    let upper = upper.max(1);
    let measured: Vec<(usize, f64)> = rates
        .iter()
        .filter(|(k, (_, n))| *n >= **k && **k <= upper)
        .map(|(k, (r, _))| (*k, *r))
        .collect();
    let Some(&first) = measured.first() else {
        return (guess.clamp(1, upper), None);
    };
    let best = measured
        .iter()
        .skip(1)
        .fold(first, |b, m| if m.1 > b.1 * BETTER_BY { *m } else { b });
    let largest = measured.last().map_or(best.0, |m| m.0);
    let said: Vec<String> = measured
        .iter()
        .map(|(k, r)| format!("{k} at once {r:.0} trials/h"))
        .collect();
    let said = said.join(", ");
    if best.0 == largest && best.0 < upper {
        let next = (best.0 + 1).max(guess).min(upper);
        return (
            next,
            Some(format!(
                "auto, measured: {said}; {next} trial(s) at once (trying more while more was faster; memory and the cores allow {upper}), {} thread(s) each",
                placement::cpu_slots(next as u32, cores())[0].threads.unwrap_or(1)
            )),
        );
    }
    (
        best.0,
        Some(format!(
            "auto, measured: {said}; {} trial(s) at once (the fastest measured), {} thread(s) each",
            best.0,
            placement::cpu_slots(best.0 as u32, cores())[0]
                .threads
                .unwrap_or(1)
        )),
    )
}

#[cfg(test)]
mod tests {
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
}
