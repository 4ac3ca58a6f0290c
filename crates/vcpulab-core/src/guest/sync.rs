//! Guest synchronization (kernel spinlocks are in guest/spinlock.rs): futex-based user
//! mutexes, barriers (futex and spin-then-block), condition variables
//! and bounded queues. The blocking paths run as sequences of kernel steps (`Micro`)
//! that take the futex hash-bucket spinlock, as Linux does; the reschedule IPI of a
//! wake-up is sent under that lock or after it (`ipi_under_lock`).

use crate::guest::thread::{Micro, ThreadActivity, ThreadState};
use crate::sim::world::World;
use crate::sim::{LockId, Nanos, ThreadId, VcpuId};
use std::collections::VecDeque;

/// Marks `v` as a vCPU a release may have to poke (`World::poke_spinners`): its current
/// thread has just begun such a spin there.
pub(crate) fn watch_spinner(watch: &mut [u64], v: VcpuId) {
    watch[v.idx() / 64] |= 1u64 << (v.idx() % 64);
}

#[derive(Clone, Debug)]
pub struct Mutex {
    pub holder: Option<ThreadId>,
    /// Threads spinning for it (so an unlock looks for spinners only when some spin).
    pub spinners: u32,
    pub waiters: VecDeque<ThreadId>,
    pub bucket: LockId,
    /// Its statistics class (world.lock_classes, a user class), and when its holder took it.
    pub class: u32,
    pub acquired_at: Nanos,
    /// InnoDB's event mutex: a release wakes every sleeper, which spins again
    /// (`LockSpinSpec::wake_all`).
    pub wake_all: bool,
    /// An InnoDB mutex's event (`wake_all`), which its sleepers wait on.
    pub event: Option<OsEvent>,
    /// glibc's lock word is 2 (`lll_lock`'s "locked, maybe waiters"): set by a thread
    /// that sleeps on the futex or takes the mutex on the slow path, cleared by the
    /// unlock, which calls futex_wake only when it was set (nptl/lowlevellock.h
    /// `lll_unlock`). A thread woken while the word is 1 takes the mutex on the slow
    /// path and so wakes the next at its own unlock.
    pub word_contended: bool,
}

/// InnoDB's `os_event_t` (MySQL 5.5/5.6 os/os0sync.cc): a flag and a signal count
/// under a pthread mutex (`os_mutex`, a default mutex: no spinning), and a condition
/// variable its waiters sleep on. An InnoDB mutex's sleepers wait on its event
/// (sync0sync.cc `mutex_spin_wait` → sync0arr.cc `sync_array_wait_event`), and a release
/// that finds the waiters flag set sets it (`mutex_signal_object` → `os_event_set`: a
/// broadcast under `os_mutex`).
#[derive(Clone, Copy, Debug)]
pub struct OsEvent {
    /// `os_mutex`: a user mutex taken as a low-level lock.
    pub mutex: u32,
    /// `cond_var`: a condition variable waited on with `mutex`.
    pub cond: u32,
    pub is_set: bool,
    pub signal_count: u64,
    /// The owning lock's waiters flag (`mutex->waiters`, `lock->waiters`): set by a
    /// thread about to wait, cleared by the release that sets the event.
    pub waiters: bool,
}

/// The InnoDB lock an event belongs to: a mutex, or a rw-lock taken for reading or
/// writing (which the waiter tries again once woken).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventOwner {
    Mutex(u32),
    Rw { s: u32, write: bool },
}

#[derive(Clone, Debug)]
pub struct Barrier {
    pub parties: u32,
    pub spinners: u32,
    pub arrived: u32,
    pub gen: u64,
    /// Sleeping waiters and the generation each waits to see end.
    pub waiters: Vec<(ThreadId, u64)>,
    pub bucket: LockId,
    /// A PARSEC barrier's mutex and condition variable (world indices); `None` for a
    /// futex or spin-then-block barrier.
    pub parsec: Option<(u32, u32)>,
    /// A PARSEC barrier is in its departure phase (`!is_arrival_phase`): the last
    /// thread has arrived and not every thread has left yet. Each change of phase
    /// advances `gen`, which its spinners watch.
    pub departing: bool,
    /// glibc's internal lock of a futex barrier (`ibarrier->lock`, glibc before 2.25,
    /// `guest.barrier_lock`): a user mutex; `u32::MAX` when the C library has none.
    pub lock: u32,
    /// Threads of the ended round that have counted out (glibc before 2.25).
    pub leaving: u32,
}

#[derive(Clone, Debug)]
pub struct Cond {
    pub waiters: VecDeque<ThreadId>,
    pub bucket: LockId,
    /// The mutex its last waiter waits with (glibc's `__data.__mutex`, set by
    /// pthread_cond_wait): where a requeueing broadcast moves the waiters. `u32::MAX`
    /// before the first wait.
    pub mutex: u32,
    /// glibc's internal lock (`__data.__lock`, glibc before 2.25, `guest.cond_lock`):
    /// a user mutex taken without spinning; `u32::MAX` when the C library has none.
    pub lock: u32,
}

#[derive(Clone, Debug)]
pub struct Sem {
    pub count: u64,
    pub waiters: VecDeque<ThreadId>,
    pub bucket: LockId,
    /// Threads spinning for a unit (`ThreadActivity::SpinSem`).
    pub spinners: u32,
}

/// A group-commit log (`OpSpec::GroupFlush`): one flush at a time; a flush covers the
/// writes made before it started.
#[derive(Clone, Debug)]
pub struct Flusher {
    pub flushing: bool,
    /// Flushes started and completed (the k-th covers writes made before it started).
    pub started: u64,
    pub done: u64,
    pub waiters: Vec<ThreadId>,
    pub bucket: LockId,
    pub io: crate::workload::dist::Dist,
}

/// A work dispenser (`OpSpec::Dispense`): a shared ticket counter, taken from without
/// blocking; it starts afresh with each new episode (the first thread to enter the
/// dispenser for the k-th time starts episode k).
#[derive(Clone, Debug)]
pub struct Dispenser {
    pub episode: u64,
    pub taken: u64,
    pub tickets: u64,
}

impl Dispenser {
    /// Takes a ticket for a thread in its `episode`-th entry: false when that episode's
    /// tickets are gone (or a later episode has begun).
    pub fn take(&mut self, episode: u64) -> bool {
        if episode > self.episode {
            self.episode = episode;
            self.taken = 0;
        }
        if episode == self.episode && self.taken < self.tickets {
            self.taken += 1;
            true
        } else {
            false
        }
    }
}

/// A kernel read-write semaphore (kernel/locking/rwsem.c in Linux 3.x terms): readers
/// share it, a writer excludes everyone; a newcomer queues behind any waiter (so
/// writers are not starved); a release that frees it wakes the writer at the front of
/// the queue, or all readers before the first queued writer (__rwsem_do_wake). From
/// Linux 3.16 a writer that finds it taken may first spin for it (`guest.rwsem_spin`,
/// `World::rwsem_spin_step`).
#[derive(Clone, Debug)]
pub struct RwSem {
    pub readers: u32,
    pub writer: Option<ThreadId>,
    pub waiters: VecDeque<(ThreadId, bool)>,
    /// The semaphore's wait_lock (a kernel spinlock; a user read-write lock has none
    /// it takes, its waiters go through its `event`).
    pub wait_lock: LockId,
    /// Threads spinning for it (`ThreadActivity::SpinRw`, `ThreadActivity::SpinRwsem`).
    pub spinners: u32,
    /// `reader-bounded`: when a writer spinning while readers hold it gives up
    /// (rwsem_rspin_threshold, set when a spinner first sees the readers' phase);
    /// `Nanos::MAX` outside such a phase.
    pub rspin_deadline: Nanos,
    /// A writer's spin on readers timed out (RWSEM_NONSPINNABLE): writers do not spin
    /// until the readers are gone or a writer takes it.
    pub nonspinnable: bool,
    /// RWSEM_FLAG_HANDOFF (`guest.rwsem_steal`): the first waiter has waited
    /// RWSEM_WAIT_TIMEOUT; nobody takes the semaphore ahead of it.
    pub handoff: bool,
    /// A user read-write lock (InnoDB's rw_lock_t, `rw_spin_read`/`rw_spin_write`): a
    /// release wakes every waiter.
    pub user: bool,
    /// A user read-write lock's event (`lock->event`), which its waiters sleep on.
    pub event: Option<OsEvent>,
    /// A kernel mutex (`kmutex_lock`, kernel/locking/mutex.c): taken for writing only;
    /// a free mutex is taken whoever waits (the fast path's cmpxchg, the slow path's
    /// xchg), a taker spins on a running owner before it sleeps (mutex_optimistic_spin,
    /// every kernel since 2.6.29), and a woken waiter that finds it taken again keeps its
    /// place at the front (it stays on the wait list until it has the mutex).
    pub mutex: bool,
    /// A mutex's first waiter that set MUTEX_FLAG_HANDOFF (`guest.mutex_handoff`): the
    /// next unlock makes it the owner. It spins on the owner or sleeps at the head of
    /// `waiters`. (`handoff` is the rw-semaphore's flag; a mutex's is this.)
    pub handoff_to: Option<ThreadId>,
    /// Writers spinning optimistically, in the order they queued on its OSQ (the MCS
    /// queue of kernel/locking/osq_lock.c): the head spins on the owner and takes it
    /// when it is free; the others wait for their turn.
    pub osq: VecDeque<ThreadId>,
    /// A mutex's waiter an unlock woke that has not looked at the mutex again. It is
    /// still on the kernel's wait list (it leaves it only with the mutex), so another
    /// unlock meanwhile wakes it again — a no-op — rather than the waiter behind it.
    pub woken: Option<ThreadId>,
    /// Its statistics class (world.lock_classes), and when its writer took it.
    pub class: u32,
    pub acquired_at: Nanos,
}

impl RwSem {
    fn grantable(&self, write: bool, queue_checked: bool) -> bool {
        let queue_ok = !queue_checked || self.waiters.is_empty();
        self.writer.is_none() && (!write || self.readers == 0) && queue_ok
    }
    /// Whether down_read / down_write gets it at once on Linux 5.11+
    /// (`guest.rwsem_steal`, kernel/locking/rwsem.c); `woken`: a waiter woken by a
    /// release tries again (a reader woken was granted it by `rwsem_mark_wake`).
    fn grantable_stealing(&self, write: bool, woken: bool) -> bool {
        if self.writer.is_some() {
            return false;
        }
        if write {
            // The fast path needs a zero count (no waiters flag); a woken writer
            // (rwsem_try_write_lock) only a free semaphore.
            return self.readers == 0 && (woken || (self.waiters.is_empty() && !self.handoff));
        }
        if woken {
            return true;
        }
        // rwsem_read_trylock fails on the waiters or hand-off flag;
        // rwsem_down_read_slowpath then queues if readers own it (`rcnt > 1`), and
        // otherwise steals it unless the hand-off bit is set.
        !self.handoff && (self.waiters.is_empty() || self.readers == 0)
    }
    fn take(&mut self, t: ThreadId, write: bool) {
        if write {
            self.writer = Some(t);
            // rwsem_set_owner overwrites the owner word and its flags.
            self.rspin_deadline = Nanos::MAX;
            self.nonspinnable = false;
        } else {
            self.readers += 1;
        }
    }
}

