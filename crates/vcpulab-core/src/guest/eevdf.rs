//! The guest kernel's EEVDF (Linux 6.6–6.12, kernel/sched/fair.c), chosen by the guest
//! kernel profile (`guest.scheduler = "eevdf"`; linux-6.6 sets it), beside the CFS-like
//! runqueue of the papers' 3.x kernels (guest/runqueue.rs).
//!
//! Per vCPU, the threads on its runqueue and its current thread form one cfs_rq. A
//! thread is *eligible* when its vruntime is not beyond the runqueue's load-weighted
//! mean (`entity_eligible`); the pick is the eligible thread with the earliest virtual
//! deadline (`pick_eevdf`). A thread runs until its vruntime passes its deadline; then
//! it gets a new deadline one slice on (`update_deadline`) and, with others queued, a
//! reschedule — noticed at the guest's next tick (`CONFIG_HZ`, no HRTICK) or at the next
//! wake-up on that vCPU (`update_curr`). Once picked, a thread keeps the vCPU against
//! wake-ups while it is eligible and has not been given a new deadline (RUN_TO_PARITY);
//! otherwise a wake-up preempts when EEVDF would now pick the wakee
//! (`check_preempt_wakeup_fair`). A blocked thread keeps its lag, clamped (`update_entity_lag`), and is placed
//! back with it scaled for the load it joins (`place_entity`, PLACE_LAG); a migrated
//! thread carries its lag the same way. `sched_yield` pushes the deadline one slice on
//! (`yield_task_fair`). Threads are nice 0 (weight 1024), SCHED_IDLE ones weight 3
//! (WEIGHT_IDLEPRIO), and a waking normal thread always preempts a SCHED_IDLE one.
//!
//! The preemption model (`guest.preemption`) decides when a reschedule of a thread in
//! kernel mode (a system call's path, a switch-in, kernel work) takes effect: at once
//! with PREEMPT (full), at the return to user mode with PREEMPT_NONE and
//! PREEMPT_VOLUNTARY (the model's kernel paths have no cond_resched() points), and with
//! PREEMPT_LAZY (6.13+) at the next tick or the return to user mode, whichever is first.
//! A thread holding a kernel spinlock is never preempted (preempt_disable).
//!
//! The arithmetic (calc_delta_fair, lag limits and scaling, eligibility) is the host
//! EEVDF's (hv/sched/eevdf.rs).

use crate::guest::thread::ThreadState;
use crate::hv::sched::eevdf::{
    div_euclid_i128, eligible, fair, lag_limit, scale_lag, slice_factor, NICE_0_LOAD,
};
use crate::sim::world::World;
use crate::sim::{Nanos, ThreadId, VcpuId};

/// SCHED_IDLE's weight (kernel/sched/sched.h WEIGHT_IDLEPRIO).
pub(crate) const IDLE_WEIGHT: u64 = 3;

/// The base slice of a guest with `vcpus` vCPUs: `base` scaled by 1 + ilog2(min(vCPUs,
/// 8)), as the guest kernel scales sysctl_sched_base_slice for its CPUs.
pub fn scaled_base_slice(base: u64, vcpus: u32) -> u64 {
    base * slice_factor(vcpus)
}

impl World {
    #[inline]
    pub(crate) fn guest_eevdf(&self, v: VcpuId) -> bool {
        self.vms[self.vcpus[v.idx()].vm.idx()].guest.eevdf
    }

    #[inline]
    fn thread_weight(&self, t: ThreadId) -> u64 {
        if self.threads[t.idx()].idle_prio {
            IDLE_WEIGHT
        } else {
            NICE_0_LOAD
        }
    }

    /// Threads start queued with half a slice of deadline (PLACE_DEADLINE_INITIAL).
    pub(crate) fn eevdf_initial_deadline(&mut self, t: ThreadId) {
        let v = self.threads[t.idx()].vcpu;
        let slice = self.vms[self.vcpus[v.idx()].vm.idx()].guest.base_slice;
        let w = self.thread_weight(t);
        self.threads[t.idx()].deadline = fair(slice, w) as u64 / 2;
    }

