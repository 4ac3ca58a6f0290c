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
//!
//! With load tracking on (the schedulers' `per_vm_groups`) it also keeps the load
//! averages the group shares are computed from (hv/sched/pelt.rs): per vCPU, per slot
//! (the group runqueue's load average, which a vCPU's average joins and leaves as it
//! moves between pCPUs) and per VM (the task group's load average, `tg->load_avg`).

use super::pelt::LoadAvg;
use crate::sim::Nanos;
use rustc_hash::FxHashMap;
use std::cell::Cell;

/// The smallest group share (kernel/sched/sched.h MIN_SHARES).
pub(crate) const MIN_SHARES: u64 = 2;
/// A vCPU thread's weight in its group (nice 0, kernel/sched/sched.h NICE_0_LOAD).
const VCPU_LOAD: u64 = 1024;
/// No slot: a vCPU that never ran.
const NO_SLOT: Slot = Slot::MAX;

/// A slot: one VM's group on one pCPU.
pub(crate) type Slot = u32;

/// No pair (pCPU and VM ids are below 2^32 − 1).
const NO_PAIR: u64 = u64::MAX;

#[inline]
fn pair(p: u32, vm: usize) -> u64 {
    (u64::from(p) << 32) | vm as u64
}

#[derive(Clone, Debug)]
pub(crate) struct GroupSlots {
    /// (pCPU, VM) → slot, for every VM that has had a runnable vCPU on that pCPU.
    by_pair: FxHashMap<u64, Slot>,
    /// The pair looked up last and its slot: one scheduler operation looks the same
    /// pair up several times (leaf runqueue, group entity, shares), and a slot never
    /// changes once allocated, so this is never stale. (NO_PAIR: none yet.)
    last: Cell<(u64, Slot)>,
    /// Per slot: its VM, the VM's runnable vCPUs on the slot's pCPU and its load
    /// average.
    slots: Vec<SlotRec>,
    /// Per pCPU: the VMs with runnable vCPUs there, in the order they became so.
    active: Vec<Vec<u32>>,
    /// Load averages are kept (group scheduling is on).
    track_load: bool,
    /// The scheduler's clock (rq_clock): the latest time it was called at, in ns.
    clock: u64,
    /// Per VM: the task group's load average over all pCPUs (tg->load_avg).
    vm_load: Vec<LoadAvg>,
    /// Per vCPU: its own load average and the slot it is attached to.
    vcpus: Vec<VcpuRec>,
}

/// A slot's state, together in one record (32 bytes, aligned): adding or removing a
/// vCPU reads and writes all of it, and on a large host separate arrays were a cache
/// miss each.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(32))]
struct SlotRec {
    /// The group runqueue's load average (cfs_rq->avg.load_avg), its input being the
    /// runnable vCPUs' weight there (kept only with load tracking).
    load: LoadAvg,
    vm: u32,
    /// The VM's runnable vCPUs on the slot's pCPU.
    nr: u32,
}

/// A vCPU's load average and the slot it is attached to, in one record (see SlotRec).
#[derive(Clone, Copy, Debug)]
#[repr(align(32))]
struct VcpuRec {
    load: LoadAvg,
    slot: Slot,
}

impl GroupSlots {
    /// Slots for `pcpus` pCPUs; with `track_load`, load averages for `vcpus` vCPUs in
    /// `vms` VMs.
    pub(crate) fn new(pcpus: u32, vcpus: usize, vms: usize, track_load: bool) -> GroupSlots {
        let (vcpus, vms) = if track_load { (vcpus, vms) } else { (0, 0) };
        GroupSlots {
            by_pair: FxHashMap::default(),
            last: Cell::new((NO_PAIR, NO_SLOT)),
            slots: Vec::new(),
            active: vec![Vec::new(); pcpus as usize],
            track_load,
            clock: 0,
            vm_load: vec![LoadAvg::default(); vms],
            vcpus: vec![
                VcpuRec {
                    load: LoadAvg::default(),
                    slot: NO_SLOT,
                };
                vcpus
            ],
        }
    }

