//! Guest threads: a program counter over a compiled program, the current activity,
//! a queue of kernel-path steps, and scheduling state.

use crate::guest::sync::EventOwner;
use crate::sim::{LockId, Nanos, Rng, ThreadId, VcpuId, VmId};
use crate::workload::program::Program;
use std::collections::VecDeque;
use std::rc::Rc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    /// On its vCPU's runqueue.
    Runnable,
    /// Its vCPU's current thread.
    Running,
    /// Woken onto another vCPU's wake list (ttwu_queue_remote): on no runqueue until
    /// that vCPU handles the reschedule IPI (sched_ttwu_pending), so no other vCPU's
    /// balancing can take it (guest/ipi.rs `send_wake`).
    Waking,
    Blocked,
    Done,
}

/// What the thread does while it is its vCPU's current thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadActivity {
    /// Computing `remaining` (after `debt`).
    Work,
    /// Spinning for a kernel spinlock.
    SpinLock(LockId),
    /// Spinning on a held user mutex (global mutex index), for `spin_left`.
    SpinMutex(u32),
    /// Spinning at a barrier (global index) until its generation passes `gen`.
    SpinBarrier(u32, u64),
    /// Spinning on a user read-write lock (global index), for writing if `true`.
    SpinRw(u32, bool),
    /// Spinning in user space until a semaphore (global index) has a unit to take.
    SpinSem(u32),
    /// A writer spinning optimistically, in kernel mode, on a kernel read-write
    /// semaphore (global index; guest/sync.rs `rwsem_spin_step`).
    SpinRwsem(u32),
    /// Waiting for TLB-shootdown acknowledgements.
    TlbWait,
    /// pv spinlock: the vCPU halted waiting for the unlocker's kick.
    PvHalt(LockId),
}

impl ThreadActivity {
    pub fn is_spin(self) -> bool {
        !matches!(self, ThreadActivity::Work | ThreadActivity::PvHalt(_))
    }

    /// A spin that a release re-examines at once on a running vCPU (guest/sync.rs
    /// `poke_spinners`): a user-space spin or a read-write semaphore's optimistic spin.
    pub fn is_poked_spin(self) -> bool {
        self.is_user_spin() || matches!(self, ThreadActivity::SpinRwsem(_))
    }

    /// Spinning in user space (a library's mutex, barrier or read-write lock spin), where
    /// the guest scheduler can preempt the thread; a kernel spinlock, a TLB-shootdown
    /// wait and a pv halt run with preemption off.
    pub fn is_user_spin(self) -> bool {
        matches!(
            self,
            ThreadActivity::SpinMutex(_)
                | ThreadActivity::SpinBarrier(..)
                | ThreadActivity::SpinRw(..)
                | ThreadActivity::SpinSem(_)
        )
    }

    /// Runs the scheduler tick's check while it spins: a user-space spin (which the tick
    /// can preempt) and a read-write semaphore's optimistic spin, which stops when the
    /// tick sets need_resched.
    pub fn sees_tick(self) -> bool {
        self.is_user_spin() || matches!(self, ThreadActivity::SpinRwsem(_))
    }
}

