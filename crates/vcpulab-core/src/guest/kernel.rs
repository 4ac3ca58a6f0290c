//! The thread step machine: what a running vCPU does next (run its current thread's
//! work, spin, or go idle), the step events that end each segment, and the context
//! switch into a thread.
//! A thread progresses only while its vCPU runs on a pCPU and it is the vCPU's current
//! thread; progress is computed from timestamps, never simulated in small steps.
//! Spinning (kernel spinlocks, user mutex spin, spin barriers, TLB-shootdown waits) is
//! a state with a timer: the PLE window or the spin budget, whichever ends first.
//! The other guest concerns live beside it: runqueue.rs (which thread next), idle.rs
//! (idle loop, haltpoll, HLT), interpreter.rs (a thread's program), timer.rs (timed
//! blocking and timer wake-ups).

use crate::guest::interpreter::Advance;
use crate::guest::thread::{ThreadActivity, ThreadState};
use crate::hv::vcpu::{VCat, VcpuActivity};
use crate::sim::world::World;
use crate::sim::{Nanos, ThreadId, VcpuId};

/// Where a VM's synchronization objects start in the global arenas.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjBases {
    pub spin: u32,
    pub mutex: u32,
    pub barrier: u32,
    pub cond: u32,
    pub queue: u32,
    pub sem: u32,
    pub rwsem: u32,
}

impl World {
    /// Credits the running vCPU's current thread with the progress made since its
    /// segment started (work done, or spin budget used).
    #[inline]
    pub(crate) fn sync_progress(&mut self, v: VcpuId) {
        self.sync_progress_at::<false>(v);
    }

    /// `sync_progress` of a vCPU whose work runs below full speed (host/speed.rs): out
    /// of line, so that the common case carries nothing for it.
    #[cold]
    #[inline(never)]
    fn sync_progress_slowed(&mut self, v: VcpuId) {
        self.sync_progress_at::<true>(v);
    }

    #[inline(always)]
    fn sync_progress_at<const SLOWED: bool>(&mut self, v: VcpuId) {
        let now = self.now;
        let vc = &mut self.vcpus[v.idx()];
        let Some(t) = vc.cur else { return };
        if !vc.is_running() || vc.act != VcpuActivity::Thread || now <= vc.seg_start {
            return;
        }
        if !SLOWED && vc.slow != 0 {
            // (Nothing changed yet: the slowed variant starts over.)
            return self.sync_progress_slowed(v);
        }
        let mut el = (now - vc.seg_start).0;
        vc.seg_start = now;
        let vm = vc.vm.idx();
        let th = &mut self.threads[t.idx()];
        th.vruntime += if th.idle_prio && self.vms[vm].guest.eevdf {
            crate::hv::sched::eevdf::fair(el, crate::guest::eevdf::IDLE_WEIGHT) as u64
        } else {
            el
        };
        th.slice_used += el;
        if th.act != ThreadActivity::Work {
            th.spin_left = th.spin_left.saturating_sub(el);
            return;
        }
        // Work re-fetches the vCPU's missing working set as it goes (host/cache.rs).
        let prof = &self.vms[vc.vm.idx()].cache;
        let (progress, stall) = self.cache.split_elapsed(prof, el, vc.refill_left_ns);
        vc.refill_left_ns -= stall;
        vc.refill_ns += stall;
        el = progress;
        if SLOWED {
            // A core shared with a busy sibling, or memory on another node: less work
            // in the time (host/speed.rs).
            let speed = crate::host::speed::slowed(self.smt, self.vms[vm].remote_speed, vc.slow);
            el = crate::host::speed::progress(speed, el);
        }
        let d = el.min(th.debt.0);
        th.debt.0 -= d;
        el -= d;
        th.remaining.0 -= el.min(th.remaining.0);
    }

