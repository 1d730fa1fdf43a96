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
}
