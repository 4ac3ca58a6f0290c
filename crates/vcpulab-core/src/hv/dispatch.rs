//! Dispatch mechanics: putting vCPUs on pCPUs and taking them off, with the costs of
//! VM exits and entries, vCPU switches and cache refill; halting and waking vCPUs.

use crate::guest::thread::ThreadActivity;
use crate::host::cache::Moved;
use crate::hv::irq::WakePlacement;
use crate::hv::preemption::PreemptCause;
use crate::hv::sched::StopReason;
use crate::hv::vcpu::{HvState, VCat, VcpuActivity};
use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, PcpuId, VcpuId};

impl World {
    /// Asks `p` to pick again at `at` for `cause` (the earliest request wins, with its
    /// cause).
    pub(crate) fn request_resched(&mut self, p: PcpuId, at: Nanos, cause: PreemptCause) {
        let pc = &mut self.pcpus[p.idx()];
        if at < pc.resched_at {
            pc.resched_at = at;
            pc.resched_cause = cause;
            self.q.push(at, Ev::Resched(p));
        }
    }

    /// Queues `v`'s next step at `at` — unless `v` runs on a pCPU whose slice timer
    /// fires first: then the slice end takes `v` off (cancelling the step), so the step
    /// is only kept on the vCPU (`held_step`), and queued should `v` run on past the
    /// slice end (`release_step`). Half the events of a host of CPU-bound vCPUs were
    /// such cancelled steps. Results are the same as queuing every step. A queued step
    /// takes the place of the vCPU's earlier one, cancelled or already run
    /// (`EventQueue::push_slot`).
    #[inline]
    pub(crate) fn push_step(&mut self, v: VcpuId, at: Nanos) {
        let vc = &mut self.vcpus[v.idx()];
        if let HvState::Running(p) = vc.hv {
            if at > self.pcpus[p.idx()].slice_end {
                vc.held_step = Some((at, vc.gen));
                return;
            }
        }
        let gen = vc.gen;
        self.queue_step(v, at, gen);
    }

    /// Queues `Step(v, gen)`: while steps are re-armed in place
    /// (`World::choose_step_queue`), in `v`'s slot of the event queue, in place of the
    /// step pending there — one of an older generation, which the dispatcher would
    /// drop (checked in debug builds).
    #[inline]
    fn queue_step(&mut self, v: VcpuId, at: Nanos, gen: u32) {
        if self.slotted_steps {
            self.queue_step_in_slot(v, at, gen);
        } else {
            self.q.push(at, Ev::Step(v, gen));
        }
    }

    /// `queue_step` while steps are re-armed in place (apart, so that the common path
    /// stays small where it is inlined).
    #[inline(never)]
    fn queue_step_in_slot(&mut self, v: VcpuId, at: Nanos, gen: u32) {
        #[cfg(debug_assertions)]
        if let Some(&Ev::Step(_, g)) = self.q.slot_pending(v.idx()) {
            debug_assert_ne!(g, gen, "a live step of vCPU {} would be superseded", v.0);
        }
        if self.q.push_slot(at, v.idx(), Ev::Step(v, gen)) {
            self.superseded_steps += 1;
        }
    }

    /// `v` runs on `p` past the slice end: its kept-back step (if still current) is
    /// queued.
    fn release_step(&mut self, p: PcpuId, v: VcpuId) {
        self.pcpus[p.idx()].slice_end = Nanos::MAX;
        let vc = &mut self.vcpus[v.idx()];
        if let Some((at, gen)) = vc.held_step.take() {
            if gen == vc.gen {
                self.queue_step(v, at, gen);
            }
        }
    }

