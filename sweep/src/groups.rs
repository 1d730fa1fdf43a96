//! GPUs in groups for trials that are jobs of several ranks (torchrun
//! `--nproc_per_node N`, or the space's `ranks_per_trial: N`): each trial
//! gets N GPUs of its own through CUDA_VISIBLE_DEVICES, one per rank. The
//! GPUs memdiag sees are cut into groups of N in index order (the GPUs
//! left over stay unused), and each group is placed as one GPU: its first
//! GPU's index, the least free and total memory of its members (a rank on
//! each holds about the same), so the rest of placement (how many trials
//! at once, room, packing) works on groups unchanged. Pure.

use crate::placement::Gpu;
use std::collections::BTreeMap;

/// The groups, by their first GPU's index; empty where a trial takes one
/// GPU (each GPU its own group).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Groups {
    members: BTreeMap<u32, Vec<u32>>,
}

impl Groups {
    /// `gpus` (memdiag's, in any order) in groups of `ranks`, with why, or
    /// why not (more ranks than GPUs: both numbers). `from` says where
    /// the number of ranks came from.
    pub fn of(gpus: &[Gpu], ranks: u32, from: &str) -> Result<(Groups, Vec<String>), String> {
        if ranks <= 1 || gpus.is_empty() {
            return Ok((Groups::default(), Vec::new()));
        }
        let n = ranks as usize;
        if n > gpus.len() {
            return Err(format!(
                "each trial starts {ranks} ranks ({from}) and memdiag sees {} GPU(s): a rank needs a GPU of its own, so a trial needs {ranks}",
                gpus.len()
            ));
        }
        let mut indexes: Vec<u32> = gpus.iter().map(|g| g.index).collect();
        indexes.sort_unstable();
        let members: BTreeMap<u32, Vec<u32>> = indexes
            .chunks_exact(n)
            .map(|c| (c[0], c.to_vec()))
            .collect();
        let groups = Groups { members };
        let mut why = vec![format!(
            "each trial starts {ranks} ranks ({from}): the {} GPU(s) in {} group(s) of {ranks} ({}), a trial given a group of its own (CUDA_VISIBLE_DEVICES), a rank on each GPU",
            gpus.len(),
            groups.members.len(),
            groups
                .members
                .values()
                .map(|m| join(m))
                .collect::<Vec<_>>()
                .join("; ")
        )];
        let left = &indexes[groups.members.len() * n..];
        if !left.is_empty() {
            why.push(format!(
                "GPU(s) {} left unused: fewer than the {ranks} a trial needs",
                join(left)
            ));
        }
        Ok((groups, why))
    }

    /// `gpus` (a fresh reading) as the groups: one entry a group, at its
    /// first GPU's index, with the least free and total memory of its
    /// members; a group with a member not read is left out. Unchanged
    /// without groups.
    pub fn apply(&self, gpus: &[Gpu]) -> Vec<Gpu> {
        if self.members.is_empty() {
            return gpus.to_vec();
        }
        self.members
            .iter()
            .filter_map(|(lead, members)| {
                let read: Vec<&Gpu> = members
                    .iter()
                    .map(|m| gpus.iter().find(|g| g.index == *m))
                    .collect::<Option<_>>()?;
                Some(Gpu {
                    index: *lead,
                    name: format!(
                        "{}{GROUPED} {}: the least free of them",
                        read[0].name,
                        join(&members[1..])
                    ),
                    total_mib: read.iter().map(|g| g.total_mib).min()?,
                    free_mib: read.iter().map(|g| g.free_mib).min()?,
                })
            })
            .collect()
    }

    /// CUDA_VISIBLE_DEVICES for a trial on `gpu` (a group's first GPU).
    pub fn devices(&self, gpu: u32) -> String {
        match self.members.get(&gpu) {
            Some(m) => join(m),
            None => gpu.to_string(),
        }
    }

    /// Where a trial on `gpu` runs, in words: "GPU 2", "GPUs 0,1".
    pub fn label(&self, gpu: u32) -> String {
        match self.members.get(&gpu) {
            Some(m) => format!("GPUs {}", join(m)),
            None => format!("GPU {gpu}"),
        }
    }
}

/// What a group's name says after its first GPU's.
const GROUPED: &str = ", as one group with GPU(s)";

/// Whether `gpu` is a group placed as one (`Groups::apply`).
pub fn is_group(gpu: &Gpu) -> bool {
    gpu.name.contains(GROUPED)
}

fn join(indexes: &[u32]) -> String {
    let words: Vec<String> = indexes.iter().map(u32::to_string).collect();
    words.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, free_mib: u64) -> Gpu {
        Gpu {
            index,
            name: "NVIDIA T4".into(),
            total_mib: 15360,
            free_mib,
        }
    }

    #[test]
    fn gpus_are_cut_in_groups_by_index_and_the_rest_is_said_unused() {
        let gpus = [gpu(2, 9000), gpu(0, 15000), gpu(1, 12000)];
        let (g, why) = Groups::of(&gpus, 2, "--nproc_per_node 2").unwrap();
        assert_eq!(g.devices(0), "0,1");
        assert_eq!(g.label(0), "GPUs 0,1");
        assert!(
            why[0].contains("the 3 GPU(s) in 1 group(s) of 2 (0,1)"),
            "{why:?}"
        );
        assert_eq!(
            why[1],
            "GPU(s) 2 left unused: fewer than the 2 a trial needs"
        );
        // Placed as one GPU: the least free of the two.
        let placed = g.apply(&gpus);
        assert_eq!(placed.len(), 1);
        assert_eq!((placed[0].index, placed[0].free_mib), (0, 12000));
        assert!(placed[0].name.contains("as one group with GPU(s) 1"));
        assert!(is_group(&placed[0]) && !is_group(&gpus[0]));
        // A group with a member not read again is not placed.
        assert!(g.apply(&[gpu(0, 15000)]).is_empty());
    }

    #[test]
    fn more_ranks_than_gpus_is_refused_with_both_numbers() {
        let e = Groups::of(&[gpu(0, 15000), gpu(1, 15000)], 4, "--nproc_per_node 4").unwrap_err();
        assert!(
            e.starts_with(
                "each trial starts 4 ranks (--nproc_per_node 4) and memdiag sees 2 GPU(s)"
            ),
            "{e}"
        );
    }

    #[test]
    fn one_rank_a_trial_or_no_gpu_leaves_the_gpus_as_they_are() {
        let gpus = [gpu(0, 15000), gpu(1, 9000)];
        let (g, why) = Groups::of(&gpus, 1, "torchrun's default").unwrap();
        assert!(why.is_empty());
        assert_eq!(g.apply(&gpus), gpus.to_vec());
        assert_eq!((g.devices(1), g.label(1)), ("1".into(), "GPU 1".into()));
        // On the CPU (gloo), ranks run without GPUs.
        assert_eq!(Groups::of(&[], 4, "x").unwrap().0, Groups::default());
    }
}
