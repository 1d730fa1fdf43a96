//! `--parallel` for a program sweep, which has no estimate: with a number,
//! that many slots (round-robin over the GPUs); with `auto`, the first trial
//! runs alone and, from its measured peak on, the slots follow
//! `placement::measured` with the largest peak so far, revised as peaks
//! come in (the decision printed with its numbers each time it changes).

use crate::driver::Driver;
use crate::journal::Study;
use crate::placement::{self, Gpu, Measured, Plan, Slot};

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The slots a program sweep starts with.
pub fn program_plan(gpus: &[Gpu], parallel: Option<u32>, budget_mib: Option<f64>) -> Plan {
    match parallel {
        None => placement::measured(&Measured {
            peak_mib: None,
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

impl Driver {
    /// Revises the slots from the peaks measured so far (the finished
    /// trials' in the journal, the running ones' now). Only the CPU side is
    /// revised as trials run; on GPUs the first plan's devices stay.
    pub(crate) fn replan(&mut self, study: &Study) {
        let recorded = study.trials.iter().filter_map(|t| {
            t.user_attrs
                .get("peak_host_pss_mib")
                .and_then(|v| v.as_f64())
        });
        let running: Vec<f64> = self
            .running
            .iter()
            .filter_map(|r| r.host_peak_mib())
            .collect();
        let peak = recorded
            .chain(running.iter().copied())
            .chain(self.peak_mib)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        // Nothing finished yet: the first trial runs alone until it ends.
        let finished = study.trials.iter().any(|t| t.state.is_finished());
        if peak.is_none() || !finished || self.slots.iter().any(|s| s.gpu.is_some()) {
            return;
        }
        self.peak_mib = peak;
        let ours: f64 = running.iter().sum();
        let host = self
            .settings
            .memory_budget_mib
            .unwrap_or_else(|| available_mib() + ours);
        let plan = placement::measured(&Measured {
            peak_mib: peak,
            host_mib: host,
            cores: cores(),
            gpus: Vec::new(),
        });
        let open = self.closed.iter().filter(|c| !**c).count();
        // A slot taken away for crowding stays away.
        let want = plan.slots.len().saturating_sub(self.crowded).max(1);
        if want == open {
            return;
        }
        for w in &plan.why {
            common::say!("train sweep: placement: {w}");
        }
        if want > open {
            let threads = plan.slots[0].threads;
            for s in &mut self.slots {
                s.threads = threads;
            }
            for _ in open..want {
                self.slots.push(Slot { gpu: None, threads });
                self.closed.push(false);
            }
        } else {
            // Close free slots first; a busy one closes when its trial ends.
            let mut extra = open - want;
            for i in (0..self.slots.len()).rev() {
                if extra > 0 && !self.closed[i] && self.running.iter().all(|r| r.slot != i) {
                    self.closed[i] = true;
                    extra -= 1;
                }
            }
        }
    }
}