#[derive(Clone, Debug)]
pub struct Queue {
    pub items: u32,
    pub cap: u32,
    pub mutex: u32,
    pub not_full: u32,
    pub not_empty: u32,
}

/// What a writer spinning optimistically on a read-write semaphore does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RwsemSpinStep {
    /// It is free: take it (rwsem_try_write_lock_unqueued, ahead of any queued waiter).
    Take,
    /// Spin on.
    Spin,
    /// Stop spinning (or do not start): queue and sleep.
    Stop,
}

/// Outcome of one kernel step.
pub enum Flow {
    /// Go on with the next step at once.
    Next,
    /// The thread now has timed work or spins: arm it.
    Wait,
    /// The thread blocked.
    Left,
}

/// The position of the set bit of rank `rank` (0: the lowest) in `word`, which has
/// `count` set bits: from the low end or the high end, whichever is nearer.
fn select_bit(word: u64, rank: u32, count: u32) -> u32 {
    debug_assert!(rank < count && word.count_ones() == count);
    let mut w = word;
    if rank < count / 2 {
        for _ in 0..rank {
            w &= w - 1;
        }
        w.trailing_zeros()
    } else {
        for _ in 0..count - 1 - rank {
            w &= !(1u64 << (63 - w.leading_zeros()));
        }
        63 - w.leading_zeros()
    }
}

impl World {
    /// `t` takes read-write semaphore, kernel mutex or user rw-lock `s` (`write`: as
    /// its writer): count the acquisition in its class, with the wait since its first
    /// failed attempt (0 when it got it at once).
    fn rw_take(&mut self, s: u32, t: ThreadId, write: bool) {
        let now = self.now;
        let rw = &mut self.rwsems[s as usize];
        rw.take(t, write);
        if write {
            rw.acquired_at = now;
        }
        if rw.handoff_to == Some(t) {
            // A mutex's first waiter has it: its hand-off flag is spent.
            rw.handoff_to = None;
        }
        let class = rw.class as usize;
        let since = std::mem::replace(&mut self.threads[t.idx()].lock_wait_since, Nanos::MAX);
        self.lock_classes[class].count_acquisition(since, now);
    }

    /// `t` wakes the waiters of read-write semaphore (or kernel mutex) `s` that a release
    /// lets in: `WakeRw` under the semaphore's wait_lock, after a futex-sized kernel path.
    fn push_rwsem_wake(&mut self, t: ThreadId, s: u32) {
        let wait_lock = self.rwsems[s as usize].wait_lock;
        let cost = Micro::Work {
            ns: self.costs.futex_ns,
            kernel: true,
        };
        self.push_wake_path(t, wait_lock, Micro::WakeRw(s), cost);
    }

    /// `t`, unlocking kernel mutex `s` on vCPU `v` under its wait_lock, hands it to the
    /// first waiter that set MUTEX_FLAG_HANDOFF (__mutex_handoff, Linux 4.10+): that
    /// waiter owns it from now on, running or not, and picks it up when it next looks —
    /// woken if it sleeps, at once if it spins on a running vCPU. A hand-off to a waiter
    /// whose vCPU the host has preempted is counted as a lock-waiter preemption.
    fn mutex_handoff(&mut self, t: ThreadId, v: VcpuId, s: u32) {
        let rw = &mut self.rwsems[s as usize];
        let Some(w) = rw.handoff_to else {
            return;
        };
        rw.writer = Some(w);
        let class = rw.class as usize;
        // Asleep, it is at the head of the queue (one waiter is awake at a time: `woken`).
        let asleep = rw.waiters.front().is_some_and(|&(f, _)| f == w);
        if asleep {
            rw.waiters.pop_front();
        }
        let wv = &self.vcpus[self.threads[w.idx()].vcpu.idx()];
        if wv.hv == crate::hv::vcpu::HvState::Runnable {
            self.lock_classes[class].lwp += 1;
        }
        if asleep {
            self.futex_wake_one(t, v, w);
        } else if self.threads[w.idx()].act == ThreadActivity::SpinRwsem(s) {
            // Every spinner of the mutex looks: the first waiter picks it up, the
            // others spin on in its name (its vCPU runs).
            self.poke_spinners(
                t,
                |a| matches!(a, ThreadActivity::SpinRwsem(x) if x == s),
                false,
            );
        }
        // Otherwise it is on its way between spinning and sleeping, and finds the mutex
        // its own when it next looks (RwSleep).
    }

    /// `t` takes low-level lock `l` (free).
    fn lll_acquired(&mut self, l: u32, t: ThreadId) {
        let now = self.now;
        let th = &mut self.threads[t.idx()];
        let slow = std::mem::replace(&mut th.lll_slow, false);
        let since = std::mem::replace(&mut th.lll_since, Nanos::MAX);
        let mu = &mut self.mutexes[l as usize];
        mu.holder = Some(t);
        mu.acquired_at = now;
        if slow {
            mu.word_contended = true;
        }
        let class = mu.class as usize;
        self.lock_classes[class].count_acquisition(since, now);
    }

    /// User mutex `m` is released: no holder; its hold time counted.
    fn mutex_released(&mut self, m: u32) {
        let mu = &mut self.mutexes[m as usize];
        mu.holder = None;
        let (class, held) = (
            mu.class as usize,
            self.now.0.saturating_sub(mu.acquired_at.0),
        );
        self.lock_classes[class].hold.record(held);
    }

