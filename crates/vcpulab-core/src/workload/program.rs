//! The operation language: what a workload's threads execute, as written in scenario
//! files, and its compiled form (a flat instruction list with loop jumps).

use super::dist::Dist;
use serde::{Deserialize, Serialize};

/// How many times a loop runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LoopCount {
    Times(u64),
    /// The string "forever": the thread never finishes (fixed-time workloads).
    Forever(String),
}

/// One operation as written in a scenario: a single-key table such as
/// `{compute = "exp(100us)"}` or `{loop = {n = 10, body = [...]}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OpSpec {
    /// User-mode computation.
    Compute(Dist),
    /// Guest-kernel computation (a system call's work, no locks).
    Kernel(Dist),
    /// Block for a duration (nanosleep); the guest's timer slack is added.
    Sleep(Dist),
    /// Count `n` units of work (the throughput metric).
    Count(u64),
    Loop(LoopSpec),
    /// Work handed out from a shared ticket counter (a work pool): the thread takes a
    /// ticket and runs `body`, again and again, while the episode's `n` tickets last —
    /// bodytrack's TicketDispenser, raytrace's tile counter, OpenMP's
    /// `schedule(dynamic)`. The counter starts afresh when the first thread enters the
    /// dispenser for the next time (its next episode); a thread still in an earlier
    /// episode then finds no ticket. With `mutex` each take locks it (for `hold` inside),
    /// as a TicketDispenser does; without, it is an atomic fetch-and-add.
    Dispense(DispenseSpec),
    /// Acquire a user mutex (glibc-style: brief spin, then futex).
    Lock(String),
    /// Acquire a mutex spinning up to `spin` before sleeping on its futex (a
    /// spin-then-block mutex such as InnoDB's), instead of the guest's default spin.
    LockSpin(LockSpinSpec),
    Unlock(String),
    /// A guest-kernel critical section under a spinlock.
    Kspin(KspinSpec),
    /// Wait at a futex barrier (all threads that use it are its parties).
    Barrier(String),
    /// A spin-then-block barrier: spin up to `spin`, then futex-wait.
    SpinBarrier(SpinBarrierSpec),
    /// PARSEC's own barrier (parsec_barrier_wait with ENABLE_SPIN_BARRIER): a two-phase
    /// barrier under a pthread mutex and condition variable. Every thread takes the
    /// mutex to arrive and again to leave; a waiter drops it and spins up to `spin` on
    /// the phase flag, spins on `trylock` until it has the mutex again, and waits on the
    /// condition variable if the phase has not changed; the next arrivals wait until
    /// the last thread has left.
    ParsecBarrier(SpinBarrierSpec),
    CondWait(CondWaitSpec),
    /// A kernel read-write semaphore (Linux's rw_semaphore, e.g. mmap_sem): take it
    /// shared / exclusive, sleeping while it is not available; release it (the mode
    /// it was taken in).
    RwRead(String),
    RwWrite(String),
    RwUnlock(String),
    /// A guest-kernel mutex (Linux's struct mutex, kernel/locking/mutex.c, e.g.
    /// i_mmap_mutex, a directory's i_mutex): a taker that finds it held spins while the
    /// owner runs on a CPU (mutex_optimistic_spin; from Linux 4.10 not while the
    /// owner's vCPU is preempted, with `guest.vcpu_is_preempted`), then queues under the
    /// mutex's wait_lock and sleeps; the unlock wakes the first waiter when there is
    /// one. No futex and no system call: it is kernel code.
    KmutexLock(String),
    KmutexUnlock(String),
    /// A file mapping's i_mmap lock taken for writing (`i_mmap_lock_write`, e.g. by
    /// vma_link and unlink_file_vma): the kernel mutex `i_mmap_mutex` before Linux 3.19,
    /// the rw-semaphore `i_mmap_rwsem` taken for writing from 3.19 ("mm: convert
    /// i_mmap_mutex to rwsem"), as the guest says (`guest.i_mmap_rwsem`).
    IMmapLockWrite(String),
    IMmapUnlockWrite(String),
    /// An inode's lock (`inode_lock`, e.g. a directory's around create and unlink): the
    /// kernel mutex `i_mutex` before Linux 4.7, the rw-semaphore `i_rwsem` taken for
    /// writing from 4.7, as the guest says (`guest.i_rwsem`).
    InodeLock(String),
    InodeUnlock(String),
    /// A user-level read-write lock that spins before it sleeps (InnoDB's rw_lock_t:
    /// rw_lock_s_lock_spin / rw_lock_x_lock_func spin up to `spin`, then wait on the
    /// lock's event — a futex): take it shared / exclusive; release with `rw_unlock`.
    /// It tries and spins whatever sleeps on the lock (no queue fairness, as InnoDB).
    RwSpinRead(RwSpinSpec),
    RwSpinWrite(RwSpinSpec),
    /// Counting semaphore (futex-based): post adds one and wakes a waiter, wait takes
    /// one or sleeps.
    SemPost(String),
    SemWait(String),
    /// Wait for a unit of a counting semaphore spinning in user space up to `spin`
    /// before sleeping on its futex (a busy-waited flag, such as NPB-LU's `sync_left`,
    /// with a spin no run outlasts).
    SemSpinWait(SemSpinSpec),
    /// sched_yield(): let another runnable thread of the vCPU run.
    Yield(u32),
    /// Change the workload's cpuset (its allowed vCPUs, e.g. "0-3"): threads on vCPUs
    /// left out migrate at once.
    Cpuset(String),
    CondSignal(String),
    CondBroadcast(String),
    /// Put one item into / take one item from a bounded queue (blocking).
    Push(String),
    Pop(String),
    /// Change the address space (munmap/mprotect): shoot down the TLBs of every other
    /// vCPU that runs or ran the process's threads, and wait for their acknowledgement.
    TlbShootdown(u32),
    /// Block on a device for a duration; its completion interrupt wakes the thread.
    Io(Dist),
    /// Make everything written so far durable through a flush shared by everyone
    /// (group commit: InnoDB's log_write_up_to, a journal commit): with no flush under
    /// way the thread flushes itself (runs `body`, then a device wait of `io`);
    /// otherwise it sleeps until that flush ends and then, as its writes came after that
    /// flush began, needs the next one — which the first of the woken starts for all of
    /// them.
    GroupFlush(GroupFlushSpec),
    /// Receive up to `n` datagrams from the VM's NIC (guest/nic.rs), waiting for its
    /// interrupt when none has arrived.
    NetRecv(u32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KspinSpec {
    pub lock: String,
    pub hold: Dist,
    /// The lock is an rwlock_t taken for writing (write_lock): before the queued
    /// rwlocks of Linux 3.16 an unfair test-and-set on x86, then a queue behind the
    /// kernel's spinlock (`guest.queued_rwlocks`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rwlock: bool,
    /// The lock is a dentry's `d_lock` taken to get a reference at the end of a path
    /// walk (`"get"`: complete_walk, lockless from Linux 3.12's lockref,
    /// `guest.lockref`) or to drop the last one in dput (`"put"`: lockless for a cached
    /// dentry from 4.0's fast_dput, `guest.fast_dput`). On a guest where it is lockless
    /// the section is kernel work with no lock.
    #[serde(default, skip_serializing_if = "DentryRef::is_none")]
    pub dentry: DentryRef,
}

/// What a dentry's `d_lock` section does (`KspinSpec::dentry`), and so on which kernels
/// it takes no lock (fs/dcache.c, lib/lockref.c).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DentryRef {
    /// Not a dentry's reference count: always a lock.
    #[default]
    None,
    /// Take a reference (complete_walk → lockref_get_not_dead from 3.12).
    Get,
    /// Drop the last reference of a cached dentry (dput → fast_dput from 4.0).
    Put,
}

