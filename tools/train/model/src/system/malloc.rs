//! glibc malloc's thresholds for a training process, set once at the start
//! of `train-model`'s main, before libtorch allocates its first tensor.
//!
//! Why: with glibc's defaults (a dynamic mmap threshold of at most 32 MiB
//! and a trim threshold of twice it), every step's large activations are
//! either mmapped and unmapped, or carved from the heap top and handed back
//! by `brk` when the step frees them (issue 26 counted about 14 `brk` calls
//! and 6970 page faults per step on configs/demo_cpu.yaml, against 0.2 and
//! 2830 in PyTorch's process), so the next step faults the same pages in
//! again: about 10 ms a step of kernel time. A 256 MiB mmap threshold keeps
//! activations on the heap and a 1 GiB trim threshold keeps freed heap
//! mapped for the next step. Both are needed: setting the trim threshold
//! alone also freezes the mmap threshold at its 128 KiB start, which is
//! worse. The cost is resident memory: freed heap stays resident and
//! fragments, so peak RSS figures are higher (45-54 MiB on the demo;
//! +26% on the seeds' full model, whose step it makes 0.72× as long:
//! docs/guide/train.md, "Speed on the CPU").
//!
//! The user's own choice wins: with MALLOC_MMAP_THRESHOLD_,
//! MALLOC_TRIM_THRESHOLD_ or a glibc.malloc tunable in GLIBC_TUNABLES in
//! the environment, glibc's reading of them stands and nothing is changed
//! (`GLIBC_TUNABLES=glibc.malloc.perturb=0`, perturb's default, keeps
//! glibc's own thresholds: how the benchmarks measure train without this).

/// The mmap threshold: allocations below it come from the heap.
pub const MMAP_THRESHOLD: i32 = 256 << 20;
/// The trim threshold: free heap above it at the top is given back.
pub const TRIM_THRESHOLD: i32 = 1 << 30;

/// Whether the environment already chose malloc's thresholds.
pub fn user_chose(var: impl Fn(&str) -> Option<String>) -> bool {
    var("MALLOC_MMAP_THRESHOLD_").is_some()
        || var("MALLOC_TRIM_THRESHOLD_").is_some()
        || var("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc."))
}

/// Sets the two thresholds unless the environment chose them; returns
/// whether it did. Only glibc has mallopt's M_MMAP_THRESHOLD and
/// M_TRIM_THRESHOLD; elsewhere (musl, macOS) this does nothing.
pub fn keep_heap_for_training() -> bool {
    if user_chose(|k| std::env::var(k).ok()) {
        return false;
    }
    set_thresholds()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> bool {
    // SAFETY: mallopt only changes malloc's parameters; it is called first
    // thing in main, before any thread that allocates is started by us.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_setting_wins() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(!user_chose(env(&[])));
        assert!(!user_chose(env(&[("GLIBC_TUNABLES", "glibc.rtld.nns=2")])));
        assert!(user_chose(env(&[("MALLOC_TRIM_THRESHOLD_", "0")])));
        assert!(user_chose(env(&[("MALLOC_MMAP_THRESHOLD_", "65536")])));
        assert!(user_chose(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.trim_threshold=1"
        )])));
    }
}
