//! Urgent-vCPU-first (UVF), the time domain of demand-based coordinated scheduling
//! (Kim et al., "Demand-based coordinated scheduling for SMP VMs", ASPLOS 2013, §4):
//! a vCPU that receives a coordination signal (a TLB-shootdown IPI, or a reschedule IPI
//! for Resched-Co) becomes *urgent*: it joins a per-pCPU FIFO urgent queue that the
//! pCPU serves before its normal runqueue, and preempts the running vCPU — unless that
//! one is protected, or the urgent vCPU has already run further ahead of its fair share
//! than the *urgent allowance* (so a VM cannot buy CPU time with IPIs). Once running,
//! an urgent vCPU is protected from preemption for the urgent time slice `utslice`;
//! Resched-DP protects the *sender* of a reschedule IPI the same way. A protected
//! vCPU is not descheduled by ticks, wake-up preemption or directed yields before its
//! protection ends.
//!
//! This file holds the bookkeeping (queues, protection, counters); a host scheduler
//! embeds it and says how far ahead of its fair share a vCPU is.

use crate::sim::{Nanos, PcpuId, VcpuId};
use std::collections::VecDeque;

/// Why a vCPU became urgent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrgentKind {
    /// TLB-Co: a TLB-shootdown IPI's recipient.
    TlbShootdown,
    /// Resched-Co: a reschedule IPI's recipient.
    Resched,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct UvfStats {
    pub urgent_tlb: u64,
    pub urgent_resched: u64,
    /// Urgent vCPUs that preempted a running one.
    pub urgent_preemptions: u64,
    /// Urgent requests refused because the vCPU was ahead of its fair share by more
    /// than the allowance.
    pub allowance_refusals: u64,
    /// Preemptions deferred because the running vCPU was protected.
    pub protected_deferrals: u64,
    /// Protections (urgent slices and Resched-DP) granted.
    pub protections: u64,
}

#[derive(Clone, Debug)]
pub struct Uvf {
    pub utslice: Nanos,
    pub allowance: Nanos,
    queues: Vec<VecDeque<VcpuId>>,
    queued: Vec<bool>,
    protect_until: Vec<Nanos>,
    pub stats: UvfStats,
}

impl Uvf {
    pub fn new(pcpus: usize, vcpus: usize, utslice: Nanos, allowance: Nanos) -> Uvf {
        Uvf {
            utslice,
            allowance,
            queues: vec![VecDeque::new(); pcpus],
            queued: vec![false; vcpus],
            protect_until: vec![Nanos::ZERO; pcpus],
            stats: UvfStats::default(),
        }
    }

    /// `v`, waiting on `p` and `lead` ns ahead of its fair share (negative: behind),
    /// becomes urgent. True when it joined `p`'s urgent queue.
    pub fn make_urgent(&mut self, v: VcpuId, p: PcpuId, lead: i64, kind: UrgentKind) -> bool {
        match kind {
            UrgentKind::TlbShootdown => self.stats.urgent_tlb += 1,
            UrgentKind::Resched => self.stats.urgent_resched += 1,
        }
        if lead > self.allowance.0 as i64 {
            self.stats.allowance_refusals += 1;
            return false;
        }
        if !self.queued[v.idx()] {
            self.queued[v.idx()] = true;
            self.queues[p.idx()].push_back(v);
        }
        true
    }

    /// The first urgent vCPU of `p` that `still_waiting` confirms (entries for vCPUs
    /// that ran or blocked meanwhile are dropped).
    pub fn pop(&mut self, p: PcpuId, still_waiting: impl Fn(VcpuId) -> bool) -> Option<VcpuId> {
        while let Some(v) = self.queues[p.idx()].pop_front() {
            if !self.queued[v.idx()] {
                continue;
            }
            self.queued[v.idx()] = false;
            if still_waiting(v) {
                return Some(v);
            }
        }
        None
    }

