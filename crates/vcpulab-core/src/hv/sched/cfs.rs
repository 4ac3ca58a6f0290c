//! Linux CFS as KVM's host scheduler (pre-6.6 semantics): per-pCPU runqueues ordered by
//! weighted vruntime, a bounded scheduling period, tick-driven preemption
//! (check_preempt_tick), wake-up preemption with a wake-up granularity, sleeper
//! placement, next/skip buddies, idle and periodic load balancing with a cache-hot
//! migration cost, and CFS bandwidth control for caps.

use super::{HostScheduler, SchedSetup, StopReason, WakePlacement};
use crate::hv::placement::prev_else_next_idle;
use crate::scenario::CfsParams;
use crate::sim::{Nanos, PcpuId, VcpuId};
use std::cell::Cell;

const NICE_0_LOAD: u64 = 1024;
/// vruntimes start here so that relative placement never underflows.
const VR_BASE: u64 = 1 << 50;

#[derive(Clone, Debug)]
struct Ent {
    vruntime: u64,
    load: u64,
    /// vruntime relative to its runqueue's min_vruntime, saved when it blocks.
    rel_vr: i64,
    rq: u32,
    queued: bool,
    /// When it last stopped running (for cache-hotness).
    last_ran: Nanos,
    /// Has run at least once (else it is placed like a new task).
    ran: bool,
}

#[derive(Clone, Debug, Default)]
struct Rq {
    queue: Vec<VcpuId>,
    curr: Option<VcpuId>,
    exec_start: Nanos,
    picked_at: Nanos,
    min_vr: u64,
    next_buddy: Option<VcpuId>,
    skip_buddy: Option<VcpuId>,
    /// Urgent-vCPU-first (hv/uvf.rs): the queued vCPU this runqueue runs next.
    forced: Option<VcpuId>,
    last_balance: Nanos,
    /// Σ load of the running and queued vCPUs, kept incrementally.
    load_sum: u64,
    /// The leftmost queued vCPU as last computed (None: stale). Queued vCPUs' vruntimes
    /// do not change while they wait, so it stays right until the queue changes.
    left: Cell<Option<Option<VcpuId>>>,
}

pub struct Cfs {
    placement: crate::hv::placement::Placement,
    latency: u64,
    min_gran: u64,
    wakeup_gran: u64,
    migration_cost: u64,
    balance_interval: u64,
    tick: Nanos,
    bw_period: Nanos,
    setup: SchedSetup,
    ent: Vec<Ent>,
    rqs: Vec<Rq>,
    /// Per VM: quota per bandwidth period (ns), runtime used, throttled.
    quota: Vec<Option<u64>>,
    used: Vec<u64>,
    throttled: Vec<bool>,
    running_per_vm: Vec<u32>,
    /// Some VM has a cap (throttling can exclude vCPUs from the load).
    capped: bool,
}

fn ms(x: f64) -> u64 {
    (x * 1e6).round() as u64
}

impl Cfs {
    pub fn new(p: &CfsParams, setup: SchedSetup) -> Cfs {
        let nv = setup.vcpu_vm.len();
        let nvm = setup.vm_weight.len();
        let bw_period = Nanos(ms(p.bandwidth_period_ms));
        let ent = (0..nv)
            .map(|i| Ent {
                vruntime: VR_BASE,
                load: setup.vm_weight[setup.vcpu_vm[i].idx()] as u64 * 4,
                rel_vr: 0,
                rq: setup.vcpu_mask[i].iter().next().unwrap_or(0),
                queued: false,
                last_ran: Nanos::ZERO,
                ran: false,
            })
            .collect();
        let quota = setup
            .vm_cap
            .iter()
            .map(|c| c.map(|pct| (pct / 100.0 * bw_period.0 as f64).round() as u64))
            .collect();
        Cfs {
            placement: p.placement,
            latency: ms(p.latency_ms),
            min_gran: ms(p.min_granularity_ms),
            wakeup_gran: ms(p.wakeup_granularity_ms),
            migration_cost: (p.migration_cost_us * 1e3).round() as u64,
            balance_interval: ms(p.balance_interval_ms),
            tick: Nanos((1e9 / p.tick_hz as f64).round() as u64),
            bw_period,
            rqs: vec![
                Rq {
                    min_vr: VR_BASE,
                    ..Rq::default()
                };
                setup.pcpus as usize
            ],
            ent,
            quota,
            used: vec![0; nvm],
            throttled: vec![false; nvm],
            running_per_vm: vec![0; nvm],
            capped: setup.vm_cap.iter().any(Option::is_some),
            setup,
        }
    }

