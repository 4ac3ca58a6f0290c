//! What the Linux host schedulers (cfs.rs, eevdf.rs) keep per pCPU for load balancing
//! besides the runqueues — each sched domain's balance clock and failures
//! (struct sched_domain's last_balance, balance_interval, nr_balance_failed), the idle
//! periods that gate the newidle balance (rq->avg_idle, idle_stamp) — and the rules
//! that time the periodic balance (rebalance_domains, load_balance, should_we_balance;
//! kernel/sched/fair.c).
//!
//! **Timing.** A domain's balance_interval starts at its min_interval, doubles (up to
//! max_interval) after each balance that finds the domain balanced, and falls back to
//! min_interval after one that found an imbalance, whether it moved a vCPU or not. A
//! pCPU that is not idle waits `busy_factor` intervals; no wait exceeds
//! max_load_balance_interval (HZ × CPUs / 10 jiffies: 100 ms per pCPU). min/max:
//! before Linux 3.16 the fixed SD_SIBLING_INIT (1-2 ms), SD_MC_INIT and SD_CPU_INIT
//! (1-4 ms) of include/linux/topology.h, and the NUMA level's weight in ms to twice
//! that (sd_numa_init, 3.5+); from 3.16 every level's weight in ms to twice that
//! (sd_init). Before 5.9 a newidle balance that finds the domain balanced doubles the
//! interval too ("sched/fair: Don't increase sd->balance_interval on newidle balance").
//!
//! **Who balances.** rebalance_domains walks a pCPU's domains bottom up and balances
//! each whose interval has passed; above a level of single-pCPU groups only one pCPU of
//! each group balances (should_we_balance: the group's first idle pCPU, else its first
//! pCPU), and a pCPU that is not it stops walking up. A balance that pulled makes the
//! pCPU busy for the levels above it.

use crate::host::topology::{Level, Topology, MAX_LEVELS};
use crate::scenario::BalanceInterval;
use crate::sim::Nanos;

const MS: u64 = 1_000_000;

/// sd->cache_nice_tries of the LLC domain (SD_MC_INIT, sd_init for
/// SD_SHARE_PKG_RESOURCES): a balance overrides task_hot after more failures than this.
const CACHE_NICE_TRIES: u32 = 1;

/// sysctl_sched_nr_migrate: the most tasks one load_balance moves.
const NR_MIGRATE: u32 = 32;

/// What a balance attempt did (load_balance's outcomes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pull {
    /// A vCPU moved.
    Moved,
    /// A busier runqueue was found but nothing could move (cache-hot, pinned, or
    /// moving would not help): a failed balance.
    Failed,
    /// Nothing busier (or this pCPU is not its group's balancer): balanced.
    Balanced,
}

/// load_balance → detach_tasks: `pull` (one vCPU's move, `pull_one`) again while it
/// moves one — each move must still narrow the gap — at most sysctl_sched_nr_migrate
/// times, so a pCPU meeting one with k queued takes about k/2 at once (kernels without
/// CONFIG_PREEMPT, as servers run, do this in a newidle balance too). The first
/// attempt's outcome is the balance's.
pub(crate) fn detach_tasks(mut pull: impl FnMut() -> Pull) -> Pull {
    let first = pull();
    if first == Pull::Moved {
        for _ in 1..NR_MIGRATE {
            if pull() != Pull::Moved {
                break;
            }
        }
    }
    first
}

/// The host's balance timing, per domain level (bottom up as `Topology::levels`).
#[derive(Clone, Debug)]
pub(crate) struct BalanceTiming {
    min: [u64; MAX_LEVELS],
    max: [u64; MAX_LEVELS],
    busy_factor: u64,
    /// max_load_balance_interval.
    cap: u64,
    newidle_doubles: bool,
}

impl BalanceTiming {
    pub fn new(
        topo: &Topology,
        rule: BalanceInterval,
        busy_factor: u32,
        newidle_doubles: bool,
    ) -> BalanceTiming {
        let (mut min, mut max) = ([MS; MAX_LEVELS], [4 * MS; MAX_LEVELS]);
        for (i, d) in topo.levels().iter().enumerate() {
            let weight = d.span as u64 * MS;
            (min[i], max[i]) = match rule {
                BalanceInterval::DomainWeight => (weight, 2 * weight),
                BalanceInterval::Fixed if d.level == Level::Smt => (MS, 2 * MS),
                BalanceInterval::Fixed if d.level == Level::Host && topo.numa() => {
                    (weight, 2 * weight)
                }
                BalanceInterval::Fixed => (MS, 4 * MS),
            };
        }
        BalanceTiming {
            min,
            max,
            busy_factor: busy_factor.max(1) as u64,
            cap: 100 * MS * topo.pcpus() as u64,
            newidle_doubles,
        }
    }
}

