//! `--parallel` for a program sweep, which has no estimate: with a number,
//! that many slots (round-robin over the GPUs); with `auto`, the first trial
//! runs alone and, from its measured peaks on, the slots follow
//! `placement::measured` with the largest peaks so far, revised as peaks
//! come in (the decision printed with its numbers each time it changes).
//! On the CPU the number at once is then decided by what was measured: the
//! trials per hour at each number tried (`choose`), starting from the
//! cores a trial keeps busy and trying one more while that was the fastest,
//! within what memory and the cores' count allow. On GPUs each GPU takes
//! what its memory holds at the largest GPU peak (its free memory read
//! again when a trial ends, our own trials' counted as free), within what
//! the host's memory and cores hold; a slot crowding took stays away from
//! its GPU. `replan` takes the machine as its caller read it (the GPUs'
//! free memory, the host's), so tests bring their own.

use crate::journal::Study;
use crate::placement::{self, Gpu, Measured, Plan, Slot};
use crate::slots::Slots;
use std::collections::BTreeMap;

pub(crate) fn cores() -> usize {
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
                "--parallel {k}: {k} program trial(s) at once, round-robin over {} {}",
                gpus.len(),
                match gpus.iter().any(crate::groups::is_group) {
                    true => "group(s) of GPUs",
                    false => "GPU(s)",
                }
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

/// The largest peaks seen so far, MiB (a running trial's count before
/// its end records them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Largest {
    pub host: Option<f64>,
    pub gpu: Option<f64>,
}

/// A running trial as a revision reads it: its slot, its peaks so far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Now {
    pub slot: usize,
    pub host_mib: Option<f64>,
    pub gpu_mib: Option<f64>,
}

/// What a revision of the slots reads: the peaks the storage recorded,
/// the running trials' now, and the machine as it is now.
pub(crate) struct Peaks<'a> {
    pub study: &'a Study,
    pub running: &'a [Now],
    pub memory_budget_mib: Option<f64>,
    /// Host memory available now (MemAvailable), MiB.
    pub available_mib: f64,
    pub cores: usize,
    /// The GPUs with their free memory now plus what our running trials
    /// hold there now (memdiag's, `start::gpus_counting`), read when a
    /// trial has just ended; None: not read, the GPU slots stay as they are.
    pub gpus: Option<&'a [Gpu]>,
    /// Trials are packed by their predicted peaks (`packing`): on the CPU
    /// the slots' number follows the smallest peak measured, each start
    /// checked against the room left.
    pub packing: bool,
}

/// The largest value of `key` the finished trials recorded.
fn most(study: &Study, key: &str) -> Option<f64> {
    largest_of(
        study
            .trials
            .iter()
            .filter_map(|t| t.user_attrs.get(key).and_then(|v| v.as_f64())),
    )
}

/// The smallest value of `key` the finished trials recorded.
fn least(study: &Study, key: &str) -> Option<f64> {
    study
        .trials
        .iter()
        .filter(|t| t.state.is_finished())
        .filter_map(|t| t.user_attrs.get(key).and_then(|v| v.as_f64()))
        .filter(|v| *v > 0.0)
        .min_by(f64::total_cmp)
}

fn largest_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

/// Revises the slots from the peaks measured so far (the finished trials'
/// and the running ones' now); `largest` keeps the largest peaks seen.
pub(crate) fn replan(slots: &mut Slots, largest: &mut Largest, p: &Peaks) {
    // Slurm placed this worker: it runs where it was put.
    if slots.inherit_gpus {
        return;
    }
    let host = largest_of(
        most(p.study, "peak_host_pss_mib")
            .into_iter()
            .chain(p.running.iter().filter_map(|r| r.host_mib))
            .chain(largest.host),
    );
    let gpu = largest_of(
        most(p.study, "peak_gpu_mib")
            .into_iter()
            .chain(p.running.iter().filter_map(|r| r.gpu_mib))
            .chain(largest.gpu),
    );
    // Nothing finished yet: the first trial runs alone until it ends.
    let finished = p.study.trials.iter().any(|t| t.state.is_finished());
    let Some(host) = host.filter(|_| finished) else {
        return;
    };
    *largest = Largest {
        host: Some(host),
        gpu,
    };
    if slots.all_cpu() {
        on_cpu(slots, host, p);
    } else if let Some(gpus) = p.gpus.filter(|g| !g.is_empty()) {
        on_gpus(slots, host, gpu, gpus, p);
    }
}

/// Host memory available now plus what our running trials hold (theirs to
/// keep), or `--memory-budget`.
fn host_mib(p: &Peaks) -> f64 {
    let ours: f64 = p.running.iter().filter_map(|r| r.host_mib).sum();
    p.memory_budget_mib.unwrap_or(p.available_mib + ours)
}

/// The slots of the running trials.
fn busy(p: &Peaks) -> Vec<usize> {
    p.running.iter().map(|r| r.slot).collect()
}

