//! Platform profiles: the host (hypervisor, its version, the CPU generation) and the
//! guest kernel a study ran, as data. `host.platform = "<name>"` and
//! `guest.kernel = "<name>"` (scenario-wide or per VM) fill the keys a profile sets
//! *under* the preset and the scenario: explicit scenario keys win over the preset, the
//! preset over the profile, the profile over the built-in defaults. A host profile names
//! the guest kernel its study ran, used where no `guest.kernel` is given.
//!
//! Every number's source is in docs/model.md ("Platform profiles").

use super::{PleCandidates, ScenarioError};
use toml::{Table, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hypervisor {
    Kvm,
    Xen,
}

/// An Intel CPU generation: its VM exit + entry round trip (a null hypercall, 95th
/// percentile, in TSC cycles) and a core's private caches.
#[derive(Debug)]
pub struct CpuGeneration {
    pub name: &'static str,
    pub exit_cycles: u64,
    /// Where `exit_cycles` comes from.
    pub source: &'static str,
    /// A core's L1 data cache plus its L2, KiB (`host.cache.private_kib`), as Intel's
    /// optimization reference manual lists them per microarchitecture.
    pub private_cache_kib: u64,
    /// What one core's contexts can hold (`host.cache.kib_per_pcpu`): its share of the
    /// last-level cache, plus its L2 where the LLC does not include it (Skylake-SP on).
    pub cache_kib_per_core: u64,
    /// Where `cache_kib_per_core` comes from.
    pub cache_source: &'static str,
}

pub const GENERATIONS: &[CpuGeneration] = &[
    CpuGeneration {
        name: "nehalem",
        exit_cycles: 4986,
        source: "published (95th percentile null hypercall)",
        private_cache_kib: 32 + 256,
        cache_kib_per_core: 2_048,
        cache_source: "Xeon 5500 (Nehalem-EP): 8 MiB inclusive L3 for 4 cores",
    },
    CpuGeneration {
        name: "westmere",
        exit_cycles: 1988,
        source: "published (95th percentile null hypercall)",
        private_cache_kib: 32 + 256,
        cache_kib_per_core: 2_048,
        cache_source: "Xeon 5600 (Westmere-EP): 12 MiB inclusive L3 for 6 cores",
    },
    CpuGeneration {
        name: "sandy-bridge",
        exit_cycles: 1736,
        source: "assumed: midway between the published Westmere (1988) and Haswell (1484)",
        private_cache_kib: 32 + 256,
        cache_kib_per_core: 2_560,
        cache_source: "Xeon E5-2665 (Sandy Bridge-EP): 20 MiB inclusive L3 for 8 cores",
    },
    CpuGeneration {
        name: "haswell",
        exit_cycles: 1484,
        source: "published (95th percentile null hypercall)",
        private_cache_kib: 32 + 256,
        cache_kib_per_core: 2_560,
        cache_source: "Xeon E5 v3 (Haswell-EP): 2.5 MiB of inclusive L3 per core",
    },
    CpuGeneration {
        name: "sapphire-rapids",
        exit_cycles: 1484,
        source:
            "assumed: Haswell's published 1484 (no later published figure of the same measurement)",
        private_cache_kib: 48 + 2048,
        cache_kib_per_core: 1_920 + 2_048,
        cache_source: "4th-generation Xeon Scalable (Sapphire Rapids): 1.875 MiB of non-inclusive L3 per core, plus the core's 2 MiB L2",
    },
];

pub fn generation(name: &str) -> Option<&'static CpuGeneration> {
    GENERATIONS.iter().find(|g| g.name == name)
}

