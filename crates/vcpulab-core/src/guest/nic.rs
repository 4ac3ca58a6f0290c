//! An open-loop network receiver (a UDP stream as `iperf -u` sends it): datagrams
//! arrive from outside at a fixed rate, whatever the receiver does, into a bounded
//! buffer (the NIC ring and socket buffer) and are dropped when it is full. A device
//! interrupt, taken by the VM's interrupt vCPU (vCPU 0) when it runs, wakes the
//! receiving thread when it waits for data (NAPI-style: one interrupt per wake-up, the
//! thread then drains what arrived). The receiver measures the interarrival jitter of
//! RFC 3550 (§6.4.1, appendix A.8), as iperf reports it for UDP.

use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, ThreadId, VmId};
use std::collections::VecDeque;

/// RFC 3550 interarrival jitter: J += (|D(i-1, i)| − J) / 16, D the change in transit
/// time (receive time − send time) between consecutive packets.
#[derive(Clone, Debug, Default)]
pub struct Jitter {
    last_transit: Option<i64>,
    /// Current estimate (ns).
    pub j: f64,
    /// Σ of the estimate after each datagram (from the second on) and their number: the
    /// estimate averaged over the run, steadier than its last value, which reflects only
    /// the last ~16 datagrams.
    pub j_sum: f64,
    pub j_samples: u64,
}

impl Jitter {
    pub fn packet(&mut self, sent: Nanos, received: Nanos) {
        let transit = received.0 as i64 - sent.0 as i64;
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).abs() as f64;
            self.j += (d - self.j) / 16.0;
            self.j_sum += self.j;
            self.j_samples += 1;
        }
        self.last_transit = Some(transit);
    }

    /// The estimate averaged over the run (ns); NaN before two datagrams.
    pub fn mean(&self) -> f64 {
        if self.j_samples == 0 {
            f64::NAN
        } else {
            self.j_sum / self.j_samples as f64
        }
    }
}

#[derive(Clone, Debug)]
pub struct Nic {
    pub vm: VmId,
    pub interval: Nanos,
    pub ring: usize,
    pub packet_bytes: u64,
    pub rx_ns: u64,
    /// Arrival times of the buffered datagrams (their send times up to a constant).
    queue: VecDeque<Nanos>,
    /// The thread waiting for data, if any, and whether its interrupt is on its way.
    waiter: Option<ThreadId>,
    pub arrivals: u64,
    pub received: u64,
    pub dropped: u64,
    pub jitter: Jitter,
    /// Σ and max of the arrival-to-application delays (ns).
    pub delay_sum: u128,
    pub delay_max: u64,
}

impl Nic {
    pub fn new(vm: VmId, c: &crate::scenario::NicConfig) -> Nic {
        let bits = c.packet_bytes as f64 * 8.0;
        Nic {
            vm,
            interval: Nanos((bits / (c.rate_mbps * 1e6) * 1e9).round().max(1.0) as u64),
            ring: c.ring as usize,
            packet_bytes: c.packet_bytes as u64,
            rx_ns: (c.rx_us * 1e3).round() as u64,
            queue: VecDeque::with_capacity(c.ring as usize),
            waiter: None,
            arrivals: 0,
            received: 0,
            dropped: 0,
            jitter: Jitter::default(),
            delay_sum: 0,
            delay_max: 0,
        }
    }

    /// A datagram arrives at `now`; true when the waiting thread must be woken.
    fn arrive(&mut self, now: Nanos) -> Option<ThreadId> {
        self.arrivals += 1;
        if self.queue.len() >= self.ring {
            self.dropped += 1;
        } else {
            self.queue.push_back(now);
        }
        self.waiter.take()
    }

    /// The receiving thread takes up to `n` datagrams at `now`; None (and it waits)
    /// when there are none.
    fn take(&mut self, t: ThreadId, n: u32, now: Nanos) -> Option<u32> {
        if self.queue.is_empty() {
            self.waiter = Some(t);
            return None;
        }
        let mut got = 0;
        while got < n {
            let Some(a) = self.queue.pop_front() else {
                break;
            };
            self.jitter.packet(a, now);
            let d = (now - a).0;
            self.delay_sum += d as u128;
            self.delay_max = self.delay_max.max(d);
            self.received += 1;
            got += 1;
        }
        Some(got)
    }
}

impl World {
    /// A datagram reaches VM's NIC `i`; the next one is due an interval later.
    pub(crate) fn on_nic_arrival(&mut self, i: u32) {
        let now = self.now;
        let nic = &mut self.nics[i as usize];
        let next = now + nic.interval;
        let wake = nic.arrive(now);
        self.q.push(next, Ev::NicArrival(i));
        if let Some(t) = wake {
            // The device interrupt goes to the VM's interrupt vCPU, which wakes `t`.
            self.on_io_done(t);
        }
    }

    /// `net_recv` of thread `t`: the kernel work of the datagrams it took, or None when
    /// it must wait for an interrupt.
    pub(crate) fn nic_recv(&mut self, t: ThreadId, n: u32) -> Option<u64> {
        let vm = self.threads[t.idx()].vm;
        let i = self.vms[vm.idx()].nic?;
        let now = self.now;
        let nic = &mut self.nics[i as usize];
        let got = nic.take(t, n, now)?;
        Some(self.costs.syscall_ns + got as u64 * nic.rx_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3550_jitter_on_a_hand_made_sequence() {
        // Sent every 10 units; received with transits 5, 7, 4, 4: D = 2, 3, 0.
        let mut j = Jitter::default();
        for (s, r) in [(0, 5), (10, 17), (20, 24), (30, 34)] {
            j.packet(Nanos(s), Nanos(r));
        }
        let mut e = 0.0f64;
        for d in [2.0, 3.0, 0.0] {
            e += (d - e) / 16.0;
        }
        assert!((j.j - e).abs() < 1e-12, "{} vs {e}", j.j);
        assert!((e - 0.28564453125).abs() < 1e-12);
        // The run's mean of the estimate: (2/16 + (2/16 + (3 - 2/16)/16) + e) / 3.
        let j1 = 2.0 / 16.0;
        let j2 = j1 + (3.0 - j1) / 16.0;
        assert!((j.mean() - (j1 + j2 + e) / 3.0).abs() < 1e-12);
        assert!(Jitter::default().mean().is_nan());
    }

    #[test]
    fn arrivals_are_open_loop_and_a_full_ring_drops() {
        let c = crate::scenario::NicConfig {
            ring: 2,
            ..Default::default()
        };
        let mut nic = Nic::new(VmId(0), &c);
        assert_eq!(nic.interval, Nanos(11_760)); // 1470 B at 1 Gbit/s
        let t = ThreadId(0);
        assert_eq!(nic.take(t, 1, Nanos(0)), None);
        assert_eq!(nic.arrive(Nanos(1)), Some(t));
        assert_eq!(nic.arrive(Nanos(2)), None);
        assert_eq!(nic.arrive(Nanos(3)), None);
        assert_eq!((nic.arrivals, nic.dropped), (3, 1));
        assert_eq!(nic.take(t, 8, Nanos(10)), Some(2));
        assert_eq!(nic.received, 2);
    }
}
