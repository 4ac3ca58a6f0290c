//! Pause-loop exiting. A spinning vCPU exits after `window` cycles of continuous
//! spinning (a timer, never per-PAUSE events). Window policies are small types behind
//! one trait; the exit action is KVM's directed yield (kvm_vcpu_on_spin) or Xen's
//! undirected yield.

use crate::guest::thread::ThreadActivity;
use crate::hv::sched::StopReason;
use crate::hv::vcpu::HvState;
use crate::scenario::{PleAction, PleCandidates, PleConfig, PlePolicy};
use crate::sim::world::World;
use crate::sim::{Nanos, VcpuId, VmId};

/// A PLE window policy: the window of each vCPU, and how exits and scheduling-in
/// change it.
pub trait PleWindow {
    /// Window in cycles, or None when PLE is off.
    fn window(&self, v: VcpuId) -> Option<u64>;
    /// A PLE exit of `v` (before the exit action runs).
    fn on_exit(&mut self, v: VcpuId, now: Nanos);
    /// `v` is scheduled in on a pCPU.
    fn on_sched_in(&mut self, v: VcpuId);
    /// An epoch of `vm` (hv/ple_epochs.rs) ended with this inefficiency (NaN when the
    /// VM used no pCPU time). Only adaptive per-VM policies (APPLE) act on it.
    fn on_epoch(&mut self, _vm: VmId, _inefficiency: f64) {}
}

pub struct Off;
impl PleWindow for Off {
    fn window(&self, _: VcpuId) -> Option<u64> {
        None
    }
    fn on_exit(&mut self, _: VcpuId, _: Nanos) {}
    fn on_sched_in(&mut self, _: VcpuId) {}
}

pub struct Fixed(pub u64);
impl PleWindow for Fixed {
    fn window(&self, _: VcpuId) -> Option<u64> {
        Some(self.0)
    }
    fn on_exit(&mut self, _: VcpuId, _: Nanos) {}
    fn on_sched_in(&mut self, _: VcpuId) {}
}

/// KVM's per-vCPU window (arch/x86/kvm/vmx/vmx.c grow_ple_window/shrink_ple_window
/// and __grow_ple_window/__shrink_ple_window in x86.h).
pub struct KvmGrowShrink {
    pub base: u64,
    pub grow: u64,
    pub shrink: u64,
    pub max: u64,
    pub win: Vec<u64>,
}

impl KvmGrowShrink {
    pub fn new(c: &PleConfig, nvcpus: usize) -> KvmGrowShrink {
        KvmGrowShrink {
            base: c.window_cycles,
            grow: c.grow,
            shrink: c.shrink,
            max: c.max_cycles,
            win: vec![c.window_cycles; nvcpus],
        }
    }

    /// __grow_ple_window: modifier < 1 → base; < base → multiply; else add; capped.
    pub fn grown(&self, val: u64) -> u64 {
        let ret = if self.grow < 1 {
            self.base
        } else if self.grow < self.base {
            val.saturating_mul(self.grow)
        } else {
            val.saturating_add(self.grow)
        };
        ret.min(self.max).max(self.base.min(self.max))
    }

    /// __shrink_ple_window: modifier < 1 → base; < base → divide; else subtract;
    /// floored at base.
    pub fn shrunk(&self, val: u64) -> u64 {
        let ret = if self.shrink < 1 {
            self.base
        } else if self.shrink < self.base {
            val / self.shrink
        } else {
            val.saturating_sub(self.shrink)
        };
        ret.max(self.base)
    }
}

impl PleWindow for KvmGrowShrink {
    fn window(&self, v: VcpuId) -> Option<u64> {
        Some(self.win[v.idx()])
    }
    fn on_exit(&mut self, v: VcpuId, _: Nanos) {
        self.win[v.idx()] = self.grown(self.win[v.idx()]);
    }
    fn on_sched_in(&mut self, v: VcpuId) {
        self.win[v.idx()] = self.shrunk(self.win[v.idx()]);
    }
}

/// The window policy of `c`, for vCPUs belonging to the VMs `vcpu_vm`.
pub fn build(c: &PleConfig, vcpu_vm: &[VmId]) -> Box<dyn PleWindow> {
    match c.policy {
        PlePolicy::Off => Box::new(Off),
        PlePolicy::Fixed => Box::new(Fixed(c.window_cycles)),
        PlePolicy::Kvm => Box::new(KvmGrowShrink::new(c, vcpu_vm.len())),
        PlePolicy::Apple => Box::new(crate::hv::apple::Apple::new(c, vcpu_vm)),
    }
}

impl World {
    /// When the spin that starts at `t0` on `v` exits (None: PLE off).
    pub(crate) fn ple_deadline(&self, v: VcpuId, t0: Nanos) -> Option<Nanos> {
        let cycles = self.ple.window(v)?;
        Some(t0 + Nanos(((cycles as f64) / self.clock_ghz).ceil() as u64))
    }

