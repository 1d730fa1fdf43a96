//! `--parallel` for a program sweep, which has no estimate: with a number,
//! that many slots (round-robin over the GPUs); with `auto`, the first trial
//! runs alone and, from its measured peak on, the slots follow
//! `placement::measured` with the largest peak so far, revised as peaks
//! come in (the decision printed with its numbers each time it changes).

use crate::journal::Study;
use crate::placement::{self, Gpu, Measured, Plan, Slot};
use crate::slots::Slots;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The slots a program sweep starts with.
pub fn program_plan(gpus: &[Gpu], parallel: Option<u32>, budget_mib: Option<f64>) -> Plan {
    match parallel {
        None => placement::measured(&Measured {
            peak_mib: None,
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
    let plan = placement::measured(&Measured {
        peak_mib: peak,
        copy_mib: most("peak_host_anon_mib"),
        cores_busy: most("cpu_cores"),
        host_mib: host,
        cores: cores(),
        gpus: Vec::new(),
    });
    let open = slots.closed.iter().filter(|c| !**c).count();
    // A slot taken away for crowding stays away.
    let want = plan.slots.len().saturating_sub(slots.crowded).max(1);
    if want == open {
        return;
    }
    for w in &plan.why {
        common::say!("train sweep: placement: {w}");
    }
    if want > open {
        let threads = plan.slots[0].threads;
        for s in &mut slots.slots {
            s.threads = threads;
        }
        for _ in open..want {
            slots.slots.push(Slot { gpu: None, threads });
            slots.closed.push(false);
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
