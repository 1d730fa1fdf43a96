//! Where trials run: the slots placement gave (a GPU, or the CPU with a
//! thread count), the ones closed since (a trial ran out of memory while
//! it shared its device, or the measured peaks allow fewer), and whether
//! Slurm chose this worker's GPUs. `busy` is the slots of the running
//! trials, given by the caller, so that this knows nothing of trials.

use crate::groups::Groups;
use crate::placement::Slot;

pub(crate) struct Slots {
    pub slots: Vec<Slot>,
    pub closed: Vec<bool>,
    /// Each slot, whether it was taken away for crowding (it stays away
    /// from its device).
    pub crowded: Vec<bool>,
    /// Slurm chose this worker's GPUs: trials inherit CUDA_VISIBLE_DEVICES.
    pub inherit_gpus: bool,
    /// Trials of several ranks: a slot's GPU is its group's first.
    pub groups: Groups,
}

impl Slots {
    pub fn new(slots: Vec<Slot>, inherit_gpus: bool) -> Slots {
        Slots {
            closed: vec![false; slots.len()],
            crowded: vec![false; slots.len()],
            slots,
            inherit_gpus,
            groups: Groups::default(),
        }
    }

    /// The same, each GPU slot holding the group of GPUs it leads.
    pub fn with_groups(self, groups: Groups) -> Slots {
        Slots { groups, ..self }
    }

    /// A GPU slot's CUDA_VISIBLE_DEVICES (its GPU, or its group's GPUs);
    /// None on the CPU.
    pub fn devices(&self, slot: usize) -> Option<String> {
        self.slots[slot].gpu.map(|g| self.groups.devices(g))
    }

    /// The slots open now: the trials at once the sweep runs.
    pub fn open(&self) -> usize {
        self.closed.iter().filter(|c| !**c).count()
    }

    /// The slots open now on `gpu` (None: the CPU).
    pub fn open_on(&self, gpu: Option<u32>) -> usize {
        (0..self.slots.len())
            .filter(|i| !self.closed[*i] && self.slots[*i].gpu == gpu)
            .count()
    }

    /// The slots taken away for crowding on `gpu` (None: the CPU).
    pub fn crowded_on(&self, gpu: Option<u32>) -> usize {
        (0..self.slots.len())
            .filter(|i| self.crowded[*i] && self.slots[*i].gpu == gpu)
            .count()
    }

    /// One more open slot.
    pub fn add(&mut self, slot: Slot) {
        self.slots.push(slot);
        self.closed.push(false);
        self.crowded.push(false);
    }

    /// An open slot no running trial holds.
    pub fn free(&self, busy: &[usize]) -> Option<usize> {
        (0..self.slots.len()).find(|i| !self.closed[*i] && !busy.contains(i))
    }

    /// Trials on the device of `slot` (its GPU, or the CPU) among `busy`.
    pub fn crowd(&self, slot: usize, busy: &[usize]) -> usize {
        let gpu = self.slots[slot].gpu;
        busy.iter().filter(|b| self.slots[**b].gpu == gpu).count()
    }

    /// Gives back a slot closed for crowding: a trial re-run alone ran out
    /// of memory again, so it was too big, not crowded out. False: none
    /// was closed so.
    pub fn reopen(&mut self) -> bool {
        let Some(i) = (0..self.slots.len()).find(|i| self.crowded[*i]) else {
            return false;
        };
        self.closed[i] = false;
        self.crowded[i] = false;
        true
    }

    /// One trial fewer on the device of `slot` (a trial there ran out of
    /// memory while it shared it): `slot` closes, if another stays open.
    pub fn close(&mut self, slot: usize) {
        let open = self.open_on(self.slots[slot].gpu);
        if open > 1 {
            self.closed[slot] = true;
            self.crowded[slot] = true;
            common::say!(
                "train sweep: placement: {} trial(s) at once on {} from now on (a trial ran out of memory while it shared it)",
                open - 1,
                self.runs_on(slot)
            );
        }
    }

    /// Where a slot's trial runs, for its block.
    pub fn runs_on(&self, slot: usize) -> String {
        match (self.slots[slot].gpu, self.inherit_gpus) {
            (Some(g), _) => self.groups.label(g),
            (None, true) => format!(
                "the GPUs Slurm gave this task (CUDA_VISIBLE_DEVICES={})",
                std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default()
            ),
            (None, false) => "the CPU".into(),
        }
    }

    /// Whether every slot is on the CPU (a train trial is told `--device cpu`).
    pub fn all_cpu(&self) -> bool {
        self.slots.iter().all(|s| s.gpu.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(n: usize) -> Slots {
        Slots::new(
            (0..n)
                .map(|_| Slot {
                    gpu: None,
                    threads: Some(1),
                })
                .collect(),
            false,
        )
    }

    #[test]
    fn a_closed_or_busy_slot_is_not_free_and_the_last_open_one_stays() {
        let mut s = cpu(2);
        assert_eq!(s.free(&[]), Some(0));
        assert_eq!(s.free(&[0]), Some(1));
        assert_eq!(s.crowd(0, &[0, 1]), 2);
        s.close(1);
        assert_eq!(s.free(&[0]), None);
        s.close(0);
        assert!(!s.closed[0], "the last open slot stays open");
        assert_eq!(s.crowded_on(None), 1);
        // Given back: a re-run alone ran out of memory too.
        assert!(s.reopen());
        assert_eq!((s.closed[1], s.crowded_on(None)), (false, 0));
        assert!(!s.reopen(), "only what crowding took");
    }

    #[test]
    fn crowding_closes_a_slot_on_its_own_gpu() {
        let on = |gpu| Slot {
            gpu: Some(gpu),
            threads: None,
        };
        let mut s = Slots::new(vec![on(0), on(0), on(1)], false);
        // GPU 1's trial is not GPU 0's crowd.
        assert_eq!(s.crowd(0, &[0, 1, 2]), 2);
        assert_eq!(s.crowd(0, &[0, 2]), 1);
        s.close(1);
        assert_eq!((s.open_on(Some(0)), s.open_on(Some(1))), (1, 1));
        assert_eq!((s.crowded_on(Some(0)), s.crowded_on(Some(1))), (1, 0));
        // GPU 1's only slot stays.
        s.close(2);
        assert_eq!((s.open_on(Some(1)), s.crowded_on(Some(1))), (1, 0));
        // A slot closed for another reason is not given back for crowding.
        s.add(on(1));
        s.closed[3] = true;
        assert!(s.reopen());
        assert_eq!((s.closed[1], s.closed[3]), (false, true));
    }
}
