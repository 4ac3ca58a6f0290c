//! PLE-exit actions of the co-scheduling family (CVS, Wang et al., FGCS 2016; relaxed co-scheduling as in VMware ESX): yield-to-head,
//! yield-to-tail (literally: behind every queued vCPU; Xen's own `yield` action stays
//! behind its priority only), co-schedule the spinner's VM now, and CVS, which
//! picks one of the three by the vCPU over-commitment rate (VOR) seen at the exit.
//!
//! CVS's decision sums the runnable-vCPU count of each pCPU's runqueue (a counter the
//! runqueue keeps, as Xen's and Linux's do), so its cost is O(pCPUs):
//! `cvs_decision_ns + cvs_per_runqueue_ns x pCPUs` (host.costs). That time is hypervisor
//! overhead: the spinner's when it keeps running (co-scheduling), the next vCPU's
//! switch-in on that pCPU when the spinner yields.
//!
//! A co-schedule that puts no sibling on a pCPU (none is preempted, or every pCPU the
//! siblings may use already runs the VM) does not leave the spinner spinning: it falls
//! back to a yield — CVS to the yield its VOR range gives (yield-to-head below
//! `cvs_yield_head_below`, else yield-to-tail), the plain co-schedule action to a plain
//! yield.

use crate::host::cpumask::CpuMask;
use crate::hv::sched::StopReason;
use crate::hv::vcpu::HvState;
use crate::sim::world::World;
use crate::sim::{Nanos, PcpuId, VcpuId};

/// Per-VM counts of the co-scheduling family's PLE-exit actions.
#[derive(Clone, Debug, Default)]
pub struct CoschedStats {
    /// Co-scheduling attempts, and siblings actually put on pCPUs by them.
    pub coschedules: u64,
    pub cosched_vcpus: u64,
    pub yield_head: u64,
    pub yield_tail: u64,
    /// Co-schedules that moved no sibling and fell back to a yield.
    pub cosched_fallbacks: u64,
    /// CVS decisions and their total cost.
    pub cvs_decisions: u64,
    pub cvs_decision_ns: u64,
}

/// What CVS does at a PLE exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CvsChoice {
    Coschedule,
    YieldToHead,
    YieldToTail,
}

/// CVS's rule. The expected distance of a queued vCPU from its runqueue's head is
/// `(VOR - 1) / 2`; below one vCPU (VOR < 3 by default) the holder is best run at once
/// (co-scheduling), below two (VOR < 5) the spinner should come back soon (head), and
/// beyond that it should leave the pCPU to the others for longest (tail).
pub fn cvs_choice(vor: f64, coschedule_below: f64, yield_head_below: f64) -> CvsChoice {
    if vor < coschedule_below {
        CvsChoice::Coschedule
    } else if vor < yield_head_below {
        CvsChoice::YieldToHead
    } else {
        CvsChoice::YieldToTail
    }
}

/// Cost of one CVS decision on a host of `pcpus` pCPUs: O(pCPUs), one runqueue counter
/// read per pCPU.
pub fn cvs_decision_cost(fixed_ns: u64, per_runqueue_ns: u64, pcpus: usize) -> u64 {
    fixed_ns + per_runqueue_ns * pcpus as u64
}

impl World {
    /// vCPUs running or waiting for a pCPU (not halted).
    pub(crate) fn runnable_vcpus(&self) -> usize {
        self.vcpus
            .iter()
            .filter(|v| v.hv != HvState::Halted)
            .count()
    }

    /// Yield-to-tail: the spinner goes behind every vCPU queued on its runqueue, so it
    /// runs again after all of them (about VOR - 1 slices later).
    pub(crate) fn ple_yield_tail(&mut self, p: PcpuId, v: VcpuId) {
        let vm = self.vcpus[v.idx()].vm.idx();
        self.vms[vm].yields_ok += 1;
        self.cosched[vm].yield_tail += 1;
        self.deschedule(p, v, StopReason::Yielded);
        self.sched.requeue(v, false);
        self.schedule(p);
    }

    /// Yield-to-head: the spinner gives the pCPU to the next queued vCPU and is put at
    /// the head of its runqueue, so it runs again right after that one.
    pub(crate) fn ple_yield_head(&mut self, p: PcpuId, v: VcpuId) {
        let vm = self.vcpus[v.idx()].vm.idx();
        self.vms[vm].yields_ok += 1;
        self.cosched[vm].yield_head += 1;
        self.deschedule(p, v, StopReason::Yielded);
        // Behind the others for the pick, so another vCPU gets the pCPU; then first.
        self.sched.requeue(v, false);
        self.schedule(p);
        // Picked again at once when nothing else was queued: then it simply runs.
        self.sched.requeue(v, true);
    }