    /// Preempts whatever runs on `p` (for `cause`) and lets the scheduler pick again.
    pub(crate) fn resched(&mut self, p: PcpuId, cause: PreemptCause) {
        if let Some(v) = self.pcpus[p.idx()].cur {
            if self.vcpus[v.idx()].act == VcpuActivity::HostPoll {
                // Another vCPU wants the pCPU: halt polling stops, the vCPU blocks.
                let now = self.now;
                let pc = &mut self.pcpus[p.idx()];
                if let Some(s) = pc.poll_since.take() {
                    pc.poll_ns += (now - s).0;
                }
                pc.run_start = now;
                pc.entry_until = now;
                self.vms[self.vcpus[v.idx()].vm.idx()].halt_poll_misses += 1;
                self.deschedule(p, v, StopReason::Blocked);
                return self.schedule(p);
            }
            // A context switch is not preemptible: schedule() runs it with the runqueue
            // locked and interrupts off (Linux's __schedule/context_switch, Xen's
            // schedule()/context_switch), and the vCPU just switched out stays on_cpu
            // until finish_task_switch. A reschedule asked meanwhile (an IPI, a
            // wake-up's preemption, a directed yield's target) sets need_resched, which
            // the switched-in vCPU thread sees when the switch is done, before it
            // enters the guest (vcpu_enter_guest's need_resched check): the pCPU picks
            // again then, having paid the whole switch.
            let until = self.pcpus[p.idx()].switch_until;
            if self.now < until {
                self.request_resched(p, until, cause);
                return;
            }
            // Urgent-vCPU-first: a protected vCPU is preempted only when its urgent
            // slice ends.
            if let Some(until) = self.uvf.as_mut().and_then(|u| u.defer(p, self.now)) {
                self.request_resched(p, until, cause);
                // It runs on past its slice: a step kept back for after it is due.
                self.release_step(p, v);
                return;
            }
            self.pcpus[p.idx()].stop_cause = cause;
            self.deschedule(p, v, StopReason::Preempted);
        }
        self.schedule(p);
    }

    pub(crate) fn schedule(&mut self, p: PcpuId) {
        let urgent = self.take_urgent(p);
        let put_back = self.pcpus[p.idx()].put_back.take();
        let next = self.sched.pick_next(p, self.now);
        // The vCPU just put back is picked again: the host's schedule() found no other
        // task (prev == next), so there was no context switch — no kvm_sched_out /
        // kvm_sched_in (no PLE window shrink), no lock-holder preemption, no dispatch
        // wait. Only the exit and entry it took were real.
        let noop = put_back.is_some() && next.map(|(v, _)| v) == put_back;
        if let (Some(u), false) = (put_back, noop) {
            self.count_lhp(u);
        }
        if let Some((v, slice)) = next {
            if urgent == Some(v) {
                // The urgent vCPU runs for the urgent time slice, protected; then the
                // scheduler decides again by its own rules (what it borrowed shows in
                // its fair-share lead, which the allowance bounds).
                let now = self.now;
                if let Some(u) = self.uvf.as_mut() {
                    u.stats.urgent_preemptions += 1;
                    u.protect(p, now);
                    let end = now + u.utslice;
                    self.request_resched(p, end, PreemptCause::Slice);
                }
            }
            self.dispatch(p, v, slice, noop);
        }
        self.drain_sched_resched(Some(p), PreemptCause::Coordination);
    }

    /// The first urgent vCPU waiting on `p`, made the scheduler's next pick.
    fn take_urgent(&mut self, p: PcpuId) -> Option<VcpuId> {
        let uvf = self.uvf.as_mut()?;
        let vcpus = &self.vcpus;
        let sched = &self.sched;
        let v = uvf.pop(p, |v| {
            vcpus[v.idx()].hv == HvState::Runnable && sched.home_of(v) == p
        })?;
        self.sched.run_next(p, v).then_some(v)
    }

    /// DCS: `v` received a coordination signal. A waiting `v` becomes urgent on its
    /// pCPU, which reschedules now (or when its protection ends) if the allowance
    /// permits.
    pub(crate) fn make_urgent(&mut self, v: VcpuId, kind: crate::hv::uvf::UrgentKind) {
        if self.uvf.is_none() || self.vcpus[v.idx()].hv != HvState::Runnable {
            return;
        }
        let home = self.sched.home_of(v);
        let lead = self.sched.lead_ns(v);
        let now = self.now;
        let Some(uvf) = self.uvf.as_mut() else {
            return;
        };
        if uvf.make_urgent(v, home, lead, kind) {
            let at = uvf.defer(home, now).unwrap_or(now);
            self.request_resched(home, at, PreemptCause::Coordination);
        }
    }

    /// Resched-DP: the vCPU sending a reschedule IPI is protected from preemption.
    pub(crate) fn protect_sender(&mut self, from: VcpuId) {
        if !self.dcs_resched_dp {
            return;
        }
        if let (HvState::Running(p), Some(u)) = (self.vcpus[from.idx()].hv, self.uvf.as_mut()) {
            u.protect(p, self.now);
        }
    }