    /// `v` exceeded its PLE window while spinning.
    pub(crate) fn ple_exit(&mut self, v: VcpuId) {
        let now = self.now;
        let HvState::Running(p) = self.vcpus[v.idx()].hv else {
            return;
        };
        let window = self.ple.window(v).unwrap_or(0);
        self.ple.on_exit(v, now);
        let epoch_done = self.ple_epoch_exit(v, window);
        let vm = self.vcpus[v.idx()].vm.idx();
        self.vms[vm].ple_exits += 1;
        self.vcpus[v.idx()].ple_exits += 1;
        self.trace_instant(v, "ple-exit");
        if self.trace.is_some() {
            // The window after this exit (grown or shrunk by the policy).
            let w = self.ple.window(v).unwrap_or(0) as f64;
            self.trace_vcpu_counter(v, "PLE window (cycles)", w);
        }
        {
            let exit = Nanos(self.costs.vmexit_ns);
            self.vcpus[v.idx()].charge_overhead(now, exit);
        }
        match self.ple_action {
            PleAction::Yield => {
                self.vms[vm].yields_ok += 1;
                self.deschedule(p, v, StopReason::Yielded);
                self.schedule(p);
            }
            PleAction::YieldToHead => self.ple_yield_head(p, v),
            PleAction::YieldToTail => self.ple_yield_tail(p, v),
            PleAction::Coschedule => self.ple_coschedule_or_yield(p, v),
            PleAction::Cvs => self.ple_cvs(p, v),
            PleAction::DirectedYield => {
                let scan = self.directed_yield(p, v);
                // The handler's own work besides the exit: its loop over the VM's vCPUs
                // and the yield_to calls that found no target (a successful one is
                // `yield_to_ns` below).
                let handler = u64::from(scan.looked) * self.costs.ple_scan_per_vcpu_ns
                    + u64::from(scan.failed_calls) * self.costs.yield_to_ns;
                if let Some(tp) = scan.target {
                    self.vms[vm].yields_ok += 1;
                    // It yields from inside its handler: in the spin loop until it runs
                    // again (kvm_vcpu_set_in_spin_loop), then not eligible (the handler's
                    // end: kvm_vcpu_set_dy_eligible(me, false)).
                    let vc = &mut self.vcpus[v.idx()];
                    vc.in_spin_loop = true;
                    vc.dy_eligible = false;
                    // The handler's and yield_to's work on this pCPU, paid by whichever
                    // vCPU it switches in next (the yielder itself when it is alone there).
                    self.pcpus[p.idx()].pending_overhead_ns += handler + self.costs.yield_to_ns;
                    self.deschedule(p, v, StopReason::Yielded);
                    if tp != p {
                        // yield_to → resched_curr on the target's pCPU: a reschedule IPI
                        // (smp_send_reschedule), which takes the host's IPI latency.
                        let ipi = Nanos(self.costs.native_ipi_ns);
                        self.request_resched(
                            tp,
                            now + ipi,
                            crate::hv::preemption::PreemptCause::DirectedYield,
                        );
                    }
                    self.schedule(p);
                } else {
                    self.vms[vm].yields_failed += 1;
                    let vc = &mut self.vcpus[v.idx()];
                    vc.dy_eligible = false;
                    let entry = vc.charge_overhead(now, Nanos(handler));
                    self.ple_reentry(v, entry);
                    self.vcpu_continue(v);
                }
            }
        }
        if let Some(vm) = epoch_done {
            self.ple_epoch_close(vm);
        }
    }

