//! Strict co-scheduling (gang scheduling, Ousterhout, ICDCS 1982). A VM's runnable vCPUs start
//! together on distinct pCPUs and stop together when the gang's slice ends. A gang
//! starts only when enough pCPUs are free for all its runnable vCPUs; pCPUs that cannot
//! fit a waiting gang stay idle (CPU fragmentation). Free pCPUs are filled in fairness
//! order: the VM with the least weighted run time first, and a smaller gang may start
//! ahead of one that does not fit (backfill) unless that one has waited a whole slice.
//! A member that wakes while its gang runs joins it on a free pCPU, else it waits for
//! the next round. Caps are not enforced.

use super::{HostScheduler, SchedSetup, StopReason, WakePlacement};
use crate::host::cpumask::CpuMask;
use crate::scenario::GangParams;
use crate::sim::{Nanos, PcpuId, VcpuId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VState {
    Blocked,
    Waiting,
    /// Chosen to run on this pCPU, which reschedules now.
    Planned(u32),
    Running(u32),
}

#[derive(Clone, Debug)]
struct GangVm {
    weight: u64,
    /// Run time scaled by 256 / weight (the fairness order).
    vtime: u64,
    running: bool,
    gang_end: Nanos,
    /// Since when it has waited, not running, with a runnable vCPU.
    waiting_since: Nanos,
    vcpus: Vec<VcpuId>,
}

#[derive(Clone, Debug, Default)]
struct GangPcpu {
    curr: Option<VcpuId>,
    plan: Option<VcpuId>,
    /// Its running vCPU's gang has ended: it is free for planning.
    releasing: bool,
}

pub struct Gang {
    slice: Nanos,
    setup: SchedSetup,
    st: Vec<VState>,
    last: Vec<u32>,
    started: Vec<Nanos>,
    vms: Vec<GangVm>,
    pcpus: Vec<GangPcpu>,
    pending: Vec<PcpuId>,
}

impl Gang {
    pub fn new(p: &GangParams, setup: SchedSetup) -> Gang {
        let n = setup.vcpu_vm.len();
        let mut vms: Vec<GangVm> = setup
            .vm_weight
            .iter()
            .map(|&w| GangVm {
                weight: w.max(1) as u64,
                vtime: 0,
                running: false,
                gang_end: Nanos::ZERO,
                waiting_since: Nanos::ZERO,
                vcpus: Vec::new(),
            })
            .collect();
        for (i, vm) in setup.vcpu_vm.iter().enumerate() {
            vms[vm.idx()].vcpus.push(VcpuId(i as u32));
        }
        Gang {
            slice: Nanos((p.slice_ms * 1e6).round() as u64),
            st: vec![VState::Blocked; n],
            last: (0..n)
                .map(|i| setup.vcpu_mask[i].iter().next().unwrap_or(0))
                .collect(),
            started: vec![Nanos::ZERO; n],
            vms,
            pcpus: vec![GangPcpu::default(); setup.pcpus as usize],
            pending: Vec::new(),
            setup,
        }
    }

    fn vm_of(&self, v: VcpuId) -> usize {
        self.setup.vcpu_vm[v.idx()].idx()
    }

    fn is_free(&self, q: usize) -> bool {
        let pc = &self.pcpus[q];
        pc.plan.is_none() && (pc.curr.is_none() || pc.releasing)
    }

    /// A free pCPU for `v` not in `used`: its last one if possible, else the lowest.
    fn free_for(&self, v: VcpuId, used: CpuMask) -> Option<u32> {
        let mask = self.setup.vcpu_mask[v.idx()];
        let ok = |q: u32| mask.contains(q) && !used.contains(q) && self.is_free(q as usize);
        let last = self.last[v.idx()];
        if ok(last) {
            return Some(last);
        }
        (0..self.pcpus.len() as u32).find(|&q| ok(q))
    }

    /// Places every waiting vCPU of `vm` on free pCPUs, or none of them.
    fn fit(&self, vm: usize) -> Option<Vec<(VcpuId, u32)>> {
        let mut members: Vec<VcpuId> = self.vms[vm]
            .vcpus
            .iter()
            .copied()
            .filter(|v| self.st[v.idx()] == VState::Waiting)
            .collect();
        // Validation keeps every VM within the host; a guard all the same.
        members.truncate(self.pcpus.len());
        // The pCPUs taken so far (a host can have up to 1,024).
        let mut used = CpuMask::default();
        let mut out = Vec::with_capacity(members.len());
        // Members whose last pCPU is free keep it (cache affinity); then the others.
        let mut rest = Vec::new();
        for &v in &members {
            let l = self.last[v.idx()];
            if self.setup.vcpu_mask[v.idx()].contains(l)
                && !used.contains(l)
                && self.is_free(l as usize)
            {
                used.insert(l);
                out.push((v, l));
            } else {
                rest.push(v);
            }
        }
        for v in rest {
            let q = self.free_for(v, used)?;
            used.insert(q);
            out.push((v, q));
        }
        Some(out)
    }

    fn assign(&mut self, v: VcpuId, q: u32) {
        self.st[v.idx()] = VState::Planned(q);
        self.pcpus[q as usize].plan = Some(v);
        self.pending.push(PcpuId(q));
    }

    /// Fills free pCPUs: waiting members of running gangs first, then new gangs.
    fn plan(&mut self, now: Nanos) {
        for vm in 0..self.vms.len() {
            if !self.vms[vm].running {
                continue;
            }
            for i in 0..self.vms[vm].vcpus.len() {
                let v = self.vms[vm].vcpus[i];
                if self.st[v.idx()] == VState::Waiting {
                    if let Some(q) = self.free_for(v, CpuMask::default()) {
                        self.assign(v, q);
                    }
                }
            }
        }
        loop {
            let mut cands: Vec<usize> = (0..self.vms.len())
                .filter(|&vm| {
                    // Members still stopping from the last round count as runnable:
                    // the gang waits for them rather than start without them.
                    let st = |v: &VcpuId| self.st[v.idx()];
                    let g = &self.vms[vm];
                    !g.running
                        && g.vcpus.iter().any(|v| st(v) == VState::Waiting)
                        && g.vcpus
                            .iter()
                            .all(|v| matches!(st(v), VState::Waiting | VState::Blocked))
                })
                .collect();
            cands.sort_by_key(|&vm| (self.vms[vm].vtime, vm));
            let mut started = false;
            for (rank, &vm) in cands.iter().enumerate() {
                if let Some(places) = self.fit(vm) {
                    let g = &mut self.vms[vm];
                    g.running = true;
                    g.gang_end = now + self.slice;
                    for (v, q) in places {
                        self.assign(v, q);
                    }
                    started = true;
                    break;
                }
                // A gang that has waited a whole slice reserves the pCPUs freed next.
                if rank == 0 && now.0.saturating_sub(self.vms[vm].waiting_since.0) >= self.slice.0 {
                    break;
                }
            }
            if !started {
                break;
            }
        }
    }

    /// Books `v`'s run time since it was dispatched (or last booked) into its VM.
    fn charge(&mut self, v: VcpuId, now: Nanos) {
        let ran = now.0.saturating_sub(self.started[v.idx()].0);
        self.started[v.idx()] = now;
        let vm = self.vm_of(v);
        self.vms[vm].vtime += ran * 256 / self.vms[vm].weight;
    }

    /// The gang's slice is over: every member stops (their pCPUs reschedule now).
    fn end_gang(&mut self, vm: usize, now: Nanos) {
        self.vms[vm].running = false;
        self.vms[vm].waiting_since = now;
        for i in 0..self.vms[vm].vcpus.len() {
            let v = self.vms[vm].vcpus[i];
            match self.st[v.idx()] {
                VState::Running(q) => {
                    self.charge(v, now);
                    self.pcpus[q as usize].releasing = true;
                    self.pending.push(PcpuId(q));
                }
                VState::Planned(q) => {
                    self.pcpus[q as usize].plan = None;
                    self.st[v.idx()] = VState::Waiting;
                }
                _ => {}
            }
        }
    }

    fn has_waiting(&self, vm: usize) -> bool {
        self.vms[vm]
            .vcpus
            .iter()
            .any(|v| self.st[v.idx()] == VState::Waiting)
    }
}

impl HostScheduler for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn tick_period(&self) -> Option<Nanos> {
        None
    }

    fn global_period(&self) -> Option<Nanos> {
        None
    }

    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement {
        let vm = self.vm_of(v);
        if !self.vms[vm].running && !self.has_waiting(vm) {
            self.vms[vm].waiting_since = now;
            // Sleeping earns no credit: resume at the least run time of the others.
            let floor = (0..self.vms.len())
                .filter(|&o| {
                    o != vm
                        && self.vms[o]
                            .vcpus
                            .iter()
                            .any(|x| self.st[x.idx()] != VState::Blocked)
                })
                .map(|o| self.vms[o].vtime)
                .min();
            if let Some(f) = floor {
                self.vms[vm].vtime = self.vms[vm].vtime.max(f);
            }
        }
        self.st[v.idx()] = VState::Waiting;
        if self.vms[vm].running {
            // Its gang runs: join it on a free pCPU, else wait for the next round.
            if let Some(q) = self.free_for(v, CpuMask::default()) {
                self.assign(v, q);
                self.pending.retain(|x| x.0 != q);
                return WakePlacement {
                    pcpu: PcpuId(q),
                    preempt: true,
                };
            }
        } else if let Some(q) = (0..self.pcpus.len())
            .find(|&q| self.pcpus[q].curr.is_none() && self.pcpus[q].plan.is_none())
        {
            // Plan at that pCPU's next pick, once every wake-up of this instant is in:
            // a gang then starts with all of its runnable vCPUs.
            self.pending.push(PcpuId(q as u32));
        }
        WakePlacement {
            pcpu: PcpuId(self.last[v.idx()]),
            preempt: false,
        }
    }

    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos) {
        let vm = self.vm_of(v);
        self.charge(v, now);
        let pc = &mut self.pcpus[p.idx()];
        pc.curr = None;
        pc.releasing = false;
        self.st[v.idx()] = if why == StopReason::Blocked {
            VState::Blocked
        } else {
            VState::Waiting
        };
        // Preempted before the gang's end (a stray reschedule): it is planned again.
        if why == StopReason::Preempted && self.vms[vm].running && now >= self.vms[vm].gang_end {
            self.end_gang(vm, now);
        }
        let g = &self.vms[vm];
        if g.running && g.vcpus.iter().all(|x| self.st[x.idx()] == VState::Blocked) {
            // Every member halted: the gang is over.
            self.vms[vm].running = false;
        }
        self.plan(now);
    }

    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)> {
        let pi = p.idx();
        if self.pcpus[pi].plan.is_none() {
            self.plan(now);
        }
        self.pending.retain(|x| *x != p);
        let v = self.pcpus[pi].plan.take()?;
        self.st[v.idx()] = VState::Running(p.0);
        self.pcpus[pi].curr = Some(v);
        self.last[v.idx()] = p.0;
        self.started[v.idx()] = now;
        let end = self.vms[self.vm_of(v)].gang_end;
        Some((v, Some(Nanos(end.0.saturating_sub(now.0).max(1_000)))))
    }

    fn tick(&mut self, _p: PcpuId, _now: Nanos) -> bool {
        false
    }

    fn global_tick(&mut self, _now: Nanos, _resched: &mut Vec<PcpuId>) {}

    fn queued_on(&self, p: PcpuId) -> usize {
        let waiting = (0..self.st.len())
            .filter(|&i| self.st[i] == VState::Waiting && self.last[i] == p.0)
            .count();
        waiting + self.pcpus[p.idx()].plan.is_some() as usize
    }

    fn home_of(&self, v: VcpuId) -> PcpuId {
        PcpuId(self.last[v.idx()])
    }

    fn drain_resched(&mut self, out: &mut Vec<PcpuId>) {
        out.append(&mut self.pending);
        out.sort_unstable_by_key(|p| p.0);
        out.dedup();
    }

    fn resched_by_ipi(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cpumask::CpuMask;
    use crate::sim::VmId;

    /// VM 0 with `a` vCPUs, VM 1 with `b`, on `pcpus` pCPUs.
    fn gang(pcpus: u32, a: u32, b: u32) -> Gang {
        let mut vcpu_vm = vec![VmId(0); a as usize];
        vcpu_vm.extend(vec![VmId(1); b as usize]);
        let n = vcpu_vm.len();
        Gang::new(
            &GangParams::default(),
            SchedSetup {
                pcpus,
                threads_per_core: 1,
                numa_nodes: 1,
                vcpu_vm,
                vcpu_mask: vec![CpuMask::all(pcpus); n],
                vm_weight: vec![256, 256],
                vm_cap: vec![None, None],
            },
        )
    }

    fn drain(g: &mut Gang) -> Vec<u32> {
        let mut out = Vec::new();
        g.drain_resched(&mut out);
        out.iter().map(|p| p.0).collect()
    }

    /// On a host past 128 pCPUs the pCPUs a gang has taken are told apart: with pCPUs 5
    /// and 133 the only free ones, a 2-vCPU gang takes both (a 128-bit set once read
    /// pCPU 133 as 5 and found no place for the second member).
    #[test]
    fn a_gang_fits_on_pcpus_past_128() {
        let mut g = gang(256, 2, 0);
        for (q, pc) in g.pcpus.iter_mut().enumerate() {
            if q != 5 && q != 133 {
                pc.curr = Some(VcpuId(9_999));
            }
        }
        g.st[0] = VState::Waiting;
        g.st[1] = VState::Waiting;
        g.last[0] = 5;
        g.last[1] = 133;
        let mut places = g.fit(0).expect("two free pCPUs for two vCPUs");
        places.sort();
        assert_eq!(places, vec![(VcpuId(0), 5), (VcpuId(1), 133)]);
        g.last[1] = 0; // not free: the second member searches
        let mut places = g.fit(0).expect("two free pCPUs for two vCPUs");
        places.sort();
        assert_eq!(places, vec![(VcpuId(0), 5), (VcpuId(1), 133)]);
    }

    #[test]
    fn a_gang_starts_only_when_enough_pcpus_are_free_and_stops_together() {
        // VM 0: 2 vCPUs, VM 1: 2 vCPUs, 3 pCPUs: one gang at a time, one pCPU idle.
        let mut g = gang(3, 2, 2);
        let t0 = Nanos(0);
        for v in 0..4 {
            g.enqueue_wake(VcpuId(v), t0);
        }
        let mut running = Vec::new();
        for p in 0..3 {
            if let Some((v, slice)) = g.pick_next(PcpuId(p), t0) {
                assert_eq!(slice, Some(g.slice));
                running.push((p, v.0));
            }
        }
        drain(&mut g);
        assert_eq!(running.len(), 2, "one 2-vCPU gang on 3 pCPUs: {running:?}");
        let vm_running = g.vm_of(VcpuId(running[0].1));
        assert!(running
            .iter()
            .all(|&(_, v)| g.vm_of(VcpuId(v)) == vm_running));
        let idle: Vec<u32> = (0..3)
            .filter(|p| running.iter().all(|r| r.0 != *p))
            .collect();
        assert_eq!(idle.len(), 1);
        assert!(
            g.pick_next(PcpuId(idle[0]), Nanos(1000)).is_none(),
            "the other 2-vCPU gang does not fit the one free pCPU"
        );

        // The first member's slice ends: the whole gang stops, the other gang starts.
        let end = g.slice;
        let (p0, v0) = running[0];
        g.put_prev(PcpuId(p0), VcpuId(v0), StopReason::Preempted, end);
        let resched = drain(&mut g);
        let (p1, _) = running[1];
        assert!(
            resched.contains(&p1),
            "the sibling's pCPU stops too: {resched:?}"
        );
        assert!(!g.vms[vm_running].running);
        let other = 1 - vm_running;
        assert!(
            g.vms[other].running,
            "the waiting gang starts on the freed pCPUs"
        );
        let mut started = 0;
        for p in 0..3u32 {
            if p == p1 {
                continue; // still running the old member until it reschedules
            }
            if let Some((v, _)) = g.pick_next(PcpuId(p), end) {
                assert_eq!(g.vm_of(v), other);
                started += 1;
            }
        }
        g.put_prev(PcpuId(p1), VcpuId(running[1].1), StopReason::Preempted, end);
        if let Some((v, _)) = g.pick_next(PcpuId(p1), end) {
            assert_eq!(g.vm_of(v), other);
            started += 1;
        }
        assert_eq!(started, 2, "both vCPUs of the other VM run together");
    }

    #[test]
    fn a_blocked_member_frees_its_pcpu_only_for_a_gang_that_fits() {
        // 3 pCPUs, VM 0 with 2 vCPUs running, VM 1 with 2 vCPUs waiting.
        let mut g = gang(3, 2, 2);
        for v in 0..4 {
            g.enqueue_wake(VcpuId(v), Nanos(0));
        }
        let mut on = Vec::new();
        for p in 0..3 {
            if let Some((v, _)) = g.pick_next(PcpuId(p), Nanos(0)) {
                on.push((p, v));
            }
        }
        drain(&mut g);
        // One member halts: two pCPUs are free and VM 1's whole gang fits.
        let (p, v) = on[0];
        g.put_prev(PcpuId(p), v, StopReason::Blocked, Nanos(5_000_000));
        let vm1 = 1 - g.vm_of(v);
        assert!(g.vms[vm1].running, "two free pCPUs fit the 2-vCPU gang");
        // When the halted member wakes, no pCPU is free: it waits.
        g.enqueue_wake(v, Nanos(6_000_000));
        assert_eq!(g.st[v.idx()], VState::Waiting);
    }
}
