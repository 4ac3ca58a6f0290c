//! Physical CPUs.

use crate::hv::preemption::PreemptCause;
use crate::sim::{Nanos, VcpuId};

#[derive(Clone, Debug, Default)]
pub struct Pcpu {
    pub cur: Option<VcpuId>,
    /// When `cur` was dispatched, and when its switch-in overhead ends.
    pub run_start: Nanos,
    pub entry_until: Nanos,
    /// When the host's context switch to `cur` (and hypervisor work paid with it) ends:
    /// a reschedule arriving before then waits for it (hv/dispatch.rs `resched`).
    pub switch_until: Nanos,
    /// Generation of the slice timer.
    pub timer_gen: u32,
    /// When the live slice timer fires (Nanos::MAX: none). A step of `cur` armed past it
    /// would be cancelled there and is kept back instead (`World::push_step`).
    pub slice_end: Nanos,
    /// Earliest pending reschedule request (Nanos::MAX: none), and what asked for it.
    pub resched_at: Nanos,
    pub resched_cause: PreemptCause,
    /// Why the vCPU last taken off while runnable was taken off.
    pub stop_cause: PreemptCause,
    pub last_vcpu: Option<VcpuId>,
    /// The vCPU just taken off while still runnable, until the next pick: picked again,
    /// it never left (no context switch, hv/dispatch.rs).
    pub put_back: Option<VcpuId>,
    /// KiB brought into this pCPU's cache by all contexts so far (footprint model).
    pub cache_loaded_kib: u64,
    /// Pages brought into this pCPU's TLB by all contexts so far (TLB model).
    pub tlb_loaded: u64,
    pub guest_ns: u64,
    pub overhead_ns: u64,
    /// Host halt polling on behalf of `cur`.
    pub poll_since: Option<Nanos>,
    pub poll_ns: u64,
    /// Hypervisor work done on this pCPU that the next switch-in pays for (CVS's
    /// decision when the spinner yields).
    pub pending_overhead_ns: u64,
    /// SMT hosts: the thread occupies its core's execution units (host/smt.rs): it
    /// runs guest work or the hypervisor's paths, not a PAUSE loop or the idle loop.
    pub smt_busy: bool,
}

impl Pcpu {
    pub fn new() -> Pcpu {
        Pcpu {
            resched_at: Nanos::MAX,
            slice_end: Nanos::MAX,
            ..Pcpu::default()
        }
    }

    /// Books a finished (or, at the end, ongoing) run of `cur` up to `now`.
    pub fn book_run(&mut self, now: Nanos) {
        let o_end = self.entry_until.min(now).max(self.run_start);
        self.overhead_ns += (o_end - self.run_start).0;
        self.guest_ns += (now - o_end).0;
        self.run_start = now;
        self.entry_until = self.entry_until.max(now);
    }
}
