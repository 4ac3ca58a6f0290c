//! vCPUs as the hypervisor sees them, and their exact time accounting.

use crate::guest::ipi::IpiKind;
use crate::host::cpumask::CpuMask;
use crate::sim::{Nanos, PcpuId, ThreadId, VmId};

/// `Vcpu::mm` of a vCPU with no user address space loaded.
pub const NO_MM: u16 = u16::MAX;
/// `Vcpu::mm` of a vCPU running a thread of a process outside the workload (Gleaner's
/// yielding threads).
pub const OTHER_MM: u16 = u16::MAX - 1;

/// Where a vCPU's time goes. Every nanosecond of the run lands in exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VCat {
    User = 0,
    Kernel = 1,
    Spin = 2,
    IdlePoll = 3,
    /// VM exits and entries: switch-in, HLT exit, interrupt injection.
    Overhead = 4,
    /// Runnable but waiting for a pCPU (steal time).
    Runnable = 5,
    Halted = 6,
}
pub const NCAT: usize = 7;

impl VCat {
    /// The state's name on a trace's vCPU state track.
    pub fn name(self) -> &'static str {
        match self {
            VCat::User => "user",
            VCat::Kernel => "kernel",
            VCat::Spin => "spin",
            VCat::IdlePoll => "idle-poll",
            VCat::Overhead => "hypervisor",
            VCat::Runnable => "runnable (preempted)",
            VCat::Halted => "halted",
        }
    }
}

/// An interrupt waiting for its vCPU to run: kind, sent at, and the TLB-shootdown
/// sender and generation to acknowledge.
pub type PendingIpi = (IpiKind, Nanos, Option<(ThreadId, u32)>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HvState {
    Running(PcpuId),
    Runnable,
    Halted,
}

/// What the running vCPU is doing, which decides what its next step event means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VcpuActivity {
    /// Executing its current thread.
    Thread,
    /// Executing HLT: the exit completes at the step, then the vCPU blocks.
    Halting,
    /// idle=poll, or haltpoll's guest polling (then a step ends the poll).
    IdlePoll,
    /// Halted, with the host polling for a wake-up before descheduling it.
    HostPoll,
    /// Not running.
    Off,
}

