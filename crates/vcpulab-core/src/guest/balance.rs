//! The guest's periodic load balance (kernel/sched/fair.c: scheduler_tick →
//! trigger_load_balance → rebalance_domains → load_balance), on the vCPUs where the
//! model needs it: those that never go idle because a SCHED_IDLE thread runs there
//! (Gleaner's yielding thread). An idle vCPU balances when it goes idle
//! (newidle_balance, `guest_pull` from guest_pick) and wake-up placement spreads woken
//! threads, so the periodic balance of vCPUs running workload threads is not modelled.
//!
//! A sched_yield that finds its own runqueue holding only the yielder does not balance:
//! schedule() runs newidle_balance only when the runqueue is empty, and the yielder is
//! on it. The vCPU pulls at its periodic balance, which comes every `interval` — the
//! domain's balance_interval, times sd->busy_factor unless the CPU counts as idle — and
//! the interval doubles after each balance that moved nothing, up to the domain's
//! maximum, and falls back to the minimum after one that moved a thread.
//!
//! Which CPU counts as idle: Linux before 5.6 calls a CPU running a SCHED_IDLE task
//! busy (idle_cpu() is false), so it balances at the busy interval (64 ms to 256 ms on
//! 3.9, the domain's weight × 32 ms to twice that on 3.16–5.9); from 5.6
//! ("sched/fair: Load balance aggressively for SCHED_IDLE CPUs", rebalance_domains'
//! `!sched_idle_cpu(cpu)`) it balances at the idle interval.

use crate::guest::preempt::tick_after;
use crate::scenario::{BalanceInterval, GuestConfig};
use crate::sim::world::World;
use crate::sim::{Nanos, VcpuId};

const MS: u64 = 1_000_000;

/// The least and greatest balance interval (ns) of a guest's one sched domain, which
/// spans its `vcpus` vCPUs (a VM's vCPUs are sockets or cores of one package).
pub fn domain_interval_ns(kind: BalanceInterval, vcpus: u32) -> (u64, u64) {
    match kind {
        // SD_CPU_INIT / SD_MC_INIT: min_interval 1, max_interval 4 (ms).
        BalanceInterval::Fixed => (MS, 4 * MS),
        // sd_init(): min_interval = sd_weight, max_interval = 2 * sd_weight (ms).
        BalanceInterval::DomainWeight => {
            let w = vcpus.max(1) as u64;
            (w * MS, 2 * w * MS)
        }
    }
}

/// The guest kernel's periodic-balance settings (`guest.sched_idle_cpu`,
/// `guest.balance_interval`, `guest.balance_busy_factor`).
#[derive(Clone, Copy, Debug)]
pub struct BalanceSettings {
    /// A CPU running only SCHED_IDLE threads counts as idle.
    pub sched_idle_cpu: bool,
    pub interval: BalanceInterval,
    pub busy_factor: u64,
}

impl BalanceSettings {
    pub fn of(g: &GuestConfig) -> BalanceSettings {
        BalanceSettings {
            sched_idle_cpu: g.sched_idle_cpu,
            interval: g.balance_interval,
            busy_factor: g.balance_busy_factor as u64,
        }
    }
}

/// A vCPU's periodic-balance clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct BalanceClock {
    /// When the next balance is due (rq->next_balance).
    pub next: Nanos,
    /// The domain's current balance_interval (ns; 0: not yet balanced).
    pub interval: u64,
}

impl World {
    /// `v`, running only a SCHED_IDLE thread, reaches a point where its tick may have
    /// run the periodic balance: if it is due, pull a queued thread from the busiest
    /// sibling. True when a thread was pulled.
    pub(crate) fn periodic_balance(
        &mut self,
        v: VcpuId,
        settings: BalanceSettings,
        clock: &mut BalanceClock,
    ) -> bool {
        if self.now < clock.next {
            return false;
        }
        let pulled = self.guest_pull(v);
        let vm = &self.vms[self.vcpus[v.idx()].vm.idx()];
        let (min, max) = domain_interval_ns(settings.interval, vm.nvcpus);
        clock.interval = if pulled || clock.interval == 0 {
            min
        } else {
            (clock.interval * 2).min(max)
        };
        let factor = if settings.sched_idle_cpu {
            1
        } else {
            settings.busy_factor
        };
        clock.next = tick_after(self.now + Nanos(clock.interval * factor), vm.guest.tick);
        pulled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_intervals_follow_the_kernels_initialisers() {
        assert_eq!(domain_interval_ns(BalanceInterval::Fixed, 16), (MS, 4 * MS));
        assert_eq!(
            domain_interval_ns(BalanceInterval::DomainWeight, 8),
            (8 * MS, 16 * MS)
        );
        assert_eq!(
            domain_interval_ns(BalanceInterval::DomainWeight, 0),
            (MS, 2 * MS)
        );
    }
}
