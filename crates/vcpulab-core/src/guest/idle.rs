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
        if self.vcpus[v.idx()].idle_since == Nanos::MAX {
            self.vcpus[v.idx()].idle_since = now;
            self.vms[vm].balance.idle_vcpus += 1;
            // Newidle found nothing to pull: the busy vCPUs' ticks will kick it.
            self.nohz_arm(vm);
        }
        let vc = &mut self.vcpus[v.idx()];
        // How long to poll: idle=poll for ever; haltpoll to the end of a poll that a PLE
        // exit or a preemption interrupted (poll_idle measures its limit from its own
        // start), else for the current window.
        let poll_end = if poll {
            Some(Nanos::MAX)
        } else if !haltpoll {
            None
        } else if vc.poll_until != Nanos::MAX {
            Some(vc.poll_until).filter(|&end| end > t0)
        } else {
            (vc.guest_poll_ns > 0).then(|| t0 + Nanos(vc.guest_poll_ns))
        };
        let Some(end) = poll_end else {
            return self.start_halt(v, t0, true);
        };
        if !poll {
            vc.poll_until = end;
        }
        vc.set_cat(now, VCat::IdlePoll);
        vc.act = VcpuActivity::IdlePoll;
        // A polling loop's PAUSE leaves the core to its sibling.
        self.smt_vcpu_busy(v, false);
        self.arm_idle_poll(v, t0, end);
    }

    /// Arms an idle poll of `v` from `t0` to `end` (MAX: idle=poll, no end). The poll
    /// loop (poll_idle, drivers/cpuidle/poll_state.c) runs PAUSE (cpu_relax) in kernel
    /// mode, so PAUSE-loop exiting sees it as any kernel spin (hv/ple.rs).
    fn arm_idle_poll(&mut self, v: VcpuId, t0: Nanos, end: Nanos) {
        let ple_dl = self.ple_deadline(v, t0).unwrap_or(Nanos::MAX);
        self.vcpus[v.idx()].ple_deadline = ple_dl;
        let dl = end.min(ple_dl);
        if dl != Nanos::MAX {
            self.push_step(v, dl);
        }
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
        if idle {
            vc.poll_until = Nanos::MAX;
        }
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
        let idle_since = self.vcpus[v.idx()].idle_since;
        if idle_since != Nanos::MAX {
            self.vms[vm].balance.idle_vcpus -= 1;
        }
        let g = &self.vms[vm].guest;
        let vc = &mut self.vcpus[v.idx()];
        vc.idle_since = Nanos::MAX;
        // rq->avg_idle (ttwu_do_wakeup's update when an idle CPU gets work).
        vc.avg_idle = self.vms[vm]
            .balance
            .next_avg_idle(vc.avg_idle, now.0.saturating_sub(idle_since.0));
        vc.poll_until = Nanos::MAX;
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