    /// The scheduler was called at `now` (update_rq_clock); time never goes back.
    #[inline]
    pub(crate) fn set_clock(&mut self, now: Nanos) {
        self.clock = self.clock.max(now.0);
    }

    /// The slot of `vm` on `p`, if it was ever used.
    #[inline]
    pub(crate) fn get(&self, p: u32, vm: usize) -> Option<Slot> {
        let key = pair(p, vm);
        let (k, s) = self.last.get();
        if k == key {
            return Some(s);
        }
        let s = self.by_pair.get(&key).copied()?;
        self.last.set((key, s));
        Some(s)
    }

    /// Remembers that `vm`'s slot on `p` is `s` (known to the caller), for the lookups
    /// that follow.
    #[inline]
    pub(crate) fn remember(&self, p: u32, vm: usize, s: Slot) {
        self.last.set((pair(p, vm), s));
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
        self.slots[s as usize].vm as usize
    }

    /// Runnable vCPUs of `vm` on `p`.
    #[inline]
    pub(crate) fn nr(&self, p: u32, vm: usize) -> u32 {
        self.get(p, vm).map_or(0, |s| self.slots[s as usize].nr)
    }

    /// The VMs with runnable vCPUs on `p`.
    pub(crate) fn active(&self, p: u32) -> &[u32] {
        &self.active[p as usize]
    }

    /// vCPU `v` of `vm` became runnable on `p`. Returns its slot, and whether the slot is
    /// new (the caller then creates its group entity and runqueue, in slot order).
    pub(crate) fn add(&mut self, p: u32, vm: usize, v: usize) -> (Slot, bool) {
        let (s, new) = self.ensure(p, vm);
        self.slots[s as usize].nr += 1;
        if self.slots[s as usize].nr == 1 {
            self.active[p as usize].push(vm as u32);
        }
        if self.track_load {
            self.load_in(s, vm, v);
        }
        (s, new)
    }

    /// Load tracking for a vCPU becoming runnable on slot `s`: arriving from another
    /// pCPU it brings its average along (migrate_task_rq_fair removes it from the old
    /// group runqueue, attach_entity_load_avg adds it to the new one); then its own, the
    /// slot's and the VM's inputs grow by its weight (enqueue_entity).
    fn load_in(&mut self, s: Slot, vm: usize, v: usize) {
        let now = self.clock;
        let me = &mut self.vcpus[v].load;
        me.set_input(now, VCPU_LOAD);
        let mine = me.avg();
        let old = self.vcpus[v].slot;
        if old != s {
            if old != NO_SLOT {
                let o = &mut self.slots[old as usize].load;
                o.update(now);
                o.detach(mine);
            }
            self.vcpus[v].slot = s;
        }
        let here = &mut self.slots[s as usize].load;
        here.set_input(now, here.input() + VCPU_LOAD);
        if old != s {
            here.attach(mine);
        }
        let all = &mut self.vm_load[vm];
        all.set_input(now, all.input() + VCPU_LOAD);
    }

    /// calc_group_shares() (kernel/sched/fair.c, Linux 4.15 and later): the share of the
    /// VM's `tg_shares` its group entity on `p` weighs, its load here over the group's
    /// load everywhere. The load here is the larger of the runnable weight and its
    /// average; elsewhere it is the average, so a VM whose vCPUs ran on other pCPUs a
    /// moment ago still counts them. At least MIN_SHARES, at most
    /// `tg_shares`. The kernel sums stale per-pCPU contributions into tg->load_avg (each
    /// refreshed when it moved by 1/64, blocked ones when load balancing decays them);
    /// here the VM's average is exact at every read.
    pub(crate) fn shares(&mut self, p: u32, vm: usize, tg_shares: u64) -> u64 {
        debug_assert!(self.track_load, "group shares without load tracking");
        let now = self.clock;
        let s = self.of(p, vm) as usize;
        let here = &mut self.slots[s].load;
        here.update(now);
        let (own, load) = (here.avg(), here.avg().max(here.input()));
        let all = &mut self.vm_load[vm];
        all.update(now);
        let tg_weight = all.avg().saturating_sub(own) + load;
        (tg_shares * load)
            .checked_div(tg_weight)
            .map_or(MIN_SHARES, |w| w.clamp(MIN_SHARES, tg_shares))
    }