    /// `t` waits at futex barrier `b` for round `g` to end: futex_wait (the system
    /// call, the bucket lock, then `BarrierSleep`), queued to run next.
    fn push_barrier_sleep(&mut self, t: ThreadId, b: u32, g: u64) {
        let (bucket, syscall) = (self.barriers[b as usize].bucket, self.costs.syscall_ns);
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::BarrierSleep(b, g));
        th.micro.push_front(Micro::KLock(bucket));
        th.micro.push_front(Micro::Work {
            ns: syscall,
            kernel: true,
        });
    }

    /// The last arrival `t` at futex barrier `b` wakes the sleepers of the round that
    /// ended (futex_wake of INT_MAX under the barrier's bucket lock), if any.
    fn push_barrier_wake(&mut self, t: ThreadId, b: u32) {
        let br = &self.barriers[b as usize];
        if br.waiters.is_empty() {
            return;
        }
        let bucket = br.bucket;
        let f = self.futex_cost(t);
        let wake = Micro::WakeCond {
            cond: u32::MAX - b,
            all: true,
        };
        self.push_wake_path(t, bucket, wake, f);
    }

    /// `t` took user mutex `m`: count the acquisition, and the wait if it had to wait
    /// (from its first failed attempt, through spinning and sleeping, to now).
    fn mutex_acquired(&mut self, m: u32, t: ThreadId) {
        let now = self.now;
        let mu = &mut self.mutexes[m as usize];
        mu.acquired_at = now;
        let class = mu.class as usize;
        let th = &mut self.threads[t.idx()];
        if std::mem::replace(&mut th.mutex_slow, false) {
            mu.word_contended = true;
        }
        let since = std::mem::replace(&mut th.lock_wait_since, Nanos::MAX);
        self.lock_classes[class].count_acquisition(since, now);
    }

    /// Whether spinning thread `t` may stop spinning now (and takes what it waited for).
    pub(crate) fn spin_ready(&mut self, t: ThreadId) -> bool {
        match self.threads[t.idx()].act {
            ThreadActivity::SpinLock(l) | ThreadActivity::PvHalt(l) => self.spin_lock_ready(t, l),
            ThreadActivity::SpinMutex(m) => {
                if self.mutexes[m as usize].holder.is_none() {
                    self.mutexes[m as usize].holder = Some(t);
                    self.mutex_acquired(m, t);
                    self.mutexes[m as usize].spinners -= 1;
                    self.threads[t.idx()].act = ThreadActivity::Work;
                    true
                } else {
                    false
                }
            }
            ThreadActivity::SpinBarrier(b, g) => {
                if self.barriers[b as usize].gen > g {
                    self.barriers[b as usize].spinners -= 1;
                    self.threads[t.idx()].act = ThreadActivity::Work;
                    true
                } else {
                    false
                }
            }
            ThreadActivity::SpinRw(s, write) => {
                let rw = &mut self.rwsems[s as usize];
                if rw.grantable(write, false) {
                    rw.spinners -= 1;
                    self.rw_take(s, t, write);
                    self.threads[t.idx()].act = ThreadActivity::Work;
                    true
                } else {
                    false
                }
            }
            ThreadActivity::SpinSem(s) => {
                let sem = &mut self.sems[s as usize];
                if sem.count > 0 {
                    sem.count -= 1;
                    sem.spinners -= 1;
                    self.threads[t.idx()].act = ThreadActivity::Work;
                    true
                } else {
                    false
                }
            }
            ThreadActivity::SpinRwsem(s) => match self.rwsem_spin_step(t, s, false) {
                RwsemSpinStep::Spin => false,
                RwsemSpinStep::Take => {
                    self.rw_take(s, t, true);
                    self.rwsem_spin_end(t, s);
                    true
                }
                RwsemSpinStep::Stop => {
                    self.rwsem_spin_end(t, s);
                    let rw = &self.rwsems[s as usize];
                    let wait_lock = rw.wait_lock;
                    // A mutex's first waiter that spun (`guest.mutex_handoff`) sleeps
                    // again at the head of the queue.
                    let front = rw.handoff_to == Some(t);
                    let th = &mut self.threads[t.idx()];
                    th.micro.push_front(Micro::RwSleep {
                        s,
                        write: true,
                        front,
                    });
                    th.micro.push_front(Micro::KLock(wait_lock));
                    true
                }
            },
            ThreadActivity::TlbWait => {
                if self.threads[t.idx()].acks_left == 0 {
                    self.threads[t.idx()].act = ThreadActivity::Work;
                    self.record_tlb_wait(t);
                    true
                } else {
                    false
                }
            }
            ThreadActivity::Work => true,
        }
    }

    /// The spin budget of `t` ran out: fall back to sleeping (or pv halt).
    pub(crate) fn spin_exhausted(&mut self, t: ThreadId) {
        let th = &mut self.threads[t.idx()];
        match th.act {
            ThreadActivity::SpinMutex(m) => {
                th.act = ThreadActivity::Work;
                self.mutexes[m as usize].spinners -= 1;
                let mu = &self.mutexes[m as usize];
                let th = &mut self.threads[t.idx()];
                if mu.event.is_some() {
                    // InnoDB's mutex_spin_wait (sync0sync.cc) yields once its spin
                    // rounds are spent (os_thread_yield: sched_yield), then waits on the
                    // mutex's event.
                    th.micro
                        .push_front(Micro::EventReserve(EventOwner::Mutex(m)));
                    th.micro.push_front(Micro::SchedYield);
                    return;
                }
                th.micro.push_front(Micro::MutexSleep(m));
                th.micro.push_front(Micro::KLock(mu.bucket));
                th.micro.push_front(Micro::Work {
                    ns: self.costs.syscall_ns,
                    kernel: true,
                });
            }
            ThreadActivity::SpinBarrier(b, g) => {
                th.act = ThreadActivity::Work;
                self.barriers[b as usize].spinners -= 1;
                if self.barriers[b as usize].parsec.is_some() {
                    // A PARSEC barrier's flag spin ran out: the trylock loop comes next
                    // (queued by PbArrive).
                    return;
                }
                self.push_barrier_sleep(t, b, g);
            }
            ThreadActivity::SpinRw(s, write) => {
                // Out of spin rounds: rw_lock_s_lock_spin / rw_lock_x_lock_func
                // (sync0rw.cc) yield, as InnoDB's mutexes do, then wait on the lock's
                // event.
                th.act = ThreadActivity::Work;
                self.rwsems[s as usize].spinners -= 1;
                let th = &mut self.threads[t.idx()];
                th.micro
                    .push_front(Micro::EventReserve(EventOwner::Rw { s, write }));
                th.micro.push_front(Micro::SchedYield);
            }
            ThreadActivity::SpinSem(s) => {
                th.act = ThreadActivity::Work;
                self.sems[s as usize].spinners -= 1;
                self.push_sem_sleep(t, s);
            }
            ThreadActivity::SpinLock(l) => self.spin_lock_exhausted(t, l),
            _ => {}
        }
    }

    /// Writer `t`'s optimistic spin on read-write semaphore `s` (`starting`: it has just
    /// found it taken): rwsem_can_spin_on_owner and one round of rwsem_optimistic_spin's
    /// loop, as `guest.rwsem_spin` says (scenario::RwsemSpin). The spinners of a
    /// semaphore queue on its OSQ, the head spinning on the owner; here each spinner
    /// checks the owner itself, and the first to see it free takes it while the others
    /// spin on the new owner, as the queue's next head does.
    pub(crate) fn rwsem_spin_step(&mut self, t: ThreadId, s: u32, starting: bool) -> RwsemSpinStep {
        use crate::scenario::RwsemSpin;
        let th = &self.threads[t.idx()];
        let g = &self.vms[th.vm.idx()].guest;
        let (policy, preempted_check) = (g.rwsem_spin, g.vcpu_is_preempted);
        let vc = &self.vcpus[th.vcpu.idx()];
        // need_resched() ends the spin (a reschedule the tick or a wake-up asked for).
        if vc.need_resched && !vc.rq.is_empty() {
            return RwsemSpinStep::Stop;
        }
        let now = self.now;
        let rw = &self.rwsems[s as usize];
        if let Some(pos) = rw.osq.iter().position(|&x| x == t).filter(|&p| p > 0) {
            // Queued behind another spinner (osq_lock): it waits for its turn; from Linux
            // 4.10 it leaves the queue when the spinner ahead of it is on a preempted
            // vCPU (vcpu_is_preempted(node_cpu(node->prev))), and before that it waits
            // for that vCPU to run again.
            let ahead = rw.osq[pos - 1];
            let av = &self.vcpus[self.threads[ahead.idx()].vcpu.idx()];
            return if preempted_check && av.hv == crate::hv::vcpu::HvState::Runnable {
                RwsemSpinStep::Stop
            } else {
                RwsemSpinStep::Spin
            };
        }
        if rw.mutex {
            // mutex_optimistic_spin: spin while the owner is on a CPU
            // (mutex_spin_on_owner; from Linux 4.10 not while its vCPU is preempted),
            // take the mutex when it is free.
            return match rw.writer {
                // Handed off to it (MUTEX_FLAG_PICKUP): it picks the mutex up.
                Some(o) if o == t => RwsemSpinStep::Take,
                Some(o) => {
                    let ov = &self.vcpus[self.threads[o.idx()].vcpu.idx()];
                    let preempted = preempted_check && ov.hv == crate::hv::vcpu::HvState::Runnable;
                    if ov.cur == Some(o) && !preempted {
                        RwsemSpinStep::Spin
                    } else {
                        RwsemSpinStep::Stop
                    }
                }
                None => RwsemSpinStep::Take,
            };
        }
        if let Some(o) = rw.writer {
            // owner_on_cpu(): the owner is its CPU's current task; from Linux 4.10 also
            // !vcpu_is_preempted(task_cpu(owner)) (reader-bounded kernels only).
            let ov = &self.vcpus[self.threads[o.idx()].vcpu.idx()];
            let on_cpu = ov.cur == Some(o)
                && !(policy == RwsemSpin::ReaderBounded
                    && preempted_check
                    && ov.hv == crate::hv::vcpu::HvState::Runnable);
            return if on_cpu {
                RwsemSpinStep::Spin
            } else {
                RwsemSpinStep::Stop
            };
        }
        let readers = rw.readers;
        match policy {
            RwsemSpin::Off => RwsemSpinStep::Stop,
            // 3.16: no owner recorded (free, or readers) is no reason to start; once
            // spinning it takes a free semaphore and spins on while readers hold it.
            RwsemSpin::WriterOwner if starting => RwsemSpinStep::Stop,
            RwsemSpin::WriterOwner if readers == 0 => RwsemSpinStep::Take,
            RwsemSpin::WriterOwner => RwsemSpinStep::Spin,
            RwsemSpin::ReaderBounded => {
                if readers == 0 {
                    // rwsem_try_write_lock_unqueued fails while the hand-off bit is set
                    // (`guest.rwsem_steal`): spin on until the first waiter has it.
                    return if self.rwsems[s as usize].handoff {
                        RwsemSpinStep::Spin
                    } else {
                        RwsemSpinStep::Take
                    };
                }
                let rw = &mut self.rwsems[s as usize];
                if rw.nonspinnable {
                    return RwsemSpinStep::Stop;
                }
                if rw.rspin_deadline == Nanos::MAX {
                    // rwsem_rspin_threshold: (20 + readers) / 2 us, readers capped at 30.
                    rw.rspin_deadline = now + Nanos((20 + u64::from(readers.min(30))) * 500);
                } else if now >= rw.rspin_deadline {
                    rw.nonspinnable = true;
                    return RwsemSpinStep::Stop;
                }
                RwsemSpinStep::Spin
            }
        }
    }

    /// `t` stops spinning on read-write semaphore `s` (it took it, or goes to sleep).
    /// If it headed the OSQ, the next spinner heads it now and looks at the owner.
    fn rwsem_spin_end(&mut self, t: ThreadId, s: u32) {
        let rw = &mut self.rwsems[s as usize];
        rw.spinners -= 1;
        let pos = rw.osq.iter().position(|&x| x == t);
        if let Some(p) = pos {
            rw.osq.remove(p);
        }
        let next_head = rw.osq.front().copied().filter(|_| pos == Some(0));
        self.rwsem_spinning -= 1;
        self.threads[t.idx()].act = ThreadActivity::Work;
        if let Some(h) = next_head {
            let v = self.threads[h.idx()].vcpu;
            let vc = &self.vcpus[v.idx()];
            if vc.cur == Some(h) && vc.is_running() {
                self.sync_progress(v);
                self.vcpu_continue(v);
            }
        }
    }

    /// `t` left its CPU (it blocked, was preempted in the guest, or — where the guest
    /// asks vcpu_is_preempted — its vCPU was preempted): writers spinning on a
    /// semaphore it owns look again (owner_on_cpu).
    pub(crate) fn rwsem_owner_left(&mut self, t: ThreadId) {
        if self.rwsem_spinning > 0 {
            self.poke_spinners(t, |a| matches!(a, ThreadActivity::SpinRwsem(_)), false);
        }
    }

    fn record_tlb_wait(&mut self, t: ThreadId) {
        let th = &self.threads[t.idx()];
        let w = self.now.0.saturating_sub(th.wait_start.0);
        let vm = th.vm.idx();
        self.vms[vm].tlb_wait.record(w);
    }

    /// The first vCPU of `i..end` marked in `spin_watch`.
    fn next_watched(&self, mut i: usize, end: usize) -> Option<usize> {
        while i < end {
            let bits = self.spin_watch[i / 64] >> (i % 64);
            if bits == 0 {
                i = (i / 64 + 1) * 64;
                continue;
            }
            i += bits.trailing_zeros() as usize;
            return (i < end).then_some(i);
        }
        None
    }

    /// Lets threads of `t`'s VM that spin (on a running vCPU) for what `waits_for`
    /// matches re-check at once; `first_only`: only one of them can win. Looks at the
    /// vCPUs of `spin_watch` only; a marked vCPU whose current thread no longer spins is
    /// unmarked. Which spinner's atomic lands first after a release is a race, and no
    /// vCPU number has an edge in it: with `first_only` the winner is drawn uniformly
    /// among the spinners that can see the release (`poke_one_spinner`); otherwise all
    /// are poked, in an order that starts at a uniformly drawn vCPU and wraps around (a
    /// vCPU marked during the loop is visited if it comes later in that order). The
    /// draws come from a hash of the time and the releasing thread, so that no thread's
    /// random stream moves. (Scanning from the VM's first vCPU let the lowest-numbered
    /// spinner win every race; taking the first spinner after a uniformly drawn vCPU let
    /// one after a run of vCPUs that do not spin win most of them.)
    fn poke_spinners(
        &mut self,
        t: ThreadId,
        waits_for: impl Fn(ThreadActivity) -> bool,
        first_only: bool,
    ) {
        let vm = self.threads[t.idx()].vm.idx();
        let first = self.vms[vm].first_vcpu as usize;
        let n = self.vms[vm].nvcpus as usize;
        let end = first + n;
        #[cfg(test)]
        self.assert_spinners_watched(first, end);
        let mut draw = self.now.0 ^ (u64::from(t.0) << 32);
        if first_only {
            self.poke_one_spinner(t, &waits_for, first, end, &mut draw);
            return;
        }
        let start = if n > 1 {
            first + (crate::sim::rng::splitmix64(&mut draw) % n as u64) as usize
        } else {
            first
        };
        for (lo, hi) in [(start, end), (first, start)] {
            let mut i = lo;
            while let Some(j) = self.next_watched(i, hi) {
                self.poke_if_spinning(t, &waits_for, j);
                i = j + 1;
            }
        }
    }

    /// Pokes vCPU `j` of `spin_watch` if its current thread spins (on a running vCPU)
    /// for what `waits_for` matches; unmarks it if its thread no longer spins. True when
    /// it poked. Inlined: a barrier's release calls it for every spinning vCPU.
    #[inline(always)]
    fn poke_if_spinning(
        &mut self,
        t: ThreadId,
        waits_for: &impl Fn(ThreadActivity) -> bool,
        j: usize,
    ) -> bool {
        let vc = &self.vcpus[j];
        let spinning = vc.cur.filter(|c| self.threads[c.idx()].act.is_poked_spin());
        match spinning {
            None => {
                self.spin_watch[j / 64] &= !(1u64 << (j % 64));
                false
            }
            Some(c) => {
                if c != t && vc.is_running() && waits_for(self.threads[c.idx()].act) {
                    let v = VcpuId(j as u32);
                    self.sync_progress(v);
                    self.vcpu_continue(v);
                    true
                } else {
                    false
                }
            }
        }
    }

    /// The race for a released lock that one spinner can win: visits the vCPUs of
    /// `first..end` marked in `spin_watch` in a uniformly random order (a draw without
    /// replacement among the marked ones) and pokes the first whose spinner can take
    /// it — so each such spinner wins with the same probability, whatever the vCPU
    /// numbers. Cheap where it runs at every release (PARSEC's barrier mutex on a
    /// 288-vCPU VM: about two probes a release): a try is a draw and a bit test; only
    /// after a run of misses are the marks copied (a word per 64 vCPUs) and drawn by rank.
    /// (Drawing by rank from the start made `make bench`'s wide-VM case 28% slower.)
    fn poke_one_spinner(
        &mut self,
        t: ThreadId,
        waits_for: &impl Fn(ThreadActivity) -> bool,
        first: usize,
        end: usize,
        draw: &mut u64,
    ) {
        // A VM has at most 1,024 vCPUs (scenario/validate.rs): 17 words cover any range.
        const WORDS: usize = 17;
        if end <= first {
            return;
        }
        // Rejection sampling first: a vCPU drawn uniformly from the range is taken if it
        // is marked and not yet probed — a uniform draw among the marked ones left, at
        // the cost of a bit test per try. After a run of misses (few marked vCPUs in a
        // wide range) the draw goes on exactly, by rank among the marks left.
        const TRIES: usize = 16;
        let n = (end - first) as u64;
        let mut probed = [usize::MAX; TRIES];
        let mut nprobed = 0;
        let mut misses = 0;
        while misses < TRIES && nprobed < TRIES {
            // (A multiply, not a division: the high half of x * n is uniform on 0..n to
            // within n / 2^64.)
            let x = crate::sim::rng::splitmix64(draw);
            let j = first + ((u128::from(x) * u128::from(n)) >> 64) as usize;
            let marked = (self.spin_watch[j / 64] >> (j % 64)) & 1 == 1;
            if !marked || probed[..nprobed].contains(&j) {
                misses += 1;
                continue;
            }
            misses = 0;
            probed[nprobed] = j;
            nprobed += 1;
            if self.poke_if_spinning(t, waits_for, j) {
                return;
            }
        }
        let (w0, w1) = (first / 64, (end - 1) / 64);
        let nw = w1 - w0 + 1;
        if nw > WORDS {
            // Not reached with validated scenarios; scan as for a poke of all, stopping
            // at the first.
            let mut i = first;
            while let Some(j) = self.next_watched(i, end) {
                if self.poke_if_spinning(t, waits_for, j) {
                    return;
                }
                i = j + 1;
            }
            return;
        }
        let mut marks = [0u64; WORDS];
        marks[..nw].copy_from_slice(&self.spin_watch[w0..=w1]);
        marks[0] &= !0u64 << (first % 64);
        let top = end - w1 * 64; // 1..=64 bits of the last word are in range
        if top < 64 {
            marks[nw - 1] &= (1u64 << top) - 1;
        }
        for &j in &probed[..nprobed] {
            marks[j / 64 - w0] &= !(1u64 << (j % 64));
        }
        // Marks left per word, kept as they are drawn (a popcount per word, once).
        let mut counts = [0u32; WORDS];
        for k in 0..nw {
            counts[k] = marks[k].count_ones();
        }
        let mut left: u32 = counts[..nw].iter().sum();
        while left > 0 {
            let mut rank = (crate::sim::rng::splitmix64(draw) % u64::from(left)) as u32;
            let mut k = 0;
            while rank >= counts[k] {
                rank -= counts[k];
                k += 1;
            }
            let bit = select_bit(marks[k], rank, counts[k]);
            marks[k] &= !(1u64 << bit);
            counts[k] -= 1;
            left -= 1;
            if self.poke_if_spinning(t, waits_for, (w0 + k) * 64 + bit as usize) {
                return;
            }
        }
    }

    /// Every vCPU of `first..end` whose current thread spins where a release pokes it is
    /// marked in `spin_watch` (the invariant `poke_spinners` relies on).
    #[cfg(test)]
    fn assert_spinners_watched(&self, first: usize, end: usize) {
        for i in first..end {
            if let Some(c) = self.vcpus[i].cur {
                if self.threads[c.idx()].act.is_poked_spin() {
                    assert!(
                        (self.spin_watch[i / 64] >> (i % 64)) & 1 == 1,
                        "vCPU {i} runs a spinner ({:?}) it does not watch",
                        self.threads[c.idx()].act
                    );
                }
            }
        }
    }

    /// A pv kick: wakes a halted vCPU, cancels a halt in progress or host polling.
    /// `by`: the kicking vCPU (a hypercall's exit), if a vCPU kicks.
    pub(crate) fn kick_vcpu(&mut self, v: VcpuId, by: Option<VcpuId>) {
        use crate::hv::irq::{Delivered, Irq};
        let waker = by.and_then(|k| self.waker_of(k, false));
        if self.irq_deliver(
            v,
            Irq::Kick {
                only_idle: false,
                waker,
            },
        ) == Delivered::Running
        {
            self.sync_progress(v);
            self.vcpu_continue(v);
        }
    }

    /// The cost of a futex system call by `t` (wait or wake), counted in its VM's
    /// futex calls.
    pub(crate) fn futex_cost(&mut self, t: ThreadId) -> Micro {
        let vm = self.threads[t.idx()].vm;
        self.vms[vm.idx()].futex_calls += 1;
        Micro::Work {
            ns: self.costs.syscall_ns + self.costs.futex_ns,
            kernel: true,
        }
    }

    /// pthread_mutex_lock-like acquisition of `mx` by `t`: take it if free, else spin up
    /// to `spin` ns (then sleep on its futex).
    fn mutex_lock(&mut self, t: ThreadId, mx: u32, spin: u64) -> Flow {
        let mu = &mut self.mutexes[mx as usize];
        if mu.holder.is_none() {
            mu.holder = Some(t);
            self.mutex_acquired(mx, t);
            return Flow::Next;
        }
        let th = &mut self.threads[t.idx()];
        th.wait_start = self.now;
        if th.lock_wait_since == Nanos::MAX {
            th.lock_wait_since = self.now;
        }
        self.mutexes[mx as usize].spinners += 1;
        let th = &mut self.threads[t.idx()];
        if spin == 0 {
            th.act = ThreadActivity::SpinMutex(mx);
            watch_spinner(&mut self.spin_watch, th.vcpu);
            self.spin_exhausted(t);
            return Flow::Next;
        }
        th.act = ThreadActivity::SpinMutex(mx);
        watch_spinner(&mut self.spin_watch, th.vcpu);
        th.spin_left = spin;
        Flow::Wait
    }

    /// Executes one kernel step of thread `t` running on `v`.
    pub(crate) fn exec_micro(&mut self, t: ThreadId, v: VcpuId, m: Micro) -> Flow {
        match m {
            Micro::Work { ns, kernel } => {
                let th = &mut self.threads[t.idx()];
                th.remaining = Nanos(ns.max(1));
                th.in_kernel = kernel;
                th.in_exit = false;
                Flow::Wait
            }
            Micro::Exit { ns } => {
                if ns == 0 {
                    return Flow::Next;
                }
                let th = &mut self.threads[t.idx()];
                th.remaining = Nanos(ns);
                th.in_kernel = true;
                th.in_exit = true;
                Flow::Wait
            }
            Micro::KLock(l) => self.klock(t, l),
            Micro::KUnlock(l) => {
                self.kunlock(t, l);
                Flow::Next
            }
            Micro::MutexLock(mx) => {
                let spin = self.vms[self.threads[t.idx()].vm.idx()].guest.mutex_spin;
                self.mutex_lock(t, mx, spin)
            }
            Micro::MutexLockSpin(mx, spin) => {
                if self.mutexes[mx as usize].wake_all {
                    // Spent again after each wake-up (the field is free: a thread waits
                    // for one lock at a time).
                    self.threads[t.idx()].rw_spin = spin;
                }
                self.mutex_lock(t, mx, spin)
            }
            Micro::MutexSleep(mx) => {
                let vm = self.threads[t.idx()].vm;
                self.vms[vm.idx()].futex_calls += 1;
                let bucket = self.mutexes[mx as usize].bucket;
                let mu = &mut self.mutexes[mx as usize];
                let th = &mut self.threads[t.idx()];
                // __lll_lock_wait: the word goes to 2 whether it takes the mutex now
                // (the exchange found it free) or sleeps.
                th.mutex_slow = true;
                mu.word_contended = true;
                if mu.holder.is_none() {
                    mu.holder = Some(t);
                    th.micro.push_front(Micro::KUnlock(bucket));
                    self.mutex_acquired(mx, t);
                } else {
                    mu.waiters.push_back(t);
                    // Woken, the waiter takes it or sleeps again at once.
                    th.micro.push_front(Micro::MutexLock(mx));
                    th.micro.push_front(Micro::Block);
                    th.micro.push_front(Micro::KUnlock(bucket));
                }
                Flow::Next
            }
            Micro::MutexUnlock(mx) => {
                self.mutex_released(mx);
                // A spinner on a running vCPU sees the unlock at once and takes it.
                if self.mutexes[mx as usize].spinners > 0 {
                    self.poke_spinners(t, |a| a == ThreadActivity::SpinMutex(mx), true);
                }
                let mu = &mut self.mutexes[mx as usize];
                // glibc calls futex_wake when the word was 2, waiters or not (and not
                // when it was 1: a waiter woken earlier is on its way and will take the
                // mutex on the slow path). InnoDB's mutex sets its event if its waiters
                // flag is set (mutex_exit → mutex_signal_object).
                let contended = std::mem::replace(&mut mu.word_contended, false);
                if mu.event.is_some() {
                    self.event_signal(t, EventOwner::Mutex(mx));
                    return Flow::Next;
                }
                if contended {
                    let bucket = mu.bucket;
                    let f = self.futex_cost(t);
                    self.push_wake_path(t, bucket, Micro::WakeMutexWaiter(mx), f);
                }
                Flow::Next
            }
            Micro::WakeMutexWaiter(mx) => {
                if let Some(w) = self.mutexes[mx as usize].waiters.pop_front() {
                    self.futex_wake_one(t, v, w);
                }
                Flow::Next
            }
            Micro::EventReserve(o) => {
                // sync_array_reserve_cell, then os_event_reset under the event's mutex.
                // The wait for the lock goes on through the event's own locks: its start
                // is kept apart meanwhile (those locks count their own waits).
                let Some(ev) = self.event(o) else {
                    return Flow::Next;
                };
                let th = &mut self.threads[t.idx()];
                th.event_wait_since = std::mem::replace(&mut th.lock_wait_since, Nanos::MAX);
                th.micro.push_front(Micro::EventTryOrWait(o));
                th.micro.push_front(Micro::MutexUnlock(ev.mutex));
                th.micro.push_front(Micro::EventReset(o));
                th.micro.push_front(Micro::LllLock(ev.mutex));
                Flow::Next
            }
            Micro::EventReset(o) => {
                // os_event_reset: clear the flag, note the signal count to wait past.
                if let Some(ev) = self.event_mut(o) {
                    ev.is_set = false;
                    let sig = ev.signal_count;
                    self.threads[t.idx()].event_sig = sig;
                }
                Flow::Next
            }
            Micro::EventTryOrWait(o) => {
                // mutex_set_waiters / rw_lock_set_waiter_flag, then one more try: a
                // release since the spin ended is seen here or sees the flag.
                let Some(ev) = self.event_mut(o) else {
                    return Flow::Next;
                };
                ev.waiters = true;
                let em = ev.mutex;
                let free = match o {
                    EventOwner::Mutex(m) => self.mutexes[m as usize].holder.is_none(),
                    EventOwner::Rw { s, write } => self.rwsems[s as usize].grantable(write, false),
                };
                if free {
                    let th = &mut self.threads[t.idx()];
                    th.lock_wait_since = std::mem::replace(&mut th.event_wait_since, Nanos::MAX);
                    match o {
                        EventOwner::Mutex(m) => {
                            self.mutexes[m as usize].holder = Some(t);
                            self.mutex_acquired(m, t);
                        }
                        EventOwner::Rw { s, write } => self.rw_take(s, t, write),
                    }
                    return Flow::Next;
                }
                let th = &mut self.threads[t.idx()];
                th.micro.push_front(Micro::EventWaitLocked(o));
                th.micro.push_front(Micro::LllLock(em));
                Flow::Next
            }
            Micro::EventWaitLocked(o) => {
                // os_event_wait_low, holding the event's mutex: while neither set nor
                // signalled since the reset, pthread_cond_wait (which drops and retakes
                // the mutex); then release it and spin for the lock again.
                let Some(ev) = self.event(o) else {
                    return Flow::Next;
                };
                let th = &mut self.threads[t.idx()];
                // Retaken after a wait with __pthread_mutex_cond_lock: the word is 2.
                if std::mem::replace(&mut th.mutex_slow, false) {
                    self.mutexes[ev.mutex as usize].word_contended = true;
                }
                let th = &mut self.threads[t.idx()];
                if ev.is_set || ev.signal_count != th.event_sig {
                    th.lock_wait_since = std::mem::replace(&mut th.event_wait_since, Nanos::MAX);
                    let spin = th.rw_spin;
                    th.micro.push_front(match o {
                        EventOwner::Mutex(m) => Micro::MutexLockSpin(m, spin),
                        EventOwner::Rw { s, write } => Micro::RwSpinDown { s, write, spin },
                    });
                    th.micro.push_front(Micro::MutexUnlock(ev.mutex));
                    return Flow::Next;
                }
                self.push_cond_wait_lll(t, ev.cond, ev.mutex, Micro::EventWaitLocked(o));
                Flow::Next
            }
            Micro::EventSetLocked(o) => {
                // os_event_set, holding the event's mutex: set, count, broadcast.
                let Some(ev) = self.event_mut(o) else {
                    return Flow::Next;
                };
                if !ev.is_set {
                    ev.is_set = true;
                    ev.signal_count += 1;
                    let c = ev.cond;
                    self.push_broadcast(t, c);
                }
                Flow::Next
            }
            Micro::BarrierArriveLocked(b) => {
                // nptl/pthread_barrier_wait.c (glibc before 2.25), holding the barrier's
                // lock: --left; the last arrival bumps the event, wakes every sleeper
                // (futex_wake of INT_MAX) and keeps the lock; the others note the event,
                // unlock and futex_wait until it changes. Every thread then counts out;
                // the last out unlocks, so the next round's arrivals wait for it.
                let br = &mut self.barriers[b as usize];
                br.arrived += 1;
                if br.arrived >= br.parties {
                    br.arrived = 0;
                    br.gen += 1;
                    let th = &mut self.threads[t.idx()];
                    th.micro.push_front(Micro::BarrierLeave(b));
                    self.push_barrier_wake(t, b);
                    return Flow::Next;
                }
                let (g, lock) = (br.gen, br.lock);
                let th = &mut self.threads[t.idx()];
                th.wait_start = self.now;
                th.micro.push_front(Micro::BarrierLeave(b));
                self.push_barrier_sleep(t, b, g);
                self.threads[t.idx()]
                    .micro
                    .push_front(Micro::MutexUnlock(lock));
                Flow::Next
            }
            Micro::BarrierLeave(b) => {
                let br = &mut self.barriers[b as usize];
                br.leaving += 1;
                if br.leaving >= br.parties {
                    br.leaving = 0;
                    let lock = br.lock;
                    self.threads[t.idx()]
                        .micro
                        .push_front(Micro::MutexUnlock(lock));
                }
                Flow::Next
            }
            Micro::BarrierArrive(b) => {
                let br = &mut self.barriers[b as usize];
                br.arrived += 1;
                if br.arrived >= br.parties {
                    br.arrived = 0;
                    br.gen += 1;
                    // Spinners on running vCPUs see the generation change at once.
                    if self.barriers[b as usize].spinners > 0 {
                        self.poke_spinners(
                            t,
                            |a| matches!(a, ThreadActivity::SpinBarrier(x, _) if x == b),
                            false,
                        );
                    }
                    self.push_barrier_wake(t, b);
                    return Flow::Next;
                }
                let g = br.gen;
                let th = &mut self.threads[t.idx()];
                th.wait_start = self.now;
                if th.spin_left > 0 {
                    th.act = ThreadActivity::SpinBarrier(b, g);
                    watch_spinner(&mut self.spin_watch, th.vcpu);
                    self.barriers[b as usize].spinners += 1;
                    return Flow::Wait;
                }
                self.push_barrier_sleep(t, b, g);
                Flow::Next
            }
            Micro::PbArrive { b, spin } => self.parsec_barrier_arrive(t, b, spin),
            Micro::PbSpin { b, spin, departure } => {
                let br = &mut self.barriers[b as usize];
                if br.departing == departure {
                    return Flow::Next;
                }
                // `while (phase is not the wanted one && i < SPIN_COUNTER_MAX) i++;`: the
                // phase's change advances the generation, which the spin watches.
                let g = br.gen;
                br.spinners += 1;
                let th = &mut self.threads[t.idx()];
                th.act = ThreadActivity::SpinBarrier(b, g);
                watch_spinner(&mut self.spin_watch, th.vcpu);
                th.spin_left = spin.max(1);
                Flow::Wait
            }
            Micro::PbWait { b, departure } => {
                let br = &self.barriers[b as usize];
                if br.departing != departure {
                    let (m, c) = br
                        .parsec
                        .expect("a PARSEC barrier has a mutex and a condvar");
                    self.push_cond_wait(t, c, m, Some(Micro::PbWait { b, departure }));
                }
                Flow::Next
            }
            Micro::PbDepart(b) => {
                let br = &mut self.barriers[b as usize];
                let (m, c) = br
                    .parsec
                    .expect("a PARSEC barrier has a mutex and a condvar");
                br.arrived = br.arrived.saturating_sub(1);
                let last = br.arrived == 0;
                self.threads[t.idx()]
                    .micro
                    .push_front(Micro::MutexUnlock(m));
                if last {
                    // The last to leave starts the next arrival phase.
                    self.barriers[b as usize].departing = false;
                    self.parsec_phase_changed(t, b, c);
                }
                Flow::Next
            }
            Micro::BarrierSleep(b, g) => {
                let vm = self.threads[t.idx()].vm;
                self.vms[vm.idx()].futex_calls += 1;
                let br = &mut self.barriers[b as usize];
                let bucket = br.bucket;
                let th = &mut self.threads[t.idx()];
                if br.gen == g {
                    br.waiters.push((t, g));
                    th.micro.push_front(Micro::Block);
                }
                th.micro.push_front(Micro::KUnlock(bucket));
                Flow::Next
            }
            Micro::SemWait(s) => {
                if self.sems[s as usize].count > 0 {
                    self.sems[s as usize].count -= 1;
                    return Flow::Next;
                }
                self.threads[t.idx()].wait_start = self.now;
                self.push_sem_sleep(t, s);
                Flow::Next
            }
            Micro::SemSpinWait(s, spin) => {
                let sem = &mut self.sems[s as usize];
                if sem.count > 0 {
                    sem.count -= 1;
                    return Flow::Next;
                }
                self.threads[t.idx()].wait_start = self.now;
                if spin == 0 {
                    self.push_sem_sleep(t, s);
                    return Flow::Next;
                }
                sem.spinners += 1;
                let th = &mut self.threads[t.idx()];
                th.act = ThreadActivity::SpinSem(s);
                watch_spinner(&mut self.spin_watch, th.vcpu);
                th.spin_left = spin;
                Flow::Wait
            }
            Micro::SemSleep(s) => {
                let sem = &mut self.sems[s as usize];
                let bucket = sem.bucket;
                let th = &mut self.threads[t.idx()];
                if sem.count > 0 {
                    sem.count -= 1;
                    th.micro.push_front(Micro::KUnlock(bucket));
                } else {
                    sem.waiters.push_back(t);
                    th.micro.push_front(Micro::SemWait(s));
                    th.micro.push_front(Micro::Block);
                    th.micro.push_front(Micro::KUnlock(bucket));
                }
                Flow::Next
            }
            Micro::RwDown { s, write, retry } => {
                let vm = self.threads[t.idx()].vm.idx();
                let stealing = self.vms[vm].guest.rwsem_steal;
                let handoff = self.vms[vm].guest.mutex_handoff;
                let rw = &mut self.rwsems[s as usize];
                let mutex = rw.mutex;
                if retry && rw.woken == Some(t) {
                    rw.woken = None;
                }
                let ok = if mutex {
                    // Free, or handed off to it (MUTEX_FLAG_PICKUP).
                    rw.writer.is_none() || rw.writer == Some(t)
                } else if stealing {
                    rw.grantable_stealing(write, retry)
                } else {
                    rw.grantable(write, !retry)
                };
                if ok {
                    let stole = stealing && !retry && !rw.waiters.is_empty();
                    if stealing && retry && !mutex {
                        // The first waiter has it: the hand-off is done.
                        rw.handoff = false;
                    }
                    self.rw_take(s, t, write);
                    let rw = &mut self.rwsems[s as usize];
                    // A reader that stole it as the first reader wakes the queued
                    // readers if a reader is first in the queue (rwsem_mark_wake,
                    // RWSEM_WAKE_READ_OWNED).
                    if stole
                        && !write
                        && rw.readers == 1
                        && rw.waiters.front().is_some_and(|w| !w.1)
                    {
                        self.push_rwsem_wake(t, s);
                    }
                    return Flow::Next;
                }
                let th = &mut self.threads[t.idx()];
                if th.lock_wait_since == Nanos::MAX {
                    th.lock_wait_since = self.now;
                }
                // A mutex's waiter woken that finds it taken again is its first waiter:
                // from Linux 4.10 (`guest.mutex_handoff`) it sets MUTEX_FLAG_HANDOFF
                // (__mutex_trylock_or_handoff) and spins on the owner
                // (mutex_optimistic_spin with its waiter) before it sleeps again.
                let waiter_spins = mutex && retry && handoff;
                if waiter_spins {
                    self.rwsems[s as usize].handoff_to = Some(t);
                }
                if stealing && retry && !mutex {
                    // Woken and beaten to it: the first waiter sets the hand-off bit once
                    // it has waited RWSEM_WAIT_TIMEOUT = DIV_ROUND_UP(HZ, 250) jiffies.
                    let tick = self.vms[vm].guest.tick.max(1);
                    let timeout = 4_000_000u64.div_ceil(tick) * tick;
                    let waited = self
                        .now
                        .0
                        .saturating_sub(self.threads[t.idx()].wait_start.0);
                    if waited >= timeout {
                        self.rwsems[s as usize].handoff = true;
                    }
                } else {
                    self.threads[t.idx()].wait_start = self.now;
                }
                // rwsem_down_write_failed: optimistic spinning first (Linux 3.16+); a
                // mutex's __mutex_lock_common on every kernel.
                if write
                    && (!retry || waiter_spins)
                    && (mutex || self.vms[vm].guest.rwsem_spin != crate::scenario::RwsemSpin::Off)
                {
                    match self.rwsem_spin_step(t, s, true) {
                        RwsemSpinStep::Take => {
                            self.rw_take(s, t, true);
                            return Flow::Next;
                        }
                        RwsemSpinStep::Spin => {
                            let rw = &mut self.rwsems[s as usize];
                            rw.spinners += 1;
                            // The mutex's first waiter spins without the OSQ
                            // (mutex_optimistic_spin with its waiter); before Linux
                            // 3.10 a mutex has no queue of spinners (`guest.mutex_osq`).
                            if !waiter_spins && (!mutex || self.vms[vm].guest.mutex_osq) {
                                rw.osq.push_back(t);
                            }
                            self.rwsem_spinning += 1;
                            let th = &mut self.threads[t.idx()];
                            th.act = ThreadActivity::SpinRwsem(s);
                            watch_spinner(&mut self.spin_watch, th.vcpu);
                            // Bounded by the owner, need_resched and (on readers) the
                            // semaphore's deadline, not by a budget of its own.
                            th.spin_left = u64::MAX;
                            return Flow::Wait;
                        }
                        RwsemSpinStep::Stop => {}
                    }
                }
                let wait_lock = self.rwsems[s as usize].wait_lock;
                let th = &mut self.threads[t.idx()];
                th.micro.push_front(Micro::RwSleep {
                    s,
                    write,
                    front: (stealing || mutex) && retry,
                });
                th.micro.push_front(Micro::KLock(wait_lock));
                Flow::Next
            }
            Micro::RwSleep { s, write, front } => {
                let rw = &mut self.rwsems[s as usize];
                let wait_lock = rw.wait_lock;
                let ok = if rw.mutex {
                    // Queued, __mutex_lock_common still takes a free mutex (its xchg)
                    // before it sleeps, whoever else waits — or one handed off to it.
                    rw.writer.is_none() || rw.writer == Some(t)
                } else if front {
                    rw.grantable_stealing(write, true)
                } else {
                    rw.grantable(write, true)
                };
                if ok {
                    if front && !rw.mutex {
                        rw.handoff = false;
                    }
                    self.rw_take(s, t, write);
                    let th = &mut self.threads[t.idx()];
                    th.micro.push_front(Micro::KUnlock(wait_lock));
                } else {
                    let th = &mut self.threads[t.idx()];
                    if front {
                        rw.waiters.push_front((t, write));
                    } else {
                        rw.waiters.push_back((t, write));
                    }
                    th.micro.push_front(Micro::RwDown {
                        s,
                        write,
                        retry: true,
                    });
                    th.micro.push_front(Micro::Block);
                    th.micro.push_front(Micro::KUnlock(wait_lock));
                }
                Flow::Next
            }
            Micro::RwSpinDown { s, write, spin } => {
                let rw = &mut self.rwsems[s as usize];
                if rw.grantable(write, false) {
                    self.rw_take(s, t, write);
                    return Flow::Next;
                }
                rw.spinners += 1;
                let th = &mut self.threads[t.idx()];
                th.rw_spin = spin;
                th.wait_start = self.now;
                if th.lock_wait_since == Nanos::MAX {
                    th.lock_wait_since = self.now;
                }
                th.act = ThreadActivity::SpinRw(s, write);
                watch_spinner(&mut self.spin_watch, th.vcpu);
                if spin == 0 {
                    self.spin_exhausted(t);
                    return Flow::Next;
                }
                self.threads[t.idx()].spin_left = spin;
                Flow::Wait
            }
            Micro::RwUp(s) => {
                let rw = &mut self.rwsems[s as usize];
                if rw.writer == Some(t) {
                    let held = self.now.0.saturating_sub(rw.acquired_at.0);
                    let class = rw.class as usize;
                    self.lock_classes[class].hold.record(held);
                    let rw = &mut self.rwsems[s as usize];
                    if rw.handoff_to.is_some() {
                        // __mutex_unlock_slowpath with MUTEX_FLAG_HANDOFF: the owner word
                        // is left as it is, and under the wait_lock the first waiter
                        // becomes the owner (__mutex_handoff) and is woken.
                        self.push_rwsem_wake(t, s);
                        return Flow::Next;
                    }
                    rw.writer = None;
                } else {
                    rw.readers = rw.readers.saturating_sub(1);
                    if rw.readers == 0 {
                        // The readers' phase is over; __up_read clears the non-spinnable
                        // mark when the last reader leaves with waiters queued.
                        rw.rspin_deadline = Nanos::MAX;
                        if !rw.waiters.is_empty() {
                            rw.nonspinnable = false;
                        }
                    }
                }
                // Spinners on running vCPUs see the release at once: every reader can
                // take it, the first writer only (the others find it taken). A mutex
                // without the OSQ (`guest.mutex_osq`) goes to whichever spinner's
                // cmpxchg lands first; on the OSQ, to its head.
                let rw = &self.rwsems[s as usize];
                let racing = rw.mutex && !self.vms[self.threads[t.idx()].vm.idx()].guest.mutex_osq;
                if rw.spinners > 0 && rw.writer.is_none() {
                    self.poke_spinners(
                        t,
                        |a| {
                            matches!(a, ThreadActivity::SpinRw(x, _) | ThreadActivity::SpinRwsem(x)
                            if x == s)
                        },
                        racing,
                    );
                }
                let rw = &mut self.rwsems[s as usize];
                if rw.event.is_some() {
                    // rw_lock_x_unlock_func / rw_lock_s_unlock_func: the lock's event is
                    // set when it is free and its waiters flag is set.
                    if rw.writer.is_none() && rw.readers == 0 {
                        self.event_signal(t, EventOwner::Rw { s, write: false });
                    }
                    return Flow::Next;
                }
                if rw.writer.is_none() && rw.readers == 0 && !rw.waiters.is_empty() {
                    self.push_rwsem_wake(t, s);
                }
                Flow::Next
            }
            Micro::WakeRw(s) if self.rwsems[s as usize].handoff_to.is_some() => {
                self.mutex_handoff(t, v, s);
                Flow::Next
            }
            Micro::WakeRw(s) if self.rwsems[s as usize].mutex => {
                // __mutex_unlock_slowpath: wake the first waiter on the wait list.
                let rw = &mut self.rwsems[s as usize];
                if rw.woken.is_none() {
                    if let Some((w, _)) = rw.waiters.pop_front() {
                        rw.woken = Some(w);
                        self.futex_wake_one(t, v, w);
                    }
                }
                Flow::Next
            }
            Micro::WakeRw(s) => {
                let rw = &mut self.rwsems[s as usize];
                let mut woken = Vec::new();
                let phase_fair = self.vms[self.threads[t.idx()].vm.idx()].guest.rwsem_steal;
                if let Some(&(w, write)) = rw.waiters.front() {
                    if write {
                        rw.waiters.pop_front();
                        woken.push(w);
                    } else if phase_fair {
                        // Linux 5.3+ (rwsem_mark_wake): every queued reader, writers
                        // keeping their places.
                        rw.waiters.retain(|&(w, write)| {
                            if !write {
                                woken.push(w);
                            }
                            write
                        });
                    } else {
                        while let Some(&(w, false)) = rw.waiters.front() {
                            rw.waiters.pop_front();
                            woken.push(w);
                        }
                    }
                }
                for w in woken {
                    self.futex_wake_one(t, v, w);
                }
                Flow::Next
            }
            Micro::SemPost(s) => {
                let sem = &mut self.sems[s as usize];
                sem.count += 1;
                // A spinner on a running vCPU sees the unit at once and takes it.
                if sem.spinners > 0 {
                    self.poke_spinners(t, |a| a == ThreadActivity::SpinSem(s), true);
                }
                let sem = &self.sems[s as usize];
                if !sem.waiters.is_empty() {
                    let bucket = sem.bucket;
                    let f = self.futex_cost(t);
                    self.push_wake_path(t, bucket, Micro::WakeSemWaiter(s), f);
                }
                Flow::Next
            }
            Micro::WakeSemWaiter(s) => {
                if let Some(w) = self.sems[s as usize].waiters.pop_front() {
                    self.futex_wake_one(t, v, w);
                }
                Flow::Next
            }
            Micro::CondRegister(c) => {
                self.conds[c as usize].waiters.push_back(t);
                Flow::Next
            }
            Micro::LllLock(l) => {
                if self.mutexes[l as usize].holder.is_none() {
                    self.lll_acquired(l, t);
                    return Flow::Next;
                }
                // lll_lock's compare-and-swap failed: __lll_lock_wait sets the word to 2
                // and sleeps on it (futex_wait), with no spinning first.
                let (b, syscall) = (self.mutexes[l as usize].bucket, self.costs.syscall_ns);
                let th = &mut self.threads[t.idx()];
                if th.lll_since == Nanos::MAX {
                    th.lll_since = self.now;
                }
                th.micro.push_front(Micro::LllLockSleep(l));
                th.micro.push_front(Micro::KLock(b));
                th.micro.push_front(Micro::Work {
                    ns: syscall,
                    kernel: true,
                });
                Flow::Next
            }
            Micro::LllLockSleep(l) => {
                let vm = self.threads[t.idx()].vm;
                self.vms[vm.idx()].futex_calls += 1;
                let b = self.mutexes[l as usize].bucket;
                self.threads[t.idx()].lll_slow = true;
                self.mutexes[l as usize].word_contended = true;
                if self.mutexes[l as usize].holder.is_none() {
                    self.lll_acquired(l, t);
                    self.threads[t.idx()].micro.push_front(Micro::KUnlock(b));
                } else {
                    self.mutexes[l as usize].waiters.push_back(t);
                    let th = &mut self.threads[t.idx()];
                    th.micro.push_front(Micro::LllLock(l));
                    th.micro.push_front(Micro::Block);
                    th.micro.push_front(Micro::KUnlock(b));
                }
                Flow::Next
            }
            Micro::LllReleaseInKernel(l) => {
                // FUTEX_WAKE_OP (kernel/futex.c futex_wake_op): with both buckets locked
                // the kernel sets the lock word to 0 and, if it was above 1, wakes one
                // of the lock's sleepers (the cond's waiter is woken next, `WakeCond`).
                // Approximation: only the condition variable's bucket is taken.
                self.mutex_released(l);
                let mu = &mut self.mutexes[l as usize];
                if std::mem::replace(&mut mu.word_contended, false) {
                    if let Some(w) = mu.waiters.pop_front() {
                        self.futex_wake_one(t, v, w);
                    }
                }
                Flow::Next
            }
            Micro::CondSignalLocked(c) => {
                let cond = &self.conds[c as usize];
                let (bucket, lock) = (cond.bucket, cond.lock);
                if cond.waiters.is_empty() {
                    self.threads[t.idx()]
                        .micro
                        .push_front(Micro::MutexUnlock(lock));
                    return Flow::Next;
                }
                // pthread_cond_signal: ++wakeup_seq, then lll_futex_wake_unlock
                // (FUTEX_WAKE_OP): one system call wakes a waiter and releases the lock.
                let f = self.futex_cost(t);
                let th = &mut self.threads[t.idx()];
                th.micro.push_front(Micro::FlushWakes);
                th.micro.push_front(Micro::KUnlock(bucket));
                th.micro.push_front(Micro::WakeCond {
                    cond: c,
                    all: false,
                });
                th.micro.push_front(Micro::LllReleaseInKernel(lock));
                th.micro.push_front(Micro::KLock(bucket));
                th.micro.push_front(f);
                Flow::Next
            }
            Micro::CondBroadcastLocked(c) => {
                // pthread_cond_broadcast: the sequence counters updated, lll_unlock, then
                // FUTEX_CMP_REQUEUE (or, without waiters, just lll_unlock).
                self.push_broadcast_unlocked(t, c);
                let lock = self.conds[c as usize].lock;
                self.threads[t.idx()]
                    .micro
                    .push_front(Micro::MutexUnlock(lock));
                Flow::Next
            }
            Micro::WakeCond { cond, all } => {
                // Barriers reuse this step with cond = u32::MAX - barrier.
                let ws: Vec<ThreadId> = if cond > u32::MAX / 2 {
                    // Only the waiters of an ended generation: one that already sleeps on
                    // the next (registered while this wake-up waited for the bucket lock)
                    // would wake, see its round still open and sleep again (glibc's
                    // pthread_barrier_wait re-checks after every futex wake).
                    let br = &mut self.barriers[(u32::MAX - cond) as usize];
                    let gen = br.gen;
                    let ended = br
                        .waiters
                        .iter()
                        .filter(|&&(_, g)| g < gen)
                        .map(|&(w, _)| w)
                        .collect();
                    br.waiters.retain(|&(_, g)| g >= gen);
                    ended
                } else {
                    let q = &mut self.conds[cond as usize].waiters;
                    if all {
                        q.drain(..).collect()
                    } else {
                        q.pop_front().into_iter().collect()
                    }
                };
                let from_cond = cond <= u32::MAX / 2;
                for w in ws {
                    // A condition variable's waiter retakes its mutex with
                    // __pthread_mutex_cond_lock (the slow path's exchange to 2).
                    self.threads[w.idx()].mutex_slow |= from_cond;
                    self.futex_wake_one(t, v, w);
                }
                Flow::Next
            }
            Micro::RequeueCond { cond, mutex } => {
                // Holding both bucket locks: wake the first waiter, move the rest to
                // the mutex's futex (requeue_futex: a few list operations each, not
                // charged apart from the futex call). From now on they wait for the
                // mutex: woken by an unlock, each retakes it (their next step).
                let mut ws = std::mem::take(&mut self.conds[cond as usize].waiters);
                if let Some(w) = ws.pop_front() {
                    self.threads[w.idx()].mutex_slow = true;
                    self.futex_wake_one(t, v, w);
                }
                let now = self.now;
                for &w in &ws {
                    let th = &mut self.threads[w.idx()];
                    th.mutex_slow = true;
                    if th.lock_wait_since == Nanos::MAX {
                        th.lock_wait_since = now;
                    }
                }
                self.mutexes[mutex as usize].waiters.extend(ws.drain(..));
                // Keep the deque's buffer for the next waiters.
                self.conds[cond as usize].waiters = ws;
                Flow::Next
            }
            Micro::QueuePush(q) => {
                let qu = &self.queues[q as usize];
                let (mx, nf, ne) = (qu.mutex, qu.not_full, qu.not_empty);
                if qu.items >= qu.cap {
                    // while (full) cond_wait(not_full, m); then retry.
                    self.push_cond_wait(t, nf, mx, Some(Micro::QueuePush(q)));
                } else {
                    self.queues[q as usize].items += 1;
                    self.push_signal_unlock(t, ne, mx);
                }
                Flow::Next
            }
            Micro::QueuePop(q) => {
                let qu = &self.queues[q as usize];
                let (mx, nf, ne) = (qu.mutex, qu.not_full, qu.not_empty);
                if qu.items == 0 {
                    self.push_cond_wait(t, ne, mx, Some(Micro::QueuePop(q)));
                } else {
                    self.queues[q as usize].items -= 1;
                    self.push_signal_unlock(t, nf, mx);
                }
                Flow::Next
            }
            Micro::SchedYield => {
                self.threads[t.idx()].debt += Nanos(self.costs.syscall_ns);
                if self.vcpus[v.idx()].rq.is_empty() {
                    // Alone on its vCPU: the guest's schedule() picks it again (no
                    // switch), the same Linux path as the host's re-pick. The call
                    // returns after that kernel time: what follows (InnoDB's event
                    // reservation, which reads the lock word again) comes after it.
                    self.threads[t.idx()].debt += Nanos(self.costs.repick_ns);
                    return Flow::Wait;
                }
                self.yield_behind_queued(v, t);
                self.guest_preempt(v, t);
                Flow::Left
            }
            Micro::FlushWakes => {
                let mut ws = std::mem::take(&mut self.threads[t.idx()].deferred_wakes);
                for &w in &ws {
                    self.send_wake(v, w);
                }
                // Keep the buffer for the next wake-up path.
                ws.clear();
                self.threads[t.idx()].deferred_wakes = ws;
                Flow::Next
            }
            Micro::TlbWait => {
                let th = &mut self.threads[t.idx()];
                if th.acks_left == 0 {
                    self.record_tlb_wait(t);
                    return Flow::Next;
                }
                th.act = ThreadActivity::TlbWait;
                Flow::Wait
            }
            Micro::FlushCheck { f, slot, exit } => {
                let fl = &mut self.flushers[f as usize];
                let th = &mut self.threads[t.idx()];
                if fl.done >= *th.loop_counter(slot as usize) {
                    th.pc = exit;
                    return Flow::Next;
                }
                if !fl.flushing {
                    // log_write_up_to: nobody flushing — this thread flushes everything
                    // written so far, its own writes too: the flush's body, then the
                    // device write (`Instr::FlushIo`).
                    fl.flushing = true;
                    fl.started += 1;
                    return Flow::Next;
                }
                // A flush is under way: wait on the flush event.
                th.wait_start = self.now;
                let bucket = fl.bucket;
                let c = self.futex_cost(t);
                let th = &mut self.threads[t.idx()];
                th.micro.push_front(Micro::FlushSleep { f, slot, exit });
                th.micro.push_front(Micro::KLock(bucket));
                th.micro.push_front(c);
                Flow::Next
            }
            Micro::FlushSleep { f, slot, exit } => {
                let fl = &mut self.flushers[f as usize];
                let bucket = fl.bucket;
                let th = &mut self.threads[t.idx()];
                th.micro.push_front(Micro::FlushCheck { f, slot, exit });
                if fl.flushing {
                    fl.waiters.push(t);
                    th.micro.push_front(Micro::Block);
                }
                th.micro.push_front(Micro::KUnlock(bucket));
                Flow::Next
            }
            Micro::FlushDone(f) => {
                let fl = &mut self.flushers[f as usize];
                fl.done = fl.started;
                fl.flushing = false;
                if !fl.waiters.is_empty() {
                    let bucket = fl.bucket;
                    let c = self.futex_cost(t);
                    self.push_wake_path(t, bucket, Micro::WakeFlushWaiters(f), c);
                }
                Flow::Next
            }
            Micro::WakeFlushWaiters(f) => {
                let ws = std::mem::take(&mut self.flushers[f as usize].waiters);
                for w in ws {
                    self.futex_wake_one(t, v, w);
                }
                Flow::Next
            }
            Micro::Block => {
                let th = &mut self.threads[t.idx()];
                if th.wake_pending {
                    th.wake_pending = false;
                    return Flow::Next;
                }
                th.state = ThreadState::Blocked;
                th.debt += Nanos(self.costs.syscall_ns);
                self.trace_thread_end(v);
                Flow::Left
            }
        }
    }

    /// futex_wake: take the bucket lock, wake, release (and send deferred IPIs).
    pub(crate) fn push_wake_path(&mut self, t: ThreadId, bucket: LockId, wake: Micro, cost: Micro) {
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::FlushWakes);
        th.micro.push_front(Micro::KUnlock(bucket));
        th.micro.push_front(wake);
        th.micro.push_front(Micro::KLock(bucket));
        th.micro.push_front(cost);
    }

    /// parsec_barrier_wait (PARSEC's parsec_barrier.cpp, ENABLE_SPIN_BARRIER) from the
    /// point where `t` holds the barrier's mutex: in a departure phase, drop the mutex,
    /// spin on the flag, spin on trylock, wait on the condition variable while the
    /// phase lasts, then come back here; in an arrival phase, count in: the last thread
    /// starts the departure phase, broadcasts and leaves, the others drop the mutex,
    /// spin on the flag, spin on trylock and wait on the condition variable until the
    /// departure phase, then leave.
    fn parsec_barrier_arrive(&mut self, t: ThreadId, b: u32, spin: u64) -> Flow {
        let br = &mut self.barriers[b as usize];
        let (m, c) = br
            .parsec
            .expect("a PARSEC barrier has a mutex and a condvar");
        if br.departing {
            self.push_parsec_wait(t, b, m, spin, false, Micro::PbArrive { b, spin });
            return Flow::Next;
        }
        br.arrived += 1;
        if br.arrived >= br.parties {
            br.departing = true;
            self.threads[t.idx()].micro.push_front(Micro::PbDepart(b));
            self.parsec_phase_changed(t, b, c);
            return Flow::Next;
        }
        self.threads[t.idx()].wait_start = self.now;
        self.push_parsec_wait(t, b, m, spin, true, Micro::PbDepart(b));
        Flow::Next
    }

    /// `t`, holding PARSEC barrier `b`'s mutex `m`, waits for the phase `departure`
    /// names, then goes on with `then`: it drops the mutex, spins up to `spin` on the
    /// phase flag, spins on `pthread_mutex_trylock` until it has the mutex again (no
    /// budget, no PAUSE) and waits on the condition variable while the phase lasts.
    fn push_parsec_wait(
        &mut self,
        t: ThreadId,
        b: u32,
        m: u32,
        spin: u64,
        departure: bool,
        then: Micro,
    ) {
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(then);
        th.micro.push_front(Micro::PbWait { b, departure });
        th.micro.push_front(Micro::MutexLockSpin(m, u64::MAX));
        th.micro.push_front(Micro::PbSpin { b, spin, departure });
        th.micro.push_front(Micro::MutexUnlock(m));
    }

    /// A PARSEC barrier's phase changed (its holder `t` set or cleared the flag): flag
    /// spinners on running vCPUs see it at once, and the condition variable's waiters
    /// are woken by `pthread_cond_broadcast`, still under the mutex.
    fn parsec_phase_changed(&mut self, t: ThreadId, b: u32, c: u32) {
        let br = &mut self.barriers[b as usize];
        br.gen += 1;
        if br.spinners > 0 {
            self.poke_spinners(
                t,
                |a| matches!(a, ThreadActivity::SpinBarrier(x, _) if x == b),
                false,
            );
        }
        self.push_broadcast(t, c);
    }

    /// pthread_cond_broadcast(c) by `t`, if anyone waits. glibc 2.25+ wakes every
    /// waiter (futex_wake of INT_MAX under the cond's bucket lock). glibc 2.3–2.24
    /// (`guest.cond_requeue`, nptl/pthread_cond_broadcast.c) calls FUTEX_CMP_REQUEUE:
    /// the kernel (kernel/futex.c futex_requeue) takes both futexes' bucket locks
    /// (double_lock_hb, lower first), wakes one waiter and moves the others to the
    /// mutex's futex, where each is woken by the unlock of the one before it (a woken
    /// waiter retakes the mutex with __pthread_mutex_cond_lock, which marks it
    /// contended, so its unlock wakes the next).
    pub(crate) fn push_broadcast(&mut self, t: ThreadId, c: u32) {
        let lock = self.conds[c as usize].lock;
        if lock != u32::MAX {
            // glibc before 2.25: under the condition variable's internal lock.
            let th = &mut self.threads[t.idx()];
            th.micro.push_front(Micro::CondBroadcastLocked(c));
            th.micro.push_front(Micro::LllLock(lock));
            return;
        }
        self.push_broadcast_unlocked(t, c);
    }

    /// The broadcast's futex call: wake every waiter, or wake one and requeue the others.
    fn push_broadcast_unlocked(&mut self, t: ThreadId, c: u32) {
        let cond = &self.conds[c as usize];
        if cond.waiters.is_empty() {
            return;
        }
        let (bucket, mutex) = (cond.bucket, cond.mutex);
        let f = self.futex_cost(t);
        let requeue = self.vms[self.threads[t.idx()].vm.idx()].guest.cond_requeue;
        if !requeue || mutex == u32::MAX {
            self.push_wake_path(t, bucket, Micro::WakeCond { cond: c, all: true }, f);
            return;
        }
        let other = self.mutexes[mutex as usize].bucket;
        let (first, second) = if other.0 < bucket.0 {
            (other, bucket)
        } else {
            (bucket, other)
        };
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::FlushWakes);
        th.micro.push_front(Micro::KUnlock(first));
        if second != first {
            th.micro.push_front(Micro::KUnlock(second));
        }
        th.micro.push_front(Micro::RequeueCond { cond: c, mutex });
        if second != first {
            th.micro.push_front(Micro::KLock(second));
        }
        th.micro.push_front(Micro::KLock(first));
        th.micro.push_front(f);
    }

    /// sem_wait's futex path for `t`: under the semaphore's bucket lock, take a unit or
    /// queue and sleep.
    fn push_sem_sleep(&mut self, t: ThreadId, s: u32) {
        let bucket = self.sems[s as usize].bucket;
        let f = self.futex_cost(t);
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::SemSleep(s));
        th.micro.push_front(Micro::KLock(bucket));
        th.micro.push_front(f);
    }

    /// The event of InnoDB lock `o`.
    fn event(&self, o: EventOwner) -> Option<OsEvent> {
        match o {
            EventOwner::Mutex(m) => self.mutexes[m as usize].event,
            EventOwner::Rw { s, .. } => self.rwsems[s as usize].event,
        }
    }

    fn event_mut(&mut self, o: EventOwner) -> Option<&mut OsEvent> {
        match o {
            EventOwner::Mutex(m) => self.mutexes[m as usize].event.as_mut(),
            EventOwner::Rw { s, .. } => self.rwsems[s as usize].event.as_mut(),
        }
    }

    /// `t` released InnoDB lock `o`: if its waiters flag is set, clear it and set the
    /// event under the event's mutex (mutex_signal_object, rw_lock_x_unlock_func →
    /// os_event_set).
    fn event_signal(&mut self, t: ThreadId, o: EventOwner) {
        let Some(ev) = self.event_mut(o) else {
            return;
        };
        if !std::mem::replace(&mut ev.waiters, false) {
            return;
        }
        let em = ev.mutex;
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::MutexUnlock(em));
        th.micro.push_front(Micro::EventSetLocked(o));
        th.micro.push_front(Micro::LllLock(em));
    }

    /// pthread_cond_wait(c, m), then `then`.
    ///
    /// With glibc's internal lock (before 2.25, nptl/pthread_cond_wait.c): take it,
    /// drop the mutex (its futex_wake included), count in as a waiter, release it,
    /// futex_wait; woken, take it again to check the counters, release it, retake the
    /// mutex (`__pthread_mutex_cond_lock`). A signal between the release and the
    /// futex_wait makes the futex_wait return at once (the futex word changed): here
    /// the wake-up is pending when the thread gets to block.
    pub(crate) fn push_cond_wait(&mut self, t: ThreadId, c: u32, m: u32, then: Option<Micro>) {
        let th = &mut self.threads[t.idx()];
        if let Some(x) = then {
            th.micro.push_front(x);
        }
        self.push_cond_wait_then(t, c, m, Micro::MutexLock(m));
    }

    /// pthread_cond_wait(c, m) on a default (non-spinning) mutex `m` taken as a
    /// low-level lock (InnoDB's `os_mutex`), then `then`.
    fn push_cond_wait_lll(&mut self, t: ThreadId, c: u32, m: u32, then: Micro) {
        self.threads[t.idx()].micro.push_front(then);
        self.push_cond_wait_then(t, c, m, Micro::LllLock(m));
    }

    /// pthread_cond_wait(c, m), retaking the mutex with `retake`.
    fn push_cond_wait_then(&mut self, t: ThreadId, c: u32, m: u32, retake: Micro) {
        self.conds[c as usize].mutex = m;
        let bucket = self.conds[c as usize].bucket;
        let lock = self.conds[c as usize].lock;
        let f = self.futex_cost(t);
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(retake);
        if lock != u32::MAX {
            th.micro.push_front(Micro::MutexUnlock(lock));
            th.micro.push_front(Micro::LllLock(lock));
            th.micro.push_front(Micro::Block);
            th.micro.push_front(Micro::KUnlock(bucket));
            th.micro.push_front(Micro::KLock(bucket));
            th.micro.push_front(f);
            th.micro.push_front(Micro::MutexUnlock(lock));
            th.micro.push_front(Micro::CondRegister(c));
            th.micro.push_front(Micro::MutexUnlock(m));
            th.micro.push_front(Micro::LllLock(lock));
            return;
        }
        th.micro.push_front(Micro::Block);
        th.micro.push_front(Micro::MutexUnlock(m));
        th.micro.push_front(Micro::KUnlock(bucket));
        th.micro.push_front(Micro::CondRegister(c));
        th.micro.push_front(Micro::KLock(bucket));
        th.micro.push_front(f);
    }

    /// pthread_cond_signal(c); pthread_mutex_unlock(m).
    fn push_signal_unlock(&mut self, t: ThreadId, c: u32, m: u32) {
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::MutexUnlock(m));
        let lock = self.conds[c as usize].lock;
        if lock != u32::MAX {
            th.micro.push_front(Micro::CondSignalLocked(c));
            th.micro.push_front(Micro::LllLock(lock));
            return;
        }
        if !self.conds[c as usize].waiters.is_empty() {
            let bucket = self.conds[c as usize].bucket;
            let f = self.futex_cost(t);
            self.push_wake_path(
                t,
                bucket,
                Micro::WakeCond {
                    cond: c,
                    all: false,
                },
                f,
            );
        }
    }

    /// One futex waiter `w` is woken by `t` on `v`: under the bucket lock the IPI goes
    /// out now, otherwise it is deferred until after the unlock.
    fn futex_wake_one(&mut self, t: ThreadId, v: VcpuId, w: ThreadId) {
        let under = self.vms[self.threads[t.idx()].vm.idx()]
            .guest
            .ipi_under_lock;
        let wake = self.costs.wake_ns;
        self.threads[t.idx()].micro.push_front(Micro::Work {
            ns: wake,
            kernel: true,
        });
        if under {
            self.send_wake(v, w);
        } else {
            self.threads[t.idx()].deferred_wakes.push(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Dispenser;
    use crate::sim::world::World;

    /// Releases poke the spinners of `spin_watch` only: every spinner on a vCPU is
    /// marked there whenever a release looks (`assert_spinners_watched` runs at each
    /// poke in test builds), with spinners preempted by the guest scheduler and resumed
    /// on other vCPUs (more threads than vCPUs, over-committed pCPUs) and every kind of
    /// poked spin: a mutex, PARSEC's barrier, a semaphore, a user rw-lock and a kernel
    /// rw-semaphore's optimistic spin.
    #[test]
    fn every_spinner_a_release_must_poke_is_watched() {
        let program = r#"
preset = "kvm-default"
[run]
duration = "30ms"
[host]
pcpus = 3
[guest]
rwsem_spin = "reader-bounded"
[[vm]]
vcpus = 6
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 9
ops = [{ loop = { n = "forever", body = [
  { compute = "exp(5us)" },
  { lock_spin = { mutex = "m", spin = "20us" } }, { compute = "2us" }, { unlock = "m" },
  { rw_spin_write = { lock = "u", spin = "10us" } }, { compute = "1us" }, { rw_unlock = "u" },
  { rw_spin_read = { lock = "u", spin = "10us" } }, { compute = "1us" }, { rw_unlock = "u" },
  { rw_write = "k" }, { compute = "1us" }, { rw_unlock = "k" },
  { sem_post = "s" }, { sem_spin_wait = { sem = "s", spin = "5us" } },
  { count = 1 },
] } }]
[[vm]]
vcpus = 3
workload = { model = "cpu-bomb" }
"#;
        let barrier = r#"
preset = "kvm-default"
[run]
duration = "20ms"
[host]
pcpus = 12
[[vm]]
vcpus = 24
workload = { model = "streamcluster", threads = 30, params = { forever = true } }
"#;
        // A semaphore's units come slower than its four consumers spin for them.
        let sem = r#"
preset = "kvm-default"
[run]
duration = "20ms"
[host]
pcpus = 5
[[vm]]
vcpus = 5
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "producer"
ops = [{ loop = { n = "forever", body = [{ compute = "50us" }, { sem_post = "s" }] } }]
[[vm.workload.group]]
name = "consumer"
threads = 4
ops = [{ loop = { n = "forever", body = [{ sem_spin_wait = { sem = "s", spin = "1ms" } }, { compute = "10us" }, { count = 1 }] } }]
"#;
        // Long mutex spins on two vCPUs with three threads each: the guest tick preempts
        // spinners, which resume later, on either vCPU.
        let preempted = r#"
preset = "kvm-default"
[run]
duration = "300ms"
[host]
pcpus = 2
[[vm]]
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 6
ops = [{ loop = { n = "forever", body = [{ compute = "exp(2ms)" }, { lock_spin = { mutex = "m", spin = "30ms" } }, { compute = "exp(1ms)" }, { unlock = "m" }, { count = 1 }] } }]
"#;
        for text in [program, barrier, sem, preempted] {
            let sc = crate::resolve(text, &[], None).expect("scenario resolves");
            let mut w = World::new(&sc).expect("world builds");
            w.run();
            assert!(w.events > 300, "the run did something: {}", w.events);
        }
    }

    #[test]
    fn a_dispenser_restarts_with_each_episode_and_a_laggard_finds_none() {
        let mut d = Dispenser {
            episode: 0,
            taken: 0,
            tickets: 2,
        };
        // Episode 1: two tickets, then none.
        assert!(d.take(1) && d.take(1) && !d.take(1));
        // The first thread into episode 2 starts it afresh ...
        assert!(d.take(2));
        // ... and a thread still in episode 1 finds nothing left for it.
        assert!(!d.take(1));
        assert!(d.take(2) && !d.take(2));
    }

    /// `select_bit` finds the set bit of each rank, from either end.
    #[test]
    fn select_bit_finds_each_rank() {
        for word in [
            1u64,
            0b1011_0110,
            u64::MAX,
            0x8000_0000_0000_0001,
            0xF0F0_0000_1234_8001,
        ] {
            let bits: Vec<u32> = (0..64).filter(|b| (word >> b) & 1 == 1).collect();
            for (rank, &b) in bits.iter().enumerate() {
                assert_eq!(super::select_bit(word, rank as u32, word.count_ones()), b);
            }
        }
    }
}