/// One step of a kernel or library path (futex, mutex, barrier, condvar, queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Micro {
    Work {
        ns: u64,
        kernel: bool,
    },
    /// A VM exit the thread's kernel path causes (an ICR write): `ns` of the vCPU's
    /// time booked as exit overhead; the thread keeps what it holds meanwhile.
    Exit {
        ns: u64,
    },
    KLock(LockId),
    KUnlock(LockId),
    MutexLock(u32),
    /// down_read / down_write of a read-write semaphore; `retry` after a wake-up (the
    /// queue is not checked again, so a woken waiter is not sent to its back).
    RwDown {
        s: u32,
        write: bool,
        retry: bool,
    },
    /// Holding the semaphore's wait_lock: take it if now available, else queue and sleep.
    RwSleep {
        s: u32,
        write: bool,
        /// A woken waiter that found it taken again: it goes back to the front of the
        /// queue (`guest.rwsem_steal`: it never left the kernel's wait list).
        front: bool,
    },
    /// up_read / up_write (the mode the thread holds it in).
    RwUp(u32),
    /// A spinning read-write lock (InnoDB's): take it if free for the mode, else spin up
    /// to the given ns, then wait on its event (`RwSpinSleep`) and, woken, start over.
    RwSpinDown {
        s: u32,
        write: bool,
        spin: u64,
    },
    /// Holding the wait_lock: wake the writer at the front, or every reader before the
    /// first queued writer.
    WakeRw(u32),
    /// Group commit on log `f` for a thread whose writes the flush numbered in its loop
    /// slot `slot` covers: done (on to `exit`) if that flush has ended; else, with no
    /// flush under way, it flushes (on to the flush's body); else it sleeps until the
    /// flush under way ends, and checks again.
    FlushCheck {
        f: u32,
        slot: u16,
        exit: u32,
    },
    /// Holding the log's futex bucket: sleep unless the flush under way has ended.
    FlushSleep {
        f: u32,
        slot: u16,
        exit: u32,
    },
    /// The thread's flush of log `f` has completed: wake the sleepers.
    FlushDone(u32),
    /// Holding the log's bucket: wake every sleeper (InnoDB's flush event).
    WakeFlushWaiters(u32),
    /// Take the mutex, spinning up to the given ns (not the guest's default) before
    /// sleeping on its futex.
    MutexLockSpin(u32, u64),
    /// Holding the mutex's futex bucket: take it if free, else queue and sleep.
    MutexSleep(u32),
    MutexUnlock(u32),
    /// Holding the object's bucket lock: wake the first futex waiter.
    WakeMutexWaiter(u32),
    /// InnoDB lock's spin rounds and yield are spent: reserve a wait cell and reset
    /// the lock's event under the event's mutex (`OsEvent`).
    EventReserve(EventOwner),
    /// Holding the lock's event mutex: os_event_reset.
    EventReset(EventOwner),
    /// Set the lock's waiters flag and try it once more; else wait on its event.
    EventTryOrWait(EventOwner),
    /// Holding the lock's event mutex: wait on the event unless it was set since the
    /// reset, then spin for the lock again.
    EventWaitLocked(EventOwner),
    /// Holding the lock's event mutex: os_event_set (a broadcast).
    EventSetLocked(EventOwner),
    BarrierArrive(u32),
    /// Holding the barrier's bucket: sleep unless generation `gen` has passed.
    BarrierSleep(u32, u64),
    /// PARSEC barrier `b`, holding its mutex: count in, or, in a departure phase, drop
    /// the mutex and wait for the next arrival phase first. `spin`: the flag spin's
    /// budget.
    PbArrive {
        b: u32,
        spin: u64,
    },
    /// PARSEC barrier `b`, its mutex dropped: spin up to `spin` on the phase flag while
    /// the phase is not the wanted one (`departure`: the departure phase is wanted).
    PbSpin {
        b: u32,
        spin: u64,
        departure: bool,
    },
    /// PARSEC barrier `b`, holding its mutex: go on if the phase is the wanted one,
    /// else wait on its condition variable (which retakes the mutex) and look again.
    PbWait {
        b: u32,
        departure: bool,
    },
    /// PARSEC barrier `b`, holding its mutex: leave; the last to leave starts the next
    /// arrival phase. Then unlock.
    PbDepart(u32),
    CondRegister(u32),
    /// glibc's low-level lock (lll_lock, nptl/lowlevellock.c) on user mutex `m` (a
    /// condition variable's or a barrier's internal lock, glibc before 2.25): a
    /// compare-and-swap, else sleep on its futex; no spinning. It is released as the
    /// user mutex it is (`MutexUnlock`: lll_unlock, futex_wake when the word was 2).
    LllLock(u32),
    /// Holding low-level lock `m`'s futex bucket: take it if free, else queue and sleep
    /// (`__lll_lock_wait`).
    LllLockSleep(u32),
    /// Holding a condition variable's bucket in FUTEX_WAKE_OP: release low-level lock
    /// `m` there, waking one of its sleepers if the word was 2 (pthread_cond_signal).
    LllReleaseInKernel(u32),
    /// Holding `c`'s internal lock: signal (one waiter, FUTEX_WAKE_OP) or release.
    CondSignalLocked(u32),
    /// Holding `c`'s internal lock: release it, then wake or requeue the waiters.
    CondBroadcastLocked(u32),
    /// pthread_barrier_wait before glibc 2.25, holding barrier `b`'s internal lock:
    /// count in; the last arrival wakes the others and keeps the lock, the others drop
    /// it and sleep until the round ends.
    BarrierArriveLocked(u32),
    /// Leaving barrier `b` (glibc before 2.25): the last thread of the round to leave
    /// releases the barrier's internal lock.
    BarrierLeave(u32),
    SemWait(u32),
    /// Take a unit, spinning up to the given ns for one before sleeping on the futex.
    SemSpinWait(u32, u64),
    /// Holding the semaphore's bucket: take a unit or queue and sleep.
    SemSleep(u32),
    SemPost(u32),
    WakeSemWaiter(u32),
    WakeCond {
        cond: u32,
        all: bool,
    },
    /// Holding the buckets of condition variable `cond` and of `mutex`: wake the first
    /// waiter and move the others to the mutex's waiters (FUTEX_CMP_REQUEUE).
    RequeueCond {
        cond: u32,
        mutex: u32,
    },
    QueuePush(u32),
    QueuePop(u32),
    /// sched_yield (yield_task_fair): the system call, then, if another thread is
    /// queued on the vCPU, it runs and the yielder goes behind it.
    SchedYield,
    /// Send the reschedule IPIs deferred past the bucket unlock (wake_q).
    FlushWakes,
    /// Wait (spinning) for the acknowledgements of a TLB shootdown.
    TlbWait,
    Block,
}

