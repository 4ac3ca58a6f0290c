//! Building a `World` from a scenario, per subsystem: the guest's synchronization objects
//! in their global arenas (each VM's offsets computed here, in one place), a VM's guest
//! parameters, its cpuset and its threads. `World::new` (sim/world.rs) puts them
//! together with the host's parts.

use super::rng::Stream;
use super::{Nanos, Rng, ThreadId, VcpuId, VmId};
use crate::guest::kernel::ObjBases;
use crate::guest::spinlock::{LockClass, LockClassKind, SpinLock};
use crate::guest::sync::{Barrier, Cond, Dispenser, Flusher, Mutex, OsEvent, Queue, RwSem, Sem};
use crate::guest::thread::Thread;
use crate::host::cpumask::CpuMask;
use crate::hv::vm::GuestParams;
use crate::scenario::{GuestConfig, GuestScheduler, IdleMode, ScenarioError, SpinlockKind};
use crate::sim::LockId;
use crate::workload::program::RwKind;
use crate::workload::BuiltWorkload;
use std::collections::HashMap;

fn ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

fn us(us: f64) -> u64 {
    (us * 1e3).round() as u64
}

/// The guest's synchronization objects of every VM, in global arenas.
#[derive(Default)]
pub(crate) struct SyncArenas {
    pub locks: Vec<SpinLock>,
    pub lock_classes: Vec<LockClass>,
    pub mutexes: Vec<Mutex>,
    pub barriers: Vec<Barrier>,
    pub conds: Vec<Cond>,
    pub queues: Vec<Queue>,
    pub sems: Vec<Sem>,
    pub rwsems: Vec<RwSem>,
    pub dispensers: Vec<Dispenser>,
    pub flushers: Vec<Flusher>,
}

/// The statistics class of a user mutex named `name`: its name without a trailing
/// index (`bucket17` and `bucket3` are both `bucket`), so that a family of mutexes
/// reports as one lock.
fn mutex_class_name(name: &str) -> &str {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let trimmed = trimmed.trim_end_matches(['-', '_', '.', '[', ']', '#']);
    if trimmed.is_empty() {
        name
    } else {
        trimmed
    }
}

/// A VM's futex hash table (kernel/futex.c `futex_hash`): each futex object's bucket
/// lock is the one its address hashes to among `size` buckets. The addresses are the
/// heap's (randomized per run), so each object's bucket is a draw from the VM's seeded
/// stream; objects drawing the same bucket share its lock. Buckets are created when
/// first drawn.
struct FutexTable {
    class: u32,
    kind: SpinlockKind,
    size: u64,
    rng: Rng,
    slots: HashMap<u64, LockId>,
}

impl SyncArenas {
    fn new_lock(&mut self, kind: SpinlockKind, class: u32) -> LockId {
        self.locks.push(SpinLock::new(kind, class));
        LockId((self.locks.len() - 1) as u32)
    }

    fn new_class(&mut self, vm: VmId, name: String, kind: LockClassKind) -> u32 {
        let mut c = LockClass::new(vm, name);
        c.kind = kind;
        self.lock_classes.push(c);
        (self.lock_classes.len() - 1) as u32
    }

    /// The futex hash bucket of the next futex object of table `ft` (created on first
    /// use).
    fn futex_bucket(&mut self, ft: &mut FutexTable) -> LockId {
        let i = ft.rng.below(ft.size);
        if let Some(&l) = ft.slots.get(&i) {
            return l;
        }
        let l = self.new_lock(ft.kind, ft.class);
        ft.slots.insert(i, l);
        l
    }

    fn new_mutex(&mut self, ft: &mut FutexTable, class: u32) -> u32 {
        let bucket = self.futex_bucket(ft);
        self.mutexes.push(Mutex {
            holder: None,
            spinners: 0,
            waiters: Default::default(),
            bucket,
            class,
            acquired_at: Nanos::ZERO,
            wake_all: false,
            event: None,
            word_contended: false,
        });
        self.mutexes.len() as u32 - 1
    }

    /// A condition variable; with `lock_class` (`guest.cond_lock`, glibc before 2.25)
    /// its internal lock too, a user mutex of that statistics class.
    fn new_cond(&mut self, ft: &mut FutexTable, lock_class: Option<u32>) -> u32 {
        let bucket = self.futex_bucket(ft);
        let lock = lock_class.map_or(u32::MAX, |c| self.new_mutex(ft, c));
        self.conds.push(Cond {
            waiters: Default::default(),
            bucket,
            mutex: u32::MAX,
            lock,
        });
        self.conds.len() as u32 - 1
    }

