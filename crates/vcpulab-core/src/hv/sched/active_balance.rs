//! Active balancing, for the Linux schedulers (cfs.rs, eevdf.rs): the busiest
//! runqueue's *running* vCPU is stopped and moved, where load balancing moves only
//! queued ones. `load_balance()` (kernel/sched/fair.c) counts a balance that found an
//! imbalance and moved nothing (`sd->nr_balance_failed`; periodic balances only), and
//! once the failures exceed `sd->cache_nice_tries + 2` (`need_active_balance()`) and
//! the busiest runqueue's current task may run on this CPU, the stopper on the busiest
//! CPU preempts it and `active_load_balance_cpu_stop()` moves it here; the failure count
//! drops to `cache_nice_tries + 1` and the interval doubles. Two triggers here:
//!
//! - **Load balancing** (balance.rs `rebalance_domains`, `ActiveBalance::kick`): a
//!   periodic balance that failed (every queued vCPU of the busiest pCPU pinned away
//!   while its running one may come, or none that fits) more than cache_nice_tries + 2
//!   times in a row moves the busiest pCPU's running vCPU.
//! - **SMT** (`after_periodic`): two CPU-bound vCPUs on the two threads of one core,
//!   with another core idle, queue nowhere, so the model's pull (which compares pCPUs,
//!   not the core-level groups Linux compares) finds nothing — yet each runs at the
//!   shared core's speed (host/smt.rs). Linux finds the busiest group (the core with
//!   no idle thread) against an idle local group, fails to detach a task, and after
//!   enough failures pushes one (`imbalanced_active_balance()`; `cache_nice_tries` is
//!   1 at the LLC level, `sd_init()` in kernel/sched/topology.c). Here: after four
//!   failed periodic balances in a row on a pCPU whose core is idle, the running vCPU
//!   of a thread sharing a busy core in the balanced domain (with nothing queued
//!   behind it) is preempted and moved to the idle pCPU.
//!
//! Either way the move happens when the vCPU stops on its pCPU (`take`); the SMT
//! trigger's only if its target is still idle (Linux moves it to a busy target too:
//! approximation), load balancing's onto a busy target too, where it preempts as a
//! wakee would (attach_one_task → check_preempt_curr).

use super::balance::Active;
use crate::host::topology::Topology;
use crate::sim::{PcpuId, VcpuId};

/// Failed balances before the push: more than `cache_nice_tries` (1) + 2.
const FAILED_BEFORE_ACTIVE: u8 = 4;

/// A push under way.
#[derive(Clone, Copy, Debug)]
struct Push {
    v: VcpuId,
    src: u32,
    dst: u32,
    /// The SMT trigger's push, made only if the target is still idle.
    only_if_idle: bool,
}

#[derive(Clone, Debug, Default)]
pub struct ActiveBalance {
    /// Per pCPU: periodic balances in a row that moved nothing while its core was idle.
    failed: Vec<u8>,
    /// The pushes under way: the vCPU, the pCPU it runs on, the pCPU it moves to
    /// (at most one per source pCPU, as the runqueue's `active_balance` flag allows).
    pending: Vec<Push>,
    /// pCPUs to reschedule (the scheduler's `drain_resched`).
    pub out: Vec<PcpuId>,
}

impl ActiveBalance {
    pub fn new(topo: &Topology) -> ActiveBalance {
        ActiveBalance {
            failed: if topo.threads_per_core() > 1 {
                vec![0; topo.pcpus() as usize]
            } else {
                Vec::new()
            },
            ..ActiveBalance::default()
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
        if *f < FAILED_BEFORE_ACTIVE || !self.pending.is_empty() {
            return;
        }
        let shared = |q: u32| topo.core_of(q).filter(|&s| busy(s)).count() >= 2;
        let src = scope
            .filter(|q| !topo.core_of(p).contains(q) && shared(*q))
            .find_map(|q| lone(q).filter(|&v| allowed(v, p)).map(|v| (v, q)));
        if let Some((v, q)) = src {
            self.failed[p as usize] = 0;
            self.pending.push(Push {
                v,
                src: q,
                dst: p,
                only_if_idle: true,
            });
            self.out.push(PcpuId(q));
        }
    }

    /// Load balancing's active balance (load_balance after need_active_balance()):
    /// `running`, the vCPU running on `src`, is to move to `dst` (`src` rescheduled
    /// now), if `allowed` says it may run there and no push from `src` (or of it) is
    /// under way (the busiest runqueue's `active_balance` flag).
    pub(crate) fn kick(
        &mut self,
        running: Option<VcpuId>,
        allowed: impl Fn(VcpuId) -> bool,
        src: u32,
        dst: u32,
    ) -> Active {
        let Some(v) = running.filter(|&v| allowed(v)) else {
            return Active::Pinned;
        };
        if self.pending.iter().any(|x| x.v == v || x.src == src) {
            return Active::Busy;
        }
        self.pending.push(Push {
            v,
            src,
            dst,
            only_if_idle: false,
        });
        self.out.push(PcpuId(src));
        Active::Kicked
    }

    /// `v` stops running on `src`: the pCPU it is to move to and whether only if that
    /// is idle, if a push is under way for it there (the push ends either way).
    #[inline]
    pub fn take(&mut self, v: VcpuId, src: u32) -> Option<(u32, bool)> {
        if self.pending.is_empty() {
            return None;
        }
        let i = self.pending.iter().position(|x| x.v == v)?;
        let x = self.pending.swap_remove(i);
        (x.src == src).then_some((x.dst, x.only_if_idle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_after_four_failures_from_a_shared_core_only() {
        let topo = Topology::new(4, 2, 4, 1);
        let mut b = ActiveBalance::new(&topo);
        // pCPUs 0 and 1 (one core) each run a vCPU; core 2–3 is idle.
        let busy = |q: u32| q < 2;
        let lone = |q: u32| (q < 2).then_some(VcpuId(q));
        for k in 1..=4 {
            b.after_periodic(&topo, 2, false, 0..4, busy, lone, |_, _| true);
            assert_eq!(b.out.is_empty(), k < 4, "after {k} failures");
        }
        assert_eq!(b.out, [PcpuId(0)]);
        assert_eq!(b.take(VcpuId(1), 1), None);
        assert_eq!(b.take(VcpuId(0), 0), Some((2, true)));
        assert_eq!(b.take(VcpuId(0), 0), None);
        // One busy thread per core: nothing to push.
        let mut b = ActiveBalance::new(&topo);
        for _ in 0..8 {
            b.after_periodic(&topo, 3, false, 0..4, |q| q == 0, lone, |_, _| true);
        }
        assert!(b.out.is_empty());
        // Without SMT it never counts.
        let mut b = ActiveBalance::new(&Topology::new(4, 1, 4, 1));
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
