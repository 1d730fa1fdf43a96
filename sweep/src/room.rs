//! The memory a point would run in, read from the machine as it starts
//! (the memory model's `Room`, which refusal measures a prediction
//! against): on a GPU, its free memory as last read with what our trials
//! hold there; on the CPU, the smallest of `--memory-budget`, the host's
//! available memory with what our trials hold, the sweep's memory
//! cgroup's limit, and the address-space limit (RLIMIT_AS) the sweep runs
//! under, which its trials inherit (it counts virtual memory, above the
//! PSS the model predicts: a point refused by it could not fit even were
//! all of it resident).

use crate::memory_model::Room;
use crate::placement::Gpu;

/// The host's room for one more trial: `budget_mib` (`--memory-budget`)
/// when given, else what is available plus `ours_mib` (what our running
/// trials hold, theirs to keep but a trial alone would have), within the
/// limits the sweep runs under.
pub fn host(budget_mib: Option<f64>, ours_mib: f64) -> Option<Room> {
    let me = std::process::id();
    let mut rooms = vec![match budget_mib {
        Some(b) => Room {
            mib: b,
            what: "of --memory-budget".into(),
        },
        None => Room {
            mib: crate::measured::available_mib() + ours_mib,
            what: "of host memory available (with what the sweep's running trials hold)".into(),
        },
    }];
    if let Some(l) = supervise::oom_kills::limit_mib(me) {
        rooms.push(Room {
            mib: l,
            what: "the sweep's memory cgroup allows".into(),
        });
    }
    if let Some(l) = supervise::memory::address_limit_mib(me) {
        rooms.push(Room {
            mib: l,
            what: "the sweep's address-space limit (RLIMIT_AS, `ulimit -v`) allows".into(),
        });
    }
    Room::smallest(rooms)
}

/// GPU `index`'s room (`label`: "GPU 1", or a group's "GPUs 0,1", the
/// least free of them), from the GPUs as last read (their free memory with
/// what our trials hold there); None when it was not read.
pub fn gpu(gpus: &[Gpu], index: u32, label: &str) -> Option<Room> {
    let g = gpus.iter().find(|g| g.index == index)?;
    let each = if label.starts_with("GPUs ") {
        " each"
    } else {
        ""
    };
    Some(Room {
        mib: g.free_mib as f64,
        what: format!(
            "of {label}'s memory free{each} when last read (with what the sweep's trials hold there)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_or_the_available_memory_is_the_hosts_room() {
        let r = host(Some(1500.0), 0.0).unwrap();
        assert!(r.mib <= 1500.0, "{r:?}");
        let free = host(None, 100.0).unwrap();
        assert!(free.mib > 100.0, "{free:?}");
    }

    #[test]
    fn a_gpus_room_is_its_free_memory_as_read() {
        let gpus = [Gpu {
            index: 1,
            name: "T4".into(),
            total_mib: 15360,
            free_mib: 14000,
        }];
        assert_eq!(gpu(&gpus, 1, "GPU 1").unwrap().mib, 14000.0);
        assert_eq!(gpu(&gpus, 0, "GPU 0"), None);
    }
}
