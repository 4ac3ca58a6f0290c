//! Per-(pCPU, VM) bookkeeping of the host schedulers' task groups (CFS and EEVDF with
//! `per_vm_groups`): a slot is allocated the first time a VM has a runnable vCPU on a
//! pCPU and kept from then on (a group entity keeps its vruntime or lag while its group
//! runqueue is empty, as the kernel's per-CPU group entities do). Memory grows with the
//! (pCPU, VM) pairs in use, not with pCPUs × VMs: a 1,024-pCPU host of 1,024 VMs would
//! otherwise hold a million group entities and runqueues.
//!
//! A slot is found by hashing (pCPU, VM): a pCPU's list of VMs that ever ran there grows
//! over a long run as load balancing moves vCPUs around (hundreds of VMs per pCPU on a
//! 1,024-pCPU host after a second), and a scan of it made every event slower as the run
//! went on. FxHash (rustc-hash) because the key is two integers and the map is read
//! several times per event; its order is never iterated, so results do not depend on it.

use rustc_hash::FxHashMap;

/// A slot: one VM's group on one pCPU.
pub(crate) type Slot = u32;

#[inline]
fn pair(p: u32, vm: usize) -> u64 {
    (u64::from(p) << 32) | vm as u64
}

#[derive(Clone, Debug)]
pub(crate) struct GroupSlots {
    /// (pCPU, VM) → slot, for every VM that has had a runnable vCPU on that pCPU.
    by_pair: FxHashMap<u64, Slot>,
    /// Per slot: its VM, and the VM's runnable vCPUs on the slot's pCPU.
    slot_vm: Vec<u32>,
    nr: Vec<u32>,
    /// Per pCPU: the VMs with runnable vCPUs there, in the order they became so.
    active: Vec<Vec<u32>>,
}

impl GroupSlots {
    pub(crate) fn new(pcpus: u32) -> GroupSlots {
        GroupSlots {
            by_pair: FxHashMap::default(),
            slot_vm: Vec::new(),
            nr: Vec::new(),
            active: vec![Vec::new(); pcpus as usize],
        }
    }

    /// The slot of `vm` on `p`, if it was ever used.
    #[inline]
    pub(crate) fn get(&self, p: u32, vm: usize) -> Option<Slot> {
        self.by_pair.get(&pair(p, vm)).copied()
    }

    /// The slot of `vm` on `p` where one must exist (a vCPU of `vm` was runnable there).
    #[inline]
    pub(crate) fn of(&self, p: u32, vm: usize) -> Slot {
        self.get(p, vm)
            .unwrap_or_else(|| unreachable!("VM {vm} has no group on pCPU {p}"))
    }

    /// The VM of a slot.
    #[inline]
    pub(crate) fn vm(&self, s: Slot) -> usize {
        self.slot_vm[s as usize] as usize
    }

    /// Runnable vCPUs of `vm` on `p`.
    #[inline]
    pub(crate) fn nr(&self, p: u32, vm: usize) -> u32 {
        self.get(p, vm).map_or(0, |s| self.nr[s as usize])
    }

    /// The VMs with runnable vCPUs on `p`.
    pub(crate) fn active(&self, p: u32) -> &[u32] {
        &self.active[p as usize]
    }

    /// A vCPU of `vm` became runnable on `p`. Returns its slot, and whether the slot is
    /// new (the caller then creates its group entity and runqueue, in slot order).
    pub(crate) fn add(&mut self, p: u32, vm: usize) -> (Slot, bool) {
        let (s, new) = self.ensure(p, vm);
        self.nr[s as usize] += 1;
        if self.nr[s as usize] == 1 {
            self.active[p as usize].push(vm as u32);
        }
        (s, new)
    }

    /// The slot of `vm` on `p`, allocated if it was never used (and then `true`).
    pub(crate) fn ensure(&mut self, p: u32, vm: usize) -> (Slot, bool) {
        match self.get(p, vm) {
            Some(s) => (s, false),
            None => {
                let s = self.slot_vm.len() as Slot;
                self.slot_vm.push(vm as u32);
                self.nr.push(0);
                self.by_pair.insert(pair(p, vm), s);
                (s, true)
            }
        }
    }

    /// A vCPU of `vm` left `p` (blocked or migrated). Returns its slot and the runnable
    /// vCPUs of `vm` left there.
    pub(crate) fn remove(&mut self, p: u32, vm: usize) -> (Slot, u32) {
        let s = self.of(p, vm);
        let n = &mut self.nr[s as usize];
        *n -= 1;
        let left = *n;
        if left == 0 {
            self.active[p as usize].retain(|x| *x != vm as u32);
        }
        (s, left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_allocated_on_first_use_and_kept() {
        let mut g = GroupSlots::new(4);
        assert_eq!(g.get(2, 7), None);
        assert_eq!(g.nr(2, 7), 0);
        assert_eq!(g.add(2, 7), (0, true));
        assert_eq!(g.add(2, 7), (0, false));
        assert_eq!(g.add(1, 7), (1, true));
        assert_eq!(g.nr(2, 7), 2);
        assert_eq!(g.active(2), &[7]);
        assert_eq!(g.remove(2, 7), (0, 1));
        assert_eq!(g.remove(2, 7), (0, 0));
        assert!(g.active(2).is_empty());
        // The emptied slot is kept: the VM's group on pCPU 2 keeps its identity.
        assert_eq!(g.add(2, 7), (0, false));
        assert_eq!(g.vm(1), 7);
    }
}