/// Hot fields first, in declaration order (`repr(C)`), on cache-line boundaries
/// (`align(64)`): every step and dispatch touches the first two lines, the rest is
/// read at wake-ups, interrupts and in the report. On hosts of thousands of vCPUs the
/// vCPU table is far larger than a core's caches, and each line touched is a miss.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Vcpu {
    // Line 1: what every step and dispatch reads.
    pub hv: HvState,
    pub vm: VmId,
    /// Index within its VM.
    pub index: u32,
    /// Generation of the step event; bumped to cancel.
    pub gen: u32,
    /// The guest thread it runs (None: it idles, or has yet to pick one).
    pub cur: Option<ThreadId>,
    pub act: VcpuActivity,
    /// The accounting category it is in since `cat_since`.
    pub cat: VCat,
    /// Guest EEVDF (guest/eevdf.rs): a reschedule asked for and not yet honoured
    /// (TIF_NEED_RESCHED; `resched_lazy`: PREEMPT_LAZY's, upgraded at the tick).
    pub need_resched: bool,
    pub resched_lazy: bool,
    /// Woken from halt and not yet dispatched: its first run is the wake path.
    pub woke_from_halt: bool,
    /// KVM's spin_loop state: `in_spin_loop` while inside its own PLE handler
    /// (kvm_vcpu_on_spin) — here, descheduled by the handler's directed yield and not
    /// run since; `dy_eligible` flips each time another handler considers it then.
    pub in_spin_loop: bool,
    pub dy_eligible: bool,
    pub preempted_in_kernel: bool,
    /// The address space loaded on the vCPU (`active_mm`): the process of the last
    /// thread it ran, kept while it idles (lazy TLB mode). It puts the vCPU in that
    /// process's mm CPU mask, the targets of the process's TLB shootdowns.
    /// `NO_MM` before any thread ran and after a lazy vCPU left the mm (leave_mm).
    pub mm: u16,
    /// Why its work runs below full speed (host/speed.rs): `SLOW_SMT`, on an SMT core
    /// another busy thread shares (host/smt.rs); `SLOW_NUMA`, on a pCPU outside the
    /// NUMA node its VM's memory is bound to (host/numa.rs). 0: full speed.
    pub slow: u8,
    /// Its state segments are buffered for a trace (`trace_states` is Some): a flag in
    /// this line, so that a state change on an untraced run reads no colder line.
    pub tracing: bool,
    /// Guest progress resumes here after a dispatch (entry overhead + cache refill).
    pub resume_at: Nanos,
    /// Start of the current progress segment.
    pub seg_start: Nanos,
    /// When the current spin reaches the PLE window (MAX: no PLE exit armed).
    pub ple_deadline: Nanos,

    // Line 2: time accounting and the guest runqueue.
    pub cat_since: Nanos,
    /// Time before this instant, in the current accounting interval, is overhead.
    pub overhead_until: Nanos,
    /// While running: re-fetch stall still to pay for `cache_missing_kib`.
    pub refill_left_ns: u64,
    pub rq: Vec<ThreadId>,
    pub min_vr: u64,
    /// Guest EEVDF: the tick at which the current thread's used-up slice is noticed.
    pub tick_at: Nanos,

    // Line 3: time per accounting category.
    pub time: [u64; NCAT],
    /// Guest idle: when the idle period began.
    pub idle_since: Nanos,

    // Line 4: the footprint a dispatch and a departure read and write.
    pub last_thread: Option<ThreadId>,
    /// A step armed past the slice end of the pCPU it runs on, not yet queued (it
    /// would be cancelled at the slice end): queued only if the vCPU runs on past it
    /// (`World::release_step`). Valid while `gen` is unchanged.
    pub held_step: Option<(Nanos, u32)>,
    /// Guest idle: haltpoll's current window.
    pub guest_poll_ns: u64,
    /// KiB of its resident working set not in its pCPU's cache (kept across
    /// preemptions: a partial refill survives).
    pub cache_missing_kib: u64,
    /// The pCPU's `tlb_loaded` when this vCPU left it.
    pub tlb_mark_out: u64,
    pub cache_mark_out: u64,

    // Line 5: wake-up and dispatch bookkeeping.
    pub thread_seg_start: Nanos,
    /// When it last became runnable (for the scheduling-latency histogram).
    pub runnable_since: Nanos,
    /// `refill_left_ns` at dispatch (their difference is what this run re-fetched).
    pub refill_at_dispatch_ns: u64,
    pub last_pcpu: Option<PcpuId>,
    pub migrations: u64,
    /// Re-fetch stall (cache and TLB) actually paid, ns: part of its running time.
    pub refill_ns: u64,
    pub wakes: u64,
    pub switches: u64,

    // Line 6: interrupts waiting for it to run, the TLB refill in front of a run.
    /// Interrupts (IPIs) waiting for it to run: (kind, sent, TLB sender and generation).
    pub pending: Vec<PendingIpi>,
    /// Device completions waiting for it to run: (thread to wake, raised at).
    pub pending_irq: Vec<(ThreadId, Nanos)>,
    /// The TLB refill stall in front of this run: from when, and how long.
    pub tlb_stall_from: Nanos,
    pub tlb_stall_ns: u64,

    // Line 7: a thread's departure (its TLB mark) and halts.
    /// A guest timer interrupt raised while the vCPU was preempted (its first raise:
    /// later expiries coalesce into the same pending vector), taken at its next entry.
    pub pending_timer: Option<Nanos>,
    /// Guest level: pages brought into this vCPU's TLB by the threads it ran, and per
    /// process of the VM the count when its last thread left (u64::MAX: never ran here;
    /// `process_tlb_mark`). The first process's mark is kept in this line, the others'
    /// apart: most VMs run one process, and a vector's elements are a line elsewhere.
    pub guest_tlb_loaded: u64,
    first_process_tlb_mark: u64,
    pub halts: u64,
    pub halted_at: Nanos,
    /// Guest idle: when the haltpoll poll under way ends (poll_idle measures its limit
    /// from its start, across PLE exits and preemptions); MAX when none is.
    pub poll_until: Nanos,
    pub halt_poll_ns: u64,
    pub ple_exits: u64,

    // Colder: tracing, other processes' TLB marks, the placement mask.
    /// When tracing: the state segments (start, end, state) not yet written, and the
    /// start of the current one. None when not tracing (the common case).
    pub trace_states: Option<Vec<(Nanos, Nanos, VCat)>>,
    pub state_since: Nanos,
    /// The marks of processes 1 onwards (see `guest_tlb_loaded`).
    other_process_tlb_marks: Vec<u64>,
    pub mask: CpuMask,
    /// The guest's rq->avg_idle: the running average of its idle periods (ns; an
    /// eighth of each new one, capped at twice the migration cost; u64::MAX before the
    /// first, which counts as that cap).
    pub avg_idle: u64,
    /// The periodic balance this vCPU runs from its tick while it runs a workload thread
    /// (guest/balance.rs `on_busy_balance`).
    pub busy_balance: crate::guest::balance::BalanceClock,
    /// Wake-ups the host placed by its affine rule (hv/sched/wake_affine.rs).
    pub affine_wakes: u64,
    /// A reschedule IPI for a thread wake-up was sent to it and it has not handled one
    /// since: further wake-ups onto it send none (guest/ipi.rs `send_wake`).
    pub wake_ipi_outstanding: bool,
    /// Threads woken onto it through its wake list (Linux 3.0+'s ttwu_queue_remote,
    /// across caches or, before 3.3, for every remote wake-up), in the order they were
    /// woken: enqueued when it handles the reschedule IPI (guest/ipi.rs).
    pub wake_list: Vec<ThreadId>,
    /// Why it was last taken off while runnable (what its lock-holder preemptions
    /// count under).
    pub stop_cause: crate::hv::preemption::PreemptCause,
}

