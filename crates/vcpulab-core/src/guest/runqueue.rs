//! The guest runqueue: which thread a vCPU runs next (least vruntime, CFS-like), newidle
//! pulls from a busy sibling, cpuset changes and the migrations they force, and the
//! guest's time slice (Linux kernel/sched/fair.c: pick_next_entity, newidle_balance,
//! migrate_task_rq_fair, sched_slice).

use crate::guest::thread::{ThreadActivity, ThreadState};
use crate::hv::irq::{Delivered, Irq};
use crate::sim::world::World;
use crate::sim::{ThreadId, VcpuId};

impl World {
    /// sched_yield's effect on the runqueue (yield_task_fair): the yielder `t` goes
    /// behind every thread queued on `v`.
    pub(crate) fn yield_behind_queued(&mut self, v: VcpuId, t: ThreadId) {
        if self.guest_eevdf(v) {
            return self.eevdf_yield(v, t);
        }
        let max_vr = self.vcpus[v.idx()]
            .rq
            .iter()
            .map(|o| self.threads[o.idx()].vruntime)
            .max()
            .unwrap_or(0);
        let th = &mut self.threads[t.idx()];
        th.vruntime = th.vruntime.max(max_vr + 1);
    }

    pub(crate) fn guest_slice(&self, v: VcpuId) -> u64 {
        let vc = &self.vcpus[v.idx()];
        let g = &self.vms[vc.vm.idx()].guest;
        let nr = vc.rq.len() as u64 + 1;
        (g.latency / nr).max(g.min_gran)
    }

    /// Takes the thread with the least vruntime off `v`'s runqueue; an idle vCPU
    /// first pulls a queued thread from its busiest sibling (newidle balancing).
    pub(crate) fn guest_pick(&mut self, v: VcpuId) -> Option<ThreadId> {
        if self.vcpus[v.idx()].rq.is_empty() {
            self.guest_pull(v);
        }
        if self.guest_eevdf(v) {
            let i = self.eevdf_pick_index(v)?;
            let vc = &mut self.vcpus[v.idx()];
            let t = vc.rq.remove(i);
            self.vms[vc.vm.idx()].queued -= 1;
            self.eevdf_set_next(t);
            return Some(t);
        }
        let vc = &mut self.vcpus[v.idx()];
        let (i, _) = vc
            .rq
            .iter()
            .enumerate()
            // SCHED_IDLE threads run only when no normal thread is runnable.
            .min_by_key(|(_, t)| {
                let th = &self.threads[t.idx()];
                (th.idle_prio, th.vruntime)
            })?;
        let t = vc.rq.remove(i);
        let vm = vc.vm.idx();
        self.vms[vm].queued -= 1;
        vc.min_vr = vc.min_vr.max(self.threads[t.idx()].vruntime);
        Some(t)
    }

    pub(crate) fn guest_pull(&mut self, v: VcpuId) {
        let vm = self.vcpus[v.idx()].vm.idx();
        let m = &self.vms[vm];
        if m.queued == 0 || !m.guest.load_balance || m.cpuset >> (v.0 - m.first_vcpu) & 1 == 0 {
            return;
        }
        let busiest = (m.first_vcpu..m.first_vcpu + m.nvcpus)
            .map(VcpuId)
            // Linux pulls only from a CPU with more than one runnable task.
            .filter(|s| {
                let sv = &self.vcpus[s.idx()];
                *s != v
                    && !sv.rq.is_empty()
                    && sv.rq.len() + sv.cur.is_some() as usize >= 2
                    // Gleaner's yielding threads are pinned to their vCPU.
                    && sv.rq.iter().any(|t| !self.threads[t.idx()].yielder)
            })
            .max_by_key(|s| (self.vcpus[s.idx()].rq.len(), std::cmp::Reverse(s.0)));
        if let Some(s) = busiest {
            let Some(i) = self.vcpus[s.idx()]
                .rq
                .iter()
                .position(|t| !self.threads[t.idx()].yielder)
            else {
                return;
            };
            let t = self.vcpus[s.idx()].rq.remove(i);
            self.move_thread(t, v);
            self.vcpus[v.idx()].rq.push(t);
        }
    }

    /// Queues `t` on `v`'s runqueue.
    #[inline]
    pub(crate) fn rq_push(&mut self, v: VcpuId, t: ThreadId) {
        let vc = &mut self.vcpus[v.idx()];
        vc.rq.push(t);
        self.vms[vc.vm.idx()].queued += 1;
    }