/// A host: hypervisor, version, CPU.
#[derive(Debug)]
pub struct HostPlatform {
    pub name: &'static str,
    /// The study that ran on it.
    pub study: &'static str,
    pub hypervisor: Hypervisor,
    /// Host kernel (KVM) or Xen version.
    pub version: &'static str,
    pub cpu: &'static str,
    pub generation: &'static str,
    /// TSC (nominal) frequency: converts exit cycles to time and PLE windows (which
    /// count TSC cycles) to time.
    pub tsc_ghz: f64,
    /// APIC virtualization with posted interrupts (Intel APICv, Ivy Bridge-EP and later,
    /// KVM `enable_apicv`): no exit to deliver an interrupt to a running vCPU, no EOI
    /// exit. Without it every interrupt to a running vCPU forces an exit.
    pub apicv: bool,
    /// IPI virtualization (Intel IPIv, Sapphire Rapids; KVM `enable_ipiv`, Linux 5.19+):
    /// the sender's ICR write does not exit.
    pub ipiv: bool,
    /// KVM host halt polling (`halt_poll_ns`, Linux 4.0 and later; 200 us on x86).
    pub halt_poll: bool,
    /// KVM's PLE handler of Linux 5.3 and later: a preempted candidate with a pending
    /// interrupt counts as in-kernel (`host.ple.pending_irq_counts_as_kernel`).
    pub ple_pending_irq: bool,
    /// KVM: which vCPUs the PLE handler looks at (`host.ple.candidates`) and whether a
    /// kernel-mode spinner passes over user-mode candidates
    /// (`host.ple.yield_to_kernel_mode`, Linux 4.14+). Unused on Xen.
    pub ple_candidates: PleCandidates,
    pub ple_yield_to_kernel_mode: bool,
    /// KVM: the handler's dy_eligible alternation (`host.ple.dy_eligible`, Linux 3.7+).
    pub ple_dy_eligible: bool,
    /// KVM: yield_to's single-task answer ends the scan as a success
    /// (`host.ple.esrch_ends_scan`, Linux before 3.16).
    pub ple_esrch_ends_scan: bool,
    /// KVM (unused on Xen, whose pause filter is fixed): the PLE window grows on every
    /// exit and shrinks on every schedule-in
    /// (`host.ple.policy = "kvm"`; "KVM: VMX: dynamise PLE window", Linux 3.18); before
    /// that it is fixed at `ple_window` (4096 cycles, `host.ple.policy = "fixed"`).
    pub ple_window_grows: bool,
    /// Xen's scheduler rate limit (`sched_ratelimit_us`, Xen 4.2 and later; none in
    /// 4.1). `None` on KVM.
    pub xen_ratelimit_us: Option<f64>,
    /// Linux CFS hosts: whether a vCPU picked again at once keeps its slice's start
    /// (`host.scheduler.repick_keeps_slice`: from Linux 3.15); `None` elsewhere.
    pub cfs_repick_keeps_slice: Option<bool>,
    /// Linux hosts (CFS or EEVDF): the affine wake-up rule of the host kernel
    /// (`host.scheduler.wake_affine`, hv/sched/wake_affine.rs); `None` on Xen.
    pub linux_wake_affine: Option<&'static str>,
    /// Linux hosts: `host.scheduler.balance_busy_factor` (sd->busy_factor: 64 in
    /// 3.2-3.15, 32 in 3.16-5.9, 16 from 5.10); `None` on Xen.
    pub linux_busy_factor: Option<u32>,
    /// Linux CFS hosts: `host.scheduler.newidle_avg_idle_gate` (the newidle balance
    /// skipped while avg_idle < the migration cost, 2.6.35-5.15); `None` elsewhere.
    pub linux_newidle_gate: Option<bool>,
    /// Linux hosts: `host.scheduler.balance_interval` (the sched domains' intervals:
    /// "fixed" SD_*_INIT values in 3.2-3.15, "domain-weight" from 3.16); `None` on Xen.
    pub linux_balance_interval: Option<&'static str>,
    /// Linux hosts: `host.scheduler.newidle_doubles_interval` (a balanced newidle
    /// balance doubles the domain's interval, before 5.0); `None` on Xen.
    pub linux_newidle_doubles: Option<bool>,
    /// Linux CFS hosts: `host.scheduler.newidle_overload_gate` (no newidle balance
    /// while no runqueue is overloaded, 3.16+); `None` elsewhere.
    pub linux_overload_gate: Option<bool>,
    /// Linux CFS hosts: `host.scheduler.idle_keeps_busy_deadline` (3.2 and 3.9's
    /// idle_balance next_balance rule); `None` elsewhere.
    pub linux_idle_keeps_busy_deadline: Option<bool>,
    /// Xen credit's rate limit rule (`host.scheduler.ratelimit_rule`: "xen-4.2" before
    /// Xen 4.8, "xen-4.8" from it); `None` on KVM and on Xen 4.1, which has no limit.
    pub xen_ratelimit_rule: Option<&'static str>,
    /// The host scheduler the platform runs unless the preset or scenario chooses one.
    pub scheduler: &'static str,
    /// KVM: the host's CFS or EEVDF runs each VM as a task group
    /// (`host.scheduler.per_vm_groups`). `None` on Xen.
    pub per_vm_groups: Option<bool>,
    /// The guest kernel of the study, used where no `guest.kernel` is given.
    pub guest_kernel: &'static str,
    /// `guest.topology`: the CPU topology the platform's VMM gives a VM by default.
    pub guest_topology: &'static str,
    /// Which of the above are published and which assumed.
    pub notes: &'static str,
}

/// A guest kernel.
#[derive(Debug)]
pub struct GuestKernel {
    pub name: &'static str,
    pub version: &'static str,
    pub study: &'static str,
    /// `guest.scheduler`: the fair scheduler (CFS before 6.6, EEVDF from 6.6).
    pub scheduler: &'static str,
    /// `guest.tick_hz` and `guest.preemption` (EEVDF notices slice ends at the tick;
    /// the preemption model decides when kernel code gives way).
    pub tick_hz: u32,
    pub preemption: &'static str,
    /// `guest.spinlock`.
    pub spinlock: &'static str,
    /// futex_wake sends the reschedule IPI under the hash-bucket lock (before wake_q,
    /// Linux 4.2).
    pub ipi_under_lock: bool,
    /// KVM PV TLB flush (guest Linux 4.16+).
    pub pv_tlb_flush: bool,
    /// Shootdowns skip CPUs in lazy TLB mode (Linux 4.19+).
    pub tlb_skip_lazy: bool,
    /// Queued rwlocks (x86, Linux 3.16+).
    pub queued_rwlocks: bool,
    /// KVM PV EOI (guest Linux 3.6+ on KVM): no EOI exit when the host says none is
    /// needed.
    pub pv_eoi: bool,
    /// vcpu_is_preempted() from KVM's steal-time record (guest Linux 4.10+), used by
    /// the scheduler's idle-CPU test (available_idle_cpu, 4.17+).
    pub vcpu_is_preempted: bool,
    /// `guest.wake_ipi`: when a cross-vCPU wake-up sends an IPI.
    pub wake_ipi: &'static str,
    /// `guest.wake_list_idle`: a same-cache wake-up onto an idle CPU goes through its
    /// wake list (Linux 6.0+).
    pub wake_list_idle: bool,
    /// `guest.rwsem_spin`: writers' optimistic spinning on read-write semaphores.
    pub rwsem_spin: &'static str,
    /// `guest.rwsem_steal`: read-write semaphores with reader lock stealing and the
    /// hand-off bit (Linux 5.11+).
    pub rwsem_steal: bool,
    /// `guest.mutex_handoff`: the kernel mutex's hand-off to its first waiter (Linux
    /// 4.10+).
    pub mutex_handoff: bool,
    /// `guest.mutex_osq`: the kernel mutex's spinners queue on an OSQ (Linux 3.15+).
    pub mutex_osq: bool,
    /// `guest.i_mmap_rwsem`: a mapping's i_mmap lock is an rw-semaphore (Linux 3.19+).
    pub i_mmap_rwsem: bool,
    /// `guest.i_rwsem`: an inode's lock is an rw-semaphore (Linux 4.7+).
    pub i_rwsem: bool,
    /// `guest.lockref`: dentry references taken with a cmpxchg (Linux 3.12+).
    pub lockref: bool,
    /// `guest.fast_dput`: dput's last reference without d_lock (Linux 4.0+).
    pub fast_dput: bool,
    /// `guest.cond_requeue`: the distribution's glibc requeues a broadcast's waiters
    /// onto the mutex (glibc before 2.25).
    pub cond_requeue: bool,
    /// `guest.cond_lock`: the distribution's glibc serializes a condition variable on
    /// an internal lock (glibc before 2.25).
    pub cond_lock: bool,
    /// `guest.barrier_lock`: the distribution's glibc holds a barrier's internal lock
    /// from the last arrival until the last thread leaves (glibc before 2.25).
    pub barrier_lock: bool,
    /// `guest.futex_hash_buckets`: 256 up to Linux 3.12, per-CPU sizing (0) from 3.13.
    pub futex_hash_buckets: u32,
    /// The cpuidle-haltpoll driver (guest Linux 5.4+).
    pub haltpoll_available: bool,
    /// `guest.sched_idle_cpu`, `guest.balance_busy_factor`, `guest.balance_interval`:
    /// how a CPU running only SCHED_IDLE threads is placed on and balanced.
    pub sched_idle_cpu: bool,
    /// `guest.newidle_avg_idle_gate`: newidle balance skipped while the CPU's average
    /// idle is under the migration cost (Linux before 5.16).
    pub newidle_avg_idle_gate: bool,
    pub balance_busy_factor: u32,
    pub balance_interval: &'static str,
    /// `guest.wake_affine`: the kernel's affine wake-up rule (hv/sched/wake_affine.rs).
    pub wake_affine: &'static str,
    pub notes: &'static str,
}

