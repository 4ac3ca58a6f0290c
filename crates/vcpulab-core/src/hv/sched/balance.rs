//! What the Linux host schedulers (cfs.rs, eevdf.rs) keep per pCPU for load balancing
//! besides the runqueues — each sched domain's balance clock and failures
//! (struct sched_domain's last_balance, balance_interval, nr_balance_failed), the idle
//! periods that gate the newidle balance (rq->avg_idle, idle_stamp) — and the rules
//! that time the periodic balance (rebalance_domains, load_balance, should_we_balance;
//! kernel/sched/fair.c).
//!
//! **Timing.** A domain's balance_interval starts at its min_interval, doubles (up to
//! max_interval) after each balance that finds the domain balanced, and falls back to
//! min_interval after one that found an imbalance, whether it moved a vCPU or not; when
//! every queued vCPU of the busier runqueues is pinned elsewhere it doubles up to
//! MAX_PINNED_INTERVAL (512 ms). A pCPU that is not idle waits `busy_factor` intervals
//! (at most 32 on a NUMA level); no wait exceeds max_load_balance_interval (HZ × CPUs
//! / 10 jiffies: 100 ms per pCPU). min/max: before Linux 3.16 the fixed
//! SD_SIBLING_INIT (1-2 ms), SD_MC_INIT and SD_CPU_INIT (1-4 ms) of
//! include/linux/topology.h, and the NUMA level's weight in ms to twice that
//! (sd_numa_init, 3.5+; 3.2's SD_NODE_INIT, 8-32 ms, is not kept apart); from 3.16
//! every level's weight in ms to twice that (sd_init). Before 5.0 a newidle balance that
//! finds the domain balanced doubles the interval too ("sched/fair: Don't increase
//! sd->balance_interval on newidle balance"; backported to 4.4.y and 4.19.y).
//!
//! **The next balance** (rq->next_balance): the tick runs rebalance_domains only once
//! it has passed; rebalance_domains sets it to the earliest time a visited domain is
//! due. A pCPU going idle moves it forward to its domains' idle intervals (3.16+; from
//! 3.16 too, the newidle balance is skipped, and the domains not retimed, while no
//! runqueue holds a waiting vCPU: `rd->overload`); Linux 3.2 and 3.9 take the idle
//! time only when the newidle balance pulled or the busy-time deadline has passed, so a
//! pCPU that just went idle waits out the deadline it set while busy (up to
//! busy_factor × the interval).
//!
//! **Who balances.** rebalance_domains walks a pCPU's domains bottom up and balances
//! each whose interval has passed; above a level of single-pCPU groups only one pCPU of
//! each group balances (should_we_balance: the group's first idle pCPU, else its first
//! pCPU; 6.6 prefers a pCPU whose whole core is idle, not modelled), and a pCPU that is
//! not it stops walking up. A balance that pulled makes the pCPU busy for the levels
//! above. A balance may take a cache-hot vCPU after more failures in a row than the
//! domain's cache_nice_tries: 0 on the SMT level, 2 on a NUMA level, 1 elsewhere.

use crate::host::topology::{Level, Topology, MAX_LEVELS};
use crate::scenario::BalanceInterval;
use crate::sim::Nanos;

const MS: u64 = 1_000_000;

/// MAX_PINNED_INTERVAL (ms): how far a domain whose busier vCPUs are all pinned
/// elsewhere backs off.
const MAX_PINNED_INTERVAL: u64 = 512 * MS;

/// sysctl_sched_nr_migrate: the most tasks one load_balance moves.
pub(crate) const NR_MIGRATE: u32 = 32;

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
    /// Busier runqueues, but every vCPU queued on them is pinned away from this pCPU
    /// (LBF_ALL_PINNED): counted as balanced, the interval backs off to 512 ms.
    AllPinned,
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
    busy_factor: [u64; MAX_LEVELS],
    /// sd->cache_nice_tries.
    nice_tries: [u32; MAX_LEVELS],
    /// max_load_balance_interval.
    cap: u64,
    rules: BalanceRules,
}