    /// (Σ w·(v − base), Σ w, base) over `v`'s queued threads, its current one and
    /// `extra` (a thread being dequeued or migrated, counted as Linux counts it then).
    fn eevdf_parts(&self, v: VcpuId, extra: Option<ThreadId>) -> (i128, i128, u64) {
        let vc = &self.vcpus[v.idx()];
        let extra = extra.filter(|e| vc.cur != Some(*e) && !vc.rq.contains(e));
        let members = || vc.rq.iter().chain(vc.cur.iter()).chain(extra.iter());
        let Some(base) = members().map(|t| self.threads[t.idx()].vruntime).min() else {
            return (0, 0, 0);
        };
        let (mut sum, mut load) = (0i128, 0i128);
        for &t in members() {
            let w = self.thread_weight(t) as i128;
            sum += (self.threads[t.idx()].vruntime - base) as i128 * w;
            load += w;
        }
        (sum, load, base)
    }

    /// avg_vruntime(): the load-weighted mean vruntime of `v`'s runqueue.
    fn eevdf_avg(&self, v: VcpuId, extra: Option<ThreadId>) -> i128 {
        let (sum, load, base) = self.eevdf_parts(v, extra);
        if load == 0 {
            return self.vcpus[v.idx()].min_vr as i128;
        }
        base as i128 + div_euclid_i128(sum, load)
    }

    fn eevdf_eligible(&self, parts: (i128, i128, u64), t: ThreadId) -> bool {
        let key = self.threads[t.idx()].vruntime as i128 - parts.2 as i128;
        parts.1 == 0 || eligible(parts.0, parts.1, key)
    }

    /// pick_eevdf() over `v`'s queue (its current thread is not on it): the index of the
    /// eligible thread with the earliest deadline (the least vruntime if rounding left
    /// none eligible).
    pub(crate) fn eevdf_pick_index(&self, v: VcpuId) -> Option<usize> {
        let parts = self.eevdf_parts(v, None);
        let rq = &self.vcpus[v.idx()].rq;
        rq.iter()
            .enumerate()
            .filter(|(_, t)| self.eevdf_eligible(parts, **t))
            .min_by_key(|(i, t)| (self.threads[t.idx()].deadline, *i))
            .or_else(|| {
                rq.iter()
                    .enumerate()
                    .min_by_key(|(i, t)| (self.threads[t.idx()].vruntime, *i))
            })
            .map(|(i, _)| i)
    }

    /// set_next_entity(): the picked thread runs to parity.
    pub(crate) fn eevdf_set_next(&mut self, t: ThreadId) {
        self.threads[t.idx()].protect = true;
    }

    /// update_deadline() for `v`'s current thread `t`: a thread past its deadline gets a
    /// new one a slice on and stops running to parity. True when a reschedule is due
    /// (a new deadline with other threads queued).
    pub(crate) fn eevdf_update_deadline(&mut self, v: VcpuId, t: ThreadId) -> bool {
        let slice = self.vms[self.vcpus[v.idx()].vm.idx()].guest.base_slice;
        let vslice = fair(slice, self.thread_weight(t)) as u64;
        let th = &mut self.threads[t.idx()];
        if th.vruntime < th.deadline {
            return false;
        }
        th.deadline = th.vruntime + vslice;
        th.protect = false;
        !self.vcpus[v.idx()].rq.is_empty()
    }

    /// When `t`, resuming at `t0`, reaches its deadline if it runs on (a tick from then
    /// on finds its slice used up: guest/preempt.rs).
    pub(crate) fn eevdf_slice_end(&self, t: ThreadId, t0: Nanos) -> Nanos {
        let th = &self.threads[t.idx()];
        let w = self.thread_weight(t);
        // Wall time until the deadline: virtual time at weight w runs 1024/w as fast.
        let to_dl =
            th.deadline.saturating_sub(th.vruntime) as u128 * w as u128 / NICE_0_LOAD as u128;
        t0 + Nanos(to_dl as u64)
    }