    /// Whether `p` has an urgent vCPU waiting.
    pub fn has_urgent(&self, p: PcpuId) -> bool {
        self.queues[p.idx()].iter().any(|v| self.queued[v.idx()])
    }

    /// `v` is no longer urgent (it ran, or blocked).
    pub fn forget(&mut self, v: VcpuId) {
        self.queued[v.idx()] = false;
    }

    /// Protects what runs on `p` from preemption for `utslice` from `now`.
    pub fn protect(&mut self, p: PcpuId, now: Nanos) {
        if self.utslice.0 == 0 {
            return;
        }
        self.stats.protections += 1;
        let until = now + self.utslice;
        let u = &mut self.protect_until[p.idx()];
        *u = (*u).max(until);
    }

    /// Ends `p`'s protection (its vCPU stopped running).
    pub fn unprotect(&mut self, p: PcpuId) {
        self.protect_until[p.idx()] = Nanos::ZERO;
    }

    /// When `p`'s protection ends, if it is protected at `now`.
    pub fn protected_until(&self, p: PcpuId, now: Nanos) -> Option<Nanos> {
        let u = self.protect_until[p.idx()];
        (u > now).then_some(u)
    }

    /// A preemption of `p` at `now` is deferred if `p` is protected; returns when it
    /// may happen instead.
    pub fn defer(&mut self, p: PcpuId, now: Nanos) -> Option<Nanos> {
        let u = self.protected_until(p, now)?;
        self.stats.protected_deferrals += 1;
        Some(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uvf() -> Uvf {
        Uvf::new(2, 4, Nanos(500_000), Nanos(6_000_000))
    }

    #[test]
    fn urgent_within_the_allowance_only() {
        let mut u = uvf();
        assert!(u.make_urgent(VcpuId(1), PcpuId(0), 5_999_999, UrgentKind::TlbShootdown));
        assert!(!u.make_urgent(VcpuId(2), PcpuId(0), 6_000_001, UrgentKind::Resched));
        assert_eq!(u.stats.allowance_refusals, 1);
        assert_eq!((u.stats.urgent_tlb, u.stats.urgent_resched), (1, 1));
        assert_eq!(u.pop(PcpuId(0), |_| true), Some(VcpuId(1)));
        assert_eq!(u.pop(PcpuId(0), |_| true), None);
    }

    #[test]
    fn queues_are_fifo_and_skip_what_ran() {
        let mut u = uvf();
        for v in [3, 1, 2] {
            u.make_urgent(VcpuId(v), PcpuId(1), 0, UrgentKind::TlbShootdown);
        }
        // Twice urgent, queued once.
        u.make_urgent(VcpuId(1), PcpuId(1), 0, UrgentKind::TlbShootdown);
        u.forget(VcpuId(3));
        assert!(u.has_urgent(PcpuId(1)));
        assert_eq!(u.pop(PcpuId(1), |_| true), Some(VcpuId(1)));
        assert_eq!(u.pop(PcpuId(1), |v| v != VcpuId(2)), None);
        assert!(!u.has_urgent(PcpuId(1)));
    }

    #[test]
    fn protection_lasts_utslice() {
        let mut u = uvf();
        u.protect(PcpuId(0), Nanos(1_000));
        assert_eq!(u.defer(PcpuId(0), Nanos(400_000)), Some(Nanos(501_000)));
        assert_eq!(u.defer(PcpuId(0), Nanos(501_000)), None);
        assert_eq!(u.stats.protected_deferrals, 1);
        u.protect(PcpuId(1), Nanos(0));
        u.unprotect(PcpuId(1));
        assert_eq!(u.protected_until(PcpuId(1), Nanos(1)), None);
        let mut z = Uvf::new(1, 1, Nanos(0), Nanos(0));
        z.protect(PcpuId(0), Nanos(0));
        assert_eq!(z.protected_until(PcpuId(0), Nanos(0)), None);
    }
}
