//! The guest kernel's scheduler and the execution of thread programs on a vCPU.
//! A thread progresses only while its vCPU runs on a pCPU and it is the vCPU's current
//! thread; progress is computed from timestamps, never simulated in small steps.
//! Spinning (kernel spinlocks, user mutex spin, spin barriers, TLB-shootdown waits) is
//! a state with a timer: the PLE window or the spin budget, whichever ends first.

use crate::guest::ipi::{
    PATH_HALTED_BUSY_PCPU, PATH_HALTED_IDLE_PCPU, PATH_PREEMPTED, PATH_RUNNING,
};
use crate::guest::sync::Flow;
use crate::guest::thread::{Micro, TAct, ThreadState};
use crate::hv::vcpu::{Act, HvState, VCat};
use crate::sim::world::{Ev, StopCause, World};
use crate::sim::{LockId, Nanos, ThreadId, VcpuId};
use crate::workload::program::Instr;

/// Where a VM's synchronization objects start in the global arenas.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjBases {
    pub spin: u32,
    pub mutex: u32,
    pub barrier: u32,
    pub cond: u32,
    pub queue: u32,
    pub sem: u32,
}

/// What a thread did when its current step ended.
enum Advance {
    /// It has new work, or a spin, to do.
    Continue,
    /// It blocked or exited; the vCPU needs another thread.
    Left,
}

impl World {
    /// Credits the running vCPU's current thread with the progress made since its
    /// segment started (work done, or spin budget used).
    pub(crate) fn sync_progress(&mut self, v: VcpuId) {
        let now = self.now;
        let vc = &mut self.vcpus[v.idx()];
        let Some(t) = vc.cur else { return };
        if !vc.is_running() || vc.act != Act::Thread || now <= vc.seg_start {
            return;
        }
        let mut el = (now - vc.seg_start).0;
        vc.seg_start = now;
        let th = &mut self.threads[t.idx()];
        th.vruntime += el;
        th.slice_used += el;
        if th.act != TAct::Work {
            th.spin_left = th.spin_left.saturating_sub(el);
            return;
        }
        // Work re-fetches the vCPU's missing working set as it goes (host/cache.rs).
        let (progress, stall) = self.cache.split_elapsed(el, vc.refill_left_ns);
        vc.refill_left_ns -= stall;
        vc.refill_ns += stall;
        el = progress;
        let d = el.min(th.debt.0);
        th.debt.0 -= d;
        el -= d;
        th.remaining.0 -= el.min(th.remaining.0);
    }

    fn guest_slice(&self, v: VcpuId) -> u64 {
        let vc = &self.vcpus[v.idx()];
        let g = &self.vms[vc.vm.idx()].guest;
        let nr = vc.rq.len() as u64 + 1;
        (g.latency / nr).max(g.min_gran)
    }

