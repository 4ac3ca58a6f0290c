//! The guest idle policy: with no thread to run a vCPU polls (idle=poll), polls for
//! haltpoll's adaptive window (drivers/cpuidle/governors/haltpoll.c), or executes HLT.

use crate::hv::vcpu::{VCat, VcpuActivity};
use crate::sim::world::World;
use crate::sim::{Nanos, VcpuId};

impl World {
    /// No thread to run: the guest idles as configured.
    pub(crate) fn vcpu_idle_enter(&mut self, v: VcpuId, t0: Nanos) {
        let now = self.now;
        let vm = self.vcpus[v.idx()].vm.idx();
        let (poll, haltpoll) = (
            self.vms[vm].guest.idle_poll,
            self.vms[vm].guest.haltpoll_max > 0,
        );
        let vc = &mut self.vcpus[v.idx()];
        if vc.idle_since == Nanos::MAX {
            vc.idle_since = now;
        }
        if poll {
            vc.set_cat(now, VCat::IdlePoll);
            vc.act = VcpuActivity::IdlePoll;
            // A polling loop's PAUSE leaves the core to its sibling.
            self.smt_vcpu_busy(v, false);
            return;
        }
        if haltpoll && vc.guest_poll_ns > 0 {
            vc.set_cat(now, VCat::IdlePoll);
            vc.act = VcpuActivity::IdlePoll;
            self.smt_vcpu_busy(v, false);
            let vc = &self.vcpus[v.idx()];
            let end = t0 + Nanos(vc.guest_poll_ns);
            self.push_step(v, end);
            return;
        }
        self.start_halt(v, t0, true);
    }

    /// HLT: the exit takes `vmexit_ns`, then the vCPU blocks (or the host polls). An
    /// `idle` halt first stops the NOHZ tick: a timer write, another exit (a pv
    /// spinlock's halt does not).
    pub(crate) fn start_halt(&mut self, v: VcpuId, t0: Nanos, idle: bool) {
        let now = self.now;
        let tick = if idle {
            let vm = self.vcpus[v.idx()].vm.idx();
            self.timer_write_cost(vm)
        } else {
            0
        };
        let exit = tick + self.costs.vmexit_ns;
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, VCat::Overhead);
        vc.act = VcpuActivity::Halting;
        self.smt_vcpu_busy(v, true);
        self.push_step(v, t0 + Nanos(exit));
    }

    /// The vCPU leaves idle for a thread: haltpoll adapts its window to the halt's
    /// residency, as drivers/cpuidle/governors/haltpoll.c does — `haltpoll_reflect`
    /// calls `adjust_poll_limit` only when the HLT state was entered (index != 0), with
    /// the time spent in HLT (not the poll before it): grow after a halt longer than the
    /// window and no longer than the maximum, halve after a longer one (0 below
    /// grow_start). An idle period that a poll ended changes nothing.
    pub(crate) fn idle_leave(&mut self, v: VcpuId) {
        let now = self.now;
        let vm = self.vcpus[v.idx()].vm.idx();
        let g = &self.vms[vm].guest;
        let vc = &mut self.vcpus[v.idx()];
        let idle_since = vc.idle_since;
        vc.idle_since = Nanos::MAX;
        // Halted during this idle period (`halted_at` is set when the HLT exit ends).
        if g.haltpoll_max > 0 && vc.halted_at >= idle_since {
            let block = now.0.saturating_sub(vc.halted_at.0);
            let cur = vc.guest_poll_ns;
            if cur < block && block <= g.haltpoll_max {
                vc.guest_poll_ns = (cur * 2).max(g.haltpoll_start).min(g.haltpoll_max);
            } else if block > g.haltpoll_max {
                let shrunk = cur / 2;
                vc.guest_poll_ns = if shrunk < g.haltpoll_start { 0 } else { shrunk };
            }
        }
    }
}