/// Which kernel's rules, besides the intervals, a host's balancing follows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BalanceRules {
    /// A balanced newidle balance doubles the interval (before 5.0).
    pub newidle_doubles: bool,
    /// No newidle balance while no runqueue holds a waiting vCPU (rd->overload, 3.16+).
    pub overload_gate: bool,
    /// A pCPU going idle keeps its busy-time next balance (3.2, 3.9).
    pub idle_keeps_busy_deadline: bool,
}

impl BalanceTiming {
    pub fn new(
        topo: &Topology,
        rule: BalanceInterval,
        busy_factor: u32,
        rules: BalanceRules,
    ) -> BalanceTiming {
        let (mut min, mut max) = ([MS; MAX_LEVELS], [4 * MS; MAX_LEVELS]);
        let mut busy = [busy_factor.max(1) as u64; MAX_LEVELS];
        let mut nice_tries = [1; MAX_LEVELS];
        for (i, d) in topo.levels().iter().enumerate() {
            let weight = d.span as u64 * MS;
            let numa = d.level == Level::Host && topo.numa();
            (min[i], max[i]) = match rule {
                BalanceInterval::DomainWeight => (weight, 2 * weight),
                BalanceInterval::Fixed if d.level == Level::Smt => (MS, 2 * MS),
                BalanceInterval::Fixed if numa => (weight, 2 * weight),
                BalanceInterval::Fixed => (MS, 4 * MS),
            };
            if numa {
                // SD_NODE_INIT and sd_numa_init: busy_factor 32, cache_nice_tries 2.
                busy[i] = busy[i].min(32);
                nice_tries[i] = 2;
            } else if d.level == Level::Smt {
                nice_tries[i] = 0;
            }
        }
        BalanceTiming {
            min,
            max,
            busy_factor: busy,
            nice_tries,
            cap: 100 * MS * topo.pcpus() as u64,
            rules,
        }
    }

    pub fn rules(&self) -> BalanceRules {
        self.rules
    }