    /// Takes the thread with the least vruntime off `v`'s runqueue; an idle vCPU
    /// first pulls a queued thread from its busiest sibling (newidle balancing).
    fn guest_pick(&mut self, v: VcpuId) -> Option<ThreadId> {
        if self.vcpus[v.idx()].rq.is_empty() {
            self.guest_pull(v);
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
                if th.held.is_empty() && th.act == TAct::Work && !th.idle_prio {
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
    fn kick_vcpu_for_work(&mut self, to: VcpuId) {
        match self.vcpus[to.idx()].hv {
            HvState::Halted => self.hv_wake_vcpu(to, true),
            HvState::Runnable => {}
            HvState::Running(_) => {
                if self.vcpus[to.idx()].cur.is_none() {
                    if self.vcpus[to.idx()].act == Act::HostPoll {
                        self.end_host_poll(to, true);
                    }
                    self.vcpu_continue(to);
                }
            }
        }
    }

    /// Assigns `t` to vCPU `to`, carrying its vruntime over as Linux's
    /// migrate_task_rq_fair does: relative to the old runqueue's min_vruntime, then
    /// based on the new one's (else a thread from a busier runqueue would queue far
    /// behind, or one from an idler runqueue far ahead).
    pub(crate) fn move_thread(&mut self, t: ThreadId, to: VcpuId) {
        let from = self.threads[t.idx()].vcpu;
        if from != to {
            let (old, new) = (self.vcpus[from.idx()].min_vr, self.vcpus[to.idx()].min_vr);
            let th = &mut self.threads[t.idx()];
            let rel = th.vruntime as i128 - old as i128;
            th.vruntime = (new as i128 + rel).max(0) as u64;
            th.vcpu = to;
        }
    }

    /// Queues `t` on `v`'s runqueue.
    #[inline]
    pub(crate) fn rq_push(&mut self, v: VcpuId, t: ThreadId) {
        let vc = &mut self.vcpus[v.idx()];
        vc.rq.push(t);
        self.vms[vc.vm.idx()].queued += 1;
    }

    /// `t` stops being `v`'s current thread: the pages it brought into the TLB while it
    /// ran evict other processes' translations.
    fn guest_tlb_leave(&mut self, v: VcpuId, t: ThreadId) {
        let th = &self.threads[t.idx()];
        let (pages, process) = (self.tlb.loaded_pages(th.slice_used), th.process as usize);
        let vc = &mut self.vcpus[v.idx()];
        vc.guest_tlb_loaded += pages;
        vc.process_tlb_mark[process] = vc.guest_tlb_loaded;
    }

    /// TLB refill of `t` resuming on `v` after other processes' threads ran there: a
    /// woken thread's wake path walks the page tables again (a preempted one resumes
    /// where it was; its working set is the cache model's).
    fn guest_tlb_refill(&self, v: VcpuId, t: ThreadId) -> u64 {
        if self.threads[t.idx()].woken_at.is_none() {
            return 0;
        }
        let vc = &self.vcpus[v.idx()];
        let mark = vc.process_tlb_mark[self.threads[t.idx()].process as usize];
        if mark == u64::MAX {
            // The process never ran on this vCPU: its first run finds the TLB cold,
            // which the host-level model already charges when the vCPU itself is new.
            return 0;
        }
        self.tlb.refill_ns(Some(vc.guest_tlb_loaded - mark))
    }

    /// Makes `t` the current thread of `v`, which resumes guest work at `t0`.
    fn become_current(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        let now = self.now;
        let switch = self.costs.guest_switch_ns + self.guest_tlb_refill(v, t);
        let vm = self.vcpus[v.idx()].vm.idx();
        // Gleaner's yielding threads belong to another process: running one does not put
        // the vCPU in the workload's mm mask (TLB shootdown targets).
        let of_workload = !self.threads[t.idx()].yielder;
        let vc = &mut self.vcpus[v.idx()];
        // A context switch unless the same thread simply continues (coming out of the
        // idle task is a switch too).
        let fresh = vc.last_thread != Some(t) || vc.idle_since != Nanos::MAX;
        vc.cur = Some(t);
        vc.last_thread = Some(t);
        vc.ran_threads |= of_workload;
        if vc.idle_since != Nanos::MAX {
            // Leaving idle: haltpoll adapts its window to the idle period.
            let block = now.0.saturating_sub(vc.idle_since.0);
            vc.idle_since = Nanos::MAX;
            let g = &self.vms[vm].guest;
            if g.haltpoll_max > 0 {
                let cur = vc.guest_poll_ns;
                if cur < block && block < g.haltpoll_max {
                    vc.guest_poll_ns = (cur * 2).max(g.haltpoll_start).min(g.haltpoll_max);
                } else if block > g.haltpoll_max {
                    vc.guest_poll_ns = cur / 2;
                }
            }
        }
        if self.vms[vm].gleaner.is_some() {
            self.gleaner_switch_in(v, t, fresh);
        }
        let th = &mut self.threads[t.idx()];
        th.state = ThreadState::Running;
        th.vcpu = v;
        th.slice_used = 0;
        if fresh {
            th.debt += Nanos(switch);
        }
        if let Some(w) = th.woken_at.take() {
            let lat = (t0 + th.debt).0.saturating_sub(w.0);
            let path = th.wake_path as usize;
            self.vms[vm].wake_latency.record(lat);
            self.vms[vm].wake_paths[path].record(lat);
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
                TAct::Work => {
                    if self.threads[t.idx()].yielder {
                        self.yielder_clip(v, t, t0);
                    }
                    let th = &self.threads[t.idx()];
                    if th.debt.0 == 0 && th.remaining.0 == 0 {
                        if let Advance::Left = self.thread_advance(t, v) {
                            self.guest_tlb_leave(v, t);
                            self.vcpus[v.idx()].cur = None;
                        }
                        continue;
                    }
                    return self.arm_work(v, t, t0);
                }
                TAct::PvHalt(l) => {
                    if self.spin_ready(t) {
                        continue;
                    }
                    if self.threads[t.idx()].pv_halted {
                        // Woken (kicked or spuriously) without the lock: spin again.
                        let th = &mut self.threads[t.idx()];
                        th.pv_halted = false;
                        th.act = TAct::SpinLock(l);
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
                    return self.arm_spin(v, t, t0);
                }
            }
        }
    }

    fn arm_work(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
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
        // Work is slower while the vCPU re-fetches its working set.
        seg = self
            .cache
            .wall_for_progress(seg, self.vcpus[v.idx()].refill_left_ns);
        // Guest time slicing; never inside a kernel spinlock section.
        if th.held.is_empty() && !self.vcpus[v.idx()].rq.is_empty() {
            let left = self.guest_slice(v).saturating_sub(th.slice_used).max(1_000);
            seg = seg.min(left);
        }
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, cat);
        vc.act = Act::Thread;
        vc.seg_start = t0;
        let gen = vc.gen;
        self.q.push(t0 + Nanos(seg), Ev::Step(v, gen));
    }

    fn arm_spin(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        let now = self.now;
        let th = &self.threads[t.idx()];
        let budgeted = match th.act {
            TAct::SpinMutex(_) | TAct::SpinBarrier(..) => true,
            TAct::SpinLock(_) => self.vms[th.vm.idx()].guest.pv_spin > 0,
            _ => false,
        };
        let budget_dl = if budgeted {
            t0 + Nanos(th.spin_left.max(1))
        } else {
            Nanos::MAX
        };
        let ple_dl = self.ple_deadline(v, t0).unwrap_or(Nanos::MAX);
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, VCat::Spin);
        vc.act = Act::Thread;
        vc.seg_start = t0;
        vc.ple_deadline = ple_dl;
        let dl = budget_dl.min(ple_dl);
        if dl != Nanos::MAX {
            let gen = vc.gen;
            self.q.push(dl, Ev::Step(v, gen));
        }
    }

    /// No thread to run: the guest idles as configured.
    fn vcpu_idle_enter(&mut self, v: VcpuId, t0: Nanos) {
        let now = self.now;
        let vm = self.vcpus[v.idx()].vm.idx();
        let (poll, haltpoll) = (
            self.vms[vm].guest.idle_poll,
            self.vms[vm].guest.haltpoll_max > 0,
        );
        let vc = &mut self.vcpus[v.idx()];
        if vc.idle_since == Nanos::MAX {
            vc.idle_since = now;
        }
        if poll {
            vc.set_cat(now, VCat::IdlePoll);
            vc.act = Act::IdlePoll;
            return;
        }
        if haltpoll && vc.guest_poll_ns > 0 {
            vc.set_cat(now, VCat::IdlePoll);
            vc.act = Act::IdlePoll;
            let gen = vc.gen;
            let end = t0 + Nanos(vc.guest_poll_ns);
            self.q.push(end, Ev::Step(v, gen));
            return;
        }
        self.start_halt(v, t0, true);
    }

    /// HLT: the exit takes `vmexit_ns`, then the vCPU blocks (or the host polls). An
    /// `idle` halt first stops the NOHZ tick: a timer write, another exit (a pv
    /// spinlock's halt does not).
    fn start_halt(&mut self, v: VcpuId, t0: Nanos, idle: bool) {
        let now = self.now;
        let tick = if idle {
            let vm = self.vcpus[v.idx()].vm.idx();
            self.timer_write_cost(vm)
        } else {
            0
        };
        let exit = tick + self.costs.vmexit_ns;
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, VCat::Overhead);
        vc.act = Act::Halting;
        let gen = vc.gen;
        self.q.push(t0 + Nanos(exit), Ev::Step(v, gen));
    }

