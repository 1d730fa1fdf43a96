//! How many trials run at once, and where: computed, not guessed (seed 004
//! cut 4 parallel trials to 3 by hand). Pure: the caller brings the GPUs'
//! free memory (memdiag's report) and a trial's estimated peak (cfgcheck's
//! estimate of the space's worst combination).

/// One GPU as memdiag reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    pub total_mib: u64,
    pub free_mib: u64,
}

/// A place a trial runs in: a GPU (pinned through CUDA_VISIBLE_DEVICES) or
/// the CPU, with its libtorch threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    pub gpu: Option<u32>,
    pub threads: Option<i32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub slots: Vec<Slot>,
    /// The decision with its numbers, one line each.
    pub why: Vec<String>,
}

/// Trials at once: `parallel` (None: as many as fit). With GPUs, each GPU
/// takes ⌊free × (1 − margin) / peak⌋ trials; on the CPU, `auto` is one
/// trial per two cores and the cores are split between the trials.
pub fn plan(
    gpus: &[Gpu],
    peak_mib: u64,
    margin: f64,
    parallel: Option<u32>,
    cpus: usize,
) -> Result<Plan, String> {
    let mut why = Vec::new();
    if gpus.is_empty() {
        let k = parallel.unwrap_or_else(|| (cpus / 2).max(1) as u32).max(1);
        let slots = cpu_slots(k, cpus);
        why.push(format!(
            "no GPU: {k} trial(s) at once on the CPU ({}), {} libtorch thread(s) each of {cpus} core(s)",
            if parallel.is_some() { "--parallel" } else { "auto: one per two cores" },
            slots[0].threads.unwrap_or(1)
        ));
        return Ok(Plan { slots, why });
    }
    let peak = peak_mib.max(1);
    let mut fits = Vec::new();
    for g in gpus {
        let usable = (g.free_mib as f64 * (1.0 - margin)) as u64;
        let n = usable / peak;
        why.push(format!(
            "GPU {} ({}): {} MiB free of {}, {:.0}% margin -> {usable} MiB / {peak} MiB per trial (worst case) = {n} trial(s)",
            g.index,
            g.name,
            g.free_mib,
            g.total_mib,
            margin * 100.0
        ));
        fits.push((g.index, n));
    }
    let room: u64 = fits.iter().map(|(_, n)| n).sum();
    if room == 0 {
        return Err(format!(
            "no GPU has room for a trial of {peak} MiB with the {:.0}% margin: shrink the space's worst case (cfgcheck --fit), or free a GPU",
            margin * 100.0
        ));
    }
    let k = match parallel {
        Some(k) if u64::from(k) > room => {
            why.push(format!(
                "--parallel {k} asks for more than the {room} that fit: {room} it is"
            ));
            room
        }
        Some(k) => u64::from(k.max(1)),
        None => room,
    };
    // Round-robin over the GPUs with room, so trials spread out.
    let mut slots = Vec::new();
    let mut left: Vec<(u32, u64)> = fits;
    while (slots.len() as u64) < k {
        for (index, n) in left.iter_mut() {
            if *n > 0 && (slots.len() as u64) < k {
                *n -= 1;
                slots.push(Slot {
                    gpu: Some(*index),
                    threads: None,
                });
            }
        }
    }
    why.push(format!("{k} trial(s) at once"));
    Ok(Plan { slots, why })
}

/// `k` slots without a GPU pinned, the `cpus` cores split between them.
pub fn cpu_slots(k: u32, cpus: usize) -> Vec<Slot> {
    let k = k.max(1);
    let threads = (cpus / k as usize).max(1) as i32;
    vec![
        Slot {
            gpu: None,
            threads: Some(threads),
        };
        k as usize
    ]
}

/// The headroom over the largest measured peak a program trial is given
/// (its next trial may draw a larger configuration).
pub const MEASURED_HEADROOM: f64 = 1.15;

