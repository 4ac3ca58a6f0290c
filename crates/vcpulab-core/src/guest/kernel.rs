//! The guest kernel's scheduler and the execution of thread programs on a vCPU.
//! A thread progresses only while its vCPU runs on a pCPU and it is the vCPU's current
//! thread; progress is computed from timestamps, never simulated in small steps.

use crate::guest::thread::ThreadState;
use crate::hv::vcpu::{Act, HvState, VCat};
use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, ThreadId, VcpuId};
use crate::workload::program::Instr;

/// What a thread did when its current operation ended.
enum Advance {
    /// It has new work to do.
    Continue,
    /// It blocked or exited; the vCPU needs another thread.
    Left,
}

impl World {
    /// Credits the running vCPU's current thread with the progress made since its
    /// segment started.
    pub(crate) fn sync_progress(&mut self, v: VcpuId) {
        let now = self.now;
        let vc = &mut self.vcpus[v.idx()];
        let Some(t) = vc.cur else { return };
        if !vc.is_running() || vc.act != Act::Thread {
            return;
        }
        if now <= vc.seg_start {
            return;
        }
        let mut el = (now - vc.seg_start).0;
        vc.seg_start = now;
        let th = &mut self.threads[t.idx()];
        let d = el.min(th.debt.0);
        th.debt.0 -= d;
        el -= d;
        let r = el.min(th.remaining.0);
        th.remaining.0 -= r;
        th.vruntime += d + r;
        th.slice_used += d + r;
    }

    fn guest_slice(&self, v: VcpuId) -> u64 {
        let vc = &self.vcpus[v.idx()];
        let g = &self.vms[vc.vm.idx()].guest;
        let nr = vc.rq.len() as u64 + 1;
        (g.latency / nr).max(g.min_gran)
    }