    /// Takes the running `v` off `p`.
    pub(crate) fn deschedule(&mut self, p: PcpuId, v: VcpuId, why: StopReason) {
        let now = self.now;
        if let Some(u) = self.uvf.as_mut() {
            u.unprotect(p);
        }
        self.sync_progress(v);
        if why != StopReason::Blocked {
            self.note_preempted_holder(v);
            self.vcpus[v.idx()].stop_cause = if why == StopReason::Yielded {
                PreemptCause::OwnYield
            } else {
                self.pcpus[p.idx()].stop_cause
            };
        }
        self.trace_thread_end(v);
        // Runnable, it may be picked again at once (see `schedule`).
        self.pcpus[p.idx()].put_back = (why != StopReason::Blocked).then_some(v);
        let prof = *self.vms[self.vcpus[v.idx()].vm.idx()].cache;
        let ran = now.0.saturating_sub(self.vcpus[v.idx()].resume_at.0);
        let loaded = self.cache_settle(v, now) + self.cache.streamed_kib(&prof, ran);
        let pages = self.tlb.loaded_pages(ran);
        let pc = &mut self.pcpus[p.idx()];
        let (start, entry) = (pc.run_start, pc.entry_until);
        pc.book_run(now);
        pc.cache_loaded_kib += loaded;
        pc.tlb_loaded += pages;
        let tlb_mark = pc.tlb_loaded;
        pc.cur = None;
        pc.timer_gen = pc.timer_gen.wrapping_add(1);
        pc.slice_end = Nanos::MAX;
        let mark = pc.cache_loaded_kib;
        let vc = &mut self.vcpus[v.idx()];
        vc.slow = 0;
        vc.gen = vc.gen.wrapping_add(1);
        vc.act = VcpuActivity::Off;
        vc.last_pcpu = Some(p);
        vc.cache_mark_out = mark;
        vc.tlb_mark_out = tlb_mark;
        if why == StopReason::Blocked {
            vc.hv = HvState::Halted;
            vc.set_cat(now, VCat::Halted);
        } else {
            vc.hv = HvState::Runnable;
            vc.set_cat(now, VCat::Runnable);
            vc.runnable_since = now;
        }
        vc.overhead_until = now;
        self.frag.pcpu_idle(p, now);
        if why != StopReason::Blocked {
            self.frag.vcpu_waiting(now, true);
        }
        self.trace_vcpu_run(p, v, start, entry, now);
        self.sched.put_prev(p, v, why, now);
        if why == StopReason::Blocked {
            self.runq.done(v, now);
        } else {
            let home = self.sched.home_of(v);
            self.runq.wants(v, home, now);
            self.spin_waiter_preempted(v);
        }
        self.smt_set_busy(p, false);
    }

