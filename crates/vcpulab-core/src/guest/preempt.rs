//! When a guest reschedule takes effect, for both guest schedulers: the reschedule flag
//! (TIF_NEED_RESCHED), the preemption model (`guest.preemption`, CONFIG_PREEMPT_*), the
//! scheduler tick (`guest.tick_hz`, CONFIG_HZ; no HRTICK, which Linux leaves off) and a
//! tick that fell while the vCPU was descheduled.
//!
//! Whether a reschedule is *due* is the scheduler's own rule — CFS's check_preempt_tick
//! and check_preempt_wakeup (guest/runqueue.rs), EEVDF's update_deadline and
//! check_preempt_wakeup_fair (guest/eevdf.rs). Once it is due, the kernel sets the flag
//! (resched_curr) and the switch happens at the next preemption point: the return to
//! user mode in every model; also at once in kernel code with PREEMPT (full), at the
//! next tick with PREEMPT_LAZY (6.13+); never inside a spinlock section
//! (preempt_disable). A context switch clears the flag (schedule()). A thread spinning in
//! user space (a library's mutex, barrier or read-write lock spin) is in user mode: it is
//! preempted as a computing thread is, and the tick ends its slice while it spins.
//!
//! The tick is not simulated as an event per 1/HZ: a running thread's next tick that
//! can change anything is computed (`tick_at`) and its step armed there. A tick that
//! falls while the vCPU is descheduled leaves the guest's timer interrupt pending, taken
//! at the next entry (`missed_tick`).

use crate::guest::thread::ThreadActivity;
use crate::scenario::PreemptionModel;
use crate::sim::world::World;
use crate::sim::{Nanos, ThreadId, VcpuId};

/// The first tick at or after `t` of a grid of `period` at `phase` (ticks at
/// `phase` + multiples of `period`).
pub(crate) fn tick_after(t: Nanos, period: u64, phase: u64) -> Nanos {
    let p = period.max(1);
    let phase = phase % p;
    if t.0 <= phase {
        return Nanos(phase);
    }
    Nanos((t.0 - phase).div_ceil(p) * p + phase)
}

impl World {
    /// The first tick of VM `vm`'s guest kernel at or after `t` (its grid's phase:
    /// `Vm::tick_phase_us`).
    #[inline]
    pub(crate) fn guest_tick_after(&self, vm: usize, t: Nanos) -> Nanos {
        let m = &self.vms[vm];
        tick_after(t, m.guest.tick, u64::from(m.tick_phase_us) * 1_000)
    }
}

impl World {
    /// Whether `t`, running on `v`, is in kernel mode for the preemption model.
    fn in_kernel_mode(&self, t: ThreadId) -> bool {
        let th = &self.threads[t.idx()];
        // A thread spinning in user space is in user mode, whatever kernel time (a
        // switch-in's cost) it still owes: the debt is booked when it next works.
        // Counting it as kernel mode made such a spinner unpreemptible under
        // PREEMPT_NONE/VOLUNTARY, for ever if its spin has no budget.
        if th.act.is_user_spin() {
            return false;
        }
        th.debt.0 > 0 || (th.in_kernel && th.remaining.0 > 0)
    }

    /// A reschedule of `v`'s current thread `t` is due (`at_tick`: found by the tick):
    /// true when it takes effect now; else it is left pending (need_resched) for the
    /// return to user mode, the end of the spinlock section, or (lazy) the next tick.
    pub(crate) fn resched_now(&mut self, v: VcpuId, t: ThreadId, at_tick: bool) -> bool {
        let model = self.vms[self.vcpus[v.idx()].vm.idx()].guest.preemption;
        let kernel = self.in_kernel_mode(t);
        let th = &self.threads[t.idx()];
        let now = th.held.is_empty()
            && (th.act == ThreadActivity::Work || th.act.is_user_spin())
            && (!kernel
                || match model {
                    PreemptionModel::Full => true,
                    PreemptionModel::None | PreemptionModel::Voluntary => false,
                    PreemptionModel::Lazy => at_tick,
                });
        let vc = &mut self.vcpus[v.idx()];
        if now {
            vc.need_resched = false;
            vc.resched_lazy = false;
        } else {
            vc.need_resched = true;
            vc.resched_lazy |= model == PreemptionModel::Lazy && kernel && !at_tick;
        }
        now
    }

