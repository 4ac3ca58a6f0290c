//! KVM host halt polling (virt/kvm/kvm_main.c kvm_vcpu_halt): before descheduling a
//! halted vCPU the host polls for a wake-up for `halt_poll_ns`, but only while nothing
//! else wants the pCPU. The window adapts per vCPU: it grows (x2, starting at
//! grow_start) after a short halt, shrinks after a halt longer than the maximum.

use crate::hv::sched::StopReason;
use crate::hv::vcpu::{HvState, VCat, VcpuActivity};
use crate::sim::world::World;
use crate::sim::{Nanos, VcpuId};

impl World {
    /// Whether `v` should poll instead of blocking now.
    pub(crate) fn try_host_poll(&mut self, v: VcpuId) -> bool {
        if !self.halt_poll.enabled {
            return false;
        }
        let HvState::Running(p) = self.vcpus[v.idx()].hv else {
            return false;
        };
        let vm = self.vcpus[v.idx()].vm.idx();
        // When the guest polls itself (haltpoll), KVM turns host polling off.
        if self.vms[vm].guest.haltpoll_max > 0 {
            return false;
        }
        let window = self.vcpus[v.idx()].halt_poll_ns;
        if window == 0 || self.sched.queued_on(p) > 0 {
            return false;
        }
        let now = self.now;
        self.pcpus[p.idx()].book_run(now);
        self.pcpus[p.idx()].poll_since = Some(now);
        let vc = &mut self.vcpus[v.idx()];
        vc.set_cat(now, VCat::Halted);
        vc.act = VcpuActivity::HostPoll;
        vc.halted_at = now;
        vc.gen = vc.gen.wrapping_add(1);
        // KVM's polling loop (cpu_relax: PAUSE) leaves the core to its sibling.
        self.smt_set_busy(p, false);
        self.push_step(v, now + Nanos(window));
        true
    }

    /// Polling on `v` ends: `woken` when a wake-up arrived, else the window ran out.
    pub(crate) fn end_host_poll(&mut self, v: VcpuId, woken: bool) {
        let now = self.now;
        let HvState::Running(p) = self.vcpus[v.idx()].hv else {
            return;
        };
        let pc = &mut self.pcpus[p.idx()];
        if let Some(s) = pc.poll_since.take() {
            pc.poll_ns += (now - s).0;
        }
        pc.run_start = now;
        pc.entry_until = now;
        if woken {
            self.vms[self.vcpus[v.idx()].vm.idx()].halt_poll_hits += 1;
            self.adapt_halt_poll(v);
            // Entry, then the guest leaves idle and restarts its tick (an exit).
            let vm = self.vcpus[v.idx()].vm.idx();
            let tick = if self.vcpus[v.idx()].cur.is_none() {
                self.timer_write_cost(vm)
            } else {
                0
            };
            let entry = Nanos(self.costs.vmexit_ns + tick);
            let vc = &mut self.vcpus[v.idx()];
            // (set_cat: charges, and keeps a trace's state track in step.)
            vc.set_cat(now, VCat::Overhead);
            vc.act = VcpuActivity::Off;
            vc.overhead_until = now + entry;
            vc.resume_at = vc.overhead_until;
            self.pcpus[p.idx()].entry_until = now + entry;
            self.smt_set_busy(p, true);
        } else {
            self.vms[self.vcpus[v.idx()].vm.idx()].halt_poll_misses += 1;
            let vc = &mut self.vcpus[v.idx()];
            vc.act = VcpuActivity::Off;
            self.deschedule(p, v, StopReason::Blocked);
            self.schedule(p);
        }
    }

    /// KVM's adjustment after a halt of `halt_ns`.
    pub(crate) fn adapt_halt_poll(&mut self, v: VcpuId) {
        if !self.halt_poll.enabled {
            return;
        }
        let now = self.now;
        let cfg = &self.halt_poll;
        let max = (cfg.max_us * 1e3) as u64;
        let start = (cfg.grow_start_us * 1e3) as u64;
        let (grow, shrink) = (cfg.grow, cfg.shrink);
        let vc = &mut self.vcpus[v.idx()];
        let halt_ns = now.0.saturating_sub(vc.halted_at.0);
        let cur = vc.halt_poll_ns;
        if halt_ns <= cur {
            // A successful poll: keep the window.
        } else if cur > 0 && halt_ns > max {
            // shrink_halt_poll_ns: below grow_start the window drops to 0 (Linux 5.15+,
            // "KVM: halt polling: reset halt_poll_ns below grow_start", 2021).
            let shrunk = cur.checked_div(shrink).unwrap_or(0);
            vc.halt_poll_ns = if shrunk < start { 0 } else { shrunk };
        } else if cur < max && halt_ns < max {
            vc.halt_poll_ns = (cur * grow).max(start).min(max);
        }
    }
}