    fn vm_of(&self, v: VcpuId) -> usize {
        self.setup.vcpu_vm[v.idx()].idx()
    }

    #[inline]
    fn throttled(&self, v: VcpuId) -> bool {
        self.capped && self.throttled[self.vm_of(v)]
    }

    fn update_curr(&mut self, p: usize, now: Nanos) {
        let Some(c) = self.rqs[p].curr else { return };
        let delta = now.0.saturating_sub(self.rqs[p].exec_start.0);
        self.rqs[p].exec_start = now;
        let e = &mut self.ent[c.idx()];
        e.vruntime += delta * NICE_0_LOAD / e.load;
        let vm = self.setup.vcpu_vm[c.idx()].idx();
        self.used[vm] += delta;
        if let Some(q) = self.quota[vm] {
            if self.used[vm] >= q {
                self.throttled[vm] = true;
            }
        }
        self.update_min_vr(p);
    }

    /// The queued, unthrottled vCPU with the least vruntime (the first of equals in
    /// queue order). Cached until the queue changes; with caps, throttling changes it
    /// too, so it is recomputed every time.
    #[inline]
    fn leftmost(&self, p: usize) -> Option<VcpuId> {
        let rq = &self.rqs[p];
        if !self.capped {
            if let Some(l) = rq.left.get() {
                return l;
            }
        }
        let mut best: Option<VcpuId> = None;
        for &v in &rq.queue {
            if self.throttled(v) {
                continue;
            }
            match best {
                Some(b) if self.ent[b.idx()].vruntime <= self.ent[v.idx()].vruntime => {}
                _ => best = Some(v),
            }
        }
        if !self.capped {
            rq.left.set(Some(best));
        }
        best
    }

    fn update_min_vr(&mut self, p: usize) {
        let rq = &self.rqs[p];
        let mut m = rq.curr.map(|c| self.ent[c.idx()].vruntime);
        if let Some(l) = self.leftmost(p) {
            let lv = self.ent[l.idx()].vruntime;
            m = Some(m.map_or(lv, |c| c.min(lv)));
        }
        if let Some(m) = m {
            let rq = &mut self.rqs[p];
            rq.min_vr = rq.min_vr.max(m);
        }
    }

    /// Weighted load of a runqueue (running + queued, throttled excluded).
    fn load(&self, p: usize) -> u64 {
        if !self.capped {
            return self.rqs[p].load_sum;
        }
        let rq = &self.rqs[p];
        let q: u64 = rq
            .queue
            .iter()
            .filter(|v| !self.throttled(**v))
            .map(|v| self.ent[v.idx()].load)
            .sum();
        q + rq.curr.map_or(0, |c| self.ent[c.idx()].load)
    }

    fn nr_running(&self, p: usize) -> u64 {
        let rq = &self.rqs[p];
        rq.queue.iter().filter(|v| !self.throttled(**v)).count() as u64 + rq.curr.is_some() as u64
    }