/// Hot fields first, in declaration order (`repr(C)`), on cache-line boundaries
/// (`align(64)`): a step reads and writes the first line (activity, work left,
/// accounting, flags), the interpreter the second (micro-steps, locks held, pc), and
/// the rest is touched at wake-ups, sampling and synchronization. On hosts of
/// thousands of vCPUs the thread table is far larger than a core's caches, and each
/// line a step touches is a miss.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Thread {
    pub act: ThreadActivity,
    /// Remaining work of the current operation.
    pub remaining: Nanos,
    /// Kernel work to do before resuming the operation (switch-in, syscall return).
    pub debt: Nanos,
    pub vruntime: u64,
    pub slice_used: u64,
    /// Spin budget left in the current spin (user mutex, barrier, pv lock).
    pub spin_left: u64,
    pub state: ThreadState,
    pub in_kernel: bool,
    /// The current work is a VM exit's (hv/wake_path.rs): booked as overhead.
    pub in_exit: bool,
    /// SCHED_IDLE: picked only when no normal thread is runnable.
    pub idle_prio: bool,
    /// Gleaner's yielding thread of its vCPU (SCHED_IDLE, pinned, outside the cpuset).
    pub yielder: bool,
    /// pv spinlock: the vCPU has halted for this thread's lock since it last spun.
    pub pv_halted: bool,
    /// Its process (address space) within the VM's workload.
    pub process: u16,
    pub micro: VecDeque<Micro>,
    pub held: Vec<LockId>,
    pub pc: u32,
    pub vm: VmId,
    /// Shared by the threads of a group; `Rc`, not `Arc`: a run is single-threaded, and
    /// the interpreter takes a reference at every step (an atomic count there cost ~3%).
    pub program: Rc<Program>,
    pub rng: Rng,
    /// When it was last made runnable by a wake-up (its path: `wake_path`).
    pub woken_at: Option<Nanos>,
    /// The vCPU it is queued on, runs on, or last ran on.
    pub vcpu: VcpuId,
    pub timer_gen: u32,
    /// When it first failed to take the user mutex, kernel mutex or read-write lock it
    /// is waiting for (MAX: not waiting).
    pub lock_wait_since: Nanos,
    /// The path of the wake-up at `woken_at` (hv/wake_path.rs).
    pub wake_path: u8,
    pub finite: bool,
    /// A wake-up arrived before the thread got to block.
    pub wake_pending: bool,
    /// Its current user-mutex acquisition is on glibc's slow path: it slept on the
    /// mutex's futex, or it retakes the mutex after a condition-variable wait
    /// (`__pthread_mutex_cond_lock`). Such an acquisition leaves the lock word at 2
    /// (contended), so its unlock calls futex_wake.
    pub mutex_slow: bool,
    /// The same for the low-level lock (`Micro::LllLock`) being taken: it slept on the
    /// lock's futex, so the word is 2 and its release wakes.
    pub lll_slow: bool,
    /// Iterations left of the program's loops (`Instr::LoopStart` slots; u64::MAX:
    /// for ever): the first two here, in the line the interpreter reads with the
    /// wake-up fields — most programs have one or two loops, and a loop's end reads its
    /// counter at every iteration — the others apart (`loop_counter`).
    inline_loops: [u64; INLINE_LOOPS],
    other_loops: Vec<u64>,
    /// The spin budget of the InnoDB lock being taken (a spinning read-write lock, or a
    /// mutex with `wake_all`): spent again after each wake-up (InnoDB spins, then waits,
    /// in a loop).
    pub rw_spin: u64,
    /// When the current lock/barrier wait began.
    pub wait_start: Nanos,
    /// When it first failed to take the low-level lock it is waiting for (MAX: not
    /// waiting); apart from `lock_wait_since`, which a condition variable's waiter
    /// requeued onto its mutex keeps meanwhile.
    pub lll_since: Nanos,
    /// Waiting on an InnoDB mutex's event: when the wait for the mutex began (kept
    /// here while the event's own locks count theirs in `lock_wait_since`), and the
    /// event's signal count at its reset (`os_event_reset`'s return).
    pub event_wait_since: Nanos,
    pub event_sig: u64,
    pub deferred_wakes: Vec<ThreadId>,
    pub acks_left: u32,
    pub tlb_gen: u32,
    /// Guest EEVDF (guest/eevdf.rs): virtual deadline, the lag kept while dequeued, and
    /// run-to-parity (picked, no new deadline since).
    pub deadline: u64,
    pub vlag: i64,
    pub protect: bool,
    pub name: String,
    /// When it last stopped running (blocked, exited or was preempted): the kernel's
    /// se.exec_start for a thread off its CPU (task_hot). MAX: never ran.
    pub last_ran: Nanos,
}