/// What `--parallel auto` knows of a program sweep (no estimate: measured).
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The largest peak any trial reached so far, MiB (host PSS on the CPU,
    /// NVML's on a GPU); None until the first trial has run.
    pub peak_mib: Option<f64>,
    /// On the CPU: what each copy past the first adds (the largest
    /// anonymous memory a trial had: the libraries every copy maps are file
    /// pages the copies share, counted once, in the first); None: the whole
    /// peak each.
    pub copy_mib: Option<f64>,
    /// On the CPU: the cores one trial keeps busy (its CPU seconds over its
    /// seconds, the most any trial had); None: not measured (one each).
    pub cores_busy: Option<f64>,
    /// Host memory available now plus what our own running trials hold
    /// (theirs to keep), or `--memory-budget`.
    pub host_mib: f64,
    pub cores: usize,
    /// Each GPU, its free memory plus what our trials on it hold.
    pub gpus: Vec<Gpu>,
}

/// Trials at once for a program sweep: one until a trial has been measured,
/// then as many as fit `peak × 1.15` in each device's memory (on the CPU
/// also at most one per core), the cores split between them.
pub fn measured(m: &Measured) -> Plan {
    let Some(peak) = m.peak_mib else {
        return Plan {
            slots: if m.gpus.is_empty() {
                cpu_slots(1, m.cores)
            } else {
                vec![Slot {
                    gpu: Some(m.gpus[0].index),
                    threads: None,
                }]
            },
            why: vec!["auto: the first trial runs alone, to measure its peak".into()],
        };
    };
    let need = (peak * MEASURED_HEADROOM).max(1.0);
    if m.gpus.is_empty() {
        return on_cpu(m, peak, need);
    }
    let mut slots = Vec::new();
    let mut why = Vec::new();
    for g in &m.gpus {
        let n = ((g.free_mib as f64 / need).floor() as u64)
            .max(u64::from(slots.is_empty() && g.index == m.gpus[0].index));
        why.push(format!(
            "auto, measured: GPU {} ({}): {} MiB free (our trials' own counted as free) / {need:.0} MiB (largest peak {peak:.0} × {MEASURED_HEADROOM}) = {n} trial(s)",
            g.index, g.name, g.free_mib
        ));
        for _ in 0..n {
            slots.push(Slot {
                gpu: Some(g.index),
                threads: None,
            });
        }
    }
    Plan { slots, why }
}