    /// kvm_vcpu_on_spin: scan the VM's vCPUs round-robin after the last boosted one
    /// (two passes), skipping itself, running and voluntarily halted vCPUs, in
    /// yield-to-kernel mode those preempted in user mode, and candidates inside their
    /// own PLE handler whose dy_eligible flag is off (it flips on each look); try
    /// yield_to on each, until three fail with -ESRCH (Linux 3.16+) or, before 3.16
    /// (`host.ple.esrch_ends_scan`), until the first whose yield_to finds both
    /// runqueues holding one task, which ends the scan as a success without a yield.
    /// Returns the target's pCPU on success, and what the scan cost.
    fn directed_yield(&mut self, p: crate::sim::PcpuId, me: VcpuId) -> Scan {
        let now = self.now;
        let vm = self.vcpus[me.idx()].vm.idx();
        let (first, n) = (self.vms[vm].first_vcpu, self.vms[vm].nvcpus);
        let in_kernel = self.vcpus[me.idx()]
            .cur
            .map(|t| {
                matches!(
                    self.threads[t.idx()].act,
                    ThreadActivity::SpinLock(_)
                        | ThreadActivity::TlbWait
                        | ThreadActivity::SpinRwsem(_)
                )
            })
            .unwrap_or(true);
        let last = u32::from(self.vms[vm].last_boosted);
        let mut tries = 0;
        let mut scan = Scan::default();
        for pass in 0..2 {
            for i in 0..n {
                if (pass == 0 && i <= last) || (pass == 1 && i > last) {
                    continue;
                }
                // Every vCPU the loop reaches has its flag read, itself included.
                scan.looked += 1;
                let c = VcpuId(first + i);
                if c == me {
                    continue;
                }
                let cv = &self.vcpus[c.idx()];
                // Which vCPUs this kernel's handler looks at (a vCPU woken from halt
                // is runnable and `woke_from_halt` until it runs).
                let running = matches!(cv.hv, HvState::Running(_));
                if !looked_at(self.ple_candidates, cv) {
                    continue;
                }
                // Linux 4.14+: a kernel-mode spinner passes over candidates preempted
                // in user mode; from 5.3 a pending interrupt makes one a target.
                if self.ple_yield_to_kernel_mode && in_kernel && !running {
                    let pending = self.ple_pending_irq_counts
                        && (!cv.pending.is_empty() || !cv.pending_irq.is_empty());
                    if !cv.preempted_in_kernel && !pending {
                        continue;
                    }
                }
                // kvm_vcpu_eligible_for_directed_yield (Linux 3.7+): a candidate inside
                // its own PLE handler is eligible every other time it is considered;
                // any other candidate always is.
                if self.ple_dy_eligible && !eligible_for_directed_yield(&mut self.vcpus[c.idx()]) {
                    continue;
                }
                if running {
                    // yield_to finds the target running and gives up (returns 0: no
                    // try is used). Only the older kernels look at running vCPUs.
                    scan.failed_calls += 1;
                    continue;
                }
                match self.sched.yield_to(p, me, c, now) {
                    Some(tp) => {
                        self.vms[vm].last_boosted = i as u16;
                        scan.target = Some(tp);
                        return scan;
                    }
                    None if self.sched.yield_to_esrch(p, c) => {
                        scan.failed_calls += 1;
                        match after_esrch(self.ple_esrch_ends_scan, &mut tries) {
                            AfterEsrch::EndAsBoosted => {
                                self.vms[vm].last_boosted = i as u16;
                                return scan;
                            }
                            AfterEsrch::GiveUp => return scan,
                            AfterEsrch::NextCandidate => {}
                        }
                    }
                    None => scan.failed_calls += 1,
                }
            }
        }
        scan
    }
}

/// What one run of kvm_vcpu_on_spin found and did.
#[derive(Debug, Default)]
struct Scan {
    /// The pCPU of the vCPU it yielded to (None: no yield).
    target: Option<crate::sim::PcpuId>,
    /// vCPUs its loop reached (each costs `ple_scan_per_vcpu_ns`).
    looked: u32,
    /// yield_to calls that found no target: -ESRCH, or the target running or not
    /// runnable (each costs `yield_to_ns`: the double runqueue lock and the checks).
    failed_calls: u32,
}

/// What kvm_vcpu_on_spin does when yield_to finds the spinner's and the candidate's
/// runqueues holding one task each.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterEsrch {
    /// Linux before 3.16: the answer reads as a success (before 3.8 the boost succeeds;
    /// 3.8 to 3.15 return -ESRCH through a `bool`, so `yielded > 0`): the scan stops,
    /// the candidate becomes the last boosted, and the spinner, alone, keeps its pCPU.
    EndAsBoosted,
    /// Linux 3.16+: -ESRCH used one of the three tries; the scan goes on.
    NextCandidate,
    /// Linux 3.16+: the third -ESRCH ends the scan.
    GiveUp,
}

pub(crate) fn after_esrch(ends_scan: bool, tries: &mut u32) -> AfterEsrch {
    if ends_scan {
        return AfterEsrch::EndAsBoosted;
    }
    *tries += 1;
    if *tries >= 3 {
        AfterEsrch::GiveUp
    } else {
        AfterEsrch::NextCandidate
    }
}

/// Whether kvm_vcpu_on_spin looks at `v` under the kernel's candidate rule
/// (`host.ple.candidates`): before the `preempted` flag every vCPU not halted, then only
/// vCPUs preempted while running, from Linux 5.3 (`vcpu->ready`) also vCPUs woken from
/// halt that have not run since.
pub(crate) fn looked_at(rule: PleCandidates, v: &crate::hv::vcpu::Vcpu) -> bool {
    match rule {
        PleCandidates::NotHalted => v.hv != HvState::Halted,
        PleCandidates::Preempted => v.hv == HvState::Runnable && !v.woke_from_halt,
        PleCandidates::Ready => v.hv == HvState::Runnable,
    }
}