    /// The slot of `vm` on `p`, allocated if it was never used (and then `true`).
    pub(crate) fn ensure(&mut self, p: u32, vm: usize) -> (Slot, bool) {
        match self.get(p, vm) {
            Some(s) => (s, false),
            None => {
                let s = self.slots.len() as Slot;
                self.slots.push(SlotRec {
                    vm: vm as u32,
                    ..SlotRec::default()
                });
                self.by_pair.insert(pair(p, vm), s);
                (s, true)
            }
        }
    }

    /// vCPU `v` of `vm` left `p`: blocked, or `moving` to another pCPU. Returns its slot
    /// and the runnable vCPUs of `vm` left there. A blocked vCPU's load average stays
    /// attached to the slot, decaying, until it becomes runnable elsewhere (a blocked
    /// task's load, dequeue_entity); a moving one takes it along at once (detach_task).
    pub(crate) fn remove(&mut self, p: u32, vm: usize, v: usize, moving: bool) -> (Slot, u32) {
        let s = self.of(p, vm);
        let n = &mut self.slots[s as usize].nr;
        *n -= 1;
        let left = *n;
        if left == 0 {
            self.active[p as usize].retain(|x| *x != vm as u32);
        }
        if self.track_load {
            let now = self.clock;
            self.vcpus[v].load.set_input(now, 0);
            let here = &mut self.slots[s as usize].load;
            here.set_input(now, here.input() - VCPU_LOAD);
            if moving {
                here.detach(self.vcpus[v].load.avg());
                self.vcpus[v].slot = NO_SLOT;
            }
            let all = &mut self.vm_load[vm];
            all.set_input(now, all.input() - VCPU_LOAD);
        }
        (s, left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_allocated_on_first_use_and_kept() {
        let mut g = GroupSlots::new(4, 0, 0, false);
        assert_eq!(g.get(2, 7), None);
        assert_eq!(g.nr(2, 7), 0);
        assert_eq!(g.add(2, 7, 0), (0, true));
        assert_eq!(g.add(2, 7, 0), (0, false));
        assert_eq!(g.add(1, 7, 0), (1, true));
        assert_eq!(g.nr(2, 7), 2);
        assert_eq!(g.active(2), &[7]);
        assert_eq!(g.remove(2, 7, 0, false), (0, 1));
        assert_eq!(g.remove(2, 7, 0, false), (0, 0));
        assert!(g.active(2).is_empty());
        // The emptied slot is kept: the VM's group on pCPU 2 keeps its identity.
        assert_eq!(g.add(2, 7, 0), (0, false));
        assert_eq!(g.vm(1), 7);
    }

    /// The remembered last lookup never answers for another pair.
    #[test]
    fn repeated_and_alternating_lookups_find_their_own_slots() {
        let mut g = GroupSlots::new(8, 0, 0, false);
        let pairs = [(0u32, 0usize), (0, 1), (1, 0), (7, 3)];
        for &(p, vm) in &pairs {
            g.ensure(p, vm);
        }
        for _ in 0..2 {
            for (i, &(p, vm)) in pairs.iter().enumerate() {
                assert_eq!(g.get(p, vm), Some(i as Slot));
                assert_eq!(g.get(p, vm), Some(i as Slot));
                assert_eq!(g.get(p + 1, vm + 5), None);
            }
        }
    }

    const MS: u64 = 1_000_000;

    /// VM 0 with 4 vCPUs, one on each of 4 pCPUs, all runnable from 0 to `until`.
    fn four_busy(until: u64) -> GroupSlots {
        let mut g = GroupSlots::new(4, 4, 1, true);
        for v in 0..4 {
            g.add(v as u32, 0, v);
        }
        g.set_clock(Nanos(until));
        g
    }

    #[test]
    fn saturated_groups_split_the_shares_evenly() {
        let mut g = four_busy(2_000 * MS);
        for p in 0..4 {
            assert_eq!(g.shares(p, 0, 1024), 256);
        }
    }

    #[test]
    fn load_that_just_left_still_counts_then_decays() {
        // Three of the four vCPUs block: the one left weighs a quarter of the shares at
        // first (the others' load averages are still full), and nearly all of them once
        // those have decayed (PELT half-life ≈ 33.5 ms).
        let mut g = four_busy(2_000 * MS);
        for v in 1..4 {
            g.remove(v as u32, 0, v, false);
        }
        assert_eq!(g.shares(0, 0, 1024), 256);
        g.set_clock(Nanos(2_000 * MS + 34 * MS));
        let half = g.shares(0, 0, 1024);
        assert!((400..=420).contains(&half), "one half-life later: {half}");
        g.set_clock(Nanos(2_000 * MS + 400 * MS));
        assert!(g.shares(0, 0, 1024) >= 1020);
        // The blocked vCPUs' groups keep a decaying load of their own.
        assert!(g.shares(1, 0, 1024) < 10);
    }

    #[test]
    fn a_vcpu_brings_its_load_when_it_moves() {
        let mut g = four_busy(2_000 * MS);
        // vCPU 3 blocks on pCPU 3 and wakes at once on pCPU 0: its average moves with it,
        // so pCPU 0's group holds two vCPUs' load and pCPU 3's holds none.
        g.remove(3, 0, 3, false);
        g.add(0, 0, 3);
        assert_eq!(g.shares(0, 0, 1024), 512);
        assert_eq!(g.shares(3, 0, 1024), MIN_SHARES);
        // Moved by load balancing (runnable throughout), it takes its load at once.
        g.remove(0, 0, 3, true);
        g.add(3, 0, 3);
        assert_eq!(g.shares(0, 0, 1024), 256);
        assert_eq!(g.shares(3, 0, 1024), 256);
    }

    use proptest::prelude::*;

    proptest! {
        /// Random wake-ups, blocks and moves of one VM's vCPUs over 4 pCPUs: every group
        /// weight stays within [MIN_SHARES, shares], and the load averages attached to
        /// the slots add up to the VM's own average (loads are moved, never made or lost,
        /// beyond a unit of rounding per step).
        #[test]
        fn group_load_is_conserved(
            steps in prop::collection::vec((0usize..6, 0u32..4, 1u64..20_000_000, any::<bool>()), 1..120),
        ) {
            let mut g = GroupSlots::new(4, 6, 1, true);
            let mut on: Vec<Option<u32>> = vec![None; 6];
            let mut now = 0;
            for (v, p, dt, moving) in &steps {
                now += dt;
                g.set_clock(Nanos(now));
                match on[*v] {
                    None => {
                        g.add(*p, 0, *v);
                        on[*v] = Some(*p);
                    }
                    Some(q) if *moving && q != *p => {
                        g.remove(q, 0, *v, true);
                        g.add(*p, 0, *v);
                        on[*v] = Some(*p);
                    }
                    Some(q) => {
                        g.remove(q, 0, *v, false);
                        on[*v] = None;
                    }
                }
                for q in 0..4 {
                    if g.get(q, 0).is_some() {
                        let w = g.shares(q, 0, 1024);
                        prop_assert!((MIN_SHARES..=1024).contains(&w), "weight {w}");
                    }
                }
            }
            let now = g.clock;
            let mut slots = 0;
            for s in 0..g.slots.len() {
                g.slots[s].load.update(now);
                slots += g.slots[s].load.avg();
            }
            g.vm_load[0].update(now);
            let vm = g.vm_load[0].avg();
            let slack = 3 * steps.len() as u64 + 8;
            prop_assert!(slots.abs_diff(vm) <= slack, "slots {slots} vs VM {vm}");
        }
    }
}