pub const HOST_PLATFORMS: &[HostPlatform] = &[
    HostPlatform {
        name: "kvm-3.9-snb",
        study: "Gleaner (USENIX ATC 2014)",
        hypervisor: Hypervisor::Kvm,
        version: "Linux 3.9",
        cpu: "Xeon E5-2665 (Sandy Bridge-EP, 2.4 GHz, 16 cores)",
        generation: "sandy-bridge",
        tsc_ghz: 2.4,
        apicv: false,
        ipiv: false,
        halt_poll: false,
        ple_pending_irq: false,
        ple_candidates: PleCandidates::NotHalted,
        ple_yield_to_kernel_mode: false,
        ple_dy_eligible: true,
        ple_esrch_ends_scan: true,
        ple_window_grows: false,
        xen_ratelimit_us: None,
        xen_ratelimit_rule: None,
        cfs_repick_keeps_slice: Some(false),
        linux_wake_affine: Some("linux-3.2"),
        linux_busy_factor: Some(64),
        linux_newidle_gate: Some(true),
        linux_balance_interval: Some("fixed"),
        linux_newidle_doubles: Some(true),
        linux_overload_gate: Some(false),
        linux_idle_keeps_busy_deadline: Some(true),
        scheduler: "cfs",
        per_vm_groups: Some(false),
        guest_kernel: "linux-3.9",
        guest_topology: "socket-per-vcpu",
        notes: "host and CPU as published; Sandy Bridge has no APICv (it came with Ivy Bridge-EP)",
    },
    HostPlatform {
        name: "xen-4.1.2",
        study: "CVS (FGCS 2016)",
        hypervisor: Hypervisor::Xen,
        version: "Xen 4.1.2",
        cpu: "assumed Sandy Bridge-EP at 2.4 GHz (the CPU is not in our sources)",
        generation: "sandy-bridge",
        tsc_ghz: 2.4,
        apicv: false,
        ipiv: false,
        halt_poll: false,
        ple_pending_irq: false,
        ple_candidates: PleCandidates::Ready,
        ple_yield_to_kernel_mode: false,
        ple_dy_eligible: true,
        ple_esrch_ends_scan: false,
        ple_window_grows: false,
        xen_ratelimit_us: Some(0.0),
        xen_ratelimit_rule: None,
        cfs_repick_keeps_slice: None,
        linux_wake_affine: None,
        linux_busy_factor: None,
        linux_newidle_gate: None,
        linux_balance_interval: None,
        linux_newidle_doubles: None,
        linux_overload_gate: None,
        linux_idle_keeps_busy_deadline: None,
        scheduler: "credit",
        per_vm_groups: None,
        guest_kernel: "linux-3.2",
        guest_topology: "socket-per-vcpu",
        notes: "Xen version and guest as published; credit has no rate limit before Xen 4.2",
    },
    HostPlatform {
        name: "xen-4.2.3",
        study: "micro-sliced vCPUs (MICRO 2014)",
        hypervisor: Hypervisor::Xen,
        version: "Xen 4.2.3",
        cpu: "assumed Sandy Bridge-EP at 2.4 GHz (the CPU is not in our sources)",
        generation: "sandy-bridge",
        tsc_ghz: 2.4,
        apicv: false,
        ipiv: false,
        halt_poll: false,
        ple_pending_irq: false,
        ple_candidates: PleCandidates::Ready,
        ple_yield_to_kernel_mode: false,
        ple_dy_eligible: true,
        ple_esrch_ends_scan: false,
        ple_window_grows: false,
        xen_ratelimit_us: Some(1000.0),
        xen_ratelimit_rule: Some("xen-4.2"),
        cfs_repick_keeps_slice: None,
        linux_wake_affine: None,
        linux_busy_factor: None,
        linux_newidle_gate: None,
        linux_balance_interval: None,
        linux_newidle_doubles: None,
        linux_overload_gate: None,
        linux_idle_keeps_busy_deadline: None,
        scheduler: "credit",
        per_vm_groups: None,
        guest_kernel: "linux-3.5",
        guest_topology: "socket-per-vcpu",
        notes: "Xen version and guest as published; sched_ratelimit_us (default 1000) since Xen 4.2",
    },
    HostPlatform {
        name: "kvm-3.2-wsm",
        study: "DCS (ASPLOS 2013)",
        hypervisor: Hypervisor::Kvm,
        version: "Linux 3.2",
        cpu: "assumed Westmere-EP at 2.4 GHz (a 2012 server; the CPU is not in our sources)",
        generation: "westmere",
        tsc_ghz: 2.4,
        apicv: false,
        ipiv: false,
        halt_poll: false,
        ple_pending_irq: false,
        ple_candidates: PleCandidates::NotHalted,
        ple_yield_to_kernel_mode: false,
        ple_dy_eligible: false,
        ple_esrch_ends_scan: true,
        ple_window_grows: false,
        xen_ratelimit_us: None,
        xen_ratelimit_rule: None,
        cfs_repick_keeps_slice: Some(false),
        linux_wake_affine: Some("linux-3.2"),
        linux_busy_factor: Some(64),
        linux_newidle_gate: Some(true),
        linux_balance_interval: Some("fixed"),
        linux_newidle_doubles: Some(true),
        linux_overload_gate: Some(false),
        linux_idle_keeps_busy_deadline: Some(true),
        scheduler: "cfs",
        per_vm_groups: Some(false),
        guest_kernel: "linux-3.2",
        guest_topology: "socket-per-vcpu",
        notes: "a Linux 3.x KVM host of 2012 as published; version 3.2 and the CPU assumed",
    },
    HostPlatform {
        name: "kvm-3.19-hsw",
        study: "APPLE",
        hypervisor: Hypervisor::Kvm,
        version: "Linux 3.19 (Ubuntu 14.04)",
        cpu: "assumed Haswell-EP at 2.4 GHz (Haswell-era as published; 16 cores)",
        generation: "haswell",
        tsc_ghz: 2.4,
        apicv: true,
        ipiv: false,
        halt_poll: false,
        ple_pending_irq: false,
        ple_candidates: PleCandidates::Preempted,
        ple_yield_to_kernel_mode: false,
        ple_dy_eligible: true,
        ple_esrch_ends_scan: false,
        ple_window_grows: true,
        xen_ratelimit_us: None,
        xen_ratelimit_rule: None,
        cfs_repick_keeps_slice: Some(true),
        linux_wake_affine: Some("linux-3.16"),
        linux_busy_factor: Some(32),
        linux_newidle_gate: Some(true),
        linux_balance_interval: Some("domain-weight"),
        linux_newidle_doubles: Some(true),
        linux_overload_gate: Some(true),
        linux_idle_keeps_busy_deadline: Some(false),
        scheduler: "cfs",
        per_vm_groups: Some(false),
        guest_kernel: "linux-3.19",
        guest_topology: "socket-per-vcpu",
        notes: "host kernel as published; Haswell-EP has APICv with posted interrupts (KVM enables it when present); halt_poll_ns came in Linux 4.0",
    },
    HostPlatform {
        name: "kvm-6.6-spr",
        study: "a modern KVM host",
        hypervisor: Hypervisor::Kvm,
        version: "Linux 6.6",
        cpu: "Sapphire Rapids-class Xeon at 2.0 GHz (nominal)",
        generation: "sapphire-rapids",
        tsc_ghz: 2.0,
        apicv: true,
        ipiv: true,
        halt_poll: true,
        ple_pending_irq: true,
        ple_candidates: PleCandidates::Ready,
        ple_yield_to_kernel_mode: true,
        ple_dy_eligible: true,
        ple_esrch_ends_scan: false,
        ple_window_grows: true,
        xen_ratelimit_us: None,
        xen_ratelimit_rule: None,
        cfs_repick_keeps_slice: None,
        linux_wake_affine: Some("linux-4.14"),
        linux_busy_factor: Some(16),
        linux_newidle_gate: Some(false),
        linux_balance_interval: Some("domain-weight"),
        linux_newidle_doubles: Some(false),
        linux_overload_gate: Some(true),
        linux_idle_keeps_busy_deadline: Some(false),
        scheduler: "eevdf",
        per_vm_groups: Some(true),
        guest_kernel: "linux-6.6",
        guest_topology: "one-socket",
        notes: "APICv with posted interrupts; host halt polling on (halt_poll_ns 200 us); EEVDF since Linux 6.6",
    },
    HostPlatform {
        name: "xen-4.19-spr",
        study: "a modern Xen host",
        hypervisor: Hypervisor::Xen,
        version: "Xen 4.19",
        cpu: "Sapphire Rapids-class Xeon at 2.0 GHz (nominal)",
        generation: "sapphire-rapids",
        tsc_ghz: 2.0,
        apicv: true,
        ipiv: false,
        halt_poll: false,
        ple_pending_irq: false,
        ple_candidates: PleCandidates::Ready,
        ple_yield_to_kernel_mode: false,
        ple_dy_eligible: true,
        ple_esrch_ends_scan: false,
        ple_window_grows: false,
        xen_ratelimit_us: Some(1000.0),
        xen_ratelimit_rule: Some("xen-4.8"),
        cfs_repick_keeps_slice: None,
        linux_wake_affine: None,
        linux_busy_factor: None,
        linux_newidle_gate: None,
        linux_balance_interval: None,
        linux_newidle_doubles: None,
        linux_overload_gate: None,
        linux_idle_keeps_busy_deadline: None,
        scheduler: "credit2",
        per_vm_groups: None,
        guest_kernel: "linux-6.6",
        guest_topology: "one-socket",
        notes: "credit2 is Xen's default scheduler since 4.12 (sched_ratelimit_us 1000); posted interrupts with APICv; no IPI virtualization and no host halt polling in Xen",
    },
];