    /// update_entity_lag() as `t` leaves `v`'s runqueue (blocks or migrates).
    pub(crate) fn eevdf_save_lag(&mut self, v: VcpuId, t: ThreadId) {
        let avg = self.eevdf_avg(v, Some(t));
        let g = &self.vms[self.vcpus[v.idx()].vm.idx()].guest;
        let limit = lag_limit(g.base_slice, g.tick, self.thread_weight(t));
        let th = &mut self.threads[t.idx()];
        th.vlag = (avg - th.vruntime as i128).clamp(-limit as i128, limit as i128) as i64;
    }

    /// place_entity() as `t` joins `v`'s runqueue (it is not on it yet): vruntime the
    /// average less its kept lag, scaled for the load it joins; deadline a slice on.
    pub(crate) fn eevdf_place(&mut self, v: VcpuId, t: ThreadId) {
        let (_, load, _) = self.eevdf_parts(v, None);
        let avg = self.eevdf_avg(v, None);
        let w = self.thread_weight(t);
        let lag = if load > 0 {
            scale_lag(self.threads[t.idx()].vlag, load, w)
        } else {
            0
        };
        let slice = self.vms[self.vcpus[v.idx()].vm.idx()].guest.base_slice;
        let th = &mut self.threads[t.idx()];
        th.vruntime = (avg - lag).max(0) as u64;
        th.deadline = th.vruntime + fair(slice, w) as u64;
        th.protect = false;
    }

    /// yield_task_fair(): the yielder's deadline moves a slice on.
    pub(crate) fn eevdf_yield(&mut self, v: VcpuId, t: ThreadId) {
        let slice = self.vms[self.vcpus[v.idx()].vm.idx()].guest.base_slice;
        let vslice = fair(slice, self.thread_weight(t)) as u64;
        let th = &mut self.threads[t.idx()];
        th.deadline += vslice;
        th.protect = false;
    }

    /// check_preempt_wakeup_fair() on `v`, whose current thread is `c`, after `wakee` was
    /// queued there: whether EEVDF would now pick the wakee (without a known wakee:
    /// whether it would pick any thread but `c`).
    pub(crate) fn eevdf_wakeup_preempts(
        &mut self,
        v: VcpuId,
        c: ThreadId,
        wakee: Option<ThreadId>,
    ) -> bool {
        let normal_waiting = self.vcpus[v.idx()]
            .rq
            .iter()
            .any(|t| !self.threads[t.idx()].idle_prio);
        if self.threads[c.idx()].idle_prio && normal_waiting {
            return true;
        }
        // update_curr() first: a used-up slice gets its new deadline here.
        if self.eevdf_update_deadline(v, c) {
            return true;
        }
        let parts = self.eevdf_parts(v, None);
        let cur_eligible = self.eevdf_eligible(parts, c);
        if cur_eligible && self.threads[c.idx()].protect {
            return false;
        }
        // pick_eevdf(): the eligible queued thread with the earliest deadline, unless
        // the (eligible) current one's is earlier still.
        let cdl = self.threads[c.idx()].deadline;
        let best = self.vcpus[v.idx()]
            .rq
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, t)| self.eevdf_eligible(parts, *t))
            .min_by_key(|(i, t)| (self.threads[t.idx()].deadline, *i))
            .map(|(_, t)| t)
            .filter(|t| !cur_eligible || self.threads[t.idx()].deadline < cdl);
        match (best, wakee) {
            (Some(b), Some(w)) => b == w,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Whether `t` on `v` is a blocked or finished thread leaving the runqueue.
    pub(crate) fn leaves_runqueue(&self, t: ThreadId) -> bool {
        matches!(
            self.threads[t.idx()].state,
            ThreadState::Blocked | ThreadState::Done
        )
    }
}
