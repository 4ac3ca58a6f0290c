//! Timed blocking (sleep, device I/O) and the timer interrupt that wakes a sleeping
//! thread (hrtimer expiry, try_to_wake_up, check_preempt_wakeup): on the vCPU it slept
//! on, unless that vCPU is busy and an idle one can take it.

use crate::guest::ipi::wake_path_of;
use crate::guest::thread::ThreadState;
use crate::hv::irq::{Delivered, Irq};
use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, ThreadId, VcpuId};

impl World {
    /// Blocks `t` until `ev` fires `dur` from now (a sleep's timer, a device's
    /// completion).
    pub(crate) fn block_with_timer(&mut self, t: ThreadId, v: VcpuId, ev: Ev, dur: u64) {
        let now = self.now;
        let th = &mut self.threads[t.idx()];
        th.state = ThreadState::Blocked;
        th.timer_gen = th.timer_gen.wrapping_add(1);
        // The system call's return path runs when it wakes.
        th.debt += Nanos(self.costs.syscall_ns);
        let ev = match ev {
            Ev::ThreadTimer(t, _) => Ev::ThreadTimer(t, th.timer_gen),
            e => e,
        };
        self.q.push(now + Nanos(dur), ev);
        self.trace_thread_end(v);
    }

    /// A sleeping thread's timer fires: the timer interrupt goes to the vCPU the thread
    /// slept on, which wakes it there — or, when that vCPU runs another thread and wake-up
    /// placement finds an idle one, there, with a reschedule IPI.
    pub(crate) fn on_thread_timer(&mut self, t: ThreadId) {
        let now = self.now;
        let v = self.threads[t.idx()].vcpu;
        let latency = self.vms[self.vcpus[v.idx()].vm.idx()].guest.latency;
        let min_vr = self.vcpus[v.idx()].min_vr;
        if self.threads[t.idx()].state != ThreadState::Blocked {
            return;
        }
        // The timer's interrupt runs try_to_wake_up on `v`: select_task_rq_fair keeps
        // the thread there if `v` is idle, and otherwise sends it to an idle vCPU
        // (select_idle_sibling) — a cross-vCPU wake-up from the interrupt handler, as a
        // device completion's.
        let busy = {
            let vc = &self.vcpus[v.idx()];
            vc.cur.is_some() && vc.is_running()
        };
        if busy && self.select_wake_vcpu(t, None) != v {
            self.irq_deliver(v, Irq::Timer);
            self.send_wake(v, t);
            if self.vcpus[v.idx()].is_running() {
                self.vcpu_continue(v);
            }
            return;
        }
        let eevdf = self.guest_eevdf(v);
        if eevdf {
            self.eevdf_place(v, t);
        }
        let th = &mut self.threads[t.idx()];
        th.state = ThreadState::Runnable;
        th.woken_at = Some(now);
        if !eevdf {
            th.vruntime = th.vruntime.max(min_vr.saturating_sub(latency / 2));
        }
        self.rq_push(v, t);
        if self.vcpus[v.idx()].cur.is_some() {
            // Woken where it slept, behind a running thread: an idle vCPU may take it.
            self.nohz_arm(self.vcpus[v.idx()].vm.idx());
        }
        let how = self.irq_deliver(v, Irq::Timer);
        self.threads[t.idx()].wake_path = wake_path_of(how);
        if how == Delivered::Running {
            if let Some(c) = self.vcpus[v.idx()].cur {
                if self.wakeup_preempts(v, c, Some(t)) && self.resched_now(v, c, false) {
                    self.guest_preempt(v, c);
                }
            }
            self.vcpu_continue(v);
        }
    }
}