/// Loop counters kept in a thread's record (`Thread::loop_counter`).
const INLINE_LOOPS: usize = 2;

impl Thread {
    /// The iterations left of the loop in `slot`.
    #[inline]
    pub fn loop_counter(&mut self, slot: usize) -> &mut u64 {
        match slot.checked_sub(INLINE_LOOPS) {
            None => &mut self.inline_loops[slot],
            Some(i) => &mut self.other_loops[i],
        }
    }

    pub fn new(vm: VmId, name: String, program: Rc<Program>, vcpu: VcpuId, rng: Rng) -> Thread {
        Thread {
            vm,
            name,
            inline_loops: [0; INLINE_LOOPS],
            other_loops: vec![0; (program.loop_slots as usize).saturating_sub(INLINE_LOOPS)],
            finite: !program.forever,
            program,
            pc: 0,
            state: ThreadState::Runnable,
            vcpu,
            act: ThreadActivity::Work,
            remaining: Nanos::ZERO,
            in_kernel: false,
            in_exit: false,
            debt: Nanos::ZERO,
            micro: VecDeque::new(),
            spin_left: 0,
            rw_spin: 0,
            wait_start: Nanos::ZERO,
            lll_since: Nanos::MAX,
            event_wait_since: Nanos::MAX,
            event_sig: 0,
            wake_pending: false,
            held: Vec::new(),
            deferred_wakes: Vec::new(),
            acks_left: 0,
            tlb_gen: 0,
            vruntime: 0,
            slice_used: 0,
            deadline: 0,
            vlag: 0,
            protect: false,
            timer_gen: 0,
            woken_at: None,
            lock_wait_since: Nanos::MAX,
            mutex_slow: false,
            lll_slow: false,
            wake_path: 0,
            rng,
            idle_prio: false,
            process: 0,
            pv_halted: false,
            yielder: false,
            last_ran: Nanos::MAX,
        }
    }
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn a_micro_step_is_16_bytes() {
        // The micro-step queue of every thread holds these; a variant with two u64s
        // would make every step 24 bytes.
        assert_eq!(std::mem::size_of::<super::Micro>(), 16);
    }
}