/// A pCPU's state for balancing: its idle periods (rq->avg_idle, idle_stamp) and, per
/// domain level, when it last balanced there, its current interval and its failures in
/// a row (sd->last_balance, balance_interval, nr_balance_failed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PcpuBalance {
    /// rq->avg_idle: its idle periods' running average, capped at twice the
    /// migration cost.
    pub avg_idle: u64,
    /// rq->idle_stamp: when it went idle, until a wake-up onto it.
    pub idle_stamp: Option<Nanos>,
    last: [Nanos; MAX_LEVELS],
    interval: [u64; MAX_LEVELS],
    failed: [u32; MAX_LEVELS],
}

impl PcpuBalance {
    /// A pCPU that has not been idle yet: avg_idle starts at twice the migration cost
    /// (sched_init: `rq->avg_idle = 2 * sysctl_sched_migration_cost`); each domain's
    /// interval at its minimum.
    pub fn new(migration_cost: u64, timing: &BalanceTiming) -> PcpuBalance {
        PcpuBalance {
            avg_idle: 2 * migration_cost,
            idle_stamp: None,
            last: [Nanos::ZERO; MAX_LEVELS],
            interval: timing.min,
            failed: [0; MAX_LEVELS],
        }
    }

    /// Whether level `l`'s periodic balance is due (rebalance_domains: the interval,
    /// times busy_factor on a pCPU that is not idle, at most max_load_balance_interval).
    #[inline]
    pub fn due(&self, l: usize, now: Nanos, idle: bool, t: &BalanceTiming) -> bool {
        let factor = if idle { 1 } else { t.busy_factor };
        let wait = (self.interval[l] * factor).min(t.cap);
        now.0.saturating_sub(self.last[l].0) >= wait
    }

    /// Whether a balance at level `l` may move a cache-hot vCPU (more failures there
    /// than cache_nice_tries).
    pub fn hot_ok(&self, l: usize) -> bool {
        self.failed[l] > CACHE_NICE_TRIES
    }

    /// After level `l`'s periodic balance at `now`: a failure counts, a move or a
    /// balanced domain resets the count; a balanced domain doubles the interval, an
    /// imbalance resets it.
    pub fn periodic_done(&mut self, l: usize, now: Nanos, outcome: Pull, t: &BalanceTiming) {
        self.last[l] = now;
        self.failed[l] = match outcome {
            Pull::Failed => self.failed[l] + 1,
            Pull::Moved | Pull::Balanced => 0,
        };
        self.retime(l, outcome, t);
    }

    /// After level `l`'s newidle balance: as a periodic one, except that a failure is
    /// not counted, the balance time stays, and (from Linux 5.9) a balanced domain
    /// keeps its interval.
    pub fn newidle_done(&mut self, l: usize, outcome: Pull, t: &BalanceTiming) {
        if outcome != Pull::Failed {
            self.failed[l] = 0;
        }
        if outcome != Pull::Balanced || t.newidle_doubles {
            self.retime(l, outcome, t);
        }
    }

    fn retime(&mut self, l: usize, outcome: Pull, t: &BalanceTiming) {
        self.interval[l] = match outcome {
            Pull::Balanced => (self.interval[l] * 2).min(t.max[l]).max(self.interval[l]),
            Pull::Moved | Pull::Failed => t.min[l],
        };
    }

    /// ttwu_do_wakeup: a wake-up ends the idle period, if there was one, and feeds
    /// avg_idle.
    pub fn end_idle_period(&mut self, now: Nanos, migration_cost: u64) {
        if let Some(since) = self.idle_stamp.take() {
            self.avg_idle = crate::guest::balance::next_avg_idle(
                self.avg_idle,
                now.0.saturating_sub(since.0),
                migration_cost,
            );
        }
    }

    /// Nothing to run after the newidle balance: the idle period starts (if it had not).
    pub fn go_idle(&mut self, now: Nanos) {
        self.idle_stamp.get_or_insert(now);
    }
}