/// kvm_vcpu_eligible_for_directed_yield (virt/kvm/kvm_main.c): eligible unless inside its
/// own PLE handler with dy_eligible off; inside it, each look flips dy_eligible.
pub(crate) fn eligible_for_directed_yield(v: &mut crate::hv::vcpu::Vcpu) -> bool {
    let eligible = !v.in_spin_loop || v.dy_eligible;
    if v.in_spin_loop {
        v.dy_eligible = !v.dy_eligible;
    }
    eligible
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esrch_uses_a_try_since_3_16_and_ends_the_scan_before() {
        let mut tries = 0;
        assert_eq!(after_esrch(true, &mut tries), AfterEsrch::EndAsBoosted);
        assert_eq!(tries, 0, "no try counted before 3.16");
        assert_eq!(after_esrch(false, &mut tries), AfterEsrch::NextCandidate);
        assert_eq!(after_esrch(false, &mut tries), AfterEsrch::NextCandidate);
        assert_eq!(after_esrch(false, &mut tries), AfterEsrch::GiveUp);
    }

    #[test]
    fn each_kernel_looks_at_its_own_candidates() {
        use crate::host::cpumask::CpuMask;
        use crate::hv::vcpu::{HvState, Vcpu};
        use crate::sim::{PcpuId, VmId};
        let mk = |hv: HvState, woke: bool| {
            let mut v = Vcpu::new(VmId(0), 0, CpuMask::all(4));
            v.hv = hv;
            v.woke_from_halt = woke;
            v
        };
        let preempted = mk(HvState::Runnable, false);
        let woken = mk(HvState::Runnable, true);
        let running = mk(HvState::Running(PcpuId(1)), false);
        let halted = mk(HvState::Halted, false);
        use PleCandidates::*;
        // Before the preempted flag: everything not halted, running vCPUs included.
        assert!(looked_at(NotHalted, &preempted) && looked_at(NotHalted, &woken));
        assert!(looked_at(NotHalted, &running) && !looked_at(NotHalted, &halted));
        // vcpu->preempted: a vCPU woken from halt is no candidate until it has run.
        assert!(looked_at(Preempted, &preempted) && !looked_at(Preempted, &woken));
        assert!(!looked_at(Preempted, &running) && !looked_at(Preempted, &halted));
        // vcpu->ready (5.3+): woken vCPUs are candidates again.
        assert!(looked_at(Ready, &preempted) && looked_at(Ready, &woken));
        assert!(!looked_at(Ready, &running) && !looked_at(Ready, &halted));
    }

    #[test]
    fn dy_eligible_flips_only_inside_the_ple_handler() {
        let mut v = crate::hv::vcpu::Vcpu::new(
            crate::sim::VmId(0),
            0,
            crate::host::cpumask::CpuMask::all(4),
        );
        // Preempted outside its handler (a tick, a wake-up): always eligible.
        for _ in 0..3 {
            assert!(eligible_for_directed_yield(&mut v));
        }
        assert!(!v.dy_eligible, "the flag is left alone outside the handler");
        // Yielded from inside its handler: every other look.
        v.in_spin_loop = true;
        let looks: Vec<bool> = (0..4)
            .map(|_| eligible_for_directed_yield(&mut v))
            .collect();
        assert_eq!(looks, [false, true, false, true]);
    }

    fn kvm() -> KvmGrowShrink {
        KvmGrowShrink::new(&PleConfig::default(), 2)
    }

    #[test]
    fn kvm_defaults_double_on_exit_and_reset_on_sched_in() {
        let mut k = kvm();
        let v = VcpuId(0);
        k.on_exit(v, Nanos(0));
        assert_eq!(k.window(v), Some(8192));
        k.on_exit(v, Nanos(0));
        assert_eq!(k.window(v), Some(16384));
        assert_eq!(k.window(VcpuId(1)), Some(4096), "per-vCPU windows");
        k.on_sched_in(v);
        assert_eq!(k.window(v), Some(4096), "shrink 0 resets to base");
    }

    #[test]
    fn kvm_modifier_rules_follow_the_source() {
        let mut k = kvm();
        k.grow = 0;
        assert_eq!(k.grown(10_000), 4096, "grow < 1 → base");
        k.grow = 5000;
        assert_eq!(k.grown(10_000), 15_000, "grow >= base → add");
        k.max = 12_000;
        assert_eq!(k.grown(10_000), 12_000, "capped at max");
        k.shrink = 2;
        assert_eq!(k.shrunk(10_000), 5000, "shrink < base → divide");
        assert_eq!(k.shrunk(6000), 4096, "floored at base");
        k.shrink = 5000;
        assert_eq!(k.shrunk(20_000), 15_000, "shrink >= base → subtract");
    }
}