impl DentryRef {
    fn is_none(&self) -> bool {
        *self == DentryRef::None
    }

    /// The kinds of section that take no lock on a guest with lockref (`lockref`) and
    /// fast_dput (`fast_dput`), as a mask for `lockless`.
    pub fn lockless_mask(lockref: bool, fast_dput: bool) -> u8 {
        u8::from(lockref) | u8::from(fast_dput) << 1
    }

    /// True when the section takes no lock on a guest whose `lockless_mask` is `mask`.
    pub fn lockless(self, mask: u8) -> bool {
        match self {
            DentryRef::None => false,
            DentryRef::Get => mask & 1 != 0,
            DentryRef::Put => mask & 2 != 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockSpinSpec {
    pub mutex: String,
    pub spin: Dist,
    /// InnoDB's mutex (TTASEventMutex, ib0mutex.h): its release wakes every sleeper
    /// (`exit` → os_event_set, a broadcast) and each spins `spin` again before it sleeps
    /// again (`enter`'s loop). False: one sleeper is woken and takes it without spinning
    /// (glibc, nptl/lowlevellock.c).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wake_all: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RwSpinSpec {
    pub lock: String,
    pub spin: Dist,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpinBarrierSpec {
    pub name: String,
    pub spin: Dist,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SemSpinSpec {
    pub sem: String,
    pub spin: Dist,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CondWaitSpec {
    pub cond: String,
    pub mutex: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFlushSpec {
    /// The flushed log's name (one per name and VM).
    pub name: String,
    /// A flush's device time.
    pub io: Dist,
    /// What the flushing thread does before the device write (a journal commit's
    /// work); the others sleep meanwhile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<OpSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispenseSpec {
    /// The dispenser's name (one counter per name and VM).
    pub tickets: String,
    /// Tickets per episode.
    pub n: u64,
    /// The mutex each take locks (absent: a lock-free fetch-and-add).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutex: Option<String>,
    /// Time spent holding `mutex` per take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Dist>,
    pub body: Vec<OpSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopSpec {
    pub n: LoopCount,
    pub body: Vec<OpSpec>,
}

impl OpSpec {
    /// True when the op is, or its loop body holds, a `dispense`.
    fn holds_dispense(&self) -> bool {
        match self {
            OpSpec::Dispense(_) => true,
            OpSpec::Loop(l) => l.body.iter().any(OpSpec::holds_dispense),
            OpSpec::GroupFlush(g) => g.body.iter().any(OpSpec::holds_dispense),
            _ => false,
        }
    }

    /// True when the op is, or its body holds, a `group_flush`.
    fn holds_group_flush(&self) -> bool {
        match self {
            OpSpec::GroupFlush(_) => true,
            OpSpec::Loop(l) => l.body.iter().any(OpSpec::holds_group_flush),
            OpSpec::Dispense(d) => d.body.iter().any(OpSpec::holds_group_flush),
            _ => false,
        }
    }
}

/// A compiled instruction.
#[derive(Clone, Debug)]
pub enum Instr {
    Compute(Dist),
    Kernel(Dist),
    Sleep(Dist),
    Count(u64),
    /// Start of loop `slot`; `end` is the index just past the matching LoopEnd.
    LoopStart {
        slot: u16,
        count: Option<u64>,
        end: u32,
    },
    /// Jump back to `start` (the LoopStart) while iterations remain.
    LoopEnd {
        slot: u16,
        start: u32,
    },
    /// Entry to dispenser loop `slot`: the thread's episode of it (kept in the loop
    /// slot) goes up by one.
    DispenseEnter {
        dispenser: u32,
        slot: u16,
    },
    /// Take a ticket of `dispenser` in the thread's episode (loop slot `slot`), or jump
    /// to `exit` when the episode's tickets are gone.
    DispenseTake {
        dispenser: u32,
        slot: u16,
        exit: u32,
    },
    /// Continue at the given instruction (ends a dispenser loop's body).
    Jump(u32),
    Lock(u32),
    LockSpin {
        mutex: u32,
        spin: Dist,
    },
    Unlock(u32),
    Kspin {
        lock: u32,
        hold: Dist,
        dentry: DentryRef,
    },
    Barrier(u32),
    SpinBarrier {
        barrier: u32,
        spin: Dist,
    },
    ParsecBarrier {
        barrier: u32,
        spin: Dist,
    },
    CondWait {
        cond: u32,
        mutex: u32,
    },
    CondSignal(u32),
    CondBroadcast(u32),
    SemPost(u32),
    SemWait(u32),
    SemSpinWait {
        sem: u32,
        spin: Dist,
    },
    RwRead(u32),
    RwWrite(u32),
    RwUnlock(u32),
    RwSpin {
        lock: u32,
        write: bool,
        spin: Dist,
    },
    Yield,
    /// Boxed: a set of up to 1,024 vCPUs is 128 bytes, the other instructions a few.
    Cpuset(Box<crate::host::cpumask::CpuMask>),
    Push(u32),
    Pop(u32),
    TlbShootdown,
    NetRecv(u32),
    Io(Dist),
    /// Group commit on a log: check, and flush (falling through into the flush's body)
    /// or sleep; covered, go on at `exit`. The target flush is kept in loop slot `slot`.
    GroupFlush {
        flusher: u32,
        slot: u16,
        exit: u32,
    },
    /// The flush's device write (after its body).
    FlushIo(u32),
    Exit,
    /// Gleaner's yielding thread: one round of its sched_yield loop (guest/gleaner.rs);
    /// built by the guest, not written in scenarios.
    Retain,
}

/// Names of a workload's synchronization objects; an instruction refers to an object
/// by its index here (local to the VM).
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    pub spinlocks: Vec<String>,
    pub mutexes: Vec<String>,
    pub barriers: Vec<String>,
    pub conds: Vec<String>,
    pub queues: Vec<String>,
    pub sems: Vec<String>,
    pub rwsems: Vec<String>,
    /// Which of `spinlocks` are rwlock_t taken for writing (`KspinSpec::rwlock`).
    pub rwlock: Vec<bool>,
    /// Which of `barriers` are PARSEC barriers (`OpSpec::ParsecBarrier`).
    pub parsec_barrier: Vec<bool>,
    /// The mutexes taken with `lock_spin` and whether they wake every sleeper on
    /// release (`LockSpinSpec::wake_all`).
    pub mutex_wake_all: Vec<(u32, bool)>,
    /// What each of `rwsems` is: a kernel rw-semaphore, a user read-write lock
    /// (`rw_spin_read`/`rw_spin_write`, InnoDB's rw_lock_t) or a kernel mutex
    /// (`kmutex_lock`; None: only released with `rw_unlock` so far in the program text).
    pub rw_kind: Vec<Option<RwKind>>,
    /// Group-commit logs (`OpSpec::GroupFlush`) and their flush time.
    pub flushers: Vec<String>,
    pub flusher_io: Vec<Dist>,
    /// Work dispensers (`OpSpec::Dispense`) and their tickets per episode.
    pub dispensers: Vec<String>,
    pub dispenser_tickets: Vec<u64>,
}

/// Interns barrier `name` as a PARSEC barrier or a futex/spin barrier; a name is one or
/// the other.
fn intern_barrier(syms: &mut Symbols, name: &str, parsec: bool) -> Result<u32, String> {
    let b = intern(&mut syms.barriers, name);
    let i = b as usize;
    if i == syms.parsec_barrier.len() {
        syms.parsec_barrier.push(parsec);
    } else if syms.parsec_barrier[i] != parsec {
        return Err(format!(
            "barrier {name:?} is used both as a parsec_barrier and as a barrier or \
             spin_barrier; a barrier is one or the other"
        ));
    }
    Ok(b)
}

/// The sleeping locks that share the read-write semaphore's machinery (guest/sync.rs
/// `RwSem`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RwKind {
    /// A kernel rw-semaphore (`rw_read` / `rw_write`).
    Rwsem,
    /// A user read-write lock that spins, then sleeps (`rw_spin_read` / `rw_spin_write`).
    User,
    /// A kernel mutex (`kmutex_lock` / `kmutex_unlock`): a semaphore with writers only.
    KernelMutex,
    /// A file mapping's i_mmap lock (`i_mmap_lock_write` / `i_mmap_unlock_write`): a
    /// kernel mutex or an rw-semaphore by the guest's kernel (`guest.i_mmap_rwsem`).
    IMmap,
    /// An inode's lock (`inode_lock` / `inode_unlock`): a kernel mutex or an
    /// rw-semaphore by the guest's kernel (`guest.i_rwsem`).
    Inode,
}

impl RwKind {
    /// The lock kind of a writer-only sleeping-lock op (`kmutex_*`, `i_mmap_*`,
    /// `inode_*`); a kernel mutex for any other op (not called for them).
    fn of_writer_op(op: &OpSpec) -> RwKind {
        match op {
            OpSpec::IMmapLockWrite(_) | OpSpec::IMmapUnlockWrite(_) => RwKind::IMmap,
            OpSpec::InodeLock(_) | OpSpec::InodeUnlock(_) => RwKind::Inode,
            _ => RwKind::KernelMutex,
        }
    }

    fn ops(self) -> &'static str {
        match self {
            RwKind::Rwsem => "rw_read/rw_write (a kernel rw-semaphore)",
            RwKind::User => "rw_spin_read/rw_spin_write (a user lock)",
            RwKind::KernelMutex => "kmutex_lock/kmutex_unlock (a kernel mutex)",
            RwKind::IMmap => "i_mmap_lock_write/i_mmap_unlock_write (a mapping's i_mmap lock)",
            RwKind::Inode => "inode_lock/inode_unlock (an inode's lock)",
        }
    }
}

/// Interns lock `name` as a kernel rw-semaphore, a user read-write lock (InnoDB's
/// rw_lock_t) or a kernel mutex; a name is one of them.
fn intern_rw(syms: &mut Symbols, name: &str, kind: RwKind) -> Result<u32, String> {
    let s = intern(&mut syms.rwsems, name);
    let i = s as usize;
    if i >= syms.rw_kind.len() {
        syms.rw_kind.resize(i + 1, None);
    }
    let had = *syms.rw_kind[i].get_or_insert(kind);
    if had != kind {
        return Err(format!(
            "lock {name:?} is taken both with {} and with {}; a lock is one or the other",
            had.ops(),
            kind.ops()
        ));
    }
    Ok(s)
}

fn intern(v: &mut Vec<String>, name: &str) -> u32 {
    match v.iter().position(|n| n == name) {
        Some(i) => i as u32,
        None => {
            v.push(name.to_string());
            (v.len() - 1) as u32
        }
    }
}

impl Instr {
    /// True when the instruction always takes simulated time (or always blocks): a
    /// `forever` loop needs one, else its thread spins at one instant for ever.
    pub fn takes_time(&self) -> bool {
        matches!(
            self,
            Instr::Compute(_)
                | Instr::Kernel(_)
                | Instr::Sleep(_)
                | Instr::Io(_)
                | Instr::FlushIo(_)
                | Instr::Kspin { .. }
                | Instr::CondWait { .. }
                | Instr::TlbShootdown
        )
    }
}

impl Program {
    /// The barriers this program waits at.
    pub fn barriers_used(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .code
            .iter()
            .filter_map(|i| match i {
                Instr::Barrier(b) => Some(*b),
                Instr::SpinBarrier { barrier, .. } | Instr::ParsecBarrier { barrier, .. } => {
                    Some(*barrier)
                }
                _ => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[derive(Clone, Debug)]
pub struct Program {
    pub code: Vec<Instr>,
    pub loop_slots: u16,
    /// True when the program can run for ever (a `forever` loop is reachable).
    pub forever: bool,
}

impl Program {
    pub fn compile(ops: &[OpSpec]) -> Result<Program, String> {
        Program::compile_with(ops, &mut Symbols::default())
    }

    pub fn compile_with(ops: &[OpSpec], syms: &mut Symbols) -> Result<Program, String> {
        let mut p = Program {
            code: Vec::new(),
            loop_slots: 0,
            forever: false,
        };
        p.emit(ops, syms)?;
        p.code.push(Instr::Exit);
        Ok(p)
    }

    fn emit(&mut self, ops: &[OpSpec], syms: &mut Symbols) -> Result<(), String> {
        for op in ops {
            match op {
                OpSpec::Compute(d) => self.code.push(Instr::Compute(d.clone())),
                OpSpec::Kernel(d) => self.code.push(Instr::Kernel(d.clone())),
                OpSpec::Sleep(d) => self.code.push(Instr::Sleep(d.clone())),
                OpSpec::Count(n) => self.code.push(Instr::Count(*n)),
                OpSpec::Lock(m) => self.code.push(Instr::Lock(intern(&mut syms.mutexes, m))),
                OpSpec::LockSpin(l) => {
                    let mutex = intern(&mut syms.mutexes, &l.mutex);
                    match syms.mutex_wake_all.iter().find(|(m, _)| *m == mutex) {
                        None => syms.mutex_wake_all.push((mutex, l.wake_all)),
                        Some(&(_, w)) if w != l.wake_all => {
                            return Err(format!(
                                "mutex {:?} is taken with lock_spin both with wake_all = true \
                                 and without; a mutex wakes one sleeper or all of them",
                                l.mutex
                            ))
                        }
                        Some(_) => {}
                    }
                    self.code.push(Instr::LockSpin {
                        mutex,
                        spin: l.spin.clone(),
                    })
                }
                OpSpec::Unlock(m) => self.code.push(Instr::Unlock(intern(&mut syms.mutexes, m))),
                OpSpec::Kspin(k) => {
                    let lock = intern(&mut syms.spinlocks, &k.lock);
                    let i = lock as usize;
                    if i == syms.rwlock.len() {
                        syms.rwlock.push(k.rwlock);
                    } else if syms.rwlock[i] != k.rwlock {
                        return Err(format!(
                            "kernel lock {:?} is taken both as an rwlock (rwlock = true) and \
                             as a spinlock; a lock is one or the other",
                            k.lock
                        ));
                    }
                    self.code.push(Instr::Kspin {
                        lock,
                        hold: k.hold.clone(),
                        dentry: k.dentry,
                    })
                }
                OpSpec::Barrier(b) => self
                    .code
                    .push(Instr::Barrier(intern_barrier(syms, b, false)?)),
                OpSpec::SpinBarrier(b) => self.code.push(Instr::SpinBarrier {
                    barrier: intern_barrier(syms, &b.name, false)?,
                    spin: b.spin.clone(),
                }),
                OpSpec::ParsecBarrier(b) => self.code.push(Instr::ParsecBarrier {
                    barrier: intern_barrier(syms, &b.name, true)?,
                    spin: b.spin.clone(),
                }),
                OpSpec::CondWait(c) => self.code.push(Instr::CondWait {
                    cond: intern(&mut syms.conds, &c.cond),
                    mutex: intern(&mut syms.mutexes, &c.mutex),
                }),
                OpSpec::CondSignal(c) => self
                    .code
                    .push(Instr::CondSignal(intern(&mut syms.conds, c))),
                OpSpec::CondBroadcast(c) => self
                    .code
                    .push(Instr::CondBroadcast(intern(&mut syms.conds, c))),
                OpSpec::SemPost(s) => self.code.push(Instr::SemPost(intern(&mut syms.sems, s))),
                OpSpec::SemWait(s) => self.code.push(Instr::SemWait(intern(&mut syms.sems, s))),
                OpSpec::SemSpinWait(w) => self.code.push(Instr::SemSpinWait {
                    sem: intern(&mut syms.sems, &w.sem),
                    spin: w.spin.clone(),
                }),
                OpSpec::RwRead(s) => {
                    self.code
                        .push(Instr::RwRead(intern_rw(syms, s, RwKind::Rwsem)?))
                }
                OpSpec::RwWrite(s) => {
                    self.code
                        .push(Instr::RwWrite(intern_rw(syms, s, RwKind::Rwsem)?))
                }
                // The writer-only sleeping locks: taken for writing, released.
                OpSpec::KmutexLock(s) | OpSpec::IMmapLockWrite(s) | OpSpec::InodeLock(s) => {
                    let kind = RwKind::of_writer_op(op);
                    self.code.push(Instr::RwWrite(intern_rw(syms, s, kind)?))
                }
                OpSpec::KmutexUnlock(s) | OpSpec::IMmapUnlockWrite(s) | OpSpec::InodeUnlock(s) => {
                    let kind = RwKind::of_writer_op(op);
                    self.code.push(Instr::RwUnlock(intern_rw(syms, s, kind)?))
                }
                OpSpec::RwUnlock(s) => self.code.push(Instr::RwUnlock(intern(&mut syms.rwsems, s))),
                OpSpec::RwSpinRead(r) | OpSpec::RwSpinWrite(r) => self.code.push(Instr::RwSpin {
                    lock: intern_rw(syms, &r.lock, RwKind::User)?,
                    write: matches!(op, OpSpec::RwSpinWrite(_)),
                    spin: r.spin.clone(),
                }),
                OpSpec::Yield(_) => self.code.push(Instr::Yield),
                OpSpec::Cpuset(s) => {
                    // vCPUs the VM does not have are left out when it runs (a
                    // program is compiled once for every VM that runs it).
                    let m = crate::host::cpumask::CpuMask::parse_vcpus(
                        s,
                        crate::host::cpumask::MAX_PCPUS,
                    )
                    .map_err(|e| format!("cpuset: {e}"))?;
                    if m.is_empty() {
                        return Err(format!("cpuset {s:?} allows no vCPU"));
                    }
                    self.code.push(Instr::Cpuset(Box::new(m)))
                }
                OpSpec::Push(q) => self.code.push(Instr::Push(intern(&mut syms.queues, q))),
                OpSpec::Pop(q) => self.code.push(Instr::Pop(intern(&mut syms.queues, q))),
                OpSpec::TlbShootdown(_) => self.code.push(Instr::TlbShootdown),
                OpSpec::NetRecv(n) => self.code.push(Instr::NetRecv((*n).max(1))),
                OpSpec::Io(d) => self.code.push(Instr::Io(d.clone())),
                OpSpec::GroupFlush(g) => {
                    let f = intern(&mut syms.flushers, &g.name);
                    let i = f as usize;
                    if i == syms.flusher_io.len() {
                        syms.flusher_io.push(g.io.clone());
                    } else if syms.flusher_io[i] != g.io {
                        return Err(format!(
                            "group_flush {:?} is given two flush times; a log has one",
                            g.name
                        ));
                    }
                    if g.body.iter().any(OpSpec::holds_group_flush) {
                        return Err(format!(
                            "group_flush {:?}: its body holds another group_flush",
                            g.name
                        ));
                    }
                    let slot = self.loop_slots;
                    self.loop_slots = self.loop_slots.checked_add(1).ok_or("too many loops")?;
                    let at = self.code.len();
                    self.code.push(Instr::GroupFlush {
                        flusher: f,
                        slot,
                        exit: 0,
                    });
                    self.emit(&g.body, syms)?;
                    self.code.push(Instr::FlushIo(f));
                    let exit = self.code.len() as u32;
                    if let Instr::GroupFlush { exit: e, .. } = &mut self.code[at] {
                        *e = exit;
                    }
                }
                OpSpec::Dispense(d) => self.emit_dispense(d, syms)?,
                OpSpec::Loop(l) => {
                    let count = match &l.n {
                        LoopCount::Times(n) => Some(*n),
                        LoopCount::Forever(s) if s == "forever" => {
                            self.forever = true;
                            None
                        }
                        LoopCount::Forever(s) => {
                            return Err(format!(
                                "loop n = {s:?}: expected a whole number or \"forever\""
                            ));
                        }
                    };
                    if l.body.is_empty() {
                        return Err("loop body is empty".into());
                    }
                    let slot = self.loop_slots;
                    self.loop_slots = self.loop_slots.checked_add(1).ok_or("too many loops")?;
                    let start = self.code.len() as u32;
                    self.code.push(Instr::LoopStart {
                        slot,
                        count,
                        end: 0,
                    });
                    self.emit(&l.body, syms)?;
                    if count.is_none()
                        && !self.code[start as usize + 1..]
                            .iter()
                            .any(Instr::takes_time)
                    {
                        return Err("a loop with n = \"forever\" needs an op that takes simulated time in its body (compute, kernel, sleep, io, kspin, cond_wait or tlb_shootdown); without one it never ends".into());
                    }
                    self.code.push(Instr::LoopEnd { slot, start });
                    let end = self.code.len() as u32;
                    if let Instr::LoopStart { end: e, .. } = &mut self.code[start as usize] {
                        *e = end;
                    }
                }
            }
        }
        Ok(())
    }

    /// A dispenser loop:
    ///
    /// ```text
    ///     DispenseEnter
    /// s:  [Lock m, Compute hold]  DispenseTake -> e  [Unlock m]
    ///     body
    ///     Jump s
    /// e:  [Unlock m]
    /// ```
    fn emit_dispense(&mut self, d: &DispenseSpec, syms: &mut Symbols) -> Result<(), String> {
        if d.n == 0 {
            return Err(format!(
                "dispense {:?}: n = 0; a dispenser hands out at least one ticket",
                d.tickets
            ));
        }
        if d.body.is_empty() {
            return Err(format!("dispense {:?}: body is empty", d.tickets));
        }
        if d.body.iter().any(OpSpec::holds_dispense) {
            return Err(format!(
                "dispense {:?}: its body holds another dispense; a work item is not a pool",
                d.tickets
            ));
        }
        if d.hold.is_some() && d.mutex.is_none() {
            return Err(format!(
                "dispense {:?}: hold is the time the take holds its mutex; give mutex too",
                d.tickets
            ));
        }
        let disp = intern(&mut syms.dispensers, &d.tickets);
        let i = disp as usize;
        if i == syms.dispenser_tickets.len() {
            syms.dispenser_tickets.push(d.n);
        } else if syms.dispenser_tickets[i] != d.n {
            return Err(format!(
                "dispenser {:?} hands out n = {} tickets in one place and n = {} in another; \
                 a dispenser has one number of tickets",
                d.tickets, syms.dispenser_tickets[i], d.n
            ));
        }
        let mutex = d.mutex.as_ref().map(|m| intern(&mut syms.mutexes, m));
        let slot = self.loop_slots;
        self.loop_slots = self.loop_slots.checked_add(1).ok_or("too many loops")?;
        self.code.push(Instr::DispenseEnter {
            dispenser: disp,
            slot,
        });
        let start = self.code.len() as u32;
        if let Some(m) = mutex {
            self.code.push(Instr::Lock(m));
            if let Some(h) = &d.hold {
                self.code.push(Instr::Compute(h.clone()));
            }
        }
        let take = self.code.len();
        self.code.push(Instr::DispenseTake {
            dispenser: disp,
            slot,
            exit: 0,
        });
        if let Some(m) = mutex {
            self.code.push(Instr::Unlock(m));
        }
        self.emit(&d.body, syms)?;
        self.code.push(Instr::Jump(start));
        let exit = self.code.len() as u32;
        if let Some(m) = mutex {
            self.code.push(Instr::Unlock(m));
        }
        if let Instr::DispenseTake { exit: e, .. } = &mut self.code[take] {
            *e = exit;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn compiles_nested_loops() {
        let ops: Vec<OpSpec> = toml::from_str::<toml::Table>(
            r#"ops = [{loop = {n = 3, body = [{compute = "1us"}, {loop = {n = "forever", body = [{sleep = "1ns"}]}}]}}]"#,
        )
        .unwrap()["ops"]
            .clone()
            .try_into()
            .unwrap();
        let p = Program::compile(&ops).unwrap();
        assert_eq!(p.loop_slots, 2);
        assert!(p.forever);
        assert!(matches!(p.code[0], Instr::LoopStart { end: 6, .. }));
        assert!(matches!(p.code.last(), Some(Instr::Exit)));
    }
}