    /// Makes `t` the current thread of `v`, which resumes guest work at `t0`.
    pub(crate) fn become_current(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        let switch = self.costs.guest_switch_ns + self.guest_tlb_refill(v, t);
        let vm = self.vcpus[v.idx()].vm.idx();
        // switch_mm (arch/x86/mm/tlb.c): the vCPU enters the thread's process's mm CPU
        // mask and leaves the previous one's. Gleaner's yielding threads belong to
        // another process.
        let th = &self.threads[t.idx()];
        let mm = if th.yielder {
            crate::hv::vcpu::OTHER_MM
        } else {
            th.process
        };
        let vc = &mut self.vcpus[v.idx()];
        // A context switch unless the same thread simply continues (coming out of the
        // idle task is a switch too).
        let leaving_idle = vc.idle_since != Nanos::MAX;
        let fresh = vc.last_thread != Some(t) || leaving_idle;
        vc.cur = Some(t);
        vc.last_thread = Some(t);
        vc.mm = mm;
        if self.threads[t.idx()].act.is_poked_spin() {
            // A preempted spinner resumes its spin here.
            crate::guest::sync::watch_spinner(&mut self.spin_watch, v);
        }
        if leaving_idle {
            self.idle_leave(v);
        }
        if self.vms[vm].gleaner.is_some() {
            self.gleaner_switch_in(v, t, fresh);
        }
        self.resched_cleared(v);
        self.vms[vm].thread_switches += fresh as u64;
        let th = &mut self.threads[t.idx()];
        th.state = ThreadState::Running;
        th.vcpu = v;
        th.slice_used = 0;
        if fresh {
            th.debt += Nanos(switch);
        }
        if let Some(w) = th.woken_at.take() {
            let runs_at = t0 + th.debt;
            let lat = runs_at.0.saturating_sub(w.0);
            let path = th.wake_path as usize;
            self.vms[vm].wake_paths[path].record(lat);
            if self.trace.is_some() {
                let name = format!("woken {} runs", self.threads[t.idx()].name);
                self.trace_flow(v, &name, World::wake_flow_key(w, t), false, runs_at);
            }
        }
        self.trace_thread_begin(v);
    }

    /// Decides what the running vCPU `v` does next and arms its step event.
    pub(crate) fn vcpu_continue(&mut self, v: VcpuId) {
        let now = self.now;
        let t0 = now.max(self.vcpus[v.idx()].resume_at);
        {
            let vc = &mut self.vcpus[v.idx()];
            vc.gen = vc.gen.wrapping_add(1);
            vc.ple_deadline = Nanos::MAX;
        }
        loop {
            let t = match self.vcpus[v.idx()].cur {
                Some(t) => t,
                None => match self.guest_pick(v) {
                    Some(t) => {
                        self.become_current(v, t, t0);
                        t
                    }
                    None => return self.vcpu_idle_enter(v, t0),
                },
            };
            match self.threads[t.idx()].act {
                ThreadActivity::Work => {
                    if self.threads[t.idx()].yielder {
                        self.yielder_clip(v, t, t0);
                    }
                    let th = &self.threads[t.idx()];
                    if th.debt.0 == 0 && th.remaining.0 == 0 {
                        // Between operations the thread is back in user mode: a pending
                        // reschedule takes effect here.
                        if self.pending_resched(v, t) {
                            self.guest_preempt(v, t);
                            continue;
                        }
                        if let Advance::Left = self.thread_advance(t, v) {
                            if self.guest_eevdf(v) && self.leaves_runqueue(t) {
                                self.eevdf_save_lag(v, t);
                            }
                            self.guest_tlb_leave(v, t);
                            self.vcpus[v.idx()].cur = None;
                            self.threads[t.idx()].last_ran = self.now;
                            self.rwsem_owner_left(t);
                        }
                        continue;
                    }
                    if self.pending_resched(v, t) {
                        self.guest_preempt(v, t);
                        continue;
                    }
                    return self.arm_work(v, t, t0);
                }
                ThreadActivity::PvHalt(l) => {
                    if self.spin_ready(t) {
                        continue;
                    }
                    if self.threads[t.idx()].pv_halted {
                        // Woken (kicked or spuriously) without the lock: spin again.
                        let th = &mut self.threads[t.idx()];
                        th.pv_halted = false;
                        th.act = ThreadActivity::SpinLock(l);
                        th.spin_left = self.vms[th.vm.idx()].guest.pv_spin;
                        continue;
                    }
                    // pv halt: the vCPU blocks until the unlocker kicks it.
                    self.threads[t.idx()].pv_halted = true;
                    return self.start_halt(v, t0, false);
                }
                _ => {
                    if self.spin_ready(t) {
                        continue;
                    }
                    if self.threads[t.idx()].act.is_user_spin() && self.pending_resched(v, t) {
                        self.guest_preempt(v, t);
                        continue;
                    }
                    return self.arm_spin(v, t, t0);
                }
            }
        }
    }

