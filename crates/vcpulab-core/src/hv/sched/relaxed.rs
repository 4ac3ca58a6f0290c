//! Relaxed co-scheduling (VMware ESX style: "The CPU Scheduler in VMware vSphere 5.1", VMware technical white paper, 2013) on Xen's credit
//! scheduler. Each vCPU's progress is its run time; a halted vCPU is taken to keep pace
//! (ESX does not count idle vCPUs as lagging), so on waking it resumes at its slowest
//! runnable sibling's progress. A vCPU whose progress leads its slowest runnable
//! sibling by more than the skew threshold is co-stopped: it stays queued but is not
//! eligible, until the laggards have caught up to half the threshold. The lead is
//! checked when a vCPU stops, at every tick, and a running vCPU's slice is cut where
//! its lead over a waiting sibling would reach the threshold.

use super::credit::Credit;
use super::{HostScheduler, SchedSetup, StopReason, WakePlacement};
use crate::scenario::RelaxedCoParams;
use crate::sim::{Nanos, PcpuId, VcpuId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RState {
    Blocked,
    Queued,
    Running,
}

pub struct RelaxedCo {
    inner: Credit,
    threshold: u64,
    /// Per vCPU: its VM's vCPUs (siblings, itself included).
    vm_vcpus: Vec<Vec<VcpuId>>,
    vcpu_vm: Vec<usize>,
    progress: Vec<u64>,
    since: Vec<Nanos>,
    st: Vec<RState>,
    curr: Vec<Option<VcpuId>>,
    held: usize,
    pending: Vec<PcpuId>,
    /// Co-stops so far (for tests and curiosity).
    pub costops: u64,
}

impl RelaxedCo {
    pub fn new(p: &RelaxedCoParams, setup: SchedSetup) -> RelaxedCo {
        let n = setup.vcpu_vm.len();
        let mut vm_vcpus = vec![Vec::new(); setup.vm_weight.len()];
        for (i, vm) in setup.vcpu_vm.iter().enumerate() {
            vm_vcpus[vm.idx()].push(VcpuId(i as u32));
        }
        let vcpu_vm = setup.vcpu_vm.iter().map(|v| v.idx()).collect();
        let pcpus = setup.pcpus as usize;
        RelaxedCo {
            inner: Credit::new(&p.credit(), setup),
            threshold: (p.skew_threshold_ms * 1e6).round() as u64,
            vm_vcpus,
            vcpu_vm,
            progress: vec![0; n],
            since: vec![Nanos::ZERO; n],
            st: vec![RState::Blocked; n],
            curr: vec![None; pcpus],
            held: 0,
            pending: Vec::new(),
            costops: 0,
        }
    }

    fn progress_at(&self, v: VcpuId, now: Nanos) -> u64 {
        let base = self.progress[v.idx()];
        if self.st[v.idx()] == RState::Running {
            base + now.0.saturating_sub(self.since[v.idx()].0)
        } else {
            base
        }
    }

    /// The least progress among `v`'s runnable siblings (queued ones only, when
    /// `queued_only`), or None.
    fn slowest_sibling(&self, v: VcpuId, now: Nanos, queued_only: bool) -> Option<u64> {
        self.vm_vcpus[self.vcpu_vm[v.idx()]]
            .iter()
            .filter(|&&s| s != v)
            .filter(|&&s| match self.st[s.idx()] {
                RState::Blocked => false,
                RState::Running => !queued_only,
                RState::Queued => true,
            })
            .map(|&s| self.progress_at(s, now))
            .min()
    }

    fn lead(&self, v: VcpuId, now: Nanos) -> u64 {
        match self.slowest_sibling(v, now, false) {
            Some(s) => self.progress_at(v, now).saturating_sub(s),
            None => 0,
        }
    }

    fn hold(&mut self, v: VcpuId) {
        if !self.inner.is_held(v) {
            self.inner.set_held(v, true);
            self.held += 1;
            self.costops += 1;
        }
    }

    /// Releases co-stopped vCPUs whose siblings caught up (or stopped being runnable).
    fn release_caught_up(&mut self, now: Nanos) {
        if self.held == 0 {
            return;
        }
        for i in 0..self.st.len() {
            let v = VcpuId(i as u32);
            if !self.inner.is_held(v) {
                continue;
            }
            if self.st[i] == RState::Blocked || self.lead(v, now) <= self.threshold / 2 {
                let q = self.inner.set_held(v, false);
                self.held -= 1;
                if self.curr[q.idx()].is_none() {
                    self.pending.push(q);
                }
            }
        }
    }
}

impl HostScheduler for RelaxedCo {
    fn name(&self) -> &'static str {
        "relaxed_co"
    }

    fn tick_period(&self) -> Option<Nanos> {
        // Credit itself needs no tick events; the skew checks do.
        Some(self.inner.tick_len())
    }

    fn global_period(&self) -> Option<Nanos> {
        self.inner.global_period()
    }

    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement {
        if self.st[v.idx()] == RState::Blocked {
            if let Some(s) = self.slowest_sibling(v, now, false) {
                self.progress[v.idx()] = self.progress[v.idx()].max(s);
            }
        }
        self.st[v.idx()] = RState::Queued;
        let mut wp = self.inner.enqueue_wake(v, now);
        if self.lead(v, now) > self.threshold {
            self.hold(v);
            wp.preempt = false;
        }
        self.release_caught_up(now);
        wp
    }

    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos) {
        self.progress[v.idx()] = self.progress_at(v, now);
        self.curr[p.idx()] = None;
        self.st[v.idx()] = if why == StopReason::Blocked {
            RState::Blocked
        } else {
            RState::Queued
        };
        self.inner.put_prev(p, v, why, now);
        if why != StopReason::Blocked && self.lead(v, now) >= self.threshold {
            self.hold(v);
        }
        self.release_caught_up(now);
    }

    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)> {
        let (v, slice) = self.inner.pick_next(p, now)?;
        if self.inner.is_held(v) {
            // Chosen by co-scheduling or the rate limit: running releases it.
            self.inner.set_held(v, false);
            self.held -= 1;
        }
        self.st[v.idx()] = RState::Running;
        self.since[v.idx()] = now;
        self.curr[p.idx()] = Some(v);
        // Stop where the lead over a waiting sibling would pass the threshold.
        let slice = match self.slowest_sibling(v, now, true) {
            Some(s) => {
                let lead = self.progress[v.idx()].saturating_sub(s);
                let budget = Nanos(self.threshold.saturating_sub(lead).max(100_000));
                Some(slice.map_or(budget, |x| x.min(budget)))
            }
            None => slice,
        };
        Some((v, slice))
    }

    fn tick(&mut self, p: PcpuId, now: Nanos) -> bool {
        let mut resched = self.inner.tick(p, now);
        if let Some(c) = self.curr[p.idx()] {
            resched |= self.lead(c, now) > self.threshold;
        }
        self.release_caught_up(now);
        resched
    }

    fn global_tick(&mut self, now: Nanos, resched: &mut Vec<PcpuId>) {
        self.inner.global_tick(now, resched);
        self.release_caught_up(now);
    }

    fn queued_on(&self, p: PcpuId) -> usize {
        self.inner.queued_on(p)
    }

    fn yield_to(&mut self, p: PcpuId, from: VcpuId, to: VcpuId, now: Nanos) -> Option<PcpuId> {
        self.inner.yield_to(p, from, to, now)
    }

    fn home_of(&self, v: VcpuId) -> PcpuId {
        self.inner.home_of(v)
    }

    fn run_next(&mut self, p: PcpuId, v: VcpuId) -> bool {
        self.inner.run_next(p, v)
    }

    fn requeue(&mut self, v: VcpuId, head: bool) -> bool {
        self.inner.requeue(v, head)
    }

    fn drain_resched(&mut self, out: &mut Vec<PcpuId>) {
        out.append(&mut self.pending);
    }

    fn take_wake_tickle(&mut self) -> Option<PcpuId> {
        self.inner.take_wake_tickle()
    }
}

