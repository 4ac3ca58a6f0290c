//! The guest runqueue: which thread a vCPU runs next (least vruntime, CFS-like), newidle
//! pulls from a busy sibling, cpuset changes and the migrations they force, and CFS's
//! rules for when a reschedule is due — the time slice checked at the tick and wake-up
//! preemption (Linux kernel/sched/fair.c: pick_next_entity, newidle_balance,
//! migrate_task_rq_fair, sched_slice, check_preempt_tick, check_preempt_wakeup). When a
//! due reschedule takes effect is guest/preempt.rs's.

use crate::guest::thread::{ThreadActivity, ThreadState};
use crate::host::cpumask::CpuMask;
use crate::hv::irq::{Delivered, Irq};
use crate::sim::world::World;
use crate::sim::{Nanos, ThreadId, VcpuId};

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

    /// Takes the thread with the least vruntime off `v`'s runqueue; a vCPU with nothing
    /// queued first pulls a queued thread from its busiest sibling (newidle balancing,
    /// within its gates: guest/balance.rs `GuestBalance`).
    pub(crate) fn guest_pick(&mut self, v: VcpuId) -> Option<ThreadId> {
        if self.vcpus[v.idx()].rq.is_empty() {
            let vc = &self.vcpus[v.idx()];
            if self.vms[vc.vm.idx()].balance.balances(vc.avg_idle) {
                self.guest_pull(v, true);
            }
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

    /// Pulls one queued thread from `v`'s busiest sibling onto `v` (load_balance's
    /// detach_tasks / attach_tasks, one task); a newidle balance (`newidle`) leaves
    /// cache-hot threads where they are. True when it moved one.
    pub(crate) fn guest_pull(&mut self, v: VcpuId, newidle: bool) -> bool {
        let vm = self.vcpus[v.idx()].vm.idx();
        let m = &self.vms[vm];
        if m.queued == 0 || !m.guest.load_balance || !m.cpuset.contains(v.0 - m.first_vcpu) {
            return false;
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
            let hot_until = if newidle {
                self.vms[vm].balance.migration_cost
            } else {
                0
            };
            let now = self.now;
            let Some(i) = self.vcpus[s.idx()].rq.iter().position(|t| {
                let th = &self.threads[t.idx()];
                // task_hot(): it ran within the migration cost (MAX: never ran).
                let hot =
                    th.last_ran != Nanos::MAX && now.0.saturating_sub(th.last_ran.0) < hot_until;
                !th.yielder && !hot
            }) else {
                return false;
            };
            let t = self.vcpus[s.idx()].rq.remove(i);
            self.move_thread(t, v);
            self.vcpus[v.idx()].rq.push(t);
            return true;
        }
        false
    }

    /// Queues `t` on `v`'s runqueue.
    #[inline]
    pub(crate) fn rq_push(&mut self, v: VcpuId, t: ThreadId) {
        let vc = &mut self.vcpus[v.idx()];
        vc.rq.push(t);
        let vm = vc.vm.idx();
        self.vms[vm].queued += 1;
        self.busy_arm(vm);
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

    /// The CFS queue's leftmost thread as pick_next_entity sees it: normal threads
    /// before SCHED_IDLE ones, then the least vruntime.
    fn cfs_leftmost(&self, v: VcpuId) -> Option<ThreadId> {
        self.vcpus[v.idx()].rq.iter().copied().min_by_key(|t| {
            let th = &self.threads[t.idx()];
            (th.idle_prio, th.vruntime)
        })
    }

    /// check_preempt_tick() (kernel/sched/fair.c, Linux 2.6.23–6.5) for `v`'s current
    /// thread `t` at a tick: it has run more than its ideal slice since it was picked,
    /// or — after at least min_granularity — its vruntime leads the leftmost queued
    /// thread's by more than that slice.
    pub(crate) fn cfs_slice_over(&self, v: VcpuId, t: ThreadId) -> bool {
        let ideal = self.guest_slice(v);
        let th = &self.threads[t.idx()];
        if th.slice_used > ideal {
            return true;
        }
        let min_gran = self.vms[th.vm.idx()].guest.min_gran;
        if th.slice_used < min_gran {
            return false;
        }
        self.cfs_leftmost(v).is_some_and(|l| {
            th.vruntime as i128 - self.threads[l.idx()].vruntime as i128 > ideal as i128
        })
    }

    /// When `t` on `v`, resuming at `t0` and running on, first meets check_preempt_tick's
    /// conditions (`cfs_slice_over`): its run time and vruntime both grow with wall time
    /// while it runs (weight 1024).
    pub(crate) fn cfs_slice_end(&self, v: VcpuId, t: ThreadId, t0: Nanos) -> Nanos {
        let ideal = self.guest_slice(v);
        let th = &self.threads[t.idx()];
        let over_slice = (ideal + 1).saturating_sub(th.slice_used);
        let over_lead = self.cfs_leftmost(v).map_or(u64::MAX, |l| {
            let lead = th.vruntime as i128 - self.threads[l.idx()].vruntime as i128;
            let to_lead = (ideal as i128 + 1 - lead).max(0) as u64;
            let min_gran = self.vms[th.vm.idx()].guest.min_gran;
            to_lead.max(min_gran.saturating_sub(th.slice_used))
        });
        t0 + Nanos(over_slice.min(over_lead))
    }

    /// check_preempt_wakeup() (kernel/sched/fair.c, Linux 2.6.23–6.5) on `v`, whose
    /// current thread is `c`, after `wakee` was queued there: a normal thread preempts a
    /// SCHED_IDLE one; a SCHED_IDLE wakee never preempts; otherwise the current thread's
    /// vruntime must lead the wakee's by more than the wake-up granularity
    /// (wakeup_preempt_entity; nice-0 threads, so the granularity is not rescaled).
    /// Without a known wakee (reschedule IPIs taken at entry), the leftmost queued
    /// thread stands for it.
    pub(crate) fn cfs_wakeup_preempts(
        &self,
        v: VcpuId,
        c: ThreadId,
        wakee: Option<ThreadId>,
    ) -> bool {
        let Some(w) = wakee.or_else(|| self.cfs_leftmost(v)) else {
            return false;
        };
        let (cur, wt) = (&self.threads[c.idx()], &self.threads[w.idx()]);
        if cur.idle_prio && !wt.idle_prio {
            return true;
        }
        if wt.idle_prio {
            return false;
        }
        let gran = self.vms[cur.vm.idx()].guest.wakeup_gran;
        cur.vruntime.saturating_sub(wt.vruntime) > gran
    }

    /// Puts the current thread back on the runqueue (its guest slice is over).
    pub(crate) fn guest_preempt(&mut self, v: VcpuId, t: ThreadId) {
        self.trace_thread_end(v);
        self.guest_tlb_leave(v, t);
        let vc = &mut self.vcpus[v.idx()];
        vc.cur = None;
        self.rq_push(v, t);
        self.threads[t.idx()].state = ThreadState::Runnable;
        self.threads[t.idx()].last_ran = self.now;
        self.rwsem_owner_left(t);
    }

    /// Changes a VM's cpuset: queued threads on vCPUs left out move to the least loaded
    /// allowed vCPU, and running ones are preempted and moved (as set_cpus_allowed_ptr
    /// migrates them), except inside a kernel spinlock section, which they finish first.
    /// `exec`: the vCPU running the change (its own thread is handled by the caller).
    pub(crate) fn set_cpuset(&mut self, vm: usize, mask: CpuMask, exec: VcpuId) {
        self.vms[vm].cpuset = mask;
        let (first, n) = (self.vms[vm].first_vcpu, self.vms[vm].nvcpus);
        for i in 0..n {
            if mask.contains(i) {
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
            // Threads on its wake list join its runqueue now, to move with the rest (as
            // set_cpus_allowed_ptr's migration would take them once queued).
            for t in std::mem::take(&mut self.vcpus[v.idx()].wake_list) {
                self.activate_woken(t, v);
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
                    .filter(|&j| mask.contains(j))
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
        let how = self.irq_deliver(
            to,
            Irq::Kick {
                only_idle: true,
                waker: None,
            },
        );
        if how == Delivered::Running && self.vcpus[to.idx()].cur.is_none() {
            self.vcpu_continue(to);
        }
    }
}
