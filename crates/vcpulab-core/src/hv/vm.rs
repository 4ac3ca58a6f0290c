//! Virtual machines: their vCPUs, guest settings and per-VM measurements.

use crate::host::cpumask::CpuMask;
use crate::metrics::Hist;
use crate::sim::Nanos;
use std::sync::Arc;

/// Guest kernel settings of one VM, in nanoseconds. VMs with the same settings share
/// one record (`Vm::guest`).
#[derive(Clone, Debug, PartialEq)]
pub struct GuestParams {
    pub idle_poll: bool,
    /// The guest runs EEVDF (guest/eevdf.rs) rather than CFS.
    pub eevdf: bool,
    /// EEVDF: the base slice scaled for the VM's vCPUs, and the tick period.
    pub base_slice: u64,
    pub tick: u64,
    pub preemption: crate::scenario::PreemptionModel,
    pub latency: u64,
    pub min_gran: u64,
    pub wakeup_gran: u64,
    pub timer_slack: u64,
    pub pv_spin: u64,
    pub mutex_spin: u64,
    pub ipi_under_lock: bool,
    pub pv_tlb_flush: bool,
    /// Shootdowns skip vCPUs in lazy TLB mode (Linux 4.19+).
    pub tlb_skip_lazy: bool,
    /// KVM PV EOI: no EOI exit.
    pub pv_eoi: bool,
    /// vcpu_is_preempted(): a preempted vCPU is not an idle wake-up target.
    pub vcpu_is_preempted: bool,
    /// When a cross-vCPU wake-up sends an IPI (guest/ipi.rs `send_wake`).
    pub wake_ipi: crate::scenario::WakeIpi,
    /// TTWU_QUEUE: remote wake-ups that the rule above sends behind an IPI wait on the
    /// target's wake list (guest/ipi.rs `uses_wake_list`).
    pub ttwu_queue: bool,
    /// Linux 6.0+: a same-cache wake-up onto an idle vCPU uses its wake list as well.
    pub wake_list_idle: bool,
    /// Writers' optimistic spinning on read-write semaphores (guest/sync.rs).
    pub rwsem_spin: crate::scenario::RwsemSpin,
    /// Read-write semaphores steal and hand off as Linux 5.11+ (guest/sync.rs).
    pub rwsem_steal: bool,
    /// The kernel mutex hands itself to its first waiter (Linux 4.10+; guest/sync.rs).
    pub mutex_handoff: bool,
    /// The kernel mutex's spinners queue on an OSQ (Linux 3.15+; guest/sync.rs).
    pub mutex_osq: bool,
    /// Which dentry reference-count sections take no lock (`DentryRef::lockless_mask`:
    /// lockref, Linux 3.12+, and fast_dput, 4.0+).
    pub dentry_lockless: u8,
    /// A condition variable's broadcast requeues its waiters onto the mutex (glibc
    /// before 2.25; guest/sync.rs).
    pub cond_requeue: bool,
    /// Guest haltpoll: maximum and starting poll (0: not used).
    pub haltpoll_max: u64,
    pub haltpoll_start: u64,
    pub load_balance: bool,
    /// The guest kernel's affine wake-up rule (guest/ipi.rs `select_wake_vcpu`).
    pub wake_affine: crate::hv::sched::wake_affine::WakeAffine,
    /// Each vCPU is its own last-level cache domain (`guest.topology =
    /// "socket-per-vcpu"`; guest/ipi.rs).
    pub llc_per_vcpu: bool,
}