impl Vcpu {
    pub fn new(vm: VmId, index: u32, mask: CpuMask) -> Vcpu {
        Vcpu {
            vm,
            index,
            mask,
            avg_idle: u64::MAX,
            stop_cause: crate::hv::preemption::PreemptCause::Slice,
            busy_balance: crate::guest::balance::BalanceClock::default(),
            hv: HvState::Halted,
            act: VcpuActivity::Off,
            gen: 0,
            held_step: None,
            resume_at: Nanos::ZERO,
            seg_start: Nanos::ZERO,
            cur: None,
            rq: Vec::new(),
            min_vr: 0,
            last_thread: None,
            need_resched: false,
            resched_lazy: false,
            tick_at: Nanos::MAX,
            cat: VCat::Halted,
            cat_since: Nanos::ZERO,
            overhead_until: Nanos::ZERO,
            time: [0; NCAT],
            trace_states: None,
            state_since: Nanos::ZERO,
            last_pcpu: None,
            cache_mark_out: 0,
            tlb_mark_out: 0,
            woke_from_halt: false,
            refill_ns: 0,
            cache_missing_kib: 0,
            refill_left_ns: 0,
            refill_at_dispatch_ns: 0,
            tlb_stall_from: Nanos::ZERO,
            tlb_stall_ns: 0,
            guest_tlb_loaded: 0,
            first_process_tlb_mark: u64::MAX,
            other_process_tlb_marks: Vec::new(),
            switches: 0,
            migrations: 0,
            halts: 0,
            wakes: 0,
            affine_wakes: 0,
            thread_seg_start: Nanos::ZERO,
            runnable_since: Nanos::ZERO,
            pending: Vec::new(),
            pending_irq: Vec::new(),
            pending_timer: None,
            mm: NO_MM,
            wake_ipi_outstanding: false,
            wake_list: Vec::new(),
            preempted_in_kernel: false,
            slow: 0,
            tracing: false,
            in_spin_loop: false,
            dy_eligible: false,
            ple_deadline: Nanos::MAX,
            ple_exits: 0,
            halt_poll_ns: 0,
            halted_at: Nanos::ZERO,
            idle_since: Nanos::ZERO,
            guest_poll_ns: 0,
            poll_until: Nanos::MAX,
        }
    }