pub const GUEST_KERNELS: &[GuestKernel] = &[
    GuestKernel {
        name: "linux-3.2",
        version: "Linux 3.2",
        study: "CVS (HVM guest), DCS",
        scheduler: "cfs",
        tick_hz: 250,
        preemption: "voluntary",
        spinlock: "ticket",
        ipi_under_lock: true,
        pv_tlb_flush: false,
        tlb_skip_lazy: false,
        queued_rwlocks: false,
        pv_eoi: false,
        vcpu_is_preempted: false,
        wake_ipi: "always",
        wake_list_idle: false,
        rwsem_spin: "off",
        rwsem_steal: false,
        mutex_handoff: false,
        mutex_osq: false,
        i_mmap_rwsem: false,
        i_rwsem: false,
        lockref: false,
        fast_dput: false,
        cond_requeue: true,
        cond_lock: true,
        barrier_lock: true,
        futex_hash_buckets: 256,
        haltpoll_available: false,
        sched_idle_cpu: false,
        newidle_avg_idle_gate: true,
        balance_busy_factor: 64,
        balance_interval: "fixed",
        wake_affine: "linux-3.2",
        notes: "ticket spinlocks (PV ticket locks came in 3.12); a glibc of its time (before 2.25): broadcasts requeue, condition variables and barriers have an internal lock",
    },
    GuestKernel {
        name: "linux-3.5",
        version: "Linux 3.5.7",
        study: "micro-sliced vCPUs",
        scheduler: "cfs",
        tick_hz: 250,
        preemption: "voluntary",
        spinlock: "ticket",
        ipi_under_lock: true,
        pv_tlb_flush: false,
        tlb_skip_lazy: false,
        queued_rwlocks: false,
        pv_eoi: false,
        vcpu_is_preempted: false,
        wake_ipi: "on-preempt",
        wake_list_idle: false,
        rwsem_spin: "off",
        rwsem_steal: false,
        mutex_handoff: false,
        mutex_osq: false,
        i_mmap_rwsem: false,
        i_rwsem: false,
        lockref: false,
        fast_dput: false,
        cond_requeue: true,
        cond_lock: true,
        barrier_lock: true,
        futex_hash_buckets: 256,
        haltpoll_available: false,
        sched_idle_cpu: false,
        newidle_avg_idle_gate: true,
        balance_busy_factor: 64,
        balance_interval: "fixed",
        wake_affine: "linux-3.2",
        notes: "ticket spinlocks; a glibc of its time (before 2.25): broadcasts requeue, condition variables and barriers have an internal lock",
    },
    GuestKernel {
        name: "linux-3.9",
        version: "Linux 3.9",
        study: "Gleaner",
        scheduler: "cfs",
        tick_hz: 250,
        preemption: "voluntary",
        spinlock: "ticket",
        ipi_under_lock: true,
        pv_tlb_flush: false,
        tlb_skip_lazy: false,
        queued_rwlocks: false,
        pv_eoi: true,
        vcpu_is_preempted: false,
        wake_ipi: "on-preempt",
        wake_list_idle: false,
        rwsem_spin: "off",
        rwsem_steal: false,
        mutex_handoff: false,
        mutex_osq: false,
        i_mmap_rwsem: false,
        i_rwsem: false,
        lockref: false,
        fast_dput: false,
        cond_requeue: true,
        cond_lock: true,
        barrier_lock: true,
        futex_hash_buckets: 256,
        haltpoll_available: false,
        sched_idle_cpu: false,
        newidle_avg_idle_gate: true,
        balance_busy_factor: 64,
        balance_interval: "fixed",
        wake_affine: "linux-3.2",
        notes: "ticket spinlocks; a glibc of its time (before 2.25): broadcasts requeue, condition variables and barriers have an internal lock",
    },
    GuestKernel {
        name: "linux-3.19",
        version: "Linux 3.19 (Ubuntu 14.04)",
        study: "APPLE",
        scheduler: "cfs",
        tick_hz: 250,
        preemption: "voluntary",
        spinlock: "ticket",
        ipi_under_lock: true,
        pv_tlb_flush: false,
        tlb_skip_lazy: false,
        queued_rwlocks: true,
        pv_eoi: true,
        vcpu_is_preempted: false,
        wake_ipi: "on-preempt",
        wake_list_idle: false,
        rwsem_spin: "writer-owner",
        rwsem_steal: false,
        mutex_handoff: false,
        mutex_osq: true,
        i_mmap_rwsem: true,
        i_rwsem: false,
        lockref: true,
        fast_dput: false,
        cond_requeue: true,
        cond_lock: true,
        barrier_lock: true,
        futex_hash_buckets: 0,
        haltpoll_available: false,
        sched_idle_cpu: false,
        newidle_avg_idle_gate: true,
        balance_busy_factor: 32,
        balance_interval: "domain-weight",
        wake_affine: "linux-3.16",
        notes: "rwsem writers spin on a running writer owner (3.16); mutex spinners queue on the OSQ (3.15); i_mmap_mutex became i_mmap_rwsem (3.19); dentry references are lockrefs (3.12), dput's last one still under d_lock; ticket spinlocks: the PV ticket lock of 3.12-4.1 needs KVM_FEATURE_PV_UNHALT, which QEMU leaves off unless asked (kvm-pv-unhalt); Ubuntu 14.04's glibc 2.19: broadcasts requeue, condition variables and barriers have an internal lock",
    },
    GuestKernel {
        name: "linux-6.6",
        version: "Linux 6.6",
        study: "a modern guest",
        scheduler: "eevdf",
        tick_hz: 250,
        preemption: "voluntary",
        spinlock: "pv-qspinlock",
        ipi_under_lock: false,
        pv_tlb_flush: true,
        tlb_skip_lazy: true,
        queued_rwlocks: true,
        pv_eoi: true,
        vcpu_is_preempted: true,
        wake_ipi: "on-preempt",
        wake_list_idle: true,
        rwsem_spin: "reader-bounded",
        rwsem_steal: true,
        mutex_handoff: true,
        mutex_osq: true,
        i_mmap_rwsem: true,
        i_rwsem: true,
        lockref: true,
        fast_dput: true,
        cond_requeue: false,
        cond_lock: false,
        barrier_lock: false,
        futex_hash_buckets: 0,
        haltpoll_available: true,
        sched_idle_cpu: true,
        newidle_avg_idle_gate: false,
        balance_busy_factor: 16,
        balance_interval: "domain-weight",
        wake_affine: "linux-4.14",
        notes: "PV queued spinlocks, wake_q (4.2), PV TLB flush (4.16), vcpu_is_preempted (4.10), rwsem writers spin on readers for a bounded time (5.x), rwsem reader lock stealing and hand-off (5.11), the mutex's hand-off to its first waiter (4.10), i_mmap_rwsem (3.19) and i_rwsem (4.7), lockref dentries (3.12) and fast_dput (4.0), cpuidle-haltpoll (5.4); glibc 2.25+: a broadcast wakes every waiter, no internal condition-variable or barrier lock",
    },
];