    /// Adds VM `vm`'s objects (its workload's symbols; kernel spinlocks of `kind`, rwlocks
    /// as `queued_rwlocks` says) and returns where they start in each arena. `seed` and
    /// the VM's `vcpus` place its futex objects in the guest's futex hash table.
    pub fn add_vm(
        &mut self,
        vm: VmId,
        g: &GuestConfig,
        w: &BuiltWorkload,
        seed: u64,
        vcpus: u32,
    ) -> ObjBases {
        let (kind, queued_rwlocks) = (g.spinlock, g.queued_rwlocks);
        let spin = self.locks.len() as u32;
        for (i, name) in w.symbols.spinlocks.iter().enumerate() {
            let c = self.new_class(vm, name.clone(), LockClassKind::Spinlock);
            // An rwlock_t's writer before queued rwlocks (Linux 3.16, x86): the
            // unfair spin of arch/x86/lib/rwlock.S __write_lock_failed.
            let rwlock = w.symbols.rwlock.get(i).copied().unwrap_or(false);
            let k = if rwlock && !queued_rwlocks {
                SpinlockKind::Tas
            } else {
                kind
            };
            self.new_lock(k, c);
        }
        let futex_class = self.new_class(vm, "futex-bucket".into(), LockClassKind::Spinlock);
        let mut ft = FutexTable {
            class: futex_class,
            kind,
            size: if g.futex_hash_buckets == 0 {
                (256 * u64::from(vcpus.max(1))).next_power_of_two()
            } else {
                u64::from(g.futex_hash_buckets)
            },
            rng: Rng::stream(seed, Stream::Futex, u64::from(vm.0)),
            slots: HashMap::new(),
        };
        // Each read-write semaphore's wait_lock is a kernel spinlock class of its own.
        let rw_classes: Vec<u32> = w
            .symbols
            .rwsems
            .iter()
            .map(|n| self.new_class(vm, format!("{n}.wait_lock"), LockClassKind::Spinlock))
            .collect();
        // User mutexes: one statistics class per name (hash-bucket mutexes of one name
        // share it); queue mutexes are the class "queue".
        let mut user_classes: HashMap<String, u32> = HashMap::new();
        let mut user_class = |arenas: &mut SyncArenas, name: &str| -> u32 {
            *user_classes
                .entry(name.to_string())
                .or_insert_with(|| arenas.new_class(vm, name.to_string(), LockClassKind::UserMutex))
        };
        let mutex = self.mutexes.len() as u32;
        let mutex_classes: Vec<u32> = w
            .symbols
            .mutexes
            .iter()
            .map(|name| user_class(self, mutex_class_name(name)))
            .collect();
        for class in mutex_classes {
            self.new_mutex(&mut ft, class);
        }
        for &(m, wake_all) in &w.symbols.mutex_wake_all {
            self.mutexes[(mutex + m) as usize].wake_all = wake_all;
        }
        let barrier = self.barriers.len() as u32;
        for (bi, name) in w.symbols.barriers.iter().enumerate() {
            let bucket = self.futex_bucket(&mut ft);
            // A PARSEC barrier has a mutex (reported as the class `NAME.mutex`) and a
            // condition variable of its own.
            let parsec = if w.symbols.parsec_barrier.get(bi).copied().unwrap_or(false) {
                let class = user_class(self, &format!("{name}.mutex"));
                let m = self.new_mutex(&mut ft, class);
                let lock = g
                    .cond_lock
                    .then(|| user_class(self, &format!("{name}.cond_lock")));
                Some((m, self.new_cond(&mut ft, lock)))
            } else {
                None
            };
            // A futex barrier is pthread_barrier_wait: before glibc 2.25 it has an
            // internal lock (reported as the class `NAME.lock`). Spin-then-block
            // barriers (libgomp's) use the same record and never take it.
            let lock = if parsec.is_none() && g.barrier_lock {
                let class = user_class(self, &format!("{name}.lock"));
                self.new_mutex(&mut ft, class)
            } else {
                u32::MAX
            };
            self.barriers.push(Barrier {
                spinners: 0,
                parties: w.barrier_parties[bi].max(1),
                arrived: 0,
                gen: 0,
                waiters: Vec::new(),
                bucket,
                parsec,
                departing: false,
                lock,
                leaving: 0,
            });
        }
        let cond = self.conds.len() as u32;
        for name in &w.symbols.conds {
            let lock = g
                .cond_lock
                .then(|| user_class(self, &format!("{name}.cond_lock")));
            self.new_cond(&mut ft, lock);
        }
        let queue = self.queues.len() as u32;
        let queue_class = if w.symbols.queues.is_empty() {
            0
        } else {
            user_class(self, "queue")
        };
        for _ in &w.symbols.queues {
            // A pipeline queue: a mutex and two condition variables of its own.
            let m = self.new_mutex(&mut ft, queue_class);
            let lock = g.cond_lock.then(|| user_class(self, "queue.cond_lock"));
            let not_full = self.new_cond(&mut ft, lock);
            let not_empty = self.new_cond(&mut ft, lock);
            self.queues.push(Queue {
                items: 0,
                cap: w.queue_capacity,
                mutex: m,
                not_full,
                not_empty,
            });
        }
        let sem = self.sems.len() as u32;
        for _ in &w.symbols.sems {
            let bucket = self.futex_bucket(&mut ft);
            self.sems.push(Sem {
                count: 0,
                waiters: Default::default(),
                bucket,
                spinners: 0,
            });
        }
        let rwsem = self.rwsems.len() as u32;
        for (ri, c) in rw_classes.into_iter().enumerate() {
            let wait_lock = self.new_lock(kind, c);
            let rw_kind = w.symbols.rw_kind.get(ri).copied().flatten();
            let user = rw_kind == Some(RwKind::User);
            // The file locks that kernels turned from mutexes into rw-semaphores are
            // one or the other by the guest's kernel.
            let mutex = match rw_kind {
                Some(RwKind::KernelMutex) => true,
                Some(RwKind::IMmap) => !g.i_mmap_rwsem,
                Some(RwKind::Inode) => !g.i_rwsem,
                Some(RwKind::Rwsem | RwKind::User) | None => false,
            };
            let class_kind = if user {
                LockClassKind::UserRwlock
            } else if mutex {
                LockClassKind::KernelMutex
            } else {
                LockClassKind::Rwsem
            };
            let class = self.new_class(vm, w.symbols.rwsems[ri].clone(), class_kind);
            self.rwsems.push(RwSem {
                readers: 0,
                writer: None,
                waiters: Default::default(),
                wait_lock,
                spinners: 0,
                rspin_deadline: Nanos::MAX,
                nonspinnable: false,
                handoff: false,
                handoff_to: None,
                osq: Default::default(),
                woken: None,
                user,
                event: None,
                mutex,
                class,
                acquired_at: Nanos::ZERO,
            });
        }
        for io in &w.symbols.flusher_io {
            let bucket = self.futex_bucket(&mut ft);
            self.flushers.push(Flusher {
                flushing: false,
                started: 0,
                done: 0,
                waiters: Vec::new(),
                bucket,
                io: io.clone(),
            });
        }
        for &tickets in &w.symbols.dispenser_tickets {
            self.dispensers.push(Dispenser {
                episode: 0,
                taken: 0,
                tickets,
            });
        }
        // InnoDB locks' events (last: the other objects' hash buckets are drawn as
        // before): a default mutex and a condition variable each, reported as the
        // classes `NAME.event_mutex` and, with glibc's internal lock, `NAME.event_cond_lock`.
        let mut new_event = |arenas: &mut SyncArenas, name: &str| {
            let class = user_class(arenas, &format!("{name}.event_mutex"));
            let em = arenas.new_mutex(&mut ft, class);
            let lock = g
                .cond_lock
                .then(|| user_class(arenas, &format!("{name}.event_cond_lock")));
            let ec = arenas.new_cond(&mut ft, lock);
            Some(OsEvent {
                mutex: em,
                cond: ec,
                is_set: false,
                signal_count: 0,
                waiters: false,
            })
        };
        for &(m, wake_all) in &w.symbols.mutex_wake_all {
            if wake_all {
                let name = mutex_class_name(&w.symbols.mutexes[m as usize]).to_string();
                self.mutexes[(mutex + m) as usize].event = new_event(self, &name);
            }
        }
        for (ri, name) in w.symbols.rwsems.iter().enumerate() {
            if self.rwsems[rwsem as usize + ri].user {
                self.rwsems[rwsem as usize + ri].event = new_event(self, name);
            }
        }
        ObjBases {
            spin,
            mutex,
            barrier,
            cond,
            queue,
            sem,
            rwsem,
        }
    }
}