    /// sched_slice(): the share of the period this entity gets on its runqueue.
    fn sched_slice(&self, p: usize, v: VcpuId) -> u64 {
        let rq = &self.rqs[p];
        let nr = self.nr_running(p).max(1);
        let period = self.latency.max(nr * self.min_gran);
        let mut total: u64 = rq
            .queue
            .iter()
            .filter(|v| !self.throttled(**v))
            .map(|v| self.ent[v.idx()].load)
            .sum();
        if let Some(c) = rq.curr {
            total += self.ent[c.idx()].load;
        }
        if !rq.queue.contains(&v) && rq.curr != Some(v) {
            total += self.ent[v.idx()].load;
        }
        period * self.ent[v.idx()].load / total.max(1)
    }

    fn gran_for(&self, v: VcpuId) -> i64 {
        (self.wakeup_gran * NICE_0_LOAD / self.ent[v.idx()].load) as i64
    }

    fn rq_idle(&self, p: usize) -> bool {
        self.rqs[p].curr.is_none() && self.rqs[p].queue.is_empty()
    }

    /// A vCPU of `v`'s VM other than `v` runs or waits on runqueue `p`.
    fn holds_sibling(&self, p: usize, v: VcpuId) -> bool {
        let vm = self.setup.vcpu_vm[v.idx()];
        let rq = &self.rqs[p];
        rq.curr
            .iter()
            .chain(rq.queue.iter())
            .any(|&o| o != v && self.setup.vcpu_vm[o.idx()] == vm)
    }

    fn select_rq(&self, v: VcpuId) -> usize {
        let mask = self.setup.vcpu_mask[v.idx()];
        let prev = self.ent[v.idx()].rq as usize;
        if let Some(p) = crate::hv::placement::choose(
            self.placement,
            mask,
            prev as u32,
            |p| self.holds_sibling(p as usize, v),
            |p| self.load(p as usize),
        ) {
            return p as usize;
        }
        let allowed = |q: usize| mask.contains(q as u32);
        if let Some(q) = prev_else_next_idle(prev, self.rqs.len(), allowed, |q| self.rq_idle(q)) {
            return q;
        }
        if mask.contains(prev as u32) && self.ent[v.idx()].ran {
            return prev;
        }
        // First placement (fork/exec balancing) or a pCPU outside the mask: the least
        // loaded allowed pCPU.
        mask.iter()
            .map(|q| q as usize)
            .min_by_key(|&q| (self.load(q), q))
            .unwrap_or(prev)
    }

    fn migrate(&mut self, v: VcpuId, from: usize, to: usize) {
        let e = &mut self.ent[v.idx()];
        let rel = e.vruntime as i64 - self.rqs[from].min_vr as i64;
        e.vruntime = (self.rqs[to].min_vr as i64 + rel).max(0) as u64;
        e.rq = to as u32;
        let w = e.load;
        self.rqs[from].load_sum -= w;
        self.rqs[to].load_sum += w;
        self.rqs[from].queue.retain(|x| *x != v);
        self.rqs[to].queue.push(v);
        self.rqs[from].left.set(None);
        self.rqs[to].left.set(None);
    }

    /// Pulls one queued vCPU allowed on `p` from the most loaded runqueue when that
    /// reduces the weighted-load imbalance (Linux balances load, not task counts).
    /// `only_cold` leaves cache-hot vCPUs (ran within migration_cost) where they are.
    fn pull_one(&mut self, p: usize, now: Nanos, only_cold: bool) -> bool {
        let mine = self.load(p);
        let mut best: Option<(usize, u64)> = None;
        for q in 0..self.rqs.len() {
            if q == p || self.rqs[q].queue.is_empty() {
                continue;
            }
            let l = self.load(q);
            if l > mine && best.is_none_or(|(_, bl)| l > bl) {
                best = Some((q, l));
            }
        }
        let Some((src, src_load)) = best else {
            return false;
        };
        let diff = src_load - mine;
        // Moving load w changes the gap to |diff - 2w|: it helps iff 0 < w < diff.
        // Take the queued vCPU whose load is closest to half the gap.
        let cand = self.rqs[src]
            .queue
            .iter()
            .copied()
            .filter(|&v| {
                let w = self.ent[v.idx()].load;
                w < diff
                    && self.setup.vcpu_mask[v.idx()].contains(p as u32)
                    && !self.throttled(v)
                    && (!only_cold
                        || now.0.saturating_sub(self.ent[v.idx()].last_ran.0)
                            >= self.migration_cost)
            })
            .min_by_key(|&v| (self.ent[v.idx()].load as i64 - (diff / 2) as i64).unsigned_abs());
        match cand {
            Some(v) => {
                self.migrate(v, src, p);
                true
            }
            None => false,
        }
    }
}