    /// How long after its last balance level `l` is due (get_sd_balance_interval).
    #[inline]
    fn wait(&self, interval: u64, l: usize, idle: bool) -> u64 {
        let factor = if idle { 1 } else { self.busy_factor[l] };
        (interval * factor).min(self.cap)
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
    /// rq->next_balance: the tick runs the periodic balance from this time on.
    next_balance: Nanos,
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
            next_balance: Nanos::ZERO,
            last: [Nanos::ZERO; MAX_LEVELS],
            interval: timing.min,
            failed: [0; MAX_LEVELS],
        }
    }

    /// Whether the tick runs rebalance_domains (rq->next_balance has passed).
    #[inline]
    pub fn rebalance_due(&self, now: Nanos) -> bool {
        now >= self.next_balance
    }

    /// When level `l` is next due (rebalance_domains: the interval, times busy_factor
    /// on a pCPU that is not idle, at most max_load_balance_interval).
    #[inline]
    pub fn due_at(&self, l: usize, idle: bool, t: &BalanceTiming) -> Nanos {
        Nanos(
            self.last[l]
                .0
                .saturating_add(t.wait(self.interval[l], l, idle)),
        )
    }

    /// rebalance_domains' end: the next balance is the earliest `due_at` of the levels
    /// it visited.
    pub fn set_next_balance(&mut self, at: Nanos) {
        self.next_balance = at;
    }

    /// Whether a balance at level `l` may move a cache-hot vCPU (more failures there
    /// than the domain's cache_nice_tries).
    pub fn hot_ok(&self, l: usize, t: &BalanceTiming) -> bool {
        self.failed[l] > t.nice_tries[l]
    }

    /// Level `l`'s failed balances in a row (sd->nr_balance_failed).
    pub fn failed(&self, l: usize) -> u32 {
        self.failed[l]
    }

    /// need_active_balance(): level `l`'s balances failed more than cache_nice_tries
    /// + 2 times in a row.
    pub fn active_due(&self, l: usize, t: &BalanceTiming) -> bool {
        self.failed[l] > t.nice_tries[l] + 2
    }

    /// After an active balance of level `l` under `rule`, whose interval was
    /// `interval` before the failed balance (which set it to the minimum).
    ///
    /// - Linux 3.x-5.9 (`ActiveRule::AnyFailure`): a kick, or one under way, leaves
    ///   cache_nice_tries + 1 failures; with a kick the interval doubles instead (`if
    ///   (likely(!active_balance)) ... else balance_interval *= 2`); a running vCPU
    ///   pinned away keeps the failures and doubles it as an all-pinned balance does
    ///   (out_one_pinned, `all_pinned = 1`: up to 512 ms).
    /// - 5.10+ (`ActiveRule::TaskImbalance`): the interval stays at the minimum (`if
    ///   (likely(!active_balance) || need_active_balance(&env))`); the push, once made,
    ///   resets the failures (active_load_balance_cpu_stop), counted here at the kick;
    ///   a pinned running vCPU doubles it up to the maximum (out_one_pinned).
    pub fn after_active(
        &mut self,
        l: usize,
        interval: u64,
        active: Active,
        rule: ActiveRule,
        t: &BalanceTiming,
    ) {
        let doubled = |cap: u64| {
            if interval < cap {
                interval * 2
            } else {
                interval
            }
        };
        match (rule, active) {
            (_, Active::NotNeeded) => {}
            (ActiveRule::AnyFailure, Active::Kicked) => {
                self.failed[l] = t.nice_tries[l] + 1;
                self.interval[l] = doubled(t.max[l]);
            }
            (ActiveRule::AnyFailure, Active::Busy) => self.failed[l] = t.nice_tries[l] + 1,
            (ActiveRule::AnyFailure, Active::Pinned) => {
                self.interval[l] = doubled(t.max[l].max(MAX_PINNED_INTERVAL));
            }
            (ActiveRule::TaskImbalance, Active::Kicked) => self.failed[l] = 0,
            (ActiveRule::TaskImbalance, Active::Busy) => {}
            (ActiveRule::TaskImbalance, Active::Pinned) => {
                self.interval[l] = doubled(t.max[l]);
            }
        }
    }

    /// After level `l`'s periodic balance at `now`: a failure counts, a move or a
    /// balanced domain resets the count; a balanced domain doubles the interval, an
    /// imbalance resets it.
    pub fn periodic_done(&mut self, l: usize, now: Nanos, outcome: Pull, t: &BalanceTiming) {
        self.last[l] = now;
        self.failed[l] = match outcome {
            Pull::Failed => self.failed[l] + 1,
            Pull::Moved | Pull::Balanced | Pull::AllPinned => 0,
        };
        self.retime(l, outcome, t);
    }

    /// After level `l`'s newidle balance: as a periodic one, except that a failure is
    /// not counted, the balance time stays, and (from Linux 5.0) a balanced domain
    /// keeps its interval.
    pub fn newidle_done(&mut self, l: usize, outcome: Pull, t: &BalanceTiming) {
        if outcome != Pull::Failed {
            self.failed[l] = 0;
        }
        let backs_off = matches!(outcome, Pull::Balanced | Pull::AllPinned);
        if !backs_off || t.rules.newidle_doubles {
            self.retime(l, outcome, t);
        }
    }

    fn retime(&mut self, l: usize, outcome: Pull, t: &BalanceTiming) {
        let i = self.interval[l];
        self.interval[l] = match outcome {
            Pull::Balanced if i < t.max[l] => i * 2,
            Pull::AllPinned if i < t.max[l] || i < MAX_PINNED_INTERVAL => i * 2,
            Pull::Balanced | Pull::AllPinned => i,
            Pull::Moved | Pull::Failed => t.min[l],
        };
    }

    /// After a newidle balance that visited levels `..=deepest` (None: skipped before
    /// any level) and pulled or not: the next balance moves forward to their idle due
    /// times (3.16+: the lowest level's when skipped), or on 3.2 and 3.9 is set to them
    /// only if the balance ran and pulled or the busy-time deadline has passed.
    pub fn newidle_next(
        &mut self,
        now: Nanos,
        deepest: Option<usize>,
        pulled: bool,
        t: &BalanceTiming,
    ) {
        // idle_balance starts from a second on.
        let mut next = Nanos(now.0.saturating_add(1_000 * MS));
        for l in 0..=deepest.unwrap_or(0) {
            next = next.min(Nanos(self.last[l].0.saturating_add(self.interval[l])));
        }
        if t.rules.idle_keeps_busy_deadline {
            if deepest.is_some() && (pulled || now > self.next_balance) {
                self.next_balance = next;
            }
        } else {
            self.next_balance = self.next_balance.min(next);
        }
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

/// The periodic balances of one tick instant race (the host's ticks are aligned,
/// sim/world.rs): on Linux each busy CPU's rebalance_domains softirq reads the other
/// runqueues' loads at the same moment (find_busiest_group takes no lock), so none sees
/// what the others move; the first to lock the busiest runqueue pulls, and the others
/// find there less than they counted on — often nothing (`busiest->nr_running` ≤ 1:
/// a failed balance). The model runs one instant's balances one after another, so each
/// busy pCPU's balance reads the loads as they were before the balances of that instant
/// that ran ahead of it (`hidden` moves undone in what it reads), and moves only what
/// is really there. An idle pCPU's balance reads them as they are: its tick stands for
/// the nohz idle balance, which one CPU runs for the idle ones in turn.
#[derive(Clone, Debug, Default)]
pub(crate) struct TickRace {
    /// The instant of `moves`.
    at: Nanos,
    /// The moves of periodic balances at `at`: source, destination, the load moved.
    moves: Vec<(u32, u32, u64)>,
    /// How many of `moves` the balance running now does not see.
    hidden: usize,
}

impl TickRace {
    fn forget_older(&mut self, now: Nanos) {
        if self.at != now {
            self.at = now;
            self.moves.clear();
        }
    }

    /// A periodic balance starts at `now`; `racing`: it is a busy pCPU's, which does not
    /// see the moves the balances of this instant made before it.
    pub(crate) fn begin(&mut self, now: Nanos, racing: bool) {
        self.forget_older(now);
        self.hidden = if racing { self.moves.len() } else { 0 };
    }

    /// The balance that `begin` started is over.
    pub(crate) fn end(&mut self) {
        self.hidden = 0;
    }

    /// A periodic balance moved `load` from `src` to `dst` at `now`.
    pub(crate) fn record(&mut self, now: Nanos, src: u32, dst: u32, load: u64) {
        if self.at != now {
            self.forget_older(now);
            self.hidden = 0;
        }
        self.moves.push((src, dst, load));
    }

    /// `actual` of `q` with the moves the running balance does not see undone: what
    /// each took from `q` given back, what each brought taken away (`amount` of a
    /// move's load).
    #[inline]
    fn undo_hidden(&self, q: u32, actual: u64, amount: impl Fn(u64) -> u64) -> u64 {
        if self.hidden == 0 {
            return actual;
        }
        self.moves[..self.hidden]
            .iter()
            .fold(actual, |x, &(src, dst, w)| {
                if src == q {
                    x + amount(w)
                } else if dst == q {
                    x.saturating_sub(amount(w))
                } else {
                    x
                }
            })
    }

    /// The load of `q` as the running balance reads it (`actual` now).
    #[inline]
    pub(crate) fn load_seen(&self, q: u32, actual: u64) -> u64 {
        self.undo_hidden(q, actual, |w| w)
    }

    /// The runnable vCPUs on `q` as the running balance counts them (`actual` now).
    #[inline]
    pub(crate) fn nr_seen(&self, q: u32, actual: u32) -> u32 {
        self.undo_hidden(q, u64::from(actual), |_| 1) as u32
    }

    /// Whether the running balance does not see some move of this instant.
    #[inline]
    pub(crate) fn hides_any(&self) -> bool {
        self.hidden > 0
    }

    /// The pCPUs the running balance does not see lose a vCPU this instant.
    pub(crate) fn hidden_sources(&self) -> impl Iterator<Item = u32> + '_ {
        self.moves[..self.hidden].iter().map(|&(src, _, _)| src)
    }
}

