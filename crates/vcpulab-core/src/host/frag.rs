//! CPU fragmentation: time a pCPU sits idle while some vCPU waits for a pCPU. Strict
//! co-scheduling leaves pCPUs idle that cannot fit a whole gang; this makes it visible.
//!
//! Kept in O(1) per transition: `W(t)` is the total time up to `t` during which at
//! least one vCPU waited; an idle period [a, b] of a pCPU overlaps waiting for
//! `W(b) - W(a)`. (Pinning is ignored: a waiting vCPU counts even where it may not run.)

use crate::sim::{Nanos, PcpuId};

#[derive(Clone, Debug)]
pub struct FragMeter {
    /// vCPUs runnable but not running.
    waiting: u32,
    w_acc: u64,
    w_last: Nanos,
    /// Per pCPU: W at the start of its current idle period (None while busy).
    idle_mark: Vec<Option<u64>>,
    /// Per pCPU: idle time while some vCPU waited.
    pub idle_runnable_ns: Vec<u64>,
}

impl FragMeter {
    /// Every pCPU starts idle at time zero, no vCPU waiting.
    pub fn new(pcpus: usize) -> FragMeter {
        FragMeter {
            waiting: 0,
            w_acc: 0,
            w_last: Nanos::ZERO,
            idle_mark: vec![Some(0); pcpus],
            idle_runnable_ns: vec![0; pcpus],
        }
    }

    fn w_at(&self, now: Nanos) -> u64 {
        self.w_acc
            + if self.waiting > 0 {
                (now - self.w_last).0
            } else {
                0
            }
    }

    /// A vCPU starts (`true`) or stops waiting for a pCPU.
    pub fn vcpu_waiting(&mut self, now: Nanos, starts: bool) {
        self.w_acc = self.w_at(now);
        self.w_last = now;
        if starts {
            self.waiting += 1;
        } else {
            self.waiting = self.waiting.saturating_sub(1);
        }
    }

    pub fn pcpu_idle(&mut self, p: PcpuId, now: Nanos) {
        if self.idle_mark[p.idx()].is_none() {
            self.idle_mark[p.idx()] = Some(self.w_at(now));
        }
    }

    pub fn pcpu_busy(&mut self, p: PcpuId, now: Nanos) {
        if let Some(m) = self.idle_mark[p.idx()].take() {
            self.idle_runnable_ns[p.idx()] += self.w_at(now) - m;
        }
    }

    /// Closes the idle periods still open at the end of the run.
    pub fn finish(&mut self, now: Nanos) {
        for p in 0..self.idle_mark.len() {
            let id = PcpuId(p as u32);
            if self.idle_mark[p].is_some() {
                self.pcpu_busy(id, now);
                self.pcpu_idle(id, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_idle_time_that_overlaps_waiting() {
        let mut f = FragMeter::new(2);
        let (p0, p1) = (PcpuId(0), PcpuId(1));
        f.pcpu_busy(p0, Nanos(0));
        f.pcpu_busy(p1, Nanos(0));
        f.pcpu_idle(p1, Nanos(10)); // p1 idle from 10
        f.vcpu_waiting(Nanos(20), true); // someone waits 20..50
        f.vcpu_waiting(Nanos(50), false);
        f.pcpu_busy(p1, Nanos(60)); // idle 10..60, of which 20..50 overlapped
        f.vcpu_waiting(Nanos(70), true);
        f.pcpu_idle(p0, Nanos(80)); // p0 idle from 80 to the end (100), waiting all along
        f.finish(Nanos(100));
        assert_eq!(f.idle_runnable_ns, vec![20, 30]);
    }
}