/// Fields in declaration order (`repr(C)`), on cache-line boundaries (`align(64)`):
/// what every step reads comes first (the shared settings' handles, the object bases,
/// the vCPU range and queue count), then the counters, the histograms, and what only the
/// report reads.
///
/// The guest settings and the cache profile are shared by every VM that has the same
/// ones (a `count = 1024` table's VMs have one copy): read at nearly every step, they
/// stay in the cache however many VMs the host runs, where a copy per VM was two cold
/// lines per step on a host of a thousand VMs.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Vm {
    // Line 1: what every step reads.
    pub guest: Arc<GuestParams>,
    /// The cache model's parameters for this VM's contexts (host/cache.rs).
    pub cache: Arc<crate::host::cache::CacheProfile>,
    /// Where the VM's synchronization objects start in the global arenas.
    pub bases: crate::guest::kernel::ObjBases,
    pub first_vcpu: u32,
    pub nvcpus: u32,
    /// Index (within the VM) of the vCPU last boosted by a directed yield.
    pub last_boosted: u16,
    /// Where the guest kernel's ticks fall: at this phase (µs) plus multiples of its
    /// period (`World::guest_tick_after`). Each kernel booted at its own time, so each
    /// VM's grid has its own phase (drawn from the seed), against the host's and the
    /// other VMs'.
    pub tick_phase_us: u16,
    /// Threads queued on the VM's vCPU runqueues (not running).
    pub queued: u32,
    pub weight: u32,
    // Line 2: newidle balancing's gates (guest/runqueue.rs `guest_pick`), read at every
    // idle entry, and counters.
    pub balance: crate::guest::balance::GuestBalance,
    pub units: u64,
    /// futex system calls of the VM's threads (waits and wakes; guest/sync.rs).
    pub futex_calls: u64,
    pub ple_exits: u64,
    // Line 3: what a guest context switch and an idle entry or exit touch.
    /// Guest context switches (guest/kernel.rs become_current).
    pub thread_switches: u64,
    /// Gleaner's yielding threads and consolidation controller, when enabled: in this
    /// line because every guest context switch asks whether there are any, beside the
    /// switch counter it increments.
    pub gleaner: Option<Box<crate::guest::gleaner::GleanerVm>>,
    /// Exits of the wake path (hv/wake_path.rs): ICR writes, interrupt deliveries to
    /// running vCPUs, EOI writes, timer (TSC-deadline) writes (at every idle entry and
    /// exit, hence this line).
    pub exits: crate::hv::wake_path::ApicExits,
    // Counters of rarer events.
    pub yields_ok: u64,
    pub yields_failed: u64,
    pub halt_poll_hits: u64,
    pub halt_poll_misses: u64,
    pub tlb_shootdowns: u64,
    /// Thread wake-ups the guest aimed at the waking vCPU (its wake_affine).
    pub guest_affine_wakes: u64,
    /// Scheduling latency: from runnable to dispatched, per dispatch.
    pub dispatch_wait: Hist,
    /// Wake-up latency by path (guest::ipi::PATH_*); the VM's wake-up latency is their
    /// merge (`wake_latency`), not recorded twice: on hosts of many VMs every recorded
    /// sample is a cache miss.
    pub wake_paths: [Hist; 5],
    pub ipi_resched: Hist,
    pub ipi_tlb: Hist,
    pub tlb_wait: Hist,
    pub irq_latency: Hist,
    pub name: String,
    /// Its NIC's index in `World::nics`, if it receives datagrams.
    pub nic: Option<u32>,
    /// The NUMA node its memory is bound to, and its vCPUs' work speed away from it
    /// (host/numa.rs, host/speed.rs; `speed::ONE` when not bound).
    pub mem_node: Option<u32>,
    pub remote_speed: u64,
    /// Where the VM's work dispensers start in `World::dispensers` (apart from `bases`:
    /// rarely used, and kept out of the line the interpreter reads).
    pub dispenser_base: u32,
    /// Where its group-commit logs start in `World::flushers`.
    pub flusher_base: u32,
    pub cap: Option<f64>,
    pub model: String,
    pub footprint_kib: u64,
    /// Threads with finite programs, and how many of them have finished.
    pub finite_threads: u32,
    pub finished_threads: u32,
    pub completion: Option<Nanos>,
    /// The workload's cpuset: bit i allows the VM's vCPU i.
    pub cpuset: CpuMask,
}

impl Vm {
    /// The VM's wake-up latency over every path.
    pub fn wake_latency(&self) -> Hist {
        let mut all = Hist::default();
        for h in &self.wake_paths {
            all.merge(h);
        }
        all
    }
}
