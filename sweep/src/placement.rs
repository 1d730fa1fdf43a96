//! How many trials run at once, and where: computed, not guessed (seed 004
//! cut 4 parallel trials to 3 by hand). Pure: the caller brings the GPUs'
//! free memory (memdiag's report) and a trial's estimated peak (cfgcheck's
//! estimate of the space's worst combination), or for a program its
//! measured peaks (`measured`).

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
/// trial per two cores and the cores are split between the trials (each
/// slot's `threads` the most a trial gets: `free_threads` gives it fewer
/// when other work keeps cores busy as it starts).
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
            "no GPU: {k} trial(s) at once on the CPU ({}); each gets up to {} of the {cpus} core(s) as libtorch threads, fewer when other work keeps cores busy as it starts",
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
            "GPU {} ({}) has {} MiB free of {}; less a {:.0}% margin, its {usable} MiB hold {n} trial(s) of {peak} MiB (the space's worst case)",
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
                "--parallel {k} asks for more trials than the {room} that fit, so {room} run at once"
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

/// A trial's threads as it starts: its share of the cores free then
/// (`cores::Watch`: idle, and what our own trials use), `at_once` trials
/// sharing them, at least 1 and at most `most` (its share of the cores
/// that exist). A core three-quarters idle counts as free, so the noise of
/// an idle machine does not cost a thread.
pub fn free_threads(free_cores: f64, at_once: usize, most: i32) -> i32 {
    let share = free_cores / at_once.max(1) as f64;
    ((share + 0.25).floor() as i32).clamp(1, most.max(1))
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
    /// The largest host peak (PSS) any trial reached so far, MiB; None
    /// until the first trial has run.
    pub peak_mib: Option<f64>,
    /// On GPUs: the largest GPU peak (NVML's) any trial reached, MiB; None:
    /// not measured.
    pub gpu_peak_mib: Option<f64>,
    /// What each copy past the first adds to host memory (the largest
    /// anonymous memory a trial had: the libraries every copy maps are file
    /// pages the copies share, counted once, in the first); None: the whole
    /// peak each.
    pub copy_mib: Option<f64>,
    /// The cores one trial keeps busy (its CPU seconds over its seconds,
    /// the most any trial had); None: not measured (one each).
    pub cores_busy: Option<f64>,
    /// Host memory available now plus what our own running trials hold
    /// (theirs to keep), or `--memory-budget`.
    pub host_mib: f64,
    pub cores: usize,
    /// Each GPU, its free memory plus what our trials on it hold.
    pub gpus: Vec<Gpu>,
}

/// Trials at once for a program sweep: one until a trial has been measured,
/// then as many as fit `peak × 1.15` in each GPU's memory (by its GPU
/// peak), within what the host's memory and cores hold (by its host peak
/// and the cores it keeps busy), the cores split between them.
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
    let host = on_host(m, peak);
    if m.gpus.is_empty() {
        return on_cpu(m, &host);
    }
    on_gpus(m, &host)
}

/// What the host holds at the measured peaks: copies by its memory (the
/// first copy needs the whole peak, each further one what it adds, its
/// anonymous memory) and by its cores (at the cores a trial keeps busy).
struct Host {
    by_memory: u32,
    by_cores: u32,
    /// The cores a trial keeps busy, rounded, at least one.
    busy: usize,
    /// The numbers, in words.
    said: String,
}

fn on_host(m: &Measured, peak: f64) -> Host {
    let need = (peak * MEASURED_HEADROOM).max(1.0);
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
    let copies = match m.copy_mib {
        Some(u) if each < need => format!(
            ", and each further copy {each:.0} MiB (its anonymous memory, {u:.0} MiB × {MEASURED_HEADROOM})"
        ),
        _ => String::new(),
    };
    let busy_said = m.cores_busy.map_or(String::new(), |c| {
        format!(" (a trial kept {c:.1} of them busy)")
    });
    Host {
        by_memory,
        by_cores,
        busy,
        said: format!(
            "a trial needs {need:.0} MiB (the largest peak so far, {peak:.0} MiB, × {MEASURED_HEADROOM}){copies}; {:.0} MiB of host memory holds {by_memory} such trial(s), and {} core(s) hold {by_cores}{busy_said}",
            m.host_mib, m.cores
        ),
    }
}