    /// Puts `v` on `p`: entry and switch overhead, cache refill, then the guest runs.
    fn dispatch(&mut self, p: PcpuId, v: VcpuId, slice: Option<Nanos>, noop: bool) {
        let now = self.now;
        let vm = self.vcpus[v.idx()].vm;
        let pc = &self.pcpus[p.idx()];
        let c = &self.costs;
        let switch = match pc.last_vcpu {
            Some(l) if l == v => 0,
            Some(l) if self.vcpus[l.idx()].vm == vm => c.vcpu_switch_same_vm_ns,
            Some(_) => c.vcpu_switch_cross_vm_ns,
            None => c.vcpu_switch_cross_vm_ns,
        };
        // Picked again without a switch, the host still ran its schedule() (`repick_ns`).
        let repick = if noop { c.repick_ns } else { 0 };
        let host_work = switch + repick + pc.pending_overhead_ns;
        let mut overhead = c.vmexit_ns + host_work;
        let vc = &self.vcpus[v.idx()];
        let idle_exit = vc.woke_from_halt && vc.cur.is_none();
        if idle_exit {
            // The guest leaves idle: it restarts its NOHZ tick (a timer write, an exit)
            // before it runs anything (hv/wake_path.rs).
            overhead += self.timer_write_cost(vm.idx());
        }
        let pc = &self.pcpus[p.idx()];
        let vc = &self.vcpus[v.idx()];
        let moved = vc.last_pcpu.map(|lp| (lp, self.cache.moved(lp.0, p.0)));
        let (evicting, tlb_evicting) = match moved {
            Some((_, Moved::Same)) => (
                Some(pc.cache_loaded_kib - vc.cache_mark_out),
                Some(pc.tlb_loaded - vc.tlb_mark_out),
            ),
            // Moved within its last-level cache: what it still had there has been
            // evicted as if it had come back to the pCPU it left (by what others loaded
            // there since), and the rest is found in the LLC. Translations are not
            // carried over (the TLB model is per pCPU).
            Some((lp, Moved::SameCore | Moved::SameLlc)) => (
                Some(self.pcpus[lp.idx()].cache_loaded_kib - vc.cache_mark_out),
                None,
            ),
            _ => (None, None),
        };
        let prof = *self.vms[vm.idx()].cache;
        let missing = self
            .cache
            .missing_on_return(&prof, vc.cache_missing_kib, evicting);
        // Only a vCPU coming out of halt runs the guest's wake path (idle exit, the
        // interrupt, the scheduler) through evicted translations; a preempted one resumes
        // where it was, and its working set is the cache model's.
        let tlb = if vc.woke_from_halt {
            self.tlb.refill_ns(tlb_evicting)
        } else {
            0
        };
        let mut refill_left = self.cache.refill_ns(&prof, missing);
        // Memory bound to another node: the re-fetch comes from remote memory.
        let remote = self.numa.is_some_and(|n| {
            self.vms[vm.idx()]
                .mem_node
                .is_some_and(|m| m != n.node_of(p))
        });
        if remote {
            refill_left = self
                .numa
                .map_or(refill_left, |n| n.remote_refill(refill_left));
        }
        if matches!(moved, Some((_, Moved::SameLlc))) {
            // Another core: its private caches re-fetch their part from the LLC.
            refill_left += self.cache.private_refill_ns(&prof, missing);
        }
        let migrated = vc.last_pcpu.is_some_and(|lp| lp != p);
        let switched = pc.last_vcpu != Some(v);

        let pc = &mut self.pcpus[p.idx()];
        pc.pending_overhead_ns = 0;
        pc.cur = Some(v);
        pc.run_start = now;
        pc.entry_until = now + Nanos(overhead);
        pc.switch_until = now + Nanos(host_work);
        pc.last_vcpu = Some(v);
        pc.timer_gen = pc.timer_gen.wrapping_add(1);
        let tgen = pc.timer_gen;
        pc.slice_end = slice.map_or(Nanos::MAX, |s| now + s);
        if let Some(s) = slice {
            self.q.push(now + s, Ev::SliceEnd(p, tgen));
        }

        if !noop {
            self.ple.on_sched_in(v);
        }
        self.ple_reentry(v, now + Nanos(overhead));
        let vc = &mut self.vcpus[v.idx()];
        let waited = now - vc.runnable_since;
        self.frag.pcpu_busy(p, now);
        self.runq.wants(v, p, now);
        if vc.hv == HvState::Runnable {
            self.frag.vcpu_waiting(now, false);
            if !noop {
                self.vms[vm.idx()].dispatch_wait.record(waited.0);
            }
        }
        let vc = &mut self.vcpus[v.idx()];
        vc.charge(now);
        vc.hv = HvState::Running(p);
        // Back in its PLE handler, which ends: out of the spin loop, not eligible.
        if vc.in_spin_loop {
            vc.in_spin_loop = false;
            vc.dy_eligible = false;
        }
        vc.overhead_until = now + Nanos(overhead);
        // The TLB refill stalls the wake path; the cache refill slows the run instead
        // (guest/kernel.rs: sync_progress, arm_work).
        vc.resume_at = vc.overhead_until + Nanos(tlb);
        vc.tlb_stall_from = vc.overhead_until;
        vc.tlb_stall_ns = tlb;
        vc.cache_missing_kib = missing;
        vc.refill_left_ns = refill_left;
        vc.refill_at_dispatch_ns = refill_left;
        vc.woke_from_halt = false;
        vc.slow = if remote {
            crate::host::speed::SLOW_NUMA
        } else {
            0
        };
        vc.switches += switched as u64;
        vc.migrations += migrated as u64;
        // The category is set by the guest below; until then it is overhead anyway
        // (set_cat after the charge above books nothing more; it keeps a trace's state
        // track in step).
        vc.set_cat(now, VCat::Overhead);
        // The entry occupies the core; what the vCPU then runs decides further.
        self.smt_set_busy(p, true);
        self.smt_update_core(p);
        self.process_pending(v);
        self.missed_tick(v);
        self.trace_thread_begin(v);
        self.vcpu_continue(v);
    }

