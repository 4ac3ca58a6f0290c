//! Run-queue length per pCPU, time-weighted: the vCPUs that want a pCPU — the running
//! one and those queued for it. A vCPU waits where the scheduler homes it when it
//! becomes runnable (`HostScheduler::home_of`) and counts there until it runs; a
//! scheduler that moves a waiting vCPU (load balancing) moves it at its next dispatch.
//! O(1) per transition; memory is pCPUs × `MAX_LEN` plus one slot per vCPU.

use crate::sim::{Nanos, PcpuId, VcpuId};

/// Lengths at or above this are counted in the last bucket.
pub const MAX_LEN: usize = 32;

#[derive(Clone, Debug)]
pub struct RunqMeter {
    /// Per vCPU: the pCPU it counts at (u32::MAX: none, it is halted).
    at: Vec<u32>,
    len: Vec<u32>,
    since: Vec<Nanos>,
    /// Per pCPU, per length: nanoseconds spent at that length.
    time: Vec<[u64; MAX_LEN + 1]>,
    /// When tracing: (pCPU, from, new length) changes not yet written.
    pub trace_changes: Option<Vec<(u32, Nanos, u32)>>,
}

impl RunqMeter {
    pub fn new(pcpus: usize, vcpus: usize) -> RunqMeter {
        RunqMeter {
            at: vec![u32::MAX; vcpus],
            len: vec![0; pcpus],
            since: vec![Nanos::ZERO; pcpus],
            time: vec![[0; MAX_LEN + 1]; pcpus],
            trace_changes: None,
        }
    }

    fn traced(&mut self, p: usize, now: Nanos) {
        if let Some(buf) = self.trace_changes.as_mut() {
            buf.push((p as u32, now, self.len[p]));
        }
    }

    fn book(&mut self, p: usize, now: Nanos) {
        let l = (self.len[p] as usize).min(MAX_LEN);
        self.time[p][l] += (now - self.since[p]).0;
        self.since[p] = now;
    }

    /// `v` wants `p` (it runs there, or waits for it) from `now`.
    pub fn wants(&mut self, v: VcpuId, p: PcpuId, now: Nanos) {
        let old = self.at[v.idx()];
        if old == p.0 {
            return;
        }
        if old != u32::MAX {
            self.book(old as usize, now);
            self.len[old as usize] -= 1;
            self.traced(old as usize, now);
        }
        self.book(p.idx(), now);
        self.len[p.idx()] += 1;
        self.traced(p.idx(), now);
        self.at[v.idx()] = p.0;
    }

    /// `v` wants no pCPU any more (it halted).
    pub fn done(&mut self, v: VcpuId, now: Nanos) {
        let old = self.at[v.idx()];
        if old != u32::MAX {
            self.book(old as usize, now);
            self.len[old as usize] -= 1;
            self.traced(old as usize, now);
            self.at[v.idx()] = u32::MAX;
        }
    }

    /// Closes the books at the end of the run.
    pub fn finish(&mut self, now: Nanos) {
        for p in 0..self.len.len() {
            self.book(p, now);
        }
    }

    /// Nanoseconds `p` spent at each length (the last bucket: `MAX_LEN` or more).
    pub fn times(&self, p: usize) -> &[u64; MAX_LEN + 1] {
        &self.time[p]
    }

    /// Mean length of `p` over its booked time.
    pub fn mean(&self, p: usize) -> f64 {
        let t = &self.time[p];
        let total: u64 = t.iter().sum();
        if total == 0 {
            return 0.0;
        }
        t.iter()
            .enumerate()
            .map(|(l, &ns)| l as f64 * ns as f64)
            .sum::<f64>()
            / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_weighted_by_time() {
        let mut m = RunqMeter::new(2, 2);
        let (p0, p1) = (PcpuId(0), PcpuId(1));
        let (a, b) = (VcpuId(0), VcpuId(1));
        m.wants(a, p0, Nanos(0)); // 1 from 0
        m.wants(b, p0, Nanos(10)); // 2 from 10
        m.wants(b, p0, Nanos(20)); // no change
        m.wants(b, p1, Nanos(40)); // p0: 1, p1: 1 from 40
        m.done(a, Nanos(70));
        m.finish(Nanos(100));
        assert_eq!(m.times(0)[1], 10 + 30);
        assert_eq!(m.times(0)[2], 30);
        assert_eq!(m.times(0)[0], 30);
        assert_eq!(m.times(1)[0], 40);
        assert_eq!(m.times(1)[1], 60);
        assert!((m.mean(0) - (40.0 + 60.0) / 100.0).abs() < 1e-12);
    }

    #[test]
    fn long_queues_land_in_the_last_bucket() {
        let mut m = RunqMeter::new(1, 40);
        for v in 0..40 {
            m.wants(VcpuId(v), PcpuId(0), Nanos(0));
        }
        m.finish(Nanos(5));
        assert_eq!(m.times(0)[MAX_LEN], 5);
    }
}