    /// The running vCPU's armed step fired.
    pub(crate) fn on_step(&mut self, v: VcpuId) {
        match self.vcpus[v.idx()].act {
            Act::Halting => self.vcpu_halt(v),
            Act::HostPoll => self.end_host_poll(v, false),
            Act::IdlePoll => {
                // haltpoll's window ran out: HLT.
                let now = self.now;
                self.start_halt(v, now, true);
            }
            Act::Thread => {
                self.sync_progress(v);
                let Some(t) = self.vcpus[v.idx()].cur else {
                    return;
                };
                let th = &self.threads[t.idx()];
                match th.act {
                    TAct::Work => {
                        let busy = th.debt.0 > 0 || th.remaining.0 > 0;
                        if busy
                            && th.held.is_empty()
                            && th.slice_used >= self.guest_slice(v)
                            && !self.vcpus[v.idx()].rq.is_empty()
                        {
                            self.guest_preempt(v, t);
                        }
                    }
                    TAct::PvHalt(_) => {}
                    _ => {
                        if self.now >= self.vcpus[v.idx()].ple_deadline {
                            return self.ple_exit(v);
                        }
                        if self.threads[t.idx()].spin_left == 0 {
                            self.spin_exhausted(t);
                        }
                    }
                }
                if self.vcpus[v.idx()].is_running() {
                    self.vcpu_continue(v);
                }
            }
            Act::Off => {}
        }
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

    /// Runs `t`'s pending kernel steps, then its program, until something takes time,
    /// spins, blocks, or ends the thread.
    fn thread_advance(&mut self, t: ThreadId, v: VcpuId) -> Advance {
        let now = self.now;
        let prog = self.threads[t.idx()].program.clone();
        let bases = self.vms[self.threads[t.idx()].vm.idx()].bases;
        loop {
            if let Some(m) = self.threads[t.idx()].micro.pop_front() {
                match self.exec_micro(t, v, m) {
                    Flow::Next => continue,
                    Flow::Wait => return Advance::Continue,
                    Flow::Left => return Advance::Left,
                }
            }
            let th = &mut self.threads[t.idx()];
            let pc = th.pc as usize;
            th.pc += 1;
            match &prog.code[pc] {
                Instr::Compute(d) | Instr::Kernel(d) => {
                    th.remaining = Nanos(d.sample(&mut th.rng).0.max(1));
                    th.in_kernel = matches!(prog.code[pc], Instr::Kernel(_));
                    th.in_exit = false;
                    return Advance::Continue;
                }
                Instr::Count(n) => {
                    let vm = th.vm;
                    self.vms[vm.idx()].units += n;
                }
                Instr::Sleep(d) => {
                    let slack = self.vms[th.vm.idx()].guest.timer_slack;
                    let dur = d.sample(&mut th.rng).0.max(1) + slack;
                    self.block_with_timer(t, v, Ev::ThreadTimer(t, 0), dur);
                    return Advance::Left;
                }
                Instr::Io(d) => {
                    let dur = d.sample(&mut th.rng).0.max(1);
                    self.block_with_timer(t, v, Ev::IoDone(t), dur);
                    return Advance::Left;
                }
                Instr::LoopStart { slot, count, end } => match count {
                    Some(0) => th.pc = *end,
                    Some(c) => th.loops[*slot as usize] = *c,
                    None => th.loops[*slot as usize] = u64::MAX,
                },
                Instr::LoopEnd { slot, start } => {
                    let c = &mut th.loops[*slot as usize];
                    if *c != u64::MAX {
                        *c -= 1;
                    }
                    if *c > 0 {
                        th.pc = start + 1;
                    }
                }
                Instr::Lock(m) => th.micro.push_back(Micro::MutexLock(bases.mutex + m)),
                Instr::Unlock(m) => th.micro.push_back(Micro::MutexUnlock(bases.mutex + m)),
                Instr::Kspin { lock, hold } => {
                    let l = LockId(bases.spin + lock);
                    let ns = hold.sample(&mut th.rng).0.max(1);
                    th.micro.push_back(Micro::KLock(l));
                    th.micro.push_back(Micro::Work { ns, kernel: true });
                    th.micro.push_back(Micro::KUnlock(l));
                }
                Instr::Barrier(b) => {
                    th.spin_left = 0;
                    th.micro.push_back(Micro::BarrierArrive(bases.barrier + b));
                }
                Instr::SpinBarrier { barrier, spin } => {
                    th.spin_left = spin.sample(&mut th.rng).0.max(1);
                    th.micro
                        .push_back(Micro::BarrierArrive(bases.barrier + barrier));
                }
                Instr::CondWait { cond, mutex } => {
                    self.push_cond_wait(t, bases.cond + cond, bases.mutex + mutex, None);
                }
                Instr::CondSignal(c) | Instr::CondBroadcast(c) => {
                    let all = matches!(prog.code[pc], Instr::CondBroadcast(_));
                    let c = bases.cond + c;
                    if !self.conds[c as usize].waiters.is_empty() {
                        let bucket = self.conds[c as usize].bucket;
                        let f = self.futex_cost();
                        self.push_wake_path(t, bucket, Micro::WakeCond { cond: c, all }, f);
                    }
                }
                Instr::SemPost(s) => th.micro.push_back(Micro::SemPost(bases.sem + s)),
                Instr::SemWait(s) => th.micro.push_back(Micro::SemWait(bases.sem + s)),
                Instr::Yield => {
                    // sched_yield: the syscall's cost, then the runqueue's best thread
                    // (if any) runs and the yielder goes behind it.
                    th.debt += Nanos(self.costs.syscall_ns);
                    if self.vcpus[v.idx()].rq.is_empty() {
                        continue;
                    }
                    let max_vr = self.vcpus[v.idx()]
                        .rq
                        .iter()
                        .map(|o| self.threads[o.idx()].vruntime)
                        .max()
                        .unwrap_or(0);
                    let th = &mut self.threads[t.idx()];
                    th.vruntime = th.vruntime.max(max_vr + 1);
                    self.guest_preempt(v, t);
                    return Advance::Left;
                }
                Instr::Cpuset(mask) => {
                    let vm = th.vm.idx();
                    let n = self.vms[vm].nvcpus;
                    let mask = mask
                        & if n >= 128 {
                            u128::MAX
                        } else {
                            (1u128 << n) - 1
                        };
                    if mask != 0 {
                        let leaves = mask >> (v.0 - self.vms[vm].first_vcpu) & 1 == 0;
                        if leaves {
                            // This thread's own vCPU is left out: it moves too.
                            self.guest_preempt(v, t);
                        }
                        self.set_cpuset(vm, mask, v);
                        if leaves {
                            return Advance::Left;
                        }
                    }
                }
                Instr::Push(q) => {
                    let q = bases.queue + q;
                    let m = self.queues[q as usize].mutex;
                    let th = &mut self.threads[t.idx()];
                    th.micro.extend([Micro::MutexLock(m), Micro::QueuePush(q)]);
                }
                Instr::Pop(q) => {
                    let q = bases.queue + q;
                    let m = self.queues[q as usize].mutex;
                    let th = &mut self.threads[t.idx()];
                    th.micro.extend([Micro::MutexLock(m), Micro::QueuePop(q)]);
                }
                Instr::TlbShootdown => self.tlb_shootdown(t, v),
                Instr::Retain => {
                    if self.yielder_step(t, v) {
                        return Advance::Left;
                    }
                    return Advance::Continue;
                }
                Instr::Exit => {
                    th.state = ThreadState::Done;
                    th.pc -= 1;
                    let (vm, finite) = (th.vm, th.finite);
                    self.trace_thread_end(v);
                    if finite {
                        let m = &mut self.vms[vm.idx()];
                        m.finished_threads += 1;
                        if m.finished_threads == m.finite_threads {
                            m.completion = Some(now);
                        }
                        self.finite_left -= 1;
                        if self.finite_left == 0 {
                            self.stop = Some(StopCause::AllFinished);
                        }
                    }
                    return Advance::Left;
                }
            }
        }
    }

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
    /// slept on, which wakes it there.
    pub(crate) fn on_thread_timer(&mut self, t: ThreadId) {
        let now = self.now;
        let v = self.threads[t.idx()].vcpu;
        let (latency, wakeup_gran) = {
            let g = &self.vms[self.vcpus[v.idx()].vm.idx()].guest;
            (g.latency, g.wakeup_gran)
        };
        let min_vr = self.vcpus[v.idx()].min_vr;
        let path = match self.vcpus[v.idx()].hv {
            HvState::Running(_) => PATH_RUNNING,
            HvState::Runnable => PATH_PREEMPTED,
            HvState::Halted => PATH_HALTED_IDLE_PCPU,
        };
        let th = &mut self.threads[t.idx()];
        if th.state != ThreadState::Blocked {
            return;
        }
        th.state = ThreadState::Runnable;
        th.woken_at = Some(now);
        th.wake_path = path;
        th.vruntime = th.vruntime.max(min_vr.saturating_sub(latency / 2));
        let wake_vr = th.vruntime;
        self.rq_push(v, t);
        match self.vcpus[v.idx()].hv {
            HvState::Halted => {
                self.hv_wake_vcpu(v, true);
                if !self.last_wake_pcpu_idle {
                    self.threads[t.idx()].wake_path = PATH_HALTED_BUSY_PCPU;
                }
            }
            HvState::Runnable => {}
            HvState::Running(_) => {
                if self.vcpus[v.idx()].act == Act::HostPoll {
                    self.end_host_poll(v, true);
                }
                self.sync_progress(v);
                let deliver = Nanos(self.irq_running_cost(self.vcpus[v.idx()].vm.idx()));
                let vc = &mut self.vcpus[v.idx()];
                vc.charge(now);
                vc.overhead_until = vc.overhead_until.max(now) + deliver;
                vc.resume_at = vc.resume_at.max(vc.overhead_until);
                if let Some(c) = self.vcpus[v.idx()].cur {
                    let cth = &self.threads[c.idx()];
                    let woken_normal = !self.threads[t.idx()].idle_prio;
                    if cth.held.is_empty()
                        && cth.act == TAct::Work
                        && ((cth.idle_prio && woken_normal)
                            || cth.vruntime.saturating_sub(wake_vr) > wakeup_gran)
                    {
                        self.guest_preempt(v, c);
                    }
                }
                self.vcpu_continue(v);
            }
        }
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