    /// A reschedule asked for on `v` and not yet honoured, seen by its current thread
    /// `t` between or within its operations: true when `t` is to be preempted now. With
    /// nothing queued any more the flag is dropped (schedule() would pick `t` again).
    pub(crate) fn pending_resched(&mut self, v: VcpuId, t: ThreadId) -> bool {
        let vc = &mut self.vcpus[v.idx()];
        if !vc.need_resched {
            return false;
        }
        if vc.rq.is_empty() {
            vc.need_resched = false;
            vc.resched_lazy = false;
            return false;
        }
        let at_tick = self.now >= vc.tick_at;
        self.resched_now(v, t, at_tick)
    }

    /// At `v`'s step, its current thread `t` working: the tick planned at `tick_at` has
    /// come and runs the scheduler's check (a reschedule is due if its rule says so, or
    /// a lazy one is upgraded); before it, only a pending reschedule is looked at. True
    /// when `t` is to be preempted now.
    pub(crate) fn guest_tick(&mut self, v: VcpuId, t: ThreadId) -> bool {
        if self.now < self.vcpus[v.idx()].tick_at {
            return self.pending_resched(v, t);
        }
        let due = if self.guest_eevdf(v) {
            self.eevdf_update_deadline(v, t)
        } else {
            self.cfs_slice_over(v, t)
        };
        let due = due || self.vcpus[v.idx()].need_resched;
        due && !self.vcpus[v.idx()].rq.is_empty() && self.resched_now(v, t, true)
    }

    /// When `v` next looks at its current thread `t`'s slice, resuming at `t0`: the
    /// scheduler's next tick that can find a reschedule due. Records it as `tick_at`.
    pub(crate) fn next_tick_check(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) -> Nanos {
        let vm = self.vcpus[v.idx()].vm.idx();
        let due_from = if self.guest_eevdf(v) {
            self.eevdf_slice_end(t, t0)
        } else {
            self.cfs_slice_end(v, t, t0)
        };
        let mut at = self.guest_tick_after(vm, due_from);
        if self.vcpus[v.idx()].resched_lazy {
            at = at.min(self.guest_tick_after(vm, t0 + Nanos(1)));
        }
        let vc = &mut self.vcpus[v.idx()];
        vc.tick_at = at;
        at
    }

    /// `v` enters its pCPU after its planned tick check (`tick_at`) fell while it was
    /// descheduled: the guest's timer interrupt stayed pending and is taken now, and the
    /// tick's check runs. Without this a vCPU whose host slices keep ending just before
    /// its ticks never sees one, and its current thread never gives way.
    pub(crate) fn missed_tick(&mut self, v: VcpuId) {
        if self.now < self.vcpus[v.idx()].tick_at {
            return;
        }
        let Some(t) = self.vcpus[v.idx()].cur else {
            return;
        };
        let th = &self.threads[t.idx()];
        let busy = th.debt.0 > 0 || th.remaining.0 > 0;
        let slices = (th.act == ThreadActivity::Work && busy) || th.act.sees_tick();
        if slices && self.guest_tick(v, t) {
            self.guest_preempt(v, t);
        }
    }

    /// A context switch on `v` clears its pending reschedule (schedule() clears
    /// TIF_NEED_RESCHED) and its planned tick check.
    pub(crate) fn resched_cleared(&mut self, v: VcpuId) {
        let vc = &mut self.vcpus[v.idx()];
        vc.need_resched = false;
        vc.resched_lazy = false;
        vc.tick_at = Nanos::MAX;
    }

    /// A wake-up queued `wakee` (None: some thread, not known which) on `v`, whose
    /// current thread is `c`: whether the scheduler's wake-up preemption rule asks for a
    /// reschedule.
    pub(crate) fn wakeup_preempts(
        &mut self,
        v: VcpuId,
        c: ThreadId,
        wakee: Option<ThreadId>,
    ) -> bool {
        if self.guest_eevdf(v) {
            self.eevdf_wakeup_preempts(v, c, wakee)
        } else {
            self.cfs_wakeup_preempts(v, c, wakee)
        }
    }
}