impl Host {
    /// What binds when the cores hold `by_cores` and memory `by_memory`.
    fn binding(&self, memory: &str) -> String {
        if self.by_memory < self.by_cores {
            format!("{memory} is the limit")
        } else if self.busy > 1 {
            format!("the cores are the limit: a trial keeps {} busy", self.busy)
        } else {
            "the cores are the limit".to_string()
        }
    }
}

/// `measured` on the CPU: as many as the host's memory and cores hold.
fn on_cpu(m: &Measured, host: &Host) -> Plan {
    let k = host.by_memory.min(host.by_cores);
    let slots = cpu_slots(k, m.cores);
    Plan {
        why: vec![format!(
            "auto, measured: {}; so {k} trial(s) at once ({}), each with up to {} thread(s)",
            host.said,
            host.binding("memory"),
            slots[0].threads.unwrap_or(1)
        )],
        slots,
    }
}

/// `measured` on GPUs: each GPU takes what its memory holds at the largest
/// GPU peak, the total within what the host holds, spread round-robin;
/// never none (the first GPU keeps one, as the first trial ran).
fn on_gpus(m: &Measured, host: &Host) -> Plan {
    let Some(gpu_peak) = m.gpu_peak_mib.filter(|p| *p > 0.0) else {
        let g = &m.gpus[0];
        return Plan {
            slots: gpu_slots(&[(g.index, 1)], 1, m.cores),
            why: vec![format!(
                "auto, measured: no GPU peak was measured (NVML attributed no memory to the trials), so 1 trial at once on GPU {}",
                g.index
            )],
        };
    };
    let need = (gpu_peak * MEASURED_HEADROOM).max(1.0);
    let mut why = Vec::new();
    let mut fits = Vec::new();
    for g in &m.gpus {
        let n = (g.free_mib as f64 / need).floor() as u32;
        why.push(format!(
            "auto, measured: GPU {} ({}) has {} MiB free (what our trials hold there counted as free), which holds {n} trial(s) of {need:.0} MiB (the largest GPU peak so far, {gpu_peak:.0} MiB, × {MEASURED_HEADROOM})",
            g.index, g.name, g.free_mib
        ));
        fits.push((g.index, n));
    }
    let room: u32 = fits.iter().map(|(_, n)| n).sum();
    let k = room.min(host.by_memory).min(host.by_cores);
    if k == 0 {
        let g = &m.gpus[0];
        why.push(format!(
            "auto, measured: no GPU has {need:.0} MiB free, so 1 trial at once on GPU {}, as the first ran",
            g.index
        ));
        return Plan {
            slots: gpu_slots(&[(g.index, 1)], 1, m.cores),
            why,
        };
    }
    let binding = if room == k {
        "GPU memory is the limit".to_string()
    } else {
        host.binding("host memory")
    };
    let slots = gpu_slots(&fits, k, m.cores);
    let used = fits
        .iter()
        .filter(|(i, _)| slots.iter().any(|s| s.gpu == Some(*i)))
        .count();
    why.push(format!(
        "auto, measured: on the host, {}; so {k} trial(s) at once on {used} GPU(s) ({binding}){}",
        host.said,
        match slots[0].threads {
            Some(t) => format!(", each with up to {t} CPU thread(s)"),
            None => String::new(),
        }
    ));
    Plan { slots, why }
}

/// `k` slots round-robin over the GPUs, each GPU at most its own count,
/// the cores split between them when they share the host.
pub fn gpu_slots(fits: &[(u32, u32)], k: u32, cores: usize) -> Vec<Slot> {
    let threads = gpu_threads(k, cores);
    let mut left = fits.to_vec();
    let mut slots = Vec::new();
    while (slots.len() as u32) < k && left.iter().any(|(_, n)| *n > 0) {
        for (index, n) in left.iter_mut() {
            if *n > 0 && (slots.len() as u32) < k {
                *n -= 1;
                slots.push(Slot {
                    gpu: Some(*index),
                    threads,
                });
            }
        }
    }
    slots
}