    /// `v` leaves its pCPU at `now`: books the re-fetch stall it paid on this run and
    /// returns the KiB it brought back into the cache (what it still misses stays
    /// missing, for its next run).
    fn cache_settle(&mut self, v: VcpuId, now: Nanos) -> u64 {
        let vc = &mut self.vcpus[v.idx()];
        let tlb = vc
            .tlb_stall_ns
            .min(now.0.saturating_sub(vc.tlb_stall_from.0));
        vc.refill_ns += tlb;
        vc.tlb_stall_ns = 0;
        let (at, left) = (vc.refill_at_dispatch_ns, vc.refill_left_ns);
        let fetched = if left == 0 {
            vc.cache_missing_kib
        } else {
            // The stall is paid at a constant rate per KiB: the fraction paid is the
            // fraction fetched.
            (vc.cache_missing_kib as u128 * (at - left) as u128 / at as u128) as u64
        };
        vc.cache_missing_kib -= fetched;
        vc.refill_left_ns = 0;
        vc.refill_at_dispatch_ns = 0;
        fetched
    }

    /// `v` is preempted (or yields) while runnable: remember whether in kernel mode
    /// (directed yield prefers those); its lock-holder preemptions count once another
    /// vCPU takes the pCPU (`count_lhp`).
    fn note_preempted_holder(&mut self, v: VcpuId) {
        let Some(t) = self.vcpus[v.idx()].cur else {
            // The idle loop runs at CPL 0: a vCPU preempted while it polls is in kernel
            // mode (KVM reads the CPL, vmx_get_cpl, in kvm_arch_vcpu_put).
            let polling = self.vcpus[v.idx()].act == VcpuActivity::IdlePoll;
            self.vcpus[v.idx()].preempted_in_kernel = polling;
            return;
        };
        let th = &self.threads[t.idx()];
        let kernel = !th.held.is_empty()
            || !matches!(th.act, ThreadActivity::Work) && !th.act.is_user_spin()
            || (th.act == ThreadActivity::Work && (th.in_kernel || th.debt.0 > 0));
        self.vcpus[v.idx()].preempted_in_kernel = kernel;
    }

    /// `v` lost its pCPU to another vCPU: each contended lock its thread holds is a
    /// lock-holder preemption (once per episode). An episode ends when the holder runs
    /// guest code again: a vCPU preempted again before its entry completed (a directed
    /// yield that takes the pCPU straight back) is still in the episode it was in.
    fn count_lhp(&mut self, v: VcpuId) {
        let Some(t) = self.vcpus[v.idx()].cur else {
            return;
        };
        let ran_guest = self.now > self.vcpus[v.idx()].resume_at;
        for i in 0..self.threads[t.idx()].held.len() {
            let l = self.threads[t.idx()].held[i];
            let lk = &mut self.locks[l.idx()];
            if ran_guest {
                lk.lhp_counted = false;
            }
            if lk.contended() && !lk.lhp_counted {
                lk.lhp_counted = true;
                let c = lk.class as usize;
                let cause = self.vcpus[v.idx()].stop_cause;
                self.lock_classes[c].count_lhp(cause);
                self.trace_lock_event("lock-holder preempted", t, c);
            }
        }
    }

    /// A halted vCPU becomes runnable (an interrupt or IPI arrived for it); returns the
    /// pCPU it was queued on and whether that pCPU was idle.
    /// `waker`: the vCPU whose exit does the host's wake-up (an IPI or pv kick), if any.
    pub(crate) fn hv_wake_vcpu(
        &mut self,
        v: VcpuId,
        count: bool,
        waker: Option<crate::hv::sched::wake_affine::Waker>,
    ) -> WakePlacement {
        let now = self.now;
        let vc = &mut self.vcpus[v.idx()];
        debug_assert_eq!(vc.hv, HvState::Halted);
        vc.hv = HvState::Runnable;
        vc.set_cat(now, VCat::Runnable);
        vc.runnable_since = now;
        vc.wakes += count as u64;
        vc.woke_from_halt = true;
        self.frag.vcpu_waiting(now, true);
        self.adapt_halt_poll(v);
        let wp = self.sched.enqueue_wake_by(v, waker, now);
        if self.sched.take_affine() {
            self.vcpus[v.idx()].affine_wakes += 1;
        }
        let home = self.sched.home_of(v);
        self.runq.wants(v, home, now);
        let placement = WakePlacement {
            pcpu: wp.pcpu,
            pcpu_idle: self.pcpus[wp.pcpu.idx()].cur.is_none(),
        };
        let delay = if count { self.costs.wake_halted_ns } else { 0 };
        if wp.preempt {
            self.request_resched(wp.pcpu, now + Nanos(delay), PreemptCause::Wakeup);
        }
        if let Some(q) = self.sched.take_wake_tickle() {
            // An idle pCPU woken to steal the work: the same host path to a running
            // vCPU as waking one on its own idle pCPU.
            self.request_resched(q, now + Nanos(delay), PreemptCause::Wakeup);
        }
        // The wake-up is the host's work on another CPU (the waker's, or the timer's):
        // every pCPU the scheduler asks to pick again is remote.
        self.drain_sched_resched(None, PreemptCause::Wakeup);
        placement
    }

