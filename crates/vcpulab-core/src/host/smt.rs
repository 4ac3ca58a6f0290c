//! Simultaneous multithreading: the hardware threads of one core share its execution
//! units, so a thread runs guest work more slowly while another thread of its core is
//! busy.
//!
//! A thread is busy (`Pcpu::smt_busy`) while it runs guest work or the hypervisor's
//! paths (entry, exit, HLT). A PAUSE loop — a spinning waiter, guest idle=poll or
//! haltpoll polling, KVM's halt polling — leaves the core to its sibling, which is what
//! PAUSE is for on SMT cores (Intel's optimization reference manual recommends it in
//! spin-wait loops so that the spinning thread gives execution resources to the other
//! thread of its core), and so does the host's idle loop (`mwait`/`hlt`). Only guest
//! *work* slows (a
//! thread computing, and the guest kernel's paths charged as work); spin budgets, PLE
//! windows and the hypervisor's costs are wall time, as they are measured in cycles of
//! a clock that does not slow. The speed changes only when a sibling's busy state
//! changes (`smt_set_busy`: a dispatch, a deschedule, a segment of work, spin or poll
//! starting): the siblings' progress is credited at the old speed, each running
//! vCPU's `SLOW_SMT` flag is updated and the siblings' work re-timed at the new
//! speed. Without SMT none of it runs.

use crate::guest::thread::ThreadActivity;
use crate::host::pcpu::Pcpu;
use crate::hv::vcpu::{HvState, VcpuActivity};
use crate::scenario::TopologyConfig;
use crate::sim::world::World;
use crate::sim::{PcpuId, VcpuId};

use crate::host::speed::{ONE, SLOW_SMT};

#[derive(Clone, Copy, Debug)]
pub struct Smt {
    threads_per_core: u32,
    /// A thread's speed while another thread of its core is busy.
    shared_speed: u64,
}

impl Smt {
    /// `None` without SMT (one thread per core): nothing to model.
    pub fn new(t: &TopologyConfig) -> Option<Smt> {
        (t.threads_per_core > 1).then(|| Smt {
            threads_per_core: t.threads_per_core,
            shared_speed: ((t.sibling_busy_speed * ONE as f64).round() as u64).clamp(1, ONE),
        })
    }

    /// A thread's speed while another thread of its core is busy (host/speed.rs).
    pub fn shared_speed(&self) -> u64 {
        self.shared_speed
    }

    /// Whether a vCPU in state `hv` runs on a core another busy thread shares.
    #[inline]
    pub fn shared(&self, pcpus: &[Pcpu], hv: HvState) -> bool {
        let HvState::Running(p) = hv else {
            return false;
        };
        self.core_of(p).any(|q| q != p.idx() && pcpus[q].smt_busy)
    }

    fn core_of(&self, p: PcpuId) -> std::ops::Range<usize> {
        let t = self.threads_per_core as usize;
        let lo = p.idx() / t * t;
        lo..lo + t
    }
}

impl World {
    /// `p` (running its vCPU's work, the hypervisor's paths, or nothing that occupies
    /// the core) turns `busy` or not: its siblings' progress is credited at the old
    /// speed, every running vCPU of the core learns whether its core is now shared, and
    /// the siblings' work is re-timed at the new speed.
    #[inline(always)]
    pub(crate) fn smt_set_busy(&mut self, p: PcpuId, busy: bool) {
        if let Some(smt) = self.smt {
            if self.pcpus[p.idx()].smt_busy != busy {
                self.smt_switch(smt, p, busy);
            }
        }
    }

    /// The running `v` starts something that occupies its core (`busy`: work, an exit)
    /// or does not (a spin, a poll): `smt_set_busy` on its pCPU.
    #[inline(always)]
    pub(crate) fn smt_vcpu_busy(&mut self, v: VcpuId, busy: bool) {
        if self.smt.is_some() {
            self.smt_vcpu_switch(v, busy);
        }
    }

    #[cold]
    #[inline(never)]
    fn smt_vcpu_switch(&mut self, v: VcpuId, busy: bool) {
        if let HvState::Running(p) = self.vcpus[v.idx()].hv {
            self.smt_set_busy(p, busy);
        }
    }

    #[cold]
    #[inline(never)]
    fn smt_switch(&mut self, smt: Smt, p: PcpuId, busy: bool) {
        self.smt_sync(smt, p);
        self.pcpus[p.idx()].smt_busy = busy;
        self.smt_flags(smt, p);
        self.smt_retime(smt, p);
    }

    /// The vCPUs running on `p`'s siblings are credited their progress so far.
    fn smt_sync(&mut self, smt: Smt, p: PcpuId) {
        for q in smt.core_of(p) {
            if q != p.idx() {
                if let Some(w) = self.pcpus[q].cur {
                    self.sync_progress(w);
                }
            }
        }
    }

    /// A vCPU was dispatched on `p`: it and its siblings learn whether their core is
    /// now shared (`Vcpu::slow`'s `SLOW_SMT`, read where progress is credited and work is
    /// timed).
    #[inline(always)]
    pub(crate) fn smt_update_core(&mut self, p: PcpuId) {
        if let Some(smt) = self.smt {
            self.smt_flags(smt, p);
        }
    }

    /// The running vCPUs of `p`'s core learn whether their core is shared.
    fn smt_flags(&mut self, smt: Smt, p: PcpuId) {
        for q in smt.core_of(p) {
            if let Some(w) = self.pcpus[q].cur {
                let shared = smt.shared(&self.pcpus, self.vcpus[w.idx()].hv);
                let vc = &mut self.vcpus[w.idx()];
                vc.slow = (vc.slow & !SLOW_SMT) | if shared { SLOW_SMT } else { 0 };
            }
        }
    }

    /// The work of the vCPUs running on `p`'s siblings is re-timed at their new speed
    /// (the step armed at the old one is dropped).
    fn smt_retime(&mut self, smt: Smt, p: PcpuId) {
        for q in smt.core_of(p) {
            if q == p.idx() {
                continue;
            }
            let Some(w) = self.pcpus[q].cur else { continue };
            let vc = &self.vcpus[w.idx()];
            let Some(t) = vc.cur else { continue };
            let th = &self.threads[t.idx()];
            let working = vc.act == VcpuActivity::Thread
                && th.act == ThreadActivity::Work
                && (th.debt.0 > 0 || th.remaining.0 > 0);
            if !working {
                continue;
            }
            let t0 = self.now.max(vc.resume_at);
            let vc = &mut self.vcpus[w.idx()];
            vc.gen = vc.gen.wrapping_add(1);
            self.arm_work(w, t, t0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_speed_is_the_configured_fraction() {
        let smt = Smt::new(&TopologyConfig {
            threads_per_core: 2,
            ..TopologyConfig::default()
        })
        .expect("SMT");
        let p = crate::host::speed::progress(smt.shared_speed(), 1_000_000);
        assert!(p.abs_diff(650_000) < 10, "{p}");
        assert!(Smt::new(&TopologyConfig::default()).is_none());
    }
}