/// The cpuset of VM `vi` (`guest.cpuset`) as a mask of its vCPUs (all when absent).
pub(crate) fn vm_cpuset(vi: usize, g: &GuestConfig, vcpus: u32) -> Result<CpuMask, ScenarioError> {
    let Some(c) = &g.cpuset else {
        return Ok(CpuMask::all(vcpus));
    };
    CpuMask::parse_vcpus(c, vcpus)
        .map_err(|m| ScenarioError::new(format!("vm.{vi}.guest.cpuset"), m))
}

/// A guest CFS tunable in ns: the scenario gives the kernel's normalized value (one
/// CPU: latency 6 ms, minimum granularity 0.75 ms, wake-up granularity 1 ms), which the
/// guest kernel scales by 1 + ilog2(min(vCPUs, 8)) for its CPUs (kernel/sched/fair.c
/// `update_sysctl`, SCHED_TUNABLESCALING_LOG, the default), as it does EEVDF's base
/// slice.
pub(crate) fn guest_cfs_tunable(ms: f64, vcpus: u32) -> u64 {
    ns(ms) * crate::hv::sched::eevdf::slice_factor(vcpus)
}

/// A VM's guest-kernel settings, in nanoseconds.
pub(crate) fn guest_params(g: &GuestConfig, vcpus: u32) -> GuestParams {
    GuestParams {
        idle_poll: g.idle == IdleMode::Poll,
        eevdf: g.scheduler == GuestScheduler::Eevdf,
        base_slice: crate::guest::eevdf::scaled_base_slice(ns(g.base_slice_ms), vcpus),
        tick: (1e9 / g.tick_hz.max(1) as f64).round() as u64,
        preemption: g.preemption,
        latency: guest_cfs_tunable(g.latency_ms, vcpus),
        min_gran: guest_cfs_tunable(g.min_granularity_ms, vcpus),
        wakeup_gran: guest_cfs_tunable(g.wakeup_granularity_ms, vcpus),
        timer_slack: us(g.timer_slack_us),
        pv_spin: if g.spinlock.is_pv() {
            us(g.pv_spin_us)
        } else {
            0
        },
        mutex_spin: us(g.mutex_spin_us),
        ipi_under_lock: g.ipi_under_lock,
        pv_tlb_flush: g.pv_tlb_flush,
        tlb_skip_lazy: g.tlb_skip_lazy,
        pv_eoi: g.pv_eoi,
        vcpu_is_preempted: g.vcpu_is_preempted,
        rwsem_spin: g.rwsem_spin,
        rwsem_steal: g.rwsem_steal,
        mutex_handoff: g.mutex_handoff,
        mutex_osq: g.mutex_osq,
        dentry_lockless: crate::workload::program::DentryRef::lockless_mask(g.lockref, g.fast_dput),
        cond_requeue: g.cond_requeue,
        wake_ipi: g.wake_ipi,
        ttwu_queue: g.ttwu_queue,
        wake_list_idle: g.wake_list_idle,
        haltpoll_max: if g.idle == IdleMode::Haltpoll {
            us(g.haltpoll_max_us)
        } else {
            0
        },
        haltpoll_start: us(g.haltpoll_start_us),
        load_balance: g.load_balance,
        wake_affine: g.wake_affine,
        llc_per_vcpu: g.topology == crate::scenario::GuestTopology::SocketPerVcpu,
    }
}