pub fn host_platform(name: &str) -> Option<&'static HostPlatform> {
    HOST_PLATFORMS.iter().find(|p| p.name == name)
}

pub fn guest_kernel(name: &str) -> Option<&'static GuestKernel> {
    GUEST_KERNELS.iter().find(|k| k.name == name)
}

fn names<T>(list: &[T], name: impl Fn(&T) -> &'static str) -> String {
    list.iter().map(name).collect::<Vec<_>>().join(", ")
}

/// Looks up `host.platform`; an unknown name is refused with the allowed ones.
pub fn find_host(key: &str, v: &Value) -> Result<&'static HostPlatform, ScenarioError> {
    let allowed = || names(HOST_PLATFORMS, |p| p.name);
    match v {
        Value::String(s) => host_platform(s).ok_or_else(|| {
            ScenarioError::new(
                key,
                format!("unknown platform {s:?}; allowed: {}", allowed()),
            )
        }),
        other => Err(ScenarioError::new(
            key,
            format!("{other} is not a platform name; allowed: {}", allowed()),
        )),
    }
}

/// Looks up a `guest.kernel`; an unknown name is refused with the allowed ones.
pub fn find_kernel(key: &str, v: &Value) -> Result<&'static GuestKernel, ScenarioError> {
    let allowed = || names(GUEST_KERNELS, |k| k.name);
    match v {
        Value::String(s) => guest_kernel(s).ok_or_else(|| {
            ScenarioError::new(
                key,
                format!("unknown guest kernel {s:?}; allowed: {}", allowed()),
            )
        }),
        other => Err(ScenarioError::new(
            key,
            format!("{other} is not a guest kernel name; allowed: {}", allowed()),
        )),
    }
}