    /// Co-schedule the spinner's VM: each preempted sibling is made the next vCPU of a
    /// pCPU that runs no vCPU of the VM (an idle one first, then its own runqueue's),
    /// and that pCPU reschedules when the reschedule IPI reaches it. The spinner keeps spinning: the holder is among
    /// the siblings now running. False (and nothing done) when no sibling moved.
    pub(crate) fn ple_coschedule(&mut self, p: PcpuId, v: VcpuId) -> bool {
        let now = self.now;
        let vm = self.vcpus[v.idx()].vm;
        let (first, n) = (self.vms[vm.idx()].first_vcpu, self.vms[vm.idx()].nvcpus);
        let npc = self.pcpus.len() as u32;
        // The pCPUs that run the VM or were given one of its vCPUs (up to 1,024).
        let mut taken = CpuMask::default();
        for (q, pc) in self.pcpus.iter().enumerate() {
            let runs_vm = pc.cur.is_some_and(|c| self.vcpus[c.idx()].vm == vm);
            if runs_vm {
                taken.insert(q as u32);
            }
        }
        taken.insert(p.0);
        let mut moved = 0u64;
        let ipi = Nanos(self.costs.native_ipi_ns);
        for i in 0..n {
            let s = VcpuId(first + i);
            if s == v || self.vcpus[s.idx()].hv != HvState::Runnable {
                continue;
            }
            let mask = self.vcpus[s.idx()].mask;
            let free = |q: u32| mask.contains(q) && !taken.contains(q);
            let home = self.sched.home_of(s).0;
            let idle = |q: u32| self.pcpus[q as usize].cur.is_none();
            let target = if free(home) && idle(home) {
                Some(home)
            } else {
                (0..npc)
                    .find(|&q| free(q) && idle(q))
                    .or_else(|| free(home).then_some(home))
                    .or_else(|| (0..npc).find(|&q| free(q)))
            };
            let Some(q) = target else {
                break; // every pCPU already runs the VM
            };
            taken.insert(q);
            if self.sched.run_next(PcpuId(q), s) {
                moved += 1;
                // The other pCPU learns of it by a reschedule IPI (Xen's
                // cpu_raise_softirq(SCHEDULE_SOFTIRQ), Linux's smp_send_reschedule),
                // as a directed yield's target does: the host's IPI latency.
                self.request_resched(
                    PcpuId(q),
                    now + ipi,
                    crate::hv::preemption::PreemptCause::Coordination,
                );
            }
        }
        let st = &mut self.cosched[vm.idx()];
        st.coschedules += 1;
        st.cosched_vcpus += moved;
        if moved > 0 {
            self.vms[vm.idx()].yields_ok += 1;
            self.vcpu_continue(v);
        }
        moved > 0
    }

    /// The co-schedule action: co-schedule, or, when that moved nobody, a plain yield.
    pub(crate) fn ple_coschedule_or_yield(&mut self, p: PcpuId, v: VcpuId) {
        if !self.ple_coschedule(p, v) {
            self.cosched[self.vcpus[v.idx()].vm.idx()].cosched_fallbacks += 1;
            let vm = self.vcpus[v.idx()].vm.idx();
            self.vms[vm].yields_ok += 1;
            self.deschedule(p, v, StopReason::Yielded);
            self.schedule(p);
        }
    }

    /// CVS: count the runnable vCPUs, derive VOR, pick the action, pay the decision.
    pub(crate) fn ple_cvs(&mut self, p: PcpuId, v: VcpuId) {
        let now = self.now;
        let vor = self.runnable_vcpus() as f64 / self.pcpus.len() as f64;
        let cost = cvs_decision_cost(
            self.costs.cvs_decision_ns,
            self.costs.cvs_per_runqueue_ns,
            self.pcpus.len(),
        );
        let vm = self.vcpus[v.idx()].vm.idx();
        self.cosched[vm].cvs_decisions += 1;
        self.cosched[vm].cvs_decision_ns += cost;
        let choice = cvs_choice(vor, self.cvs_coschedule_below, self.cvs_yield_head_below);
        match choice {
            CvsChoice::Coschedule => {
                self.vcpus[v.idx()].charge_overhead(now, Nanos(cost));
                if !self.ple_coschedule(p, v) {
                    // Nobody to co-schedule: yield as the VOR range says (the decision
                    // is paid already, by the spinner).
                    self.cosched[vm].cosched_fallbacks += 1;
                    if vor < self.cvs_yield_head_below {
                        self.ple_yield_head(p, v);
                    } else {
                        self.ple_yield_tail(p, v);
                    }
                }
            }
            CvsChoice::YieldToHead | CvsChoice::YieldToTail => {
                // The spinner leaves at once; the decision delays the next switch-in.
                self.pcpus[p.idx()].pending_overhead_ns += cost;
                if choice == CvsChoice::YieldToHead {
                    self.ple_yield_head(p, v);
                } else {
                    self.ple_yield_tail(p, v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvs_picks_each_algorithm_in_its_vor_range() {
        for (vor, want) in [
            (0.5, CvsChoice::Coschedule),
            (1.0, CvsChoice::Coschedule),
            (2.99, CvsChoice::Coschedule),
            (3.0, CvsChoice::YieldToHead),
            (4.5, CvsChoice::YieldToHead),
            (5.0, CvsChoice::YieldToTail),
            (8.0, CvsChoice::YieldToTail),
        ] {
            assert_eq!(cvs_choice(vor, 3.0, 5.0), want, "VOR {vor}");
        }
        // Without yield-to-head: co-schedule below 4, yield-to-tail from 4.
        assert_eq!(cvs_choice(3.9, 4.0, 4.0), CvsChoice::Coschedule);
        assert_eq!(cvs_choice(4.0, 4.0, 4.0), CvsChoice::YieldToTail);
        assert_eq!(cvs_choice(4.5, 4.0, 4.0), CvsChoice::YieldToTail);
    }

    #[test]
    fn the_decision_grows_with_pcpus_not_vcpus() {
        assert_eq!(cvs_decision_cost(100, 20, 4), 180);
        assert_eq!(cvs_decision_cost(100, 20, 16), 420);
    }
}