    /// Reschedules the pCPUs the host scheduler asked for (relaxed co-scheduling's
    /// co-stops and releases, credit2's tickles, a gang's start and stop): `origin`, the
    /// pCPU whose scheduler code asked, at once; any other when the reschedule IPI
    /// reaches it (Xen's cpumask_raise_softirq(SCHEDULE_SOFTIRQ), Linux's
    /// smp_send_reschedule), after the host's IPI latency — as a directed yield's and a
    /// co-schedule's targets do. A gang's pCPUs switch together (`resched_by_ipi`).
    /// `cause`: what the scheduler was deciding when it asked.
    pub(crate) fn drain_sched_resched(&mut self, origin: Option<PcpuId>, cause: PreemptCause) {
        let mut buf = std::mem::take(&mut self.sched_resched);
        self.sched.drain_resched(&mut buf);
        let now = self.now;
        let remote = if self.sched.resched_by_ipi() {
            now + Nanos(self.costs.native_ipi_ns)
        } else {
            now
        };
        for &q in &buf {
            self.request_resched(q, if Some(q) == origin { now } else { remote }, cause);
        }
        buf.clear();
        self.sched_resched = buf;
    }

    /// The vCPU's HLT exit completed: it blocks and its pCPU picks again.
    pub(crate) fn vcpu_halt(&mut self, v: VcpuId) {
        let HvState::Running(p) = self.vcpus[v.idx()].hv else {
            return;
        };
        self.vcpus[v.idx()].halts += 1;
        self.vcpus[v.idx()].halted_at = self.now;
        if self.try_host_poll(v) {
            return;
        }
        self.deschedule(p, v, StopReason::Blocked);
        self.schedule(p);
    }

    pub(crate) fn trace_vcpu_run(
        &mut self,
        p: PcpuId,
        v: VcpuId,
        start: Nanos,
        entry: Nanos,
        end: Nanos,
    ) {
        if self.trace.is_none() {
            return;
        }
        let label = self.vcpu_label(v);
        let t = self.trace.as_mut().expect("checked above");
        let o_end = entry.min(end).max(start);
        if o_end > start {
            t.pcpu_slice(p, "vm-entry/switch", start, o_end);
        }
        if end > o_end {
            t.pcpu_slice(p, &label, o_end, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::report::{scenario_hash, Report};
    use crate::sim::world::World;

    /// A wide VM of spin-then-block barriers, where most steps are cancelled (each
    /// released spinner's spin-end step): steps re-armed in place supersede them, and
    /// the report is the same as with every step pushed anew.
    #[test]
    fn steps_rearmed_in_place_change_no_result() {
        let text = r#"
preset = "kvm-default"
[run]
duration = "5ms"
[host]
pcpus = 64
[[vm]]
vcpus = 64
workload = { model = "streamcluster", params = { forever = true } }
"#;
        let sc = crate::resolve(text, &[], None).expect("scenario resolves");
        let run = |allow: bool| {
            let mut w = World::new(&sc).expect("world builds");
            w.allow_slotted_steps = allow;
            let cause = w.run();
            let r = Report::build(&sc, &w, cause, scenario_hash(&sc));
            assert!(r.events > 10_000, "the run did something: {}", r.events);
            (serde_json::to_string(&r).expect("report serializes"), w)
        };
        let (heap, w_heap) = run(false);
        let (slots, w_slots) = run(true);
        assert_eq!(w_heap.superseded_steps, 0);
        assert!(
            w_slots.superseded_steps * 2 > w_heap.stale_events,
            "most cancelled steps superseded in place: {} of {} stale",
            w_slots.superseded_steps,
            w_heap.stale_events
        );
        assert!(w_slots.stale_events * 4 < w_heap.stale_events);
        assert_eq!(w_heap.events, w_slots.events);
        assert_eq!(heap, slots);
    }
}