impl HostScheduler for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }

    fn tick_period(&self) -> Option<Nanos> {
        Some(self.tick)
    }

    fn global_period(&self) -> Option<Nanos> {
        self.quota
            .iter()
            .any(Option::is_some)
            .then_some(self.bw_period)
    }

    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement {
        let p = self.select_rq(v);
        self.update_curr(p, now);
        let min_vr = self.rqs[p].min_vr;
        let prev_rq = self.ent[v.idx()].rq as usize;
        let e = &mut self.ent[v.idx()];
        // A sleeper keeps its vruntime on its own runqueue; moving to another, it keeps
        // its lag relative to the queue's min_vruntime.
        let placed = if prev_rq == p {
            e.vruntime
        } else {
            (min_vr as i64 + e.rel_vr).max(0) as u64
        };
        // GENTLE_FAIR_SLEEPERS: a sleeper gets at most half a latency of credit.
        e.vruntime = placed.max(min_vr.saturating_sub(self.latency / 2));
        e.rq = p as u32;
        e.queued = true;
        let w = e.load;
        self.rqs[p].queue.push(v);
        self.rqs[p].left.set(None);
        self.rqs[p].load_sum += w;
        let preempt = match self.rqs[p].curr {
            None => true,
            Some(c) => {
                if self.throttled(c) {
                    true
                } else {
                    let vdiff =
                        self.ent[c.idx()].vruntime as i64 - self.ent[v.idx()].vruntime as i64;
                    vdiff > self.gran_for(v)
                }
            }
        };
        if preempt && self.rqs[p].curr.is_some() {
            self.rqs[p].next_buddy = Some(v);
        }
        WakePlacement {
            pcpu: PcpuId(p as u32),
            preempt,
        }
    }

    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos) {
        let pi = p.idx();
        self.update_curr(pi, now);
        self.rqs[pi].curr = None;
        let vm = self.vm_of(v);
        self.running_per_vm[vm] = self.running_per_vm[vm].saturating_sub(1);
        let min_vr = self.rqs[pi].min_vr;
        let e = &mut self.ent[v.idx()];
        e.last_ran = now;
        match why {
            StopReason::Preempted | StopReason::Yielded => {
                e.queued = true;
                self.rqs[pi].queue.push(v);
                self.rqs[pi].left.set(None);
                if why == StopReason::Yielded {
                    self.rqs[pi].skip_buddy = Some(v);
                }
            }
            StopReason::Blocked => {
                e.queued = false;
                self.rqs[pi].load_sum -= e.load;
                e.rel_vr = e.vruntime as i64 - min_vr as i64;
                self.update_min_vr(pi);
            }
        }
    }

    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)> {
        let pi = p.idx();
        if self.leftmost(pi).is_none() {
            // newidle balance: an idle pCPU pulls work, cache-hot or not.
            self.pull_one(pi, now, false);
        }
        let lv = self.leftmost(pi)?;
        let li = self.rqs[pi]
            .queue
            .iter()
            .position(|x| *x == lv)
            .unwrap_or(0);
        debug_assert_eq!(self.rqs[pi].queue.get(li), Some(&lv));
        let l_vr = self.ent[lv.idx()].vruntime as i64;
        let mut pick = (li, lv);
        let rq = &self.rqs[pi];
        let forced = rq
            .forced
            .and_then(|f| rq.queue.iter().position(|x| *x == f).map(|i| (i, f)));
        if let Some(f) = forced {
            pick = f;
        } else if let Some(b) = rq.next_buddy {
            if let Some(bi) = rq.queue.iter().position(|x| *x == b) {
                if !self.throttled(b) && self.ent[b.idx()].vruntime as i64 - l_vr < self.gran_for(b)
                {
                    pick = (bi, b);
                }
            }
        } else if rq.skip_buddy == Some(lv) {
            // Take the second-leftmost when it is close enough (yield semantics).
            let second = rq
                .queue
                .iter()
                .enumerate()
                .filter(|(_, x)| **x != lv && !self.throttled(**x))
                .min_by_key(|(_, x)| self.ent[x.idx()].vruntime);
            if let Some((si, &s)) = second {
                if self.ent[s.idx()].vruntime as i64 - l_vr < self.gran_for(s) {
                    pick = (si, s);
                }
            }
        }
        let rq = &mut self.rqs[pi];
        rq.next_buddy = None;
        rq.skip_buddy = None;
        rq.forced = None;
        rq.queue.swap_remove(pick.0);
        rq.left.set(None);
        let v = pick.1;
        rq.curr = Some(v);
        rq.exec_start = now;
        rq.picked_at = now;
        let e = &mut self.ent[v.idx()];
        e.queued = false;
        e.ran = true;
        e.rq = pi as u32;
        let vm = self.vm_of(v);
        self.running_per_vm[vm] += 1;
        self.update_min_vr(pi);
        // With a cap, stop exactly when the VM's remaining quota (shared among its
        // running vCPUs) runs out; otherwise preemption is decided at ticks.
        let limit = self.quota[vm].map(|q| {
            let left = q.saturating_sub(self.used[vm]);
            Nanos((left / self.running_per_vm[vm].max(1) as u64).max(1_000))
        });
        Some((v, limit))
    }

    fn tick(&mut self, p: PcpuId, now: Nanos) -> bool {
        let pi = p.idx();
        self.update_curr(pi, now);
        let mut resched = false;
        if let Some(c) = self.rqs[pi].curr {
            if self.throttled(c) {
                return true;
            }
            // check_preempt_tick
            let ideal = self.sched_slice(pi, c);
            let ran = now.0.saturating_sub(self.rqs[pi].picked_at.0);
            if ran > ideal {
                resched = true;
            } else if ran >= self.min_gran {
                if let Some(l) = self.leftmost(pi) {
                    let d = self.ent[c.idx()].vruntime as i64 - self.ent[l.idx()].vruntime as i64;
                    if d > ideal as i64 {
                        resched = true;
                    }
                }
            }
        }
        if now.0.saturating_sub(self.rqs[pi].last_balance.0) >= self.balance_interval {
            self.rqs[pi].last_balance = now;
            let idle = self.rqs[pi].curr.is_none();
            if self.pull_one(pi, now, !idle) && idle {
                resched = true;
            }
        }
        if self.rqs[pi].curr.is_none() && self.leftmost(pi).is_some() {
            resched = true;
        }
        resched
    }

    fn global_tick(&mut self, _now: Nanos, resched: &mut Vec<PcpuId>) {
        let mut released = false;
        for vm in 0..self.used.len() {
            // An overrun (noticed only at a tick) is paid back from the next period's
            // quota, as the kernel's negative runtime_remaining is
            // (account_cfs_rq_runtime, assign_cfs_rq_runtime); unused quota does not
            // carry over (no burst).
            let q = self.quota[vm].unwrap_or(0);
            self.used[vm] = self.used[vm].saturating_sub(q);
            let still = self.quota[vm].is_some_and(|q| self.used[vm] >= q);
            released |= self.throttled[vm] && !still;
            self.throttled[vm] = still;
        }
        if released {
            for p in 0..self.rqs.len() {
                if self.rqs[p].curr.is_none() && !self.rqs[p].queue.is_empty() {
                    resched.push(PcpuId(p as u32));
                }
            }
        }
    }

    fn yield_to(&mut self, p: PcpuId, from: VcpuId, to: VcpuId, _now: Nanos) -> Option<PcpuId> {
        let e = &self.ent[to.idx()];
        if !e.queued || self.throttled(to) {
            return None; // running, blocked or throttled
        }
        let tp = e.rq as usize;
        if self.nr_running(p.idx()) == 1 && self.nr_running(tp) == 1 {
            return None;
        }
        // yield_to_task_fair: next buddy on the target's queue, skip buddy on ours.
        self.rqs[tp].next_buddy = Some(to);
        self.rqs[p.idx()].skip_buddy = Some(from);
        Some(PcpuId(tp as u32))
    }

    fn queued_on(&self, p: PcpuId) -> usize {
        self.rqs[p.idx()].queue.len()
    }

    fn yield_to_esrch(&self, p: PcpuId, to: VcpuId) -> bool {
        let tp = self.ent[to.idx()].rq as usize;
        self.nr_running(p.idx()) == 1 && self.nr_running(tp) == 1
    }

    fn home_of(&self, v: VcpuId) -> PcpuId {
        PcpuId(self.ent[v.idx()].rq)
    }

    /// Urgent-vCPU-first: the queued `v` runs next on `p` (moved there if queued
    /// elsewhere).
    fn run_next(&mut self, p: PcpuId, v: VcpuId) -> bool {
        let e = &self.ent[v.idx()];
        if !e.queued || self.throttled(v) || !self.setup.vcpu_mask[v.idx()].contains(p.0) {
            return false;
        }
        let from = e.rq as usize;
        if from != p.idx() {
            self.migrate(v, from, p.idx());
        }
        self.rqs[p.idx()].forced = Some(v);
        true
    }

    /// vruntime beyond its runqueue's min_vruntime, in CPU time at its weight.
    fn lead_ns(&self, v: VcpuId) -> i64 {
        let e = &self.ent[v.idx()];
        let min_vr = self.rqs[e.rq as usize].min_vr;
        (e.vruntime as i64 - min_vr as i64) * e.load as i64 / NICE_0_LOAD as i64
    }
}