    /// Assigns `t` to vCPU `to`, carrying its vruntime over as Linux's
    /// migrate_task_rq_fair does: relative to the old runqueue's min_vruntime, then
    /// based on the new one's (else a thread from a busier runqueue would queue far
    /// behind, or one from an idler runqueue far ahead).
    pub(crate) fn move_thread(&mut self, t: ThreadId, to: VcpuId) {
        let from = self.threads[t.idx()].vcpu;
        if from != to && self.guest_eevdf(to) {
            // EEVDF carries the lag: a queued thread leaves with it and is placed with it
            // (a blocked one saved it when it blocked and is placed as it wakes).
            let queued = self.threads[t.idx()].state == ThreadState::Runnable;
            if queued {
                self.eevdf_save_lag(from, t);
            }
            self.threads[t.idx()].vcpu = to;
            if queued {
                self.eevdf_place(to, t);
            }
        } else if from != to {
            let (old, new) = (self.vcpus[from.idx()].min_vr, self.vcpus[to.idx()].min_vr);
            let th = &mut self.threads[t.idx()];
            let rel = th.vruntime as i128 - old as i128;
            th.vruntime = (new as i128 + rel).max(0) as u64;
            th.vcpu = to;
        }
    }

    /// A reschedule asked for on `v` (`need_resched`: by a wake-up, or on EEVDF guests
    /// also by the tick), seen by its current thread `t` between or within its
    /// operations: true when `t` is to be preempted now. EEVDF guests follow their
    /// preemption model (guest/eevdf.rs). On CFS guests, inside a kernel spin section
    /// (preemption off) it stays pending until the section ends; with nothing queued
    /// any more it lapses.
    pub(crate) fn pending_resched(&mut self, v: VcpuId, t: ThreadId) -> bool {
        if self.guest_eevdf(v) {
            return self.eevdf_pending_resched(v, t);
        }
        let vc = &mut self.vcpus[v.idx()];
        if !vc.need_resched || !self.threads[t.idx()].held.is_empty() {
            return false;
        }
        vc.need_resched = false;
        !vc.rq.is_empty()
    }

    /// Puts the current thread back on the runqueue (its guest slice is over).
    pub(crate) fn guest_preempt(&mut self, v: VcpuId, t: ThreadId) {
        self.trace_thread_end(v);
        self.guest_tlb_leave(v, t);
        let vc = &mut self.vcpus[v.idx()];
        vc.cur = None;
        self.rq_push(v, t);
        self.threads[t.idx()].state = ThreadState::Runnable;
    }

    /// Changes a VM's cpuset: queued threads on vCPUs left out move to the least loaded
    /// allowed vCPU, and running ones are preempted and moved (as set_cpus_allowed_ptr
    /// migrates them), except inside a kernel spinlock section, which they finish first.
    /// `exec`: the vCPU running the change (its own thread is handled by the caller).
    pub(crate) fn set_cpuset(&mut self, vm: usize, mask: u128, exec: VcpuId) {
        self.vms[vm].cpuset = mask;
        let (first, n) = (self.vms[vm].first_vcpu, self.vms[vm].nvcpus);
        for i in 0..n {
            if mask >> i & 1 == 1 {
                continue;
            }
            let v = VcpuId(first + i);
            if let Some(c) = self.vcpus[v.idx()].cur.filter(|_| v != exec) {
                let th = &self.threads[c.idx()];
                if th.held.is_empty() && th.act == ThreadActivity::Work && !th.idle_prio {
                    self.sync_progress(v);
                    self.guest_preempt(v, c);
                }
            }
            while let Some(t) = self.vcpus[v.idx()]
                .rq
                .iter()
                .copied()
                .find(|t| !self.threads[t.idx()].idle_prio)
            {
                let pos = self.vcpus[v.idx()]
                    .rq
                    .iter()
                    .position(|x| *x == t)
                    .unwrap_or(0);
                self.vcpus[v.idx()].rq.remove(pos);
                self.vms[vm].queued -= 1;
                let to = (0..n)
                    .filter(|j| mask >> j & 1 == 1)
                    .map(|j| VcpuId(first + j))
                    .min_by_key(|d| {
                        let dv = &self.vcpus[d.idx()];
                        (dv.rq.len() + dv.cur.is_some() as usize, d.0)
                    })
                    .unwrap_or(v);
                self.move_thread(t, to);
                self.rq_push(to, t);
                if to != exec {
                    self.kick_vcpu_for_work(to);
                }
            }
            if v != exec && self.vcpus[v.idx()].is_running() && self.vcpus[v.idx()].cur.is_none() {
                // Nothing left for it: it idles (and halts).
                self.vcpu_continue(v);
            }
        }
    }

    /// `to` got a thread from `from`'s side: make sure it notices (wake it if halted,
    /// let an idle loop pick it up, interrupt a busy one).
    pub(crate) fn kick_vcpu_for_work(&mut self, to: VcpuId) {
        let how = self.irq_deliver(to, Irq::Kick { only_idle: true });
        if how == Delivered::Running && self.vcpus[to.idx()].cur.is_none() {
            self.vcpu_continue(to);
        }
    }
}