/// should_we_balance() for a periodic balance of `p` at level `l`: at the lowest level
/// (groups of one pCPU) every pCPU balances; above it only the first idle pCPU of `p`'s
/// group (the level below's domain), or the group's first pCPU if none is idle.
pub(crate) fn should_we_balance(
    topo: &Topology,
    p: u32,
    l: usize,
    idle: impl Fn(u32) -> bool,
) -> bool {
    let Some(child) = l.checked_sub(1).map(|c| topo.levels()[c].span) else {
        return true;
    };
    let group = topo.domain_of(p, child);
    let first = group.start;
    group.clone().find(|&q| idle(q)).unwrap_or(first) == p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(rule: BalanceInterval) -> (Topology, BalanceTiming) {
        // Two LLCs of 4 pCPUs: levels LLC (4) and host (8).
        let topo = Topology::new(8, 1, 4, 1);
        let t = BalanceTiming::new(&topo, rule, 32, true);
        (topo, t)
    }

    #[test]
    fn a_hot_vcpu_may_move_after_two_failures_in_a_row() {
        let (_, t) = timing(BalanceInterval::Fixed);
        let mut b = PcpuBalance::new(500_000, &t);
        b.periodic_done(0, Nanos(1), Pull::Failed, &t);
        assert!(!b.hot_ok(0));
        b.periodic_done(0, Nanos(2), Pull::Failed, &t);
        assert!(b.hot_ok(0));
        // Failures are counted per domain, and a newidle balance counts none.
        assert!(!b.hot_ok(1));
        b.newidle_done(1, Pull::Failed, &t);
        b.newidle_done(1, Pull::Failed, &t);
        assert!(!b.hot_ok(1));
        b.periodic_done(0, Nanos(3), Pull::Balanced, &t);
        assert!(!b.hot_ok(0));
    }

    /// load_balance: out_balanced doubles the interval up to max_interval; an imbalance
    /// (moved or not) resets it to min_interval. SD_MC_INIT: 1 to 4 ms.
    #[test]
    fn a_balanced_domain_doubles_its_interval_and_an_imbalance_resets_it() {
        let (_, t) = timing(BalanceInterval::Fixed);
        let mut b = PcpuBalance::new(500_000, &t);
        assert!(!b.due(0, Nanos(MS - 1), true, &t));
        assert!(b.due(0, Nanos(MS), true, &t));
        b.periodic_done(0, Nanos(MS), Pull::Balanced, &t);
        assert!(!b.due(0, Nanos(3 * MS - 1), true, &t));
        b.periodic_done(0, Nanos(3 * MS), Pull::Balanced, &t);
        b.periodic_done(0, Nanos(7 * MS), Pull::Balanced, &t);
        // At the 4 ms maximum; busy: × busy_factor.
        assert!(!b.due(0, Nanos(11 * MS - 1), true, &t));
        assert!(!b.due(0, Nanos(7 * MS + 128 * MS - 1), false, &t));
        assert!(b.due(0, Nanos(7 * MS + 128 * MS), false, &t));
        b.periodic_done(0, Nanos(200 * MS), Pull::Failed, &t);
        assert!(b.due(0, Nanos(201 * MS), true, &t));
    }

    /// sd_init (3.16+): a domain of n pCPUs balances every n ms to 2n ms.
    #[test]
    fn from_linux_3_16_the_interval_is_the_domains_weight() {
        let (_, t) = timing(BalanceInterval::DomainWeight);
        let mut b = PcpuBalance::new(500_000, &t);
        assert!(!b.due(0, Nanos(4 * MS - 1), true, &t));
        assert!(b.due(0, Nanos(4 * MS), true, &t));
        assert!(!b.due(1, Nanos(8 * MS - 1), true, &t));
        b.periodic_done(1, Nanos(8 * MS), Pull::Balanced, &t);
        b.periodic_done(1, Nanos(24 * MS), Pull::Balanced, &t);
        assert!(!b.due(1, Nanos(40 * MS - 1), true, &t));
        assert!(b.due(1, Nanos(40 * MS), true, &t));
    }

    /// Linux 5.9+: a newidle balance that finds the domain balanced leaves its interval.
    #[test]
    fn a_balanced_newidle_balance_doubles_the_interval_only_before_5_9() {
        let topo = Topology::new(8, 1, 4, 1);
        for (doubles, wait) in [(true, 2 * MS), (false, MS)] {
            let t = BalanceTiming::new(&topo, BalanceInterval::Fixed, 32, doubles);
            let mut b = PcpuBalance::new(500_000, &t);
            b.newidle_done(0, Pull::Balanced, &t);
            assert!(!b.due(0, Nanos(wait - 1), true, &t), "{doubles}");
            assert!(b.due(0, Nanos(wait), true, &t), "{doubles}");
        }
    }

    /// Above single-pCPU groups, one pCPU per group balances: the first idle one, or
    /// the group's first.
    #[test]
    fn only_one_pcpu_of_a_group_balances_the_level_above() {
        let (topo, _) = timing(BalanceInterval::Fixed);
        let none_idle = |_: u32| false;
        assert!((0..8).all(|p| should_we_balance(&topo, p, 0, none_idle)));
        let host: Vec<u32> = (0..8)
            .filter(|&p| should_we_balance(&topo, p, 1, none_idle))
            .collect();
        assert_eq!(host, [0, 4]);
        let idle = |q: u32| q == 2 || q == 3;
        let host: Vec<u32> = (0..8)
            .filter(|&p| should_we_balance(&topo, p, 1, idle))
            .collect();
        assert_eq!(host, [2, 4]);
    }

    #[test]
    fn short_idle_periods_pull_the_average_below_the_cost() {
        let cost = 500_000;
        let (_, t) = timing(BalanceInterval::Fixed);
        let mut b = PcpuBalance::new(cost, &t);
        let mut now = 0;
        for _ in 0..40 {
            b.go_idle(Nanos(now));
            now += 50_000;
            b.end_idle_period(Nanos(now), cost);
        }
        assert!(b.avg_idle < cost, "{}", b.avg_idle);
        // One long idle period caps it at twice the cost.
        b.go_idle(Nanos(now));
        b.end_idle_period(Nanos(now + 10 * cost), cost);
        assert_eq!(b.avg_idle, 2 * cost);
    }
}