#[cfg(test)]
mod tests {
    //! CFS on its own, on hand-made situations (as credit.rs is tested): the pick, the
    //! tick, wake-up placement and preemption, directed yield.
    use super::*;
    use crate::host::cpumask::CpuMask;
    use crate::sim::VmId;

    /// `weights[i]` is VM i's weight (one vCPU each), on `pcpus` pCPUs.
    fn cfs(pcpus: u32, weights: &[u32]) -> Cfs {
        let n = weights.len();
        let setup = SchedSetup {
            pcpus,
            vcpu_vm: (0..n).map(|i| VmId(i as u32)).collect(),
            vcpu_mask: vec![CpuMask::all(pcpus); n],
            vm_weight: weights.to_vec(),
            vm_cap: vec![None; n],
        };
        Cfs::new(&CfsParams::default(), setup)
    }

    /// Runs pCPU 0 tick by tick for `ms` with every vCPU always runnable; returns the
    /// CPU time each got (ns).
    fn run_ticks(c: &mut Cfs, n: usize, ms: u64) -> Vec<u64> {
        let tick = c.tick_period().expect("CFS ticks").0;
        let mut got = vec![0u64; n];
        let mut now = Nanos(0);
        let p = PcpuId(0);
        let (mut cur, _) = c.pick_next(p, now).expect("something runs");
        while now.0 < ms * 1_000_000 {
            now = Nanos(now.0 + tick);
            got[cur.idx()] += tick;
            if c.tick(p, now) {
                c.put_prev(p, cur, StopReason::Preempted, now);
                cur = c.pick_next(p, now).expect("still runnable").0;
            }
        }
        got
    }