/// `measured` on the CPU: the first copy needs the whole peak, each further
/// one what it adds (its anonymous memory); as many as the cores hold at
/// the cores a trial keeps busy.
fn on_cpu(m: &Measured, peak: f64, need: f64) -> Plan {
    let each = m
        .copy_mib
        .map_or(need, |u| (u * MEASURED_HEADROOM).max(1.0))
        .min(need);
    let by_memory = if need > m.host_mib {
        1
    } else {
        1 + ((m.host_mib - need) / each).floor() as u32
    };
    let cores = m.cores.max(1);
    let busy = m
        .cores_busy
        .map_or(1, |c| (c.round() as usize).clamp(1, cores));
    let by_cores = (cores / busy).max(1) as u32;
    let k = by_memory.min(by_cores);
    let binding = if by_memory < by_cores {
        "memory binds".to_string()
    } else if busy > 1 {
        format!("the cores bind: a trial keeps {busy} busy")
    } else {
        "the cores bind".to_string()
    };
    let slots = cpu_slots(k, m.cores);
    let copies = match m.copy_mib {
        Some(u) if each < need => format!(
            ", each further copy {each:.0} MiB (its anonymous memory, {u:.0} MiB × {MEASURED_HEADROOM})"
        ),
        _ => String::new(),
    };
    let busy_said = m
        .cores_busy
        .map_or(String::new(), |c| format!(" (a trial kept {c:.1} busy)"));
    Plan {
        why: vec![format!(
            "auto, measured: largest peak {peak:.0} MiB × {MEASURED_HEADROOM} = {need:.0} MiB for one trial{copies}; {:.0} MiB of host memory -> {by_memory}, {} core(s){busy_said} -> {by_cores}; {k} trial(s) at once ({binding}), {} thread(s) each",
            m.host_mib,
            m.cores,
            slots[0].threads.unwrap_or(1)
        )],
        slots,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, free: u64) -> Gpu {
        Gpu {
            index,
            name: "T".into(),
            total_mib: 24576,
            free_mib: free,
        }
    }

    #[test]
    fn seed_004_four_trials_of_six_gib_on_24_gib_is_three() {
        let p = plan(&[gpu(0, 24576)], 6 * 1024, 0.10, None, 16).unwrap();
        assert_eq!(p.slots.len(), 3, "{:?}", p.why);
        assert!(p.slots.iter().all(|s| s.gpu == Some(0)));
        let p = plan(&[gpu(0, 24576)], 6 * 1024, 0.10, Some(4), 16).unwrap();
        assert_eq!(p.slots.len(), 3);
    }

    #[test]
    fn trials_spread_over_gpus_with_room_and_none_fit_is_an_error() {
        let p = plan(&[gpu(0, 10000), gpu(1, 30000)], 8000, 0.0, None, 8).unwrap();
        let on = |i| p.slots.iter().filter(|s| s.gpu == Some(i)).count();
        assert_eq!((on(0), on(1)), (1, 3));
        assert!(plan(&[gpu(0, 1000)], 8000, 0.1, None, 8).is_err());
    }

    #[test]
    fn cpu_splits_the_cores() {
        let p = plan(&[], 100, 0.1, None, 8).unwrap();
        assert_eq!(p.slots.len(), 4);
        assert_eq!(p.slots[0].threads, Some(2));
        let p = plan(&[], 100, 0.1, Some(2), 2).unwrap();
        assert_eq!((p.slots.len(), p.slots[0].threads), (2, Some(1)));
    }

    #[test]
    fn measured_parallelism_follows_the_largest_peak() {
        let m = |peak: Option<f64>, host: f64, cores: usize| Measured {
            peak_mib: peak,
            copy_mib: None,
            cores_busy: None,
            host_mib: host,
            cores,
            gpus: Vec::new(),
        };
        assert_eq!(measured(&m(None, 10000.0, 8)).slots.len(), 1);
        // 1000 MiB of budget, 300 MiB peak -> 345 per trial -> 2 fit.
        let p = measured(&m(Some(300.0), 1000.0, 8));
        assert_eq!(p.slots.len(), 2, "{:?}", p.why);
        assert_eq!(p.slots[0].threads, Some(4));
        assert!(p.why[0].contains("memory binds"), "{:?}", p.why);
        // The cores bind when memory is plenty.
        let p = measured(&m(Some(300.0), 100000.0, 2));
        assert_eq!(p.slots.len(), 2);
        assert!(p.why[0].contains("the cores bind"));
        // Never fewer than one.
        assert_eq!(measured(&m(Some(5000.0), 1000.0, 8)).slots.len(), 1);
        let g = Measured {
            gpus: vec![gpu(0, 15000), gpu(1, 3000)],
            ..m(Some(4000.0), 0.0, 8)
        };
        let p = measured(&g);
        let on = |i| p.slots.iter().filter(|s| s.gpu == Some(i)).count();
        assert_eq!((on(0), on(1)), (3, 0), "{:?}", p.why);
    }

    #[test]
    fn copies_add_their_own_memory_and_a_busy_trial_takes_its_cores() {
        let m = |copy: Option<f64>, busy: Option<f64>| Measured {
            peak_mib: Some(700.0),
            copy_mib: copy,
            cores_busy: busy,
            host_mib: 3000.0,
            cores: 8,
            gpus: Vec::new(),
        };
        // The whole peak each: 805 MiB -> 3 in 3000.
        assert_eq!(measured(&m(None, None)).slots.len(), 3);
        // torch's libraries counted once: 805 + 115 each -> 1 + 19, the cores bind at 8.
        let p = measured(&m(Some(100.0), None));
        assert_eq!(p.slots.len(), 8, "{:?}", p.why);
        assert!(
            p.why[0].contains("each further copy 115 MiB"),
            "{:?}",
            p.why
        );
        // A trial that keeps 2 cores busy: 4 trials of 2 threads on 8 cores.
        let p = measured(&m(Some(100.0), Some(1.9)));
        assert_eq!(
            (p.slots.len(), p.slots[0].threads),
            (4, Some(2)),
            "{:?}",
            p.why
        );
        assert!(p.why[0].contains("a trial keeps 2 busy"), "{:?}", p.why);
        // A trial that keeps every core busy runs alone, with all of them.
        let p = measured(&Measured {
            cores: 2,
            ..m(Some(100.0), Some(1.97))
        });
        assert_eq!(
            (p.slots.len(), p.slots[0].threads),
            (1, Some(2)),
            "{:?}",
            p.why
        );
    }
}