fn on_cpu(slots: &mut Slots, peak: f64, p: &Peaks) {
    // Packed by predicted peaks, as many slots as the smallest trial
    // allows: each start is checked against the room left.
    let (peak, copy) = match p.packing {
        true => (
            least(p.study, "peak_host_pss_mib").unwrap_or(peak),
            least(p.study, "peak_host_anon_mib"),
        ),
        false => (peak, most(p.study, "peak_host_anon_mib")),
    };
    let plan_with = |cores_busy| {
        placement::measured(&Measured {
            peak_mib: Some(peak),
            gpu_peak_mib: None,
            copy_mib: copy,
            cores_busy,
            host_mib: host_mib(p),
            cores: p.cores,
            gpus: Vec::new(),
        })
    };
    // The cores a trial keeps busy give the first guess; memory and the
    // cores' count the most; the trials per hour measured at each number
    // at once decide.
    let plan = plan_with(most(p.study, "cpu_cores"));
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
    if p.packing {
        common::say!(
            "train sweep: placement: packed by each point's predicted peak: up to {want} at once (as many as the smallest trial, {peak:.0} MiB, allows), each point starting when its predicted peak fits beside the trials running"
        );
    }
    // Each trial gets its share of the cores (a trial started from now on).
    let threads = placement::cpu_slots(want as u32, p.cores)[0].threads;
    for s in &mut slots.slots {
        s.threads = threads;
    }
    if want > open {
        for _ in open..want {
            slots.add(Slot { gpu: None, threads });
        }
    } else {
        close(slots, None, open - want, &busy(p));
    }
}

/// Closes `extra` free open slots on `gpu` (None: the CPU), the last
/// first; a busy one closes when its trial ends (a later revision).
fn close(slots: &mut Slots, gpu: Option<u32>, mut extra: usize, busy: &[usize]) {
    for i in (0..slots.slots.len()).rev() {
        if extra > 0 && !slots.closed[i] && slots.slots[i].gpu == gpu && !busy.contains(&i) {
            slots.closed[i] = true;
            extra -= 1;
        }
    }
}

/// On GPUs: each GPU takes what `placement::measured` gives it, less the
/// slots crowding took there; `gpus`' free memory already counts what our
/// running trials hold on it now (`start::gpus_counting`: the same memdiag
/// snapshot, so a trial that has just released its memory is not counted
/// twice). Trials per hour (`choose`) decide only on the CPU: what more
/// trials at once do to a GPU's throughput is not measured here, and the
/// memory and cores' bounds already hold.
fn on_gpus(slots: &mut Slots, host: f64, gpu: Option<f64>, gpus: &[Gpu], p: &Peaks) {
    let gpus = gpus.to_vec();
    // Packed by predicted peaks: as many slots as the smallest trial
    // allows, each start checked against its GPU's room left.
    let gpu = match p.packing {
        true => least(p.study, "peak_gpu_mib").or(gpu),
        false => gpu,
    };
    let plan = placement::measured(&Measured {
        peak_mib: Some(host),
        gpu_peak_mib: gpu,
        copy_mib: most(p.study, "peak_host_anon_mib"),
        cores_busy: most(p.study, "cpu_cores"),
        host_mib: host_mib(p),
        cores: p.cores,
        gpus: gpus.clone(),
    });
    let mut why = plan.why.clone();
    let mut want: Vec<(u32, usize)> = Vec::new();
    for g in &gpus {
        let planned = plan.slots.iter().filter(|s| s.gpu == Some(g.index)).count();
        let crowded = slots.crowded_on(Some(g.index));
        let n = planned.saturating_sub(crowded);
        if crowded > 0 && planned > 0 {
            why.push(format!(
                "GPU {}: {n} trial(s) at once, {crowded} fewer than fit (a trial ran out of memory there while it shared it)",
                g.index
            ));
        }
        want.push((g.index, n));
    }
    // Never none: the plan's first GPU keeps one.
    if want.iter().all(|(_, n)| *n == 0) {
        let first = plan.slots[0].gpu;
        if let Some(w) = want.iter_mut().find(|(g, _)| Some(*g) == first) {
            w.1 = 1;
        }
    }
    if want.iter().all(|(g, n)| slots.open_on(Some(*g)) == *n) {
        return;
    }
    for w in &why {
        common::say!("train sweep: placement: {w}");
    }
    let total: usize = want.iter().map(|(_, n)| n).sum();
    if p.packing {
        common::say!(
            "train sweep: placement: packed by each point's predicted peak: up to {total} at once on the GPU(s) (as many as the smallest trial, {:.0} MiB, allows), each point starting when its predicted peak fits beside the trials on its GPU",
            gpu.unwrap_or(0.0)
        );
    }
    let threads = placement::gpu_threads(total as u32, p.cores);
    for s in &mut slots.slots {
        s.threads = threads;
    }
    let busy = busy(p);
    for (g, n) in want {
        let open = slots.open_on(Some(g));
        if n <= open {
            close(slots, Some(g), open - n, &busy);
            continue;
        }
        // A slot closed before (not for crowding) opens again first.
        let mut more = n - open;
        for i in 0..slots.slots.len() {
            if more > 0 && slots.closed[i] && !slots.crowded[i] && slots.slots[i].gpu == Some(g) {
                slots.closed[i] = false;
                more -= 1;
            }
        }
        for _ in 0..more {
            slots.add(Slot {
                gpu: Some(g),
                threads,
            });
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
                "auto, measured: {said}; {next} trial(s) at once (trying more while more was faster; memory and the cores allow {upper}), each with up to {} thread(s)",
                placement::cpu_slots(next as u32, cores())[0].threads.unwrap_or(1)
            )),
        );
    }
    (
        best.0,
        Some(format!(
            "auto, measured: {said}; {} trial(s) at once (the fastest measured), each with up to {} thread(s)",
            best.0,
            placement::cpu_slots(best.0 as u32, cores())[0]
                .threads
                .unwrap_or(1)
        )),
    )
}

#[cfg(test)]
mod tests;
