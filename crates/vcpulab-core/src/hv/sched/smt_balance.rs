//! Active balancing on an SMT host, for the Linux schedulers (cfs.rs, eevdf.rs).
//!
//! Load balancing moves only queued vCPUs. Two CPU-bound vCPUs on the two threads of
//! one core, with another core idle, queue nowhere, so a pull never separates them —
//! yet each runs at the shared core's speed (host/smt.rs). Linux separates them by
//! active balancing: `load_balance()` (kernel/sched/fair.c) finds the busiest group
//! (the core with no idle thread) against an idle local group, fails to detach a
//! task (the one there is running), counts the failure (`sd->nr_balance_failed`),
//! and once the failures exceed `sd->cache_nice_tries + 2` (`imbalanced_active_balance()`;
//! `cache_nice_tries` is 1 at the LLC level, `sd_init()` in kernel/sched/topology.c)
//! the stopper on the busy thread pushes its running task to the idle CPU
//! (`active_load_balance_cpu_stop()`). Here: after four failed periodic balances in
//! a row on a pCPU whose core is idle, the running vCPU of a thread sharing a busy
//! core in the balanced domain (with nothing queued behind it) is preempted and moved
//! to the idle pCPU.

use crate::host::topology::Topology;
use crate::sim::{PcpuId, VcpuId};

/// Failed balances before the push: more than `cache_nice_tries` (1) + 2.
const FAILED_BEFORE_ACTIVE: u8 = 4;

#[derive(Clone, Debug, Default)]
pub struct SmtBalance {
    /// Per pCPU: periodic balances in a row that moved nothing while its core was idle.
    failed: Vec<u8>,
    /// The push under way: the vCPU, the pCPU it runs on, the idle pCPU it moves to.
    pending: Option<(VcpuId, u32, u32)>,
    /// pCPUs to reschedule (the scheduler's `drain_resched`).
    pub out: Vec<PcpuId>,
}

impl SmtBalance {
    pub fn new(topo: &Topology) -> SmtBalance {
        SmtBalance {
            failed: if topo.threads_per_core() > 1 {
                vec![0; topo.pcpus() as usize]
            } else {
                Vec::new()
            },
            ..SmtBalance::default()
        }
    }

    /// After a periodic balance on `p` over `scope`: counts a failure when `p`'s core
    /// is idle and nothing moved, and after enough of them starts a push from a shared
    /// busy core. `busy(q)`: `q` has a runnable vCPU; `lone(q)`: the vCPU running on
    /// `q` when none waits there; `allowed(v, p)`: `v`'s affinity allows `p`.
    /// Whether the host has SMT (nothing to do otherwise).
    #[inline]
    pub fn enabled(&self) -> bool {
        !self.failed.is_empty()
    }

    #[allow(clippy::too_many_arguments)]
    pub fn after_periodic(
        &mut self,
        topo: &Topology,
        p: u32,
        pulled: bool,
        scope: std::ops::Range<u32>,
        busy: impl Fn(u32) -> bool,
        lone: impl Fn(u32) -> Option<VcpuId>,
        allowed: impl Fn(VcpuId, u32) -> bool,
    ) {
        if self.failed.is_empty() {
            return;
        }
        let idle_core = topo.core_of(p).all(|q| !busy(q));
        if pulled || !idle_core {
            self.failed[p as usize] = 0;
            return;
        }
        let f = &mut self.failed[p as usize];
        *f = f.saturating_add(1);
        if *f < FAILED_BEFORE_ACTIVE || self.pending.is_some() {
            return;
        }
        let shared = |q: u32| topo.core_of(q).filter(|&s| busy(s)).count() >= 2;
        let src = scope
            .filter(|q| !topo.core_of(p).contains(q) && shared(*q))
            .find_map(|q| lone(q).filter(|&v| allowed(v, p)).map(|v| (v, q)));
        if let Some((v, q)) = src {
            self.failed[p as usize] = 0;
            self.pending = Some((v, q, p));
            self.out.push(PcpuId(q));
        }
    }

    /// `v` stops running on `src`: the idle pCPU it is to move to, if a push is under
    /// way for it there (the push ends either way).
    #[inline]
    pub fn take(&mut self, v: VcpuId, src: u32) -> Option<u32> {
        match self.pending {
            Some((pv, ps, dst)) if pv == v && ps == src => {
                self.pending = None;
                Some(dst)
            }
            Some((pv, _, _)) if pv == v => {
                self.pending = None;
                None
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_after_four_failures_from_a_shared_core_only() {
        let topo = Topology::new(4, 2, 4, 1);
        let mut b = SmtBalance::new(&topo);
        // pCPUs 0 and 1 (one core) each run a vCPU; core 2–3 is idle.
        let busy = |q: u32| q < 2;
        let lone = |q: u32| (q < 2).then_some(VcpuId(q));
        for k in 1..=4 {
            b.after_periodic(&topo, 2, false, 0..4, busy, lone, |_, _| true);
            assert_eq!(b.out.is_empty(), k < 4, "after {k} failures");
        }
        assert_eq!(b.out, [PcpuId(0)]);
        assert_eq!(b.take(VcpuId(1), 1), None);
        assert_eq!(b.take(VcpuId(0), 0), Some(2));
        assert_eq!(b.take(VcpuId(0), 0), None);
        // One busy thread per core: nothing to push.
        let mut b = SmtBalance::new(&topo);
        for _ in 0..8 {
            b.after_periodic(&topo, 3, false, 0..4, |q| q == 0, lone, |_, _| true);
        }
        assert!(b.out.is_empty());
        // Without SMT it never counts.
        let mut b = SmtBalance::new(&Topology::new(4, 1, 4, 1));
        for _ in 0..8 {
            b.after_periodic(
                &Topology::new(4, 1, 4, 1),
                3,
                false,
                0..4,
                busy,
                lone,
                |_, _| true,
            );
        }
        assert!(b.out.is_empty());
    }
}