    /// Takes the thread with the least vruntime off `v`'s runqueue.
    fn guest_pick(&mut self, v: VcpuId) -> Option<ThreadId> {
        let vc = &mut self.vcpus[v.idx()];
        let (i, _) = vc
            .rq
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| self.threads[t.idx()].vruntime)?;
        let t = vc.rq.remove(i);
        vc.min_vr = vc.min_vr.max(self.threads[t.idx()].vruntime);
        Some(t)
    }

    /// Decides what the running vCPU `v` does next and arms its step event.
    pub(crate) fn vcpu_continue(&mut self, v: VcpuId) {
        let now = self.now;
        let t0 = now.max(self.vcpus[v.idx()].resume_at);
        {
            let vc = &mut self.vcpus[v.idx()];
            vc.gen = vc.gen.wrapping_add(1);
        }
        if self.vcpus[v.idx()].cur.is_none() {
            if let Some(t) = self.guest_pick(v) {
                let switch = self.costs.guest_switch_ns;
                let vc = &mut self.vcpus[v.idx()];
                let fresh = vc.last_thread != Some(t);
                vc.cur = Some(t);
                vc.last_thread = Some(t);
                let th = &mut self.threads[t.idx()];
                th.state = ThreadState::Running;
                th.slice_used = 0;
                if fresh {
                    th.debt += Nanos(switch);
                }
                if let Some(w) = th.woken_at.take() {
                    let lat = (t0 + th.debt).0.saturating_sub(w.0);
                    let vm = th.vm;
                    self.vms[vm.idx()].wake_latency.record(lat);
                }
                if th.remaining.0 == 0 && th.debt.0 == 0 {
                    // A thread that has not started yet: fetch its first operation.
                    if let Advance::Left = self.thread_advance(t, v) {
                        self.vcpus[v.idx()].cur = None;
                        return self.vcpu_continue(v);
                    }
                }
                self.trace_thread_begin(v);
            }
        }
        let gen = self.vcpus[v.idx()].gen;
        match self.vcpus[v.idx()].cur {
            Some(t) => {
                let th = &self.threads[t.idx()];
                let (mut seg, cat) = if th.debt.0 > 0 {
                    (th.debt.0, VCat::Kernel)
                } else {
                    (
                        th.remaining.0,
                        if th.in_kernel {
                            VCat::Kernel
                        } else {
                            VCat::User
                        },
                    )
                };
                if !self.vcpus[v.idx()].rq.is_empty() {
                    let left = self.guest_slice(v).saturating_sub(th.slice_used).max(1_000);
                    seg = seg.min(left);
                }
                let vc = &mut self.vcpus[v.idx()];
                vc.set_cat(now, cat);
                vc.act = Act::Thread;
                vc.seg_start = t0;
                self.q.push(t0 + Nanos(seg), Ev::Step(v, gen));
            }
            None => {
                let poll = self.vms[self.vcpus[v.idx()].vm.idx()].guest.idle_poll;
                let exit = self.costs.vmexit_ns;
                let vc = &mut self.vcpus[v.idx()];
                if poll {
                    vc.set_cat(now, VCat::IdlePoll);
                    vc.act = Act::IdlePoll;
                } else {
                    // HLT: the exit takes vmexit_ns, then the vCPU blocks.
                    vc.set_cat(now, VCat::Overhead);
                    vc.act = Act::Halting;
                    self.q.push(t0 + Nanos(exit), Ev::Step(v, gen));
                }
            }
        }
    }

    /// The running vCPU's armed step fired.
    pub(crate) fn on_step(&mut self, v: VcpuId) {
        match self.vcpus[v.idx()].act {
            Act::Halting => self.vcpu_halt(v),
            Act::Thread => {
                self.sync_progress(v);
                let Some(t) = self.vcpus[v.idx()].cur else {
                    return;
                };
                let th = &self.threads[t.idx()];
                if th.debt.0 == 0 && th.remaining.0 == 0 {
                    if let Advance::Left = self.thread_advance(t, v) {
                        self.vcpus[v.idx()].cur = None;
                    }
                } else if th.slice_used >= self.guest_slice(v) && !self.vcpus[v.idx()].rq.is_empty()
                {
                    self.guest_preempt(v, t);
                }
                if self.vcpus[v.idx()].is_running() {
                    self.vcpu_continue(v);
                }
            }
            Act::IdlePoll | Act::Off => {}
        }
    }

    /// Puts the current thread back on the runqueue (its guest slice is over).
    fn guest_preempt(&mut self, v: VcpuId, t: ThreadId) {
        self.trace_thread_end(v);
        let vc = &mut self.vcpus[v.idx()];
        vc.cur = None;
        vc.rq.push(t);
        self.threads[t.idx()].state = ThreadState::Runnable;
    }

    /// Runs `t`'s program from its program counter until an operation that takes time,
    /// blocks, or ends the thread.
    fn thread_advance(&mut self, t: ThreadId, v: VcpuId) -> Advance {
        let now = self.now;
        let prog = self.threads[t.idx()].program.clone();
        loop {
            let th = &mut self.threads[t.idx()];
            let pc = th.pc as usize;
            match &prog.code[pc] {
                Instr::Compute(d) | Instr::Kernel(d) => {
                    th.pc += 1;
                    th.remaining = Nanos(d.sample(&mut th.rng).0.max(1));
                    th.in_kernel = matches!(prog.code[pc], Instr::Kernel(_));
                    return Advance::Continue;
                }
                Instr::Count(n) => {
                    th.pc += 1;
                    let vm = th.vm;
                    self.vms[vm.idx()].units += n;
                }
                Instr::Sleep(d) => {
                    th.pc += 1;
                    let slack = self.vms[th.vm.idx()].guest.timer_slack;
                    let dur = d.sample(&mut th.rng).0.max(1) + slack;
                    th.state = ThreadState::Blocked;
                    th.timer_gen = th.timer_gen.wrapping_add(1);
                    // The system call's return path runs when it wakes.
                    th.debt += Nanos(self.costs.syscall_ns);
                    let gen = th.timer_gen;
                    self.q.push(now + Nanos(dur), Ev::ThreadTimer(t, gen));
                    self.trace_thread_end(v);
                    return Advance::Left;
                }
                Instr::LoopStart { slot, count, end } => match count {
                    Some(0) => th.pc = *end,
                    Some(c) => {
                        th.loops[*slot as usize] = *c;
                        th.pc += 1;
                    }
                    None => {
                        th.loops[*slot as usize] = u64::MAX;
                        th.pc += 1;
                    }
                },
                Instr::LoopEnd { slot, start } => {
                    let c = &mut th.loops[*slot as usize];
                    if *c != u64::MAX {
                        *c -= 1;
                    }
                    if *c > 0 {
                        th.pc = start + 1;
                    } else {
                        th.pc += 1;
                    }
                }
                Instr::Exit => {
                    th.state = ThreadState::Done;
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
                            self.stop = Some(crate::sim::world::StopCause::AllFinished);
                        }
                    }
                    return Advance::Left;
                }
            }
        }
    }

    pub(crate) fn on_thread_timer(&mut self, t: ThreadId) {
        let v = self.threads[t.idx()].vcpu;
        self.thread_wake(t, v, true);
    }

    /// Makes the blocked thread `t` runnable on vCPU `v`, waking the vCPU if halted.
    /// `interrupt`: the wake-up arrives as an interrupt injected into `v`.
    pub(crate) fn thread_wake(&mut self, t: ThreadId, v: VcpuId, interrupt: bool) {
        let now = self.now;
        let (latency, wakeup_gran) = {
            let g = &self.vms[self.vcpus[v.idx()].vm.idx()].guest;
            (g.latency, g.wakeup_gran)
        };
        let min_vr = self.vcpus[v.idx()].min_vr;
        let th = &mut self.threads[t.idx()];
        debug_assert_eq!(th.state, ThreadState::Blocked);
        th.state = ThreadState::Runnable;
        th.vcpu = v;
        th.woken_at = Some(now);
        // Guest CFS sleeper placement.
        th.vruntime = th.vruntime.max(min_vr.saturating_sub(latency / 2));
        let wake_vr = th.vruntime;
        self.vcpus[v.idx()].rq.push(t);
        match self.vcpus[v.idx()].hv {
            HvState::Halted => self.hv_wake_vcpu(v, true),
            HvState::Runnable => {}
            HvState::Running(_) => {
                self.sync_progress(v);
                if interrupt {
                    let deliver = Nanos(self.costs.ipi_deliver_ns);
                    let vc = &mut self.vcpus[v.idx()];
                    vc.charge(now);
                    vc.overhead_until = vc.overhead_until.max(now) + deliver;
                    vc.resume_at = vc.resume_at.max(vc.overhead_until);
                    vc.seg_start = vc.seg_start.max(vc.resume_at);
                }
                match self.vcpus[v.idx()].cur {
                    None => self.vcpu_continue(v),
                    Some(c) => {
                        let cvr = self.threads[c.idx()].vruntime;
                        if cvr.saturating_sub(wake_vr) > wakeup_gran {
                            self.guest_preempt(v, c);
                        }
                        self.vcpu_continue(v);
                    }
                }
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