    #[test]
    fn cpu_time_follows_the_weights_on_one_pcpu() {
        let mut c = cfs(1, &[256, 512, 1024]);
        for v in 0..3 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        let got = run_ticks(&mut c, 3, 10_000);
        let total: u64 = got.iter().sum();
        for (v, w) in [(0, 1.0 / 7.0), (1, 2.0 / 7.0), (2, 4.0 / 7.0)] {
            let share = got[v] as f64 / total as f64;
            assert!((share - w).abs() < 0.01, "vCPU {v}: {share} vs {w}");
        }
    }

    #[test]
    fn the_leftmost_vruntime_runs_and_a_tick_preempts_after_the_ideal_slice() {
        let mut c = cfs(1, &[256, 256]);
        c.enqueue_wake(VcpuId(0), Nanos(0));
        c.enqueue_wake(VcpuId(1), Nanos(0));
        let (first, _) = c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        // Two equal tasks share the 24 ms latency: 12 ms each, checked at 4 ms ticks.
        assert!(!c.tick(PcpuId(0), Nanos(4_000_000)));
        assert!(!c.tick(PcpuId(0), Nanos(8_000_000)));
        assert!(c.tick(PcpuId(0), Nanos(16_000_000)), "past its 12 ms slice");
        c.put_prev(PcpuId(0), first, StopReason::Preempted, Nanos(16_000_000));
        let (second, _) = c.pick_next(PcpuId(0), Nanos(16_000_000)).unwrap();
        assert_ne!(first, second, "the other one has the smaller vruntime now");
    }