/// The workload's threads of VM `vi` (`vm`, vCPUs from `first`), spread round-robin over
/// the vCPUs of its cpuset, appended to `threads`; returns how many of them finish
/// (are not `forever`) and how many threads the VM has so far (for further streams).
pub(crate) fn vm_threads(
    threads: &mut Vec<Thread>,
    w: &BuiltWorkload,
    (vi, vm, first): (usize, VmId, u32),
    allowed: &[u32],
    seed: u64,
) -> (u32, u64) {
    let mut finite = 0;
    let mut t_in_vm = 0u64;
    for grp in &w.groups {
        for k in 0..grp.threads {
            let slot = allowed[(t_in_vm % allowed.len() as u64) as usize];
            finite += !grp.program.forever as u32;
            let mut th = Thread::new(
                vm,
                format!("{}{}", grp.name, k),
                grp.program.clone(),
                VcpuId(first + slot),
                Rng::stream(seed, Stream::Thread, ((vi as u64) << 32) | t_in_vm),
            );
            th.idle_prio = grp.idle_priority;
            th.process = grp.process_of(k);
            threads.push(th);
            t_in_vm += 1;
        }
    }
    (finite, t_in_vm)
}

/// The next thread's id.
pub(crate) fn next_thread(threads: &[Thread]) -> ThreadId {
    ThreadId(threads.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guest's CFS tunables scale with its vCPUs as update_sysctl scales them: 1, 2,
    /// 3 and 4 times the one-CPU values for 1, 2, 4 and 8+ CPUs.
    #[test]
    fn guest_cfs_tunables_scale_with_the_vcpus() {
        let g = GuestConfig::default();
        for (vcpus, factor) in [(1, 1), (2, 2), (3, 2), (4, 3), (8, 4), (16, 4), (288, 4)] {
            let p = guest_params(&g, vcpus);
            assert_eq!(p.latency, 6_000_000 * factor, "{vcpus} vCPUs");
            assert_eq!(p.min_gran, 750_000 * factor, "{vcpus} vCPUs");
            assert_eq!(p.wakeup_gran, 1_000_000 * factor, "{vcpus} vCPUs");
        }
    }
}
