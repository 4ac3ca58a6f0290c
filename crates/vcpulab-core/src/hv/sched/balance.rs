//! What the Linux host schedulers (cfs.rs, eevdf.rs) keep per pCPU for load balancing
//! besides the runqueues: the outcome of a balance attempt, the failures that let a
//! cache-hot vCPU move (can_migrate_task), and the idle periods that gate the newidle
//! balance (kernel/sched/fair.c).

use crate::sim::Nanos;

/// A pCPU's state for balancing (struct rq's avg_idle and idle_stamp, the domains'
/// nr_balance_failed — one count for all of its domains here).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdleBalance {
    /// rq->avg_idle: its idle periods' running average, capped at twice the
    /// migration cost.
    pub avg_idle: u64,
    /// rq->idle_stamp: when it went idle, until a wake-up onto it.
    pub idle_stamp: Option<Nanos>,
    /// sd->nr_balance_failed: periodic balances in a row that found an imbalance and
    /// moved nothing; beyond `CACHE_NICE_TRIES` a cache-hot vCPU may move.
    pub failed: u32,
}

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
    /// Nothing busier: balanced.
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

impl IdleBalance {
    /// A pCPU that has not been idle yet: avg_idle starts at twice the migration cost
    /// (sched_init: `rq->avg_idle = 2 * sysctl_sched_migration_cost`).
    pub fn new(migration_cost: u64) -> IdleBalance {
        IdleBalance {
            avg_idle: 2 * migration_cost,
            idle_stamp: None,
            failed: 0,
        }
    }

    /// Whether a balance may move a cache-hot vCPU (more failures than
    /// cache_nice_tries).
    pub fn hot_ok(&self) -> bool {
        self.failed > CACHE_NICE_TRIES
    }

    /// After a periodic balance: a failure counts, a move or a balanced domain resets.
    pub fn record(&mut self, outcome: Pull) {
        self.failed = match outcome {
            Pull::Failed => self.failed + 1,
            Pull::Moved | Pull::Balanced => 0,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hot_vcpu_may_move_after_two_failures_in_a_row() {
        let mut b = IdleBalance::new(500_000);
        b.record(Pull::Failed);
        assert!(!b.hot_ok());
        b.record(Pull::Failed);
        assert!(b.hot_ok());
        b.record(Pull::Balanced);
        assert!(!b.hot_ok());
    }

    #[test]
    fn short_idle_periods_pull_the_average_below_the_cost() {
        let cost = 500_000;
        let mut b = IdleBalance::new(cost);
        let mut t = 0;
        for _ in 0..40 {
            b.go_idle(Nanos(t));
            t += 50_000;
            b.end_idle_period(Nanos(t), cost);
        }
        assert!(b.avg_idle < cost, "{}", b.avg_idle);
        // One long idle period caps it at twice the cost.
        b.go_idle(Nanos(t));
        b.end_idle_period(Nanos(t + 10 * cost), cost);
        assert_eq!(b.avg_idle, 2 * cost);
    }
}