#[cfg(test)]
mod tests {
    //! Relaxed co-scheduling on its own, on hand-made situations: the skew that co-stops a
    //! leading vCPU, the release at half the threshold, a waking vCPU resuming at its
    //! slowest sibling's progress, and the slice cut at the threshold.
    use super::*;
    use crate::host::cpumask::CpuMask;
    use crate::sim::VmId;

    const MS: u64 = 1_000_000;

    /// One VM of two vCPUs (0, 1) and one VM of one vCPU (2), on `pcpus` pCPUs; skew
    /// threshold 3 ms.
    fn relaxed(pcpus: u32) -> RelaxedCo {
        let setup = SchedSetup {
            pcpus,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_vm: vec![VmId(0), VmId(0), VmId(1)],
            vcpu_mask: vec![CpuMask::all(pcpus); 3],
            vm_weight: vec![256, 256],
            vm_cap: vec![None; 2],
        };
        let p = RelaxedCoParams {
            skew_threshold_ms: 3.0,
            ..RelaxedCoParams::default()
        };
        RelaxedCo::new(&p, setup)
    }

    #[test]
    fn a_vcpu_leading_its_sibling_past_the_threshold_is_co_stopped_then_released() {
        let mut r = relaxed(1);
        for v in 0..2 {
            r.enqueue_wake(VcpuId(v), Nanos(0));
        }
        let (lead, slice) = r.pick_next(PcpuId(0), Nanos(0)).unwrap();
        // Its slice is cut where its lead over the waiting sibling reaches 3 ms.
        assert_eq!(slice, Some(Nanos(3 * MS)));
        r.put_prev(PcpuId(0), lead, StopReason::Preempted, Nanos(3 * MS));
        assert!(r.inner.is_held(lead), "3 ms ahead: co-stopped");
        assert_eq!(r.costops, 1);
        // The sibling runs; once it is within half the threshold, the leader is released.
        let (lag, _) = r.pick_next(PcpuId(0), Nanos(3 * MS)).unwrap();
        assert_ne!(lag, lead);
        r.tick(PcpuId(0), Nanos(4 * MS));
        assert!(r.inner.is_held(lead), "2 ms ahead still: held");
        r.tick(PcpuId(0), Nanos(5 * MS) + Nanos(1));
        assert!(!r.inner.is_held(lead), "under 1.5 ms ahead: released");
    }