    /// Sizes the per-process TLB marks for a VM of `processes` processes (none has run
    /// here yet).
    pub fn set_processes(&mut self, processes: usize) {
        self.first_process_tlb_mark = u64::MAX;
        self.other_process_tlb_marks = vec![u64::MAX; processes.saturating_sub(1)];
    }

    /// `guest_tlb_loaded` when process `process`'s last thread left this vCPU
    /// (u64::MAX: none has run here).
    #[inline]
    pub fn process_tlb_mark(&self, process: usize) -> u64 {
        match process.checked_sub(1) {
            None => self.first_process_tlb_mark,
            Some(i) => self.other_process_tlb_marks[i],
        }
    }

    /// A thread of process `process` left this vCPU now.
    #[inline]
    pub fn mark_process_tlb(&mut self, process: usize) {
        let loaded = self.guest_tlb_loaded;
        match process.checked_sub(1) {
            None => self.first_process_tlb_mark = loaded,
            Some(i) => self.other_process_tlb_marks[i] = loaded,
        }
    }

    /// Books the time since the last change into the current category (the part
    /// before `overhead_until` into Overhead).
    #[inline]
    pub fn charge(&mut self, now: Nanos) {
        let since = self.cat_since;
        if now <= since {
            return;
        }
        let mut from = since;
        if self.overhead_until > from {
            let o_end = self.overhead_until.min(now);
            self.time[VCat::Overhead as usize] += (o_end - from).0;
            from = o_end;
        }
        self.time[self.cat as usize] += (now - from).0;
        self.cat_since = now;
    }

    /// The hypervisor works `ns` on this running vCPU's behalf from `now` (an exit, an
    /// injection, a decision): books the time so far, extends the overhead interval and
    /// holds guest progress until it ends. Returns when the vCPU resumes the guest.
    #[inline]
    pub fn charge_overhead(&mut self, now: Nanos, ns: Nanos) -> Nanos {
        self.charge(now);
        self.add_overhead(now, ns)
    }

    /// `charge_overhead` without the booking, for a vCPU being dispatched (its time is
    /// booked at the dispatch).
    #[inline]
    pub fn add_overhead(&mut self, now: Nanos, ns: Nanos) -> Nanos {
        self.overhead_until = self.overhead_until.max(now) + ns;
        self.resume_at = self.resume_at.max(self.overhead_until);
        self.overhead_until
    }

    #[inline]
    pub fn set_cat(&mut self, now: Nanos, cat: VCat) {
        self.charge(now);
        if cat != self.cat && self.tracing {
            if let Some(buf) = self.trace_states.as_mut() {
                if now > self.state_since {
                    buf.push((self.state_since, now, self.cat));
                }
                self.state_since = now;
            }
        }
        self.cat = cat;
    }

    /// Time on a pCPU (all running categories).
    pub fn cpu_ns(&self) -> u64 {
        self.time[..=VCat::Overhead as usize].iter().sum()
    }

    pub fn is_running(&self) -> bool {
        matches!(self.hv, HvState::Running(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn charge_splits_overhead() {
        let mut v = Vcpu::new(VmId(0), 0, CpuMask::all(1));
        v.set_cat(Nanos(100), VCat::User); // 100 ns halted
        v.overhead_until = Nanos(150);
        v.charge(Nanos(120));
        v.charge(Nanos(400));
        assert_eq!(v.time[VCat::Halted as usize], 100);
        assert_eq!(v.time[VCat::Overhead as usize], 50);
        assert_eq!(v.time[VCat::User as usize], 250);
    }
}
