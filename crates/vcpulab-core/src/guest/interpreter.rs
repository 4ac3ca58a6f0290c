//! The program interpreter: runs a thread's workload program (compute, sleep, I/O,
//! locks, barriers, queues, yield, cpuset changes) and its pending kernel steps until
//! something takes time, spins, blocks or ends the thread.

use crate::guest::sync::Flow;
use crate::guest::thread::{Micro, ThreadState};
use crate::host::cpumask::CpuMask;
use crate::sim::world::{Ev, StopCause, World};
use crate::sim::{LockId, Nanos, ThreadId, VcpuId};
use crate::workload::program::Instr;

/// What a thread did when its current step ended.
pub(crate) enum Advance {
    /// It has new work, or a spin, to do.
    Continue,
    /// It blocked or exited; the vCPU needs another thread.
    Left,
}

impl World {
    /// A loop whose body takes no simulated time: stop the run (reported as an error by
    /// api::run) instead of spinning for ever.
    #[cold]
    fn no_progress(&mut self, t: ThreadId) -> Advance {
        self.stop = Some(StopCause::NoProgress(t));
        Advance::Left
    }

    /// Runs `t`'s pending kernel steps, then its program, until something takes time,
    /// spins, blocks, or ends the thread.
    pub(crate) fn thread_advance(&mut self, t: ThreadId, v: VcpuId) -> Advance {
        let now = self.now;
        let prog = self.threads[t.idx()].program.clone();
        let bases = self.vms[self.threads[t.idx()].vm.idx()].bases;
        if matches!(self.stop, Some(StopCause::NoProgress(_))) {
            return Advance::Left; // the run is ending: leave every vCPU idle
        }
        let mut steps: u32 = 0;
        'step: loop {
            steps += 1;
            if steps > crate::sim::world::MAX_ZERO_TIME_STEPS {
                return self.no_progress(t);
            }
            // The next micro-step: the queue's first, or the first of the next
            // instruction's. (One call site, so that `exec_micro` stays inlined.)
            let m = 'fetch: {
                if let Some(m) = self.threads[t.idx()].micro.pop_front() {
                    break 'fetch m;
                }
                let th = &mut self.threads[t.idx()];
                let pc = th.pc as usize;
                th.pc += 1;
                // An instruction that turns into micro-steps runs the first at once (the
                // queue is empty here) and queues the rest: the same order, and the same
                // step count, as queueing them all and popping the first.
                let first = match &prog.code[pc] {
                    Instr::Compute(d) | Instr::Kernel(d) => {
                        th.remaining = Nanos(d.sample(&mut th.rng).0.max(1));
                        th.in_kernel = matches!(prog.code[pc], Instr::Kernel(_));
                        th.in_exit = false;
                        return Advance::Continue;
                    }
                    Instr::Count(n) => {
                        let vm = th.vm;
                        self.vms[vm.idx()].units += n;
                        continue 'step;
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
                    Instr::LoopStart { slot, count, end } => {
                        match count {
                            Some(0) => th.pc = *end,
                            Some(c) => *th.loop_counter(*slot as usize) = *c,
                            None => *th.loop_counter(*slot as usize) = u64::MAX,
                        }
                        continue 'step;
                    }
                    Instr::LoopEnd { slot, start } => {
                        let c = th.loop_counter(*slot as usize);
                        if *c != u64::MAX {
                            *c -= 1;
                        }
                        if *c > 0 {
                            th.pc = start + 1;
                        }
                        continue 'step;
                    }
                    Instr::DispenseEnter { slot, .. } => {
                        *th.loop_counter(*slot as usize) += 1;
                        continue 'step;
                    }
                    Instr::DispenseTake {
                        dispenser,
                        slot,
                        exit,
                    } => {
                        let episode = *th.loop_counter(*slot as usize);
                        let d = self.vms[th.vm.idx()].dispenser_base + dispenser;
                        if !self.dispensers[d as usize].take(episode) {
                            self.threads[t.idx()].pc = *exit;
                        }
                        continue 'step;
                    }
                    Instr::Jump(to) => {
                        th.pc = *to;
                        continue 'step;
                    }
                    Instr::GroupFlush {
                        flusher,
                        slot,
                        exit,
                    } => {
                        let f = self.vms[th.vm.idx()].flusher_base + flusher;
                        // Its writes are covered by the next flush to start.
                        *th.loop_counter(*slot as usize) = self.flushers[f as usize].started + 1;
                        Micro::FlushCheck {
                            f,
                            slot: *slot,
                            exit: *exit,
                        }
                    }
                    Instr::FlushIo(flusher) => {
                        let f = self.vms[th.vm.idx()].flusher_base + flusher;
                        let dur = self.flushers[f as usize].io.sample(&mut th.rng).0.max(1);
                        th.micro.push_front(Micro::FlushDone(f));
                        self.block_with_timer(t, v, Ev::IoDone(t), dur);
                        return Advance::Left;
                    }
                    Instr::Lock(m) => Micro::MutexLock(bases.mutex + m),
                    Instr::LockSpin { mutex, spin } => {
                        let ns = spin.sample(&mut th.rng).0;
                        Micro::MutexLockSpin(bases.mutex + mutex, ns)
                    }
                    Instr::Unlock(m) => Micro::MutexUnlock(bases.mutex + m),
                    Instr::Kspin { lock, hold, dentry } => {
                        let l = LockId(bases.spin + lock);
                        let ns = hold.sample(&mut th.rng).0.max(1);
                        if dentry.lockless(self.vms[th.vm.idx()].guest.dentry_lockless) {
                            // A lockref cmpxchg: the section's work, no lock.
                            th.remaining = Nanos(ns);
                            th.in_kernel = true;
                            th.in_exit = false;
                            return Advance::Continue;
                        }
                        th.micro.push_back(Micro::Work { ns, kernel: true });
                        th.micro.push_back(Micro::KUnlock(l));
                        Micro::KLock(l)
                    }
                    Instr::Barrier(b) => {
                        th.spin_left = 0;
                        let b = bases.barrier + b;
                        let lock = self.barriers[b as usize].lock;
                        if lock != u32::MAX {
                            // glibc before 2.25: under the barrier's internal lock.
                            th.micro.push_back(Micro::BarrierArriveLocked(b));
                            Micro::LllLock(lock)
                        } else {
                            Micro::BarrierArrive(b)
                        }
                    }
                    Instr::SpinBarrier { barrier, spin } => {
                        th.spin_left = spin.sample(&mut th.rng).0.max(1);
                        Micro::BarrierArrive(bases.barrier + barrier)
                    }
                    Instr::ParsecBarrier { barrier, spin } => {
                        let b = bases.barrier + barrier;
                        let spin = spin.sample(&mut th.rng).0.max(1);
                        let (m, _) = self.barriers[b as usize]
                            .parsec
                            .expect("a PARSEC barrier has a mutex (sim/build.rs)");
                        th.micro.push_back(Micro::PbArrive { b, spin });
                        Micro::MutexLock(m)
                    }
                    Instr::CondWait { cond, mutex } => {
                        self.push_cond_wait(t, bases.cond + cond, bases.mutex + mutex, None);
                        continue 'step;
                    }
                    Instr::CondSignal(c) => {
                        let c = bases.cond + c;
                        let lock = self.conds[c as usize].lock;
                        if lock != u32::MAX {
                            // glibc before 2.25: under the internal lock.
                            th.micro.push_front(Micro::CondSignalLocked(c));
                            th.micro.push_front(Micro::LllLock(lock));
                        } else if !self.conds[c as usize].waiters.is_empty() {
                            let bucket = self.conds[c as usize].bucket;
                            let f = self.futex_cost(t);
                            let wake = Micro::WakeCond {
                                cond: c,
                                all: false,
                            };
                            self.push_wake_path(t, bucket, wake, f);
                        }
                        continue 'step;
                    }
                    Instr::CondBroadcast(c) => {
                        self.push_broadcast(t, bases.cond + c);
                        continue 'step;
                    }
                    Instr::SemPost(s) => Micro::SemPost(bases.sem + s),
                    Instr::SemWait(s) => Micro::SemWait(bases.sem + s),
                    Instr::SemSpinWait { sem, spin } => {
                        let ns = spin.sample(&mut th.rng).0;
                        Micro::SemSpinWait(bases.sem + sem, ns)
                    }
                    Instr::RwRead(s) => Micro::RwDown {
                        s: bases.rwsem + s,
                        write: false,
                        retry: false,
                    },
                    Instr::RwWrite(s) => Micro::RwDown {
                        s: bases.rwsem + s,
                        write: true,
                        retry: false,
                    },
                    Instr::RwUnlock(s) => Micro::RwUp(bases.rwsem + s),
                    Instr::RwSpin { lock, write, spin } => {
                        let spin = spin.sample(&mut th.rng).0;
                        Micro::RwSpinDown {
                            s: bases.rwsem + lock,
                            write: *write,
                            spin,
                        }
                    }
                    Instr::Yield => Micro::SchedYield,
                    Instr::Cpuset(mask) => {
                        let vm = th.vm.idx();
                        let n = self.vms[vm].nvcpus;
                        let mask = mask.and(CpuMask::all(n));
                        if !mask.is_empty() {
                            let leaves = !mask.contains(v.0 - self.vms[vm].first_vcpu);
                            if leaves {
                                // This thread's own vCPU is left out: it moves too.
                                self.guest_preempt(v, t);
                            }
                            self.set_cpuset(vm, mask, v);
                            if leaves {
                                return Advance::Left;
                            }
                        }
                        continue 'step;
                    }
                    Instr::Push(q) => {
                        let q = bases.queue + q;
                        let m = self.queues[q as usize].mutex;
                        self.threads[t.idx()].micro.push_back(Micro::QueuePush(q));
                        Micro::MutexLock(m)
                    }
                    Instr::Pop(q) => {
                        let q = bases.queue + q;
                        let m = self.queues[q as usize].mutex;
                        self.threads[t.idx()].micro.push_back(Micro::QueuePop(q));
                        Micro::MutexLock(m)
                    }
                    Instr::TlbShootdown => {
                        self.tlb_shootdown(t, v);
                        continue 'step;
                    }
                    Instr::NetRecv(n) => {
                        let n = *n;
                        match self.nic_recv(t, n) {
                            Some(ns) => {
                                let th = &mut self.threads[t.idx()];
                                th.remaining = Nanos(ns.max(1));
                                th.in_kernel = true;
                                return Advance::Continue;
                            }
                            None => {
                                // No datagram yet: sleep until the NIC's interrupt, then
                                // receive again.
                                let th = &mut self.threads[t.idx()];
                                th.pc -= 1;
                                Micro::Block
                            }
                        }
                    }
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
                };
                steps += 1; // the step that popped `first` from the queue
                if steps > crate::sim::world::MAX_ZERO_TIME_STEPS {
                    return self.no_progress(t);
                }
                first
            };
            match self.exec_micro(t, v, m) {
                Flow::Next => continue 'step,
                Flow::Wait => return Advance::Continue,
                Flow::Left => return Advance::Left,
            }
        }
    }
}