/// What the domain walks below need of a Linux host scheduler (cfs.rs, eevdf.rs).
pub(crate) trait DomainBalancer {
    fn topo(&self) -> &Topology;
    /// `p`'s balancing state and the host's timing.
    fn balance_state(&mut self, p: u32) -> (&mut PcpuBalance, &BalanceTiming);
    /// `q` has nothing to run (idle_cpu()).
    fn pcpu_idle(&self, q: u32) -> bool;
    /// One load_balance of `p` over its domain at level `l`.
    fn balance_level(&mut self, p: u32, l: usize, now: Nanos, only_cold: bool) -> Pull;
    /// The last `balance_level` failed more than cache_nice_tries + 2 times in a row:
    /// if need_active_balance() holds, move the running vCPU of the busiest pCPU it met
    /// to `p` (active_balance.rs), if it may run there.
    fn active_balance(&mut self, p: u32) -> Active;
    /// Which kernel's need_active_balance() and aftermath apply.
    fn active_rule(&self) -> ActiveRule;
    /// The moves of this instant's periodic balances.
    fn tick_race(&mut self) -> &mut TickRace;
}

/// When a failed balance turns active, by kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ActiveRule {
    /// Linux 3.x-5.9: after more than cache_nice_tries + 2 failures, whatever the
    /// imbalance (`need_active_balance`).
    AnyFailure,
    /// Linux 5.10+ (6.6): only for a task-count imbalance, a local group with spare
    /// capacity — here an idle pCPU (`imbalanced_active_balance`: migrate_task).
    TaskImbalance,
}