    #[test]
    fn a_waking_vcpu_resumes_at_its_slowest_runnable_siblings_progress() {
        let mut r = relaxed(2);
        r.enqueue_wake(VcpuId(0), Nanos(0));
        let (v0, _) = r.pick_next(PcpuId(0), Nanos(0)).unwrap();
        assert_eq!(v0, VcpuId(0));
        // vCPU 1 was halted all along: it wakes at 10 ms at vCPU 0's progress, so it
        // neither lags (no co-stop of vCPU 0) nor leads.
        r.enqueue_wake(VcpuId(1), Nanos(10 * MS));
        assert_eq!(r.progress[1], 10 * MS);
        assert_eq!(r.lead(VcpuId(0), Nanos(10 * MS)), 0);
        assert!(!r.inner.is_held(VcpuId(1)));
    }

    #[test]
    fn a_single_vcpu_vm_is_never_co_stopped() {
        let mut r = relaxed(1);
        r.enqueue_wake(VcpuId(2), Nanos(0));
        let (v, slice) = r.pick_next(PcpuId(0), Nanos(0)).unwrap();
        assert_eq!(v, VcpuId(2));
        assert_ne!(slice, Some(Nanos(3 * MS)), "no sibling: credit's own slice");
        r.put_prev(PcpuId(0), v, StopReason::Preempted, Nanos(100 * MS));
        assert!(!r.inner.is_held(v));
        assert_eq!(r.costops, 0);
    }
}