/// A GPU trial's CPU threads: its share of the cores when `k` trials share
/// the host; alone, torch's own default.
pub fn gpu_threads(k: u32, cores: usize) -> Option<i32> {
    (k > 1).then(|| (cores / k as usize).max(1) as i32)
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
    fn a_trial_takes_its_share_of_the_cores_free_as_it_starts() {
        // One trial, two cores another job keeps busy: one thread, not two.
        assert_eq!(free_threads(0.04, 1, 2), 1);
        // An idle machine's noise costs no thread.
        assert_eq!(free_threads(1.8, 1, 2), 2);
        // Another job on one core of two.
        assert_eq!(free_threads(1.0, 1, 2), 1);
        // 8 free of 16 shared by 2 trials: 4 each, never past the split.
        assert_eq!(free_threads(8.0, 2, 8), 4);
        assert_eq!(free_threads(16.0, 2, 8), 8);
        assert_eq!(free_threads(0.0, 4, 1), 1);
    }

    #[test]
    fn the_measured_line_is_a_sentence_with_its_numbers() {
        let p = measured(&Measured {
            peak_mib: Some(300.0),
            gpu_peak_mib: None,
            copy_mib: None,
            cores_busy: Some(0.9),
            host_mib: 22861.0,
            cores: 2,
            gpus: Vec::new(),
        });
        assert_eq!(
            p.why[0],
            "auto, measured: a trial needs 345 MiB (the largest peak so far, 300 MiB, × 1.15); 22861 MiB of host memory holds 66 such trial(s), and 2 core(s) hold 2 (a trial kept 0.9 of them busy); so 2 trial(s) at once (the cores are the limit), each with up to 1 thread(s)"
        );
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
            gpu_peak_mib: None,
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
        assert!(p.why[0].contains("memory is the limit"), "{:?}", p.why);
        // The cores bind when memory is plenty.
        let p = measured(&m(Some(300.0), 100000.0, 2));
        assert_eq!(p.slots.len(), 2);
        assert!(p.why[0].contains("the cores are the limit"));
        // Never fewer than one.
        assert_eq!(measured(&m(Some(5000.0), 1000.0, 8)).slots.len(), 1);
        let g = Measured {
            gpu_peak_mib: Some(4000.0),
            gpus: vec![gpu(0, 15000), gpu(1, 3000)],
            ..m(Some(4000.0), 100000.0, 8)
        };
        let p = measured(&g);
        let on = |i| p.slots.iter().filter(|s| s.gpu == Some(i)).count();
        assert_eq!((on(0), on(1)), (3, 0), "{:?}", p.why);
    }

    #[test]
    fn copies_add_their_own_memory_and_a_busy_trial_takes_its_cores() {
        let m = |copy: Option<f64>, busy: Option<f64>| Measured {
            peak_mib: Some(700.0),
            gpu_peak_mib: None,
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
            p.why[0].contains("and each further copy 115 MiB"),
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
        assert!(
            p.why[0].contains("the cores are the limit: a trial keeps 2 busy"),
            "{:?}",
            p.why
        );
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

    /// A program sweep on GPUs: host peak 2000 MiB (300 MiB a further
    /// copy), a trial keeping one core busy.
    fn on(gpus: Vec<Gpu>, gpu_peak: f64, host_mib: f64, cores: usize) -> Measured {
        Measured {
            peak_mib: Some(2000.0),
            gpu_peak_mib: Some(gpu_peak),
            copy_mib: Some(300.0),
            cores_busy: Some(1.0),
            host_mib,
            cores,
            gpus,
        }
    }

    fn per_gpu(p: &Plan, index: u32) -> usize {
        p.slots.iter().filter(|s| s.gpu == Some(index)).count()
    }

    #[test]
    fn small_trials_on_a_large_gpu_are_as_many_as_the_cores_hold() {
        // 81000 MiB / (600 × 1.15) = 117 fit in the GPU; 16 cores hold 16.
        let p = measured(&on(vec![gpu(0, 81000)], 600.0, 200000.0, 16));
        assert_eq!(p.slots.len(), 16, "{:?}", p.why);
        assert_eq!(per_gpu(&p, 0), 16);
        assert_eq!(p.slots[0].threads, Some(1));
        assert!(
            p.why[0].contains("which holds 117 trial(s) of 690 MiB"),
            "{:?}",
            p.why
        );
        assert!(
            p.why[1].contains(
                "so 16 trial(s) at once on 1 GPU(s) (the cores are the limit), each with up to 1 CPU thread(s)"
            ),
            "{:?}",
            p.why
        );
        // A trial that keeps 4 cores busy: 4.
        let p = measured(&Measured {
            cores_busy: Some(3.8),
            ..on(vec![gpu(0, 81000)], 600.0, 200000.0, 16)
        });
        assert_eq!(p.slots.len(), 4, "{:?}", p.why);
        assert!(p.why[1].contains("a trial keeps 4 busy"), "{:?}", p.why);
    }

    #[test]
    fn host_memory_binds_trials_on_a_gpu() {
        // 2300 MiB for the first, 345 each further: 1 + ⌊(3000 − 2300) / 345⌋ = 3.
        let p = measured(&on(vec![gpu(0, 81000)], 600.0, 3000.0, 16));
        assert_eq!(p.slots.len(), 3, "{:?}", p.why);
        assert!(
            p.why[1].contains("3000 MiB of host memory holds 3 such trial(s), and 16 core(s) hold 16 (a trial kept 1.0 of them busy)"),
            "{:?}",
            p.why
        );
        assert!(
            p.why[1].contains("(host memory is the limit)"),
            "{:?}",
            p.why
        );
        assert_eq!(p.slots[0].threads, Some(5));
    }

    #[test]
    fn each_gpu_takes_what_its_own_memory_holds() {
        // 2300 MiB a trial: 4 in 10000, 1 in 3000.
        let p = measured(&on(vec![gpu(0, 10000), gpu(1, 3000)], 2000.0, 200000.0, 16));
        assert_eq!((per_gpu(&p, 0), per_gpu(&p, 1)), (4, 1), "{:?}", p.why);
        assert!(
            p.why[2].contains("(GPU memory is the limit)"),
            "{:?}",
            p.why
        );
        // Fewer than fit: spread over the GPUs.
        let p = measured(&on(vec![gpu(0, 10000), gpu(1, 3000)], 2000.0, 200000.0, 2));
        assert_eq!((per_gpu(&p, 0), per_gpu(&p, 1)), (1, 1), "{:?}", p.why);
        assert!(p.why[2].contains("on 2 GPU(s)"), "{:?}", p.why);
    }

    #[test]
    fn a_gpu_too_small_takes_none_and_the_first_always_keeps_one() {
        // 5750 MiB a trial: none in GPU 0's 1000, 3 in GPU 1's 20000.
        let p = measured(&on(vec![gpu(0, 1000), gpu(1, 20000)], 5000.0, 200000.0, 16));
        assert_eq!((per_gpu(&p, 0), per_gpu(&p, 1)), (0, 3), "{:?}", p.why);
        // Room nowhere: one on the first GPU, as the first trial ran.
        let p = measured(&on(vec![gpu(3, 1000), gpu(1, 500)], 5000.0, 200000.0, 16));
        assert_eq!(p.slots.len(), 1);
        assert_eq!((p.slots[0].gpu, p.slots[0].threads), (Some(3), None));
        assert!(
            p.why[2].contains("no GPU has 5750 MiB free, so 1 trial at once on GPU 3"),
            "{:?}",
            p.why
        );
        // No GPU peak measured (NVML saw none): one, not a guess.
        let p = measured(&Measured {
            gpu_peak_mib: None,
            ..on(vec![gpu(0, 81000)], 600.0, 200000.0, 16)
        });
        assert_eq!(p.slots.len(), 1, "{:?}", p.why);
        // Before any trial was measured: the first alone on the first GPU.
        let p = measured(&Measured {
            peak_mib: None,
            ..on(vec![gpu(0, 81000)], 600.0, 200000.0, 16)
        });
        assert_eq!(
            p.slots,
            vec![Slot {
                gpu: Some(0),
                threads: None
            }]
        );
    }
}