    #[test]
    fn a_waking_vcpu_takes_an_idle_pcpu_and_preempts_only_beyond_the_granularity() {
        let mut c = cfs(2, &[256, 256, 256]);
        // vCPU 0 runs on pCPU 0; vCPU 1 wakes: pCPU 1 is idle, it goes there.
        let w0 = c.enqueue_wake(VcpuId(0), Nanos(0));
        c.pick_next(w0.pcpu, Nanos(0)).unwrap();
        let w1 = c.enqueue_wake(VcpuId(1), Nanos(0));
        assert_ne!(w1.pcpu, w0.pcpu, "an idle pCPU is preferred");
        assert!(w1.preempt, "waking on an idle pCPU reschedules it");
        c.pick_next(w1.pcpu, Nanos(0)).unwrap();
        // Both busy: vCPU 2 queues somewhere; right after the others started it is not
        // far enough behind to preempt (wake-up granularity).
        let w2 = c.enqueue_wake(VcpuId(2), Nanos(1_000));
        assert!(!w2.preempt);
    }

    #[test]
    fn yield_to_needs_two_tasks_somewhere_and_steers_the_next_pick() {
        let mut c = cfs(2, &[256, 256, 256]);
        // pCPU 0 runs vCPU 0 alone; vCPU 1 runs on pCPU 1 with vCPU 2 queued behind.
        c.enqueue_wake(VcpuId(0), Nanos(0));
        c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        let w1 = c.enqueue_wake(VcpuId(1), Nanos(0));
        assert_eq!(w1.pcpu, PcpuId(1));
        c.pick_next(PcpuId(1), Nanos(0)).unwrap();
        let w2 = c.enqueue_wake(VcpuId(2), Nanos(0));
        let tp = w2.pcpu;
        // Yielding from pCPU 0 (one task) to a vCPU queued with a running one: allowed.
        assert!(!c.yield_to_esrch(PcpuId(0), VcpuId(2)));
        assert_eq!(
            c.yield_to(PcpuId(0), VcpuId(0), VcpuId(2), Nanos(10)),
            Some(tp)
        );
        // A running target cannot be yielded to.
        assert_eq!(c.yield_to(PcpuId(0), VcpuId(0), VcpuId(1), Nanos(10)), None);
        // The target's runqueue picks it next (next buddy) when it is preempted.
        let curr = c.rqs[tp.idx()].curr.expect("something runs there");
        c.put_prev(tp, curr, StopReason::Preempted, Nanos(20));
        assert_eq!(c.pick_next(tp, Nanos(20)).map(|x| x.0), Some(VcpuId(2)));
    }
}