/// What an active balance did (load_balance after need_active_balance()).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Active {
    /// need_active_balance() does not hold (5.10+: not a task-count imbalance).
    NotNeeded,
    /// The busiest pCPU's running vCPU is on its way (the stopper was kicked).
    Kicked,
    /// A push from that pCPU is under way already (`busiest->active_balance`).
    Busy,
    /// Its running vCPU may not run here (out_one_pinned).
    Pinned,
}

/// rebalance_domains at `p`'s tick, `idle` if it runs nothing: once its next balance
/// has passed, each due level bottom up, while `p` is its group's balancer; a pull
/// makes it busy for the levels above; the next balance is set to the earliest due
/// time of the levels visited. Returns the widest level balanced and whether any level
/// pulled.
pub(crate) fn rebalance_domains(
    b: &mut impl DomainBalancer,
    p: u32,
    now: Nanos,
    mut idle: bool,
) -> Option<(usize, bool)> {
    if !b.balance_state(p).0.rebalance_due(now) {
        return None;
    }
    b.tick_race().begin(now, !idle);
    let mut widest: Option<(usize, bool)> = None;
    let mut next = Nanos::MAX;
    for l in 0..b.topo().levels().len() {
        let at = {
            let (pb, t) = b.balance_state(p);
            pb.due_at(l, idle, t)
        };
        if at > now {
            next = next.min(at);
            continue;
        }
        let ours = should_we_balance(b.topo(), p, l, |q| b.pcpu_idle(q));
        let outcome = if ours {
            // can_migrate_task: a cache-hot vCPU stays unless this domain's balances
            // failed more than cache_nice_tries times in a row.
            let only_cold = {
                let (pb, t) = b.balance_state(p);
                !pb.hot_ok(l, t)
            };
            b.balance_level(p, l, now, only_cold)
        } else {
            Pull::Balanced
        };
        let (pb, t) = b.balance_state(p);
        let interval = pb.interval[l];
        pb.periodic_done(l, now, outcome, t);
        if outcome == Pull::Failed && pb.active_due(l, t) {
            let active = b.active_balance(p);
            let rule = b.active_rule();
            let (pb, t) = b.balance_state(p);
            pb.after_active(l, interval, active, rule, t);
        }
        let (pb, t) = b.balance_state(p);
        idle &= outcome != Pull::Moved;
        next = next.min(pb.due_at(l, idle, t));
        if !ours {
            break;
        }
        let pulled = outcome == Pull::Moved || widest.is_some_and(|(_, pulled)| pulled);
        widest = Some((l, pulled));
    }
    b.balance_state(p).0.set_next_balance(next);
    b.tick_race().end();
    widest
}