fn set(t: &mut Table, path: &[&str], v: Value) {
    let (last, dirs) = path.split_last().expect("non-empty key path");
    let mut cur = t;
    for d in dirs {
        let e = cur
            .entry(d.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        if !e.is_table() {
            *e = Value::Table(Table::new());
        }
        cur = e.as_table_mut().expect("made a table above");
    }
    cur.insert(last.to_string(), v);
}

fn is_xen_scheduler(kind: &str) -> bool {
    matches!(kind, "credit" | "credit2" | "relaxed_co")
}

impl HostPlatform {
    pub fn exit_ns(&self) -> u64 {
        let g = generation(self.generation).expect("profiles name known generations");
        (g.exit_cycles as f64 / self.tsc_ghz).round() as u64
    }

    /// The keys this platform sets, as a table under `host` (plus `guest.kernel`), for a
    /// host scheduler of kind `kind` (the scenario's or preset's, else the platform's).
    pub fn table(&self, kind: &str) -> Table {
        let mut t = Table::new();
        set(&mut t, &["host", "clock_ghz"], Value::Float(self.tsc_ghz));
        let g = generation(self.generation).expect("profiles name known generations");
        set(
            &mut t,
            &["host", "cache", "private_kib"],
            Value::Integer(g.private_cache_kib as i64),
        );
        set(
            &mut t,
            &["host", "cache", "kib_per_pcpu"],
            Value::Integer(g.cache_kib_per_core as i64),
        );
        set(
            &mut t,
            &["host", "costs", "vmexit_ns"],
            Value::Integer(self.exit_ns() as i64),
        );
        set(
            &mut t,
            &["host", "posted_interrupts"],
            Value::Boolean(self.apicv),
        );
        set(
            &mut t,
            &["host", "ipi_virtualization"],
            Value::Boolean(self.ipiv),
        );
        set(
            &mut t,
            &["host", "halt_poll", "enabled"],
            Value::Boolean(self.halt_poll),
        );
        set(
            &mut t,
            &["host", "scheduler", "kind"],
            Value::String(self.scheduler.into()),
        );
        if self.hypervisor == Hypervisor::Kvm {
            // The directed-yield rules of this kernel's kvm_vcpu_on_spin.
            let ple = [
                (
                    "pending_irq_counts_as_kernel",
                    Value::Boolean(self.ple_pending_irq),
                ),
                (
                    "candidates",
                    Value::String(self.ple_candidates.as_str().into()),
                ),
                (
                    "yield_to_kernel_mode",
                    Value::Boolean(self.ple_yield_to_kernel_mode),
                ),
                ("dy_eligible", Value::Boolean(self.ple_dy_eligible)),
                ("esrch_ends_scan", Value::Boolean(self.ple_esrch_ends_scan)),
                (
                    "policy",
                    Value::String(
                        if self.ple_window_grows {
                            "kvm"
                        } else {
                            "fixed"
                        }
                        .into(),
                    ),
                ),
            ];
            for (key, value) in ple {
                set(&mut t, &["host", "ple", key], value);
            }
        }
        // The host scheduler's keys this profile sets, each for the schedulers that
        // have it: (key, value, applies).
        let linux = matches!(kind, "cfs" | "eevdf");
        let cfs = kind == "cfs";
        let boolean = |b: Option<bool>| b.map(Value::Boolean);
        let string = |s: Option<&'static str>| s.map(|s| Value::String(s.into()));
        let scheduler_keys = [
            ("per_vm_groups", boolean(self.per_vm_groups), linux),
            (
                "ratelimit_us",
                self.xen_ratelimit_us.map(Value::Float),
                is_xen_scheduler(kind),
            ),
            (
                "repick_keeps_slice",
                boolean(self.cfs_repick_keeps_slice),
                cfs,
            ),
            (
                "balance_busy_factor",
                self.linux_busy_factor.map(|f| Value::Integer(f as i64)),
                linux,
            ),
            (
                "balance_interval",
                string(self.linux_balance_interval),
                linux,
            ),
            (
                "newidle_doubles_interval",
                boolean(self.linux_newidle_doubles),
                linux,
            ),
            (
                "newidle_overload_gate",
                boolean(self.linux_overload_gate),
                cfs,
            ),
            (
                "idle_keeps_busy_deadline",
                boolean(self.linux_idle_keeps_busy_deadline),
                cfs,
            ),
            (
                "newidle_avg_idle_gate",
                boolean(self.linux_newidle_gate),
                cfs,
            ),
            ("wake_affine", string(self.linux_wake_affine), linux),
            // Credit1's rule (credit2 keeps the limit its own way).
            (
                "ratelimit_rule",
                string(self.xen_ratelimit_rule),
                matches!(kind, "credit" | "relaxed_co"),
            ),
        ];
        for (key, value, applies) in scheduler_keys {
            if let (Some(value), true) = (value, applies) {
                set(&mut t, &["host", "scheduler", key], value);
            }
        }
        set(
            &mut t,
            &["guest", "kernel"],
            Value::String(self.guest_kernel.into()),
        );
        set(
            &mut t,
            &["guest", "topology"],
            Value::String(self.guest_topology.into()),
        );
        t
    }

    /// Refuses a host scheduler this hypervisor does not have.
    pub fn check_scheduler(&self, kind: &str) -> Result<(), ScenarioError> {
        let ok = match self.hypervisor {
            Hypervisor::Kvm => !matches!(kind, "credit" | "credit2"),
            Hypervisor::Xen => !matches!(kind, "cfs" | "eevdf"),
        };
        if ok {
            return Ok(());
        }
        let allowed = match self.hypervisor {
            Hypervisor::Kvm => "cfs, eevdf, gang, relaxed_co",
            Hypervisor::Xen => "credit, credit2, gang, relaxed_co",
        };
        Err(ScenarioError::new(
            "host.scheduler.kind",
            format!(
                "{kind:?} is not a scheduler of platform {} ({}); allowed: {allowed}",
                self.name, self.version
            ),
        ))
    }
}

impl GuestKernel {
    /// The keys this kernel sets in a `guest` table.
    pub fn table(&self) -> Table {
        let mut t = Table::new();
        t.insert("scheduler".into(), Value::String(self.scheduler.into()));
        if self.scheduler == "eevdf" {
            t.insert("tick_hz".into(), Value::Integer(self.tick_hz as i64));
            t.insert("preemption".into(), Value::String(self.preemption.into()));
        }
        t.insert("spinlock".into(), Value::String(self.spinlock.into()));
        t.insert("ipi_under_lock".into(), Value::Boolean(self.ipi_under_lock));
        t.insert("pv_tlb_flush".into(), Value::Boolean(self.pv_tlb_flush));
        t.insert("tlb_skip_lazy".into(), Value::Boolean(self.tlb_skip_lazy));
        t.insert("queued_rwlocks".into(), Value::Boolean(self.queued_rwlocks));
        t.insert("pv_eoi".into(), Value::Boolean(self.pv_eoi));
        t.insert(
            "vcpu_is_preempted".into(),
            Value::Boolean(self.vcpu_is_preempted),
        );
        t.insert("wake_ipi".into(), Value::String(self.wake_ipi.into()));
        t.insert("wake_list_idle".into(), Value::Boolean(self.wake_list_idle));
        t.insert("rwsem_spin".into(), Value::String(self.rwsem_spin.into()));
        t.insert("rwsem_steal".into(), Value::Boolean(self.rwsem_steal));
        t.insert("mutex_handoff".into(), Value::Boolean(self.mutex_handoff));
        t.insert("mutex_osq".into(), Value::Boolean(self.mutex_osq));
        t.insert("i_mmap_rwsem".into(), Value::Boolean(self.i_mmap_rwsem));
        t.insert("i_rwsem".into(), Value::Boolean(self.i_rwsem));
        t.insert("lockref".into(), Value::Boolean(self.lockref));
        t.insert("fast_dput".into(), Value::Boolean(self.fast_dput));
        t.insert("cond_requeue".into(), Value::Boolean(self.cond_requeue));
        t.insert("cond_lock".into(), Value::Boolean(self.cond_lock));
        t.insert("barrier_lock".into(), Value::Boolean(self.barrier_lock));
        t.insert(
            "futex_hash_buckets".into(),
            Value::Integer(self.futex_hash_buckets.into()),
        );
        t.insert(
            "haltpoll_available".into(),
            Value::Boolean(self.haltpoll_available),
        );
        t.insert("sched_idle_cpu".into(), Value::Boolean(self.sched_idle_cpu));
        t.insert(
            "newidle_avg_idle_gate".into(),
            Value::Boolean(self.newidle_avg_idle_gate),
        );
        t.insert(
            "balance_busy_factor".into(),
            Value::Integer(self.balance_busy_factor as i64),
        );
        t.insert(
            "balance_interval".into(),
            Value::String(self.balance_interval.into()),
        );
        t.insert("wake_affine".into(), Value::String(self.wake_affine.into()));
        t
    }
}

/// Fills `under` into `t` where `t` has no value: tables recursively.
pub fn merge_under(t: &mut Table, under: &Table) {
    for (k, v) in under {
        match (t.get_mut(k), v) {
            (Some(Value::Table(mine)), Value::Table(theirs)) => merge_under(mine, theirs),
            (Some(_), _) => {}
            (None, v) => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Applies `host.platform` (if any) under the merged scenario + preset table: fills the
/// host keys it sets, and `guest.kernel` where the scenario names none. Refuses an
/// unknown platform, and a host scheduler the platform's hypervisor does not have.
pub fn apply_host(t: &mut Table) -> Result<Option<&'static HostPlatform>, ScenarioError> {
    let Some(Value::Table(host)) = t.get("host") else {
        return Ok(None);
    };
    let Some(v) = host.get("platform") else {
        return Ok(None);
    };
    let p = find_host("host.platform", v)?;
    let kind = match host.get("scheduler") {
        Some(Value::Table(s)) => s.get("kind").and_then(Value::as_str),
        _ => None,
    }
    .unwrap_or(p.scheduler)
    .to_string();
    p.check_scheduler(&kind)?;
    merge_under(t, &p.table(&kind));
    Ok(Some(p))
}

/// The base `guest` table of a guest named `kernel` (the profile's keys), or an empty
/// table when no kernel is named. `key` names the key for errors.
pub fn kernel_table(key: &str, kernel: Option<&Value>) -> Result<Table, ScenarioError> {
    match kernel {
        None => Ok(Table::new()),
        Some(v) => Ok(find_kernel(key, v)?.table()),
    }
}

/// `vcpulab explain`'s account of the profiles of a resolved scenario: for each profile
/// in use, what it is and each key it sets, with the value in effect where the preset
/// or the scenario overrode it. `resolved` is the resolved scenario as a TOML table.
pub fn explain(resolved: &Table) -> String {
    let mut out = String::new();
    let get = |t: &Table, path: &[&str]| -> Option<Value> {
        let mut cur = t;
        let (last, dirs) = path.split_last()?;
        for d in dirs {
            cur = cur.get(*d)?.as_table()?;
        }
        cur.get(*last).cloned()
    };
    let host = resolved.get("host").and_then(Value::as_table);
    let platform = host
        .and_then(|h| h.get("platform"))
        .and_then(Value::as_str)
        .and_then(host_platform);
    fn lines(
        out: &mut String,
        profile: &Table,
        prefix: &str,
        actual: &dyn Fn(&[&str]) -> Option<Value>,
    ) {
        fn walk(
            out: &mut String,
            t: &Table,
            path: &mut Vec<String>,
            prefix: &str,
            actual: &dyn Fn(&[&str]) -> Option<Value>,
        ) {
            for (k, v) in t {
                path.push(k.clone());
                if let Value::Table(sub) = v {
                    walk(out, sub, path, prefix, actual);
                } else {
                    let p: Vec<&str> = path.iter().map(String::as_str).collect();
                    let key = format!("{prefix}{}", p.join("."));
                    match actual(&p) {
                        Some(a) if &a != v => out.push_str(&format!(
                            "#   {key} = {a}  (preset or scenario; the profile's: {v})\n"
                        )),
                        Some(_) => out.push_str(&format!("#   {key} = {v}\n")),
                        None => out.push_str(&format!("#   {key}: not used ({v})\n")),
                    }
                }
                path.pop();
            }
        }
        walk(out, profile, &mut Vec::new(), prefix, actual);
    }
    if let Some(p) = platform {
        let g = generation(p.generation).expect("profiles name known generations");
        out.push_str(&format!(
            "# host.platform {:?}: {} on {}, {} — the platform of {}\n",
            p.name,
            match p.hypervisor {
                Hypervisor::Kvm => "KVM",
                Hypervisor::Xen => "Xen",
            },
            p.version,
            p.cpu,
            p.study
        ));
        out.push_str(&format!(
            "#   exit + entry {} cycles ({}: {}) = {} ns at {} GHz; {}\n",
            g.exit_cycles,
            g.name,
            g.source,
            p.exit_ns(),
            p.tsc_ghz,
            p.notes
        ));
        let kind = get(resolved, &["host", "scheduler", "kind"])
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let mut tab = p.table(&kind);
        // guest.kernel is reported per guest below.
        tab.remove("guest");
        lines(&mut out, &tab, "", &|path| get(resolved, path));
    }
    let mut guests: Vec<(String, &Table)> = Vec::new();
    if let Some(g) = resolved.get("guest").and_then(Value::as_table) {
        guests.push(("guest".into(), g));
    }
    if let Some(vms) = resolved.get("vm").and_then(Value::as_array) {
        for (i, vm) in vms.iter().enumerate() {
            if let Some(g) = vm
                .as_table()
                .and_then(|v| v.get("guest"))
                .and_then(Value::as_table)
            {
                guests.push((format!("vm.{i}.guest"), g));
            }
        }
    }
    for (key, g) in guests {
        let Some(k) = g
            .get("kernel")
            .and_then(Value::as_str)
            .and_then(guest_kernel)
        else {
            continue;
        };
        out.push_str(&format!(
            "# {key}.kernel {:?}: {} — the guest of {}; {}\n",
            k.name, k.version, k.study, k.notes
        ));
        lines(&mut out, &k.table(), &format!("{key}."), &|path| {
            get(g, path)
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_names_known_data() {
        for p in HOST_PLATFORMS {
            assert!(generation(p.generation).is_some(), "{}", p.name);
            assert!(guest_kernel(p.guest_kernel).is_some(), "{}", p.name);
            assert!(p.check_scheduler(p.scheduler).is_ok(), "{}", p.name);
        }
    }

    #[test]
    fn exit_cost_follows_the_generation_and_clock() {
        let p = host_platform("kvm-3.9-snb").expect("profile");
        assert_eq!(p.exit_ns(), 723); // 1736 cycles at 2.4 GHz
        let h = host_platform("kvm-3.19-hsw").expect("profile");
        assert_eq!(h.exit_ns(), 618); // 1484 cycles at 2.4 GHz
    }

    #[test]
    fn xen_rate_limit_only_for_xen_schedulers() {
        let x41 = host_platform("xen-4.1.2").expect("profile");
        let t = x41.table("credit");
        assert_eq!(
            t["host"]["scheduler"]["ratelimit_us"],
            Value::Float(0.0),
            "Xen 4.1 has no rate limit"
        );
        let t = x41.table("gang");
        assert!(t["host"]["scheduler"].get("ratelimit_us").is_none());
        let x42 = host_platform("xen-4.2.3").expect("profile");
        assert_eq!(
            x42.table("credit")["host"]["scheduler"]["ratelimit_us"],
            Value::Float(1000.0)
        );
    }

    #[test]
    fn a_hypervisor_refuses_the_other_ones_scheduler() {
        let k = host_platform("kvm-3.9-snb").expect("profile");
        let e = k.check_scheduler("credit").expect_err("refused");
        assert_eq!(e.key, "host.scheduler.kind");
        assert!(e.message.contains("cfs"), "{}", e.message);
        let x = host_platform("xen-4.1.2").expect("profile");
        assert!(x.check_scheduler("cfs").is_err());
        assert!(x.check_scheduler("gang").is_ok());
    }

    #[test]
    fn unknown_names_list_the_allowed_ones() {
        let e = find_host("host.platform", &Value::String("kvm-9".into())).expect_err("x");
        assert!(e.message.contains("kvm-3.9-snb") && e.message.contains("xen-4.1.2"));
        let e = find_kernel("guest.kernel", &Value::String("linux-2.6".into())).expect_err("x");
        assert!(e.message.contains("linux-3.9") && e.message.contains("linux-6.6"));
    }

    #[test]
    fn merge_under_keeps_what_is_there() {
        let mut t: Table = "[host]\nclock_ghz = 3.5\n".parse().expect("toml");
        let under: Table = "[host]\nclock_ghz = 2.4\npcpus = 8\n"
            .parse()
            .expect("toml");
        merge_under(&mut t, &under);
        assert_eq!(t["host"]["clock_ghz"], Value::Float(3.5));
        assert_eq!(t["host"]["pcpus"], Value::Integer(8));
    }
}