    /// Arms `v`'s next step: the end of `t`'s current work (or of its guest time
    /// slice), at `t0` onwards.
    #[inline(always)]
    pub(crate) fn arm_work(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        self.arm_work_at::<false>(v, t, t0);
    }

    /// `arm_work` on an SMT host or for a vCPU whose work runs below full speed
    /// (host/speed.rs): out of line, so that the common case carries nothing for it.
    #[cold]
    #[inline(never)]
    fn arm_work_slowed(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        self.smt_vcpu_busy(v, true);
        self.arm_work_at::<true>(v, t, t0);
    }

    #[inline(always)]
    fn arm_work_at<const SLOWED: bool>(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        let now = self.now;
        let th = &self.threads[t.idx()];
        let (mut seg, cat) = if th.debt.0 > 0 {
            (th.debt.0, VCat::Kernel)
        } else {
            (
                th.remaining.0,
                if th.yielder {
                    // Gleaner's yield loop: the vCPU is idle, but keeps its pCPU.
                    VCat::IdlePoll
                } else if th.in_exit {
                    VCat::Overhead
                } else if th.in_kernel {
                    VCat::Kernel
                } else {
                    VCat::User
                },
            )
        };
        let vc = &self.vcpus[v.idx()];
        if !SLOWED && (vc.slow != 0 || self.smt.is_some()) {
            // (Nothing changed yet: the slowed variant starts over.)
            return self.arm_work_slowed(v, t, t0);
        }
        let refill_left = vc.refill_left_ns;
        if SLOWED && vc.slow != 0 {
            let speed =
                crate::host::speed::slowed(self.smt, self.vms[th.vm.idx()].remote_speed, vc.slow);
            seg = crate::host::speed::time_for(speed, seg);
        }
        // Work is slower while the vCPU re-fetches its working set.
        seg = self
            .cache
            .wall_for_progress(&self.vms[th.vm.idx()].cache, seg, refill_left);
        // Guest time slicing at the tick (guest/preempt.rs); never inside a kernel
        // spinlock section.
        if th.held.is_empty() && !self.vcpus[v.idx()].rq.is_empty() {
            let at = self.next_tick_check(v, t, t0);
            seg = seg.min(at.0.saturating_sub(t0.0).max(1_000));
        }
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, cat);
        vc.act = VcpuActivity::Thread;
        vc.seg_start = t0;
        self.push_step(v, t0 + Nanos(seg));
    }

    pub(crate) fn arm_spin(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        // A spin loop's PAUSE leaves the core to its sibling.
        self.smt_vcpu_busy(v, false);
        let now = self.now;
        let th = &self.threads[t.idx()];
        let budgeted = match th.act {
            ThreadActivity::SpinMutex(_)
            | ThreadActivity::SpinBarrier(..)
            | ThreadActivity::SpinRw(..)
            | ThreadActivity::SpinSem(_) => true,
            ThreadActivity::SpinLock(_) => self.vms[th.vm.idx()].guest.pv_spin > 0,
            _ => false,
        };
        let budget_dl = if budgeted {
            t0 + Nanos(th.spin_left.max(1))
        } else if let ThreadActivity::SpinRwsem(s) = th.act {
            // A writer spinning on readers gives up at the semaphore's deadline
            // (`reader-bounded`; set by rwsem_spin_step, MAX otherwise) — the head of
            // the OSQ; those behind it wait for their turn.
            let rw = &self.rwsems[s as usize];
            if rw.writer.is_none() && rw.osq.front().is_none_or(|&h| h == t) {
                rw.rspin_deadline.max(t0)
            } else {
                Nanos::MAX
            }
        } else {
            Nanos::MAX
        };
        // PAUSE-loop exiting sees kernel-mode spins only, unless the CPU's pause filter
        // counts user mode too (`host.ple.user_mode_exits`).
        let ple_dl = if th.act.is_user_spin() && !self.ple_user_mode_exits {
            Nanos::MAX
        } else {
            self.ple_deadline(v, t0).unwrap_or(Nanos::MAX)
        };
        // A user-space spin is time-sliced like work (guest/preempt.rs); a read-write
        // semaphore's spinner stops at the tick that sets need_resched.
        let th = &self.threads[t.idx()];
        let tick_dl =
            if th.act.sees_tick() && th.held.is_empty() && !self.vcpus[v.idx()].rq.is_empty() {
                self.next_tick_check(v, t, t0).max(t0 + Nanos(1_000))
            } else {
                Nanos::MAX
            };
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, VCat::Spin);
        vc.act = VcpuActivity::Thread;
        vc.seg_start = t0;
        vc.ple_deadline = ple_dl;
        let dl = budget_dl.min(ple_dl).min(tick_dl);
        if dl != Nanos::MAX {
            self.push_step(v, dl);
        }
    }

    /// The running vCPU's armed step fired.
    pub(crate) fn on_step(&mut self, v: VcpuId) {
        match self.vcpus[v.idx()].act {
            VcpuActivity::Halting => self.vcpu_halt(v),
            VcpuActivity::HostPoll => self.end_host_poll(v, false),
            VcpuActivity::IdlePoll => {
                let now = self.now;
                if now >= self.vcpus[v.idx()].ple_deadline {
                    return self.ple_exit(v);
                }
                // haltpoll's window ran out: HLT.
                self.start_halt(v, now, true);
            }
            VcpuActivity::Thread => {
                self.sync_progress(v);
                let Some(t) = self.vcpus[v.idx()].cur else {
                    return;
                };
                let th = &self.threads[t.idx()];
                match th.act {
                    ThreadActivity::Work => {
                        let busy = th.debt.0 > 0 || th.remaining.0 > 0;
                        if busy && self.guest_tick(v, t) {
                            self.guest_preempt(v, t);
                        }
                    }
                    ThreadActivity::PvHalt(_) => {}
                    _ => {
                        if self.now >= self.vcpus[v.idx()].ple_deadline {
                            return self.ple_exit(v);
                        }
                        if self.threads[t.idx()].spin_left == 0 {
                            self.spin_exhausted(t);
                        } else if self.threads[t.idx()].act.sees_tick() && self.guest_tick(v, t) {
                            self.guest_preempt(v, t);
                        }
                    }
                }
                if self.vcpus[v.idx()].is_running() {
                    self.vcpu_continue(v);
                }
            }
            VcpuActivity::Off => {}
        }
    }

    /// `t` stops being `v`'s current thread: the pages it brought into the TLB while it
    /// ran evict other processes' translations.
    pub(crate) fn guest_tlb_leave(&mut self, v: VcpuId, t: ThreadId) {
        let th = &self.threads[t.idx()];
        let (pages, process) = (self.tlb.loaded_pages(th.slice_used), th.process as usize);
        let vc = &mut self.vcpus[v.idx()];
        vc.guest_tlb_loaded += pages;
        vc.mark_process_tlb(process);
    }

    /// TLB refill of `t` resuming on `v` after other processes' threads ran there: a
    /// woken thread's wake path walks the page tables again (a preempted one resumes
    /// where it was; its working set is the cache model's).
    pub(crate) fn guest_tlb_refill(&self, v: VcpuId, t: ThreadId) -> u64 {
        if self.threads[t.idx()].woken_at.is_none() {
            return 0;
        }
        let vc = &self.vcpus[v.idx()];
        let mark = vc.process_tlb_mark(self.threads[t.idx()].process as usize);
        if mark == u64::MAX {
            // The process never ran on this vCPU: its first run finds the TLB cold,
            // which the host-level model already charges when the vCPU itself is new.
            return 0;
        }
        self.tlb.refill_ns(Some(vc.guest_tlb_loaded - mark))
    }

    pub(crate) fn trace_thread_begin(&mut self, v: VcpuId) {
        if self.trace.is_some() {
            let vc = &mut self.vcpus[v.idx()];
            vc.thread_seg_start = self.now.max(vc.resume_at);
        }
    }

    pub(crate) fn trace_thread_end(&mut self, v: VcpuId) {
        if self.trace.is_none() {
            return;
        }
        let vc = &self.vcpus[v.idx()];
        let (Some(t), true) = (vc.cur, vc.is_running()) else {
            return;
        };
        let start = vc.thread_seg_start;
        let now = self.now;
        if now > start {
            let name = self.threads[t.idx()].name.clone();
            let vm = vc.vm;
            let idx = vc.index;
            if let Some(tr) = self.trace.as_mut() {
                tr.vcpu_slice(vm, idx, &name, start, now);
            }
        }
        self.vcpus[v.idx()].thread_seg_start = now;
    }
}