/// The newidle balance of `p`, which found nothing to run: unless `gated`, its domains
/// bottom up until one pulls — a cache-hot vCPU only after the domain's periodic
/// balances failed more than cache_nice_tries times (a newidle balance counts no
/// failure); each outcome retimes its domain, and the next balance follows
/// (`PcpuBalance::newidle_next`). True when it pulled.
pub(crate) fn newidle_balance(
    b: &mut impl DomainBalancer,
    p: u32,
    now: Nanos,
    gated: bool,
) -> bool {
    let (mut deepest, mut pulled) = (None, false);
    if !gated {
        for l in 0..b.topo().levels().len() {
            deepest = Some(l);
            let only_cold = {
                let (pb, t) = b.balance_state(p);
                !pb.hot_ok(l, t)
            };
            let outcome = b.balance_level(p, l, now, only_cold);
            let (pb, t) = b.balance_state(p);
            pb.newidle_done(l, outcome, t);
            if outcome == Pull::Moved {
                pulled = true;
                break;
            }
        }
    }
    let (pb, t) = b.balance_state(p);
    pb.newidle_next(now, deepest, pulled, t);
    pulled
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

    const LINUX_3_2: BalanceRules = BalanceRules {
        newidle_doubles: true,
        overload_gate: false,
        idle_keeps_busy_deadline: true,
    };
    const LINUX_3_19: BalanceRules = BalanceRules {
        newidle_doubles: true,
        overload_gate: true,
        idle_keeps_busy_deadline: false,
    };

    fn timing(rule: BalanceInterval) -> (Topology, BalanceTiming) {
        // Two LLCs of 4 pCPUs: levels LLC (4) and host (8).
        let topo = Topology::new(8, 1, 4, 1);
        let t = BalanceTiming::new(&topo, rule, 32, LINUX_3_19);
        (topo, t)
    }

    fn due(b: &PcpuBalance, l: usize, now: u64, idle: bool, t: &BalanceTiming) -> bool {
        b.due_at(l, idle, t) <= Nanos(now)
    }

    /// A busy pCPU's balance does not see the moves made before it in its instant; its
    /// own moves, an idle pCPU's balance and the next instant see everything.
    #[test]
    fn a_racing_balance_reads_the_loads_from_before_its_instants_moves() {
        let mut r = TickRace::default();
        let t = Nanos(4 * MS);
        r.begin(t, true);
        r.record(t, 3, 1, 1024);
        r.end();
        r.begin(t, true);
        assert_eq!((r.load_seen(3, 1024), r.nr_seen(3, 1)), (2048, 2));
        assert_eq!((r.load_seen(1, 2048), r.nr_seen(1, 2)), (1024, 1));
        assert_eq!(r.load_seen(0, 1024), 1024);
        assert_eq!(r.hidden_sources().collect::<Vec<_>>(), [3]);
        r.record(t, 3, 2, 1024);
        assert_eq!(r.load_seen(2, 2048), 2048, "its own move");
        r.end();
        r.begin(t, false);
        assert!(!r.hides_any(), "an idle pCPU's balance");
        r.begin(Nanos(8 * MS), true);
        assert!(!r.hides_any(), "a new instant");
    }

    #[test]
    fn a_hot_vcpu_may_move_after_two_failures_in_a_row() {
        let (_, t) = timing(BalanceInterval::Fixed);
        let mut b = PcpuBalance::new(500_000, &t);
        b.periodic_done(0, Nanos(1), Pull::Failed, &t);
        assert!(!b.hot_ok(0, &t));
        b.periodic_done(0, Nanos(2), Pull::Failed, &t);
        assert!(b.hot_ok(0, &t));
        // Failures are counted per domain, and a newidle balance counts none.
        assert!(!b.hot_ok(1, &t));
        b.newidle_done(1, Pull::Failed, &t);
        b.newidle_done(1, Pull::Failed, &t);
        assert!(!b.hot_ok(1, &t));
        b.periodic_done(0, Nanos(3), Pull::Balanced, &t);
        assert!(!b.hot_ok(0, &t));
    }

    /// cache_nice_tries: 0 on the SMT level (a hot vCPU moves after one failure), 2 on
    /// a NUMA level, 1 elsewhere.
    #[test]
    fn cache_nice_tries_follow_the_level() {
        // SMT 2, LLCs of 4, 2 NUMA nodes of 4: levels SMT, LLC... the node is one LLC,
        // so SMT, LLC and the NUMA host.
        let topo = Topology::new(8, 2, 4, 2);
        let t = BalanceTiming::new(&topo, BalanceInterval::DomainWeight, 32, LINUX_3_19);
        let mut b = PcpuBalance::new(500_000, &t);
        let levels = topo.levels().len();
        for l in 0..levels {
            b.periodic_done(l, Nanos(1), Pull::Failed, &t);
        }
        let after_one: Vec<bool> = (0..levels).map(|l| b.hot_ok(l, &t)).collect();
        assert_eq!(after_one, [true, false, false]);
        for l in 0..levels {
            b.periodic_done(l, Nanos(2), Pull::Failed, &t);
        }
        let after_two: Vec<bool> = (0..levels).map(|l| b.hot_ok(l, &t)).collect();
        assert_eq!(after_two, [true, true, false]);
    }

    /// load_balance: out_balanced doubles the interval up to max_interval; an imbalance
    /// (moved or not) resets it to min_interval. SD_MC_INIT: 1 to 4 ms.
    #[test]
    fn a_balanced_domain_doubles_its_interval_and_an_imbalance_resets_it() {
        let (_, t) = timing(BalanceInterval::Fixed);
        let mut b = PcpuBalance::new(500_000, &t);
        assert!(!due(&b, 0, MS - 1, true, &t));
        assert!(due(&b, 0, MS, true, &t));
        b.periodic_done(0, Nanos(MS), Pull::Balanced, &t);
        assert!(!due(&b, 0, 3 * MS - 1, true, &t));
        b.periodic_done(0, Nanos(3 * MS), Pull::Balanced, &t);
        b.periodic_done(0, Nanos(7 * MS), Pull::Balanced, &t);
        // At the 4 ms maximum; busy: × busy_factor.
        assert!(!due(&b, 0, 11 * MS - 1, true, &t));
        assert!(!due(&b, 0, 7 * MS + 128 * MS - 1, false, &t));
        assert!(due(&b, 0, 7 * MS + 128 * MS, false, &t));
        b.periodic_done(0, Nanos(200 * MS), Pull::Failed, &t);
        assert!(due(&b, 0, 201 * MS, true, &t));
    }

    /// out_all_pinned: the interval backs off past max_interval, up to 512 ms.
    #[test]
    fn a_domain_whose_busier_vcpus_are_all_pinned_backs_off_to_512_ms() {
        let (_, t) = timing(BalanceInterval::Fixed);
        let mut b = PcpuBalance::new(500_000, &t);
        let mut now = 0;
        for _ in 0..12 {
            now += 1_000 * MS;
            b.periodic_done(0, Nanos(now), Pull::AllPinned, &t);
        }
        assert!(!due(&b, 0, now + 512 * MS - 1, true, &t));
        assert!(due(&b, 0, now + 512 * MS, true, &t));
    }

    /// sd_init (3.16+): a domain of n pCPUs balances every n ms to 2n ms.
    #[test]
    fn from_linux_3_16_the_interval_is_the_domains_weight() {
        let (_, t) = timing(BalanceInterval::DomainWeight);
        let mut b = PcpuBalance::new(500_000, &t);
        assert!(!due(&b, 0, 4 * MS - 1, true, &t));
        assert!(due(&b, 0, 4 * MS, true, &t));
        assert!(!due(&b, 1, 8 * MS - 1, true, &t));
        b.periodic_done(1, Nanos(8 * MS), Pull::Balanced, &t);
        b.periodic_done(1, Nanos(24 * MS), Pull::Balanced, &t);
        assert!(!due(&b, 1, 40 * MS - 1, true, &t));
        assert!(due(&b, 1, 40 * MS, true, &t));
    }

    /// Linux 5.0+: a newidle balance that finds the domain balanced leaves its interval.
    #[test]
    fn a_balanced_newidle_balance_doubles_the_interval_only_before_5_0() {
        let topo = Topology::new(8, 1, 4, 1);
        for (doubles, wait) in [(true, 2 * MS), (false, MS)] {
            let rules = BalanceRules {
                newidle_doubles: doubles,
                ..LINUX_3_19
            };
            let t = BalanceTiming::new(&topo, BalanceInterval::Fixed, 32, rules);
            let mut b = PcpuBalance::new(500_000, &t);
            b.newidle_done(0, Pull::Balanced, &t);
            assert!(!due(&b, 0, wait - 1, true, &t), "{doubles}");
            assert!(due(&b, 0, wait, true, &t), "{doubles}");
        }
    }

    /// idle_balance's next_balance: a pCPU that goes idle before the deadline it set
    /// while busy keeps that deadline on 3.2 (unless it pulled), and moves it forward to
    /// the idle interval from 3.16.
    #[test]
    fn an_idle_pcpu_waits_out_its_busy_deadline_only_on_linux_3_2() {
        let topo = Topology::new(8, 1, 4, 1);
        for (rules, pulled, next) in [
            (LINUX_3_2, false, 128 * MS),
            (LINUX_3_2, true, MS),
            (LINUX_3_19, false, MS),
        ] {
            let t = BalanceTiming::new(&topo, BalanceInterval::Fixed, 32, rules);
            let mut b = PcpuBalance::new(500_000, &t);
            // Busy at 0: the LLC level due at 1 ms × 32.
            b.set_next_balance(b.due_at(0, false, &t).min(b.due_at(1, false, &t)));
            assert_eq!(b.next_balance, Nanos(32 * MS));
            b.periodic_done(0, Nanos(0), Pull::Balanced, &t);
            b.periodic_done(0, Nanos(0), Pull::Balanced, &t);
            b.set_next_balance(b.due_at(0, false, &t));
            assert_eq!(b.next_balance, Nanos(128 * MS));
            // Idle at 10 ms: the newidle balance visits both levels (the host level is
            // due at 1 ms at its idle interval).
            b.newidle_next(Nanos(10 * MS), Some(1), pulled, &t);
            let want = Nanos(next);
            assert_eq!(b.next_balance, want, "{rules:?} pulled {pulled}");
            assert_eq!(b.rebalance_due(Nanos(20 * MS)), want <= Nanos(20 * MS));
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
