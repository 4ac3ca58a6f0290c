//! Xen's credit2 scheduler (Xen 4.8+, the default since 4.12), from
//! xen/common/sched/credit2.c.
//!
//! pCPUs share a runqueue per group of at most `max_cpus_per_runqueue` (Xen builds one
//! per socket, split to at most 16 CPUs, spread evenly: `cpu_add_to_runqueue`). Each
//! vCPU has credit in nanoseconds that it burns while running, faster the lower its
//! weight (`t2c_update`: credit −= time × max weight on the runqueue / weight). The
//! runqueue is kept sorted by credit (`runq_insert`); a pCPU runs the vCPU with the most
//! credit (`runq_candidate`), keeping the current one while it has more or ran for less
//! than the rate limit, and resisting pulling a vCPU that last ran on another pCPU unless
//! it has `migrate_resist` more credit. A vCPU runs until its credit equals the best
//! waiter's, at least 500 µs (or what is left of the rate limit) and at most 10 ms
//! (`csched2_runtime`). When the vCPU about to run (or the runqueue's head) has no
//! credit left, every vCPU of the runqueue gets 10 ms more, clipped to 10.5 ms
//! (`reset_credit`), and load is balanced between runqueues. A waking vCPU tickles an
//! idle pCPU of its runqueue, else the pCPU whose running vCPU has the least credit if
//! the wakee has more (by `migrate_resist` for another pCPU) and that vCPU is past its
//! rate limit (`runq_tickle`, `tickle_score`). A yielding vCPU gives way to the
//! runqueue's head whatever its credit. Caps use the budget mechanism: a VM's budget of
//! cap% × `cap_period_ms` is replenished every period, vCPUs grab a quota of it to run
//! and are parked when none is left (`unit_grab_budget`, `park_unit`).

use super::{HostScheduler, SchedSetup, StopReason, WakePlacement};
use crate::scenario::Credit2Params;
use crate::sim::{Nanos, PcpuId, VcpuId};

/// CSCHED2_CREDIT_INIT: credit a vCPU starts with and gets at each reset (10 ms).
const CREDIT_INIT: i64 = 10_000_000;
/// CSCHED2_CREDIT_MIN.
const CREDIT_MIN: i64 = -CREDIT_INIT;
/// CSCHED2_MIN_TIMER (500 µs), also CSCHED2_CARRYOVER_MAX.
const MIN_TIMER: i64 = 500_000;
/// CSCHED2_MAX_TIMER (= CREDIT_INIT).
const MAX_TIMER: i64 = CREDIT_INIT;
/// CSCHED2_MIGRATE_COMPENSATION (50 µs).
const MIGRATE_COMPENSATION: i64 = 50_000;
/// CSCHED2_RATELIMIT_TICKLE_TOLERANCE (50 µs).
const TICKLE_TOLERANCE: u64 = 50_000;
/// CSCHED2_IDLE_CREDIT: what an idle pCPU compares with.
const IDLE_CREDIT: i64 = CREDIT_MIN - 1;

#[derive(Clone, Debug)]
struct Unit {
    credit: i64,
    residual: u64,
    start_time: Nanos,
    weight: u64,
    /// The pCPU it runs or last ran on (`sched_unit_master`).
    cpu: u32,
    rq: u32,
    on_runq: bool,
    runnable: bool,
    tickled_cpu: Option<u32>,
    /// Cap budget grabbed from its VM's pool; parked when none could be had.
    budget: i64,
    parked: bool,
}

pub struct Credit2 {
    ratelimit: u64,
    migrate_resist: i64,
    cap_period: Nanos,
    setup: SchedSetup,
    rq_of_cpu: Vec<u32>,
    rq_cpus: Vec<Vec<u32>>,
    /// Per runqueue: waiting vCPUs by credit, highest first (FIFO among equals).
    runq: Vec<Vec<VcpuId>>,
    /// Per runqueue: the vCPUs assigned to it (running, waiting or blocked).
    members: Vec<Vec<VcpuId>>,
    max_weight: Vec<u64>,
    u: Vec<Unit>,
    curr: Vec<Option<VcpuId>>,
    run_since: Vec<Nanos>,
    tickled: Vec<bool>,
    /// What a pCPU ran until the core took it off (and whether it yielded): decided on
    /// at the next pick, like `scurr` in csched2_schedule.
    prev: Vec<Option<(VcpuId, bool)>>,
    resched: Vec<PcpuId>,
    /// Per VM with a cap: the budget pool, its size per period, the quota a vCPU grabs.
    pool: Vec<i64>,
    tot_budget: Vec<Option<i64>>,
    quota: Vec<i64>,
}

impl Credit2 {
    pub fn new(p: &Credit2Params, setup: SchedSetup) -> Credit2 {
        let np = setup.pcpus;
        let max = p.max_cpus_per_runqueue.max(1);
        // cpu_add_to_runqueue: as few runqueues as the limit allows, CPUs spread evenly.
        let nrq = (np - 1) / max + 1;
        let per = np.div_ceil(nrq);
        let rq_of_cpu: Vec<u32> = (0..np).map(|c| (c / per).min(nrq - 1)).collect();
        let mut rq_cpus = vec![Vec::new(); nrq as usize];
        for c in 0..np {
            rq_cpus[rq_of_cpu[c as usize] as usize].push(c);
        }
        let nv = setup.vcpu_vm.len();
        let mut members = vec![Vec::new(); nrq as usize];
        let mut u = Vec::with_capacity(nv);
        for i in 0..nv {
            let cpu = setup.vcpu_mask[i].iter().next().unwrap_or(0);
            let rq = rq_of_cpu[cpu as usize];
            members[rq as usize].push(VcpuId(i as u32));
            u.push(Unit {
                credit: CREDIT_INIT,
                residual: 0,
                start_time: Nanos::ZERO,
                weight: setup.vm_weight[setup.vcpu_vm[i].idx()].max(1) as u64,
                cpu,
                rq,
                on_runq: false,
                runnable: false,
                tickled_cpu: None,
                budget: i64::MAX,
                parked: false,
            });
        }
        let cap_period = Nanos((p.cap_period_ms * 1e6).round() as u64);
        let nvm = setup.vm_weight.len();
        let tot_budget: Vec<Option<i64>> = setup
            .vm_cap
            .iter()
            .map(|c| c.map(|pct| (pct / 100.0 * cap_period.0 as f64).round() as i64))
            .collect();
        let mut units_per_vm = vec![0i64; nvm];
        for vm in &setup.vcpu_vm {
            units_per_vm[vm.idx()] += 1;
        }
        let quota = (0..nvm)
            .map(|vm| tot_budget[vm].map_or(0, |t| (t / units_per_vm[vm].max(1)).max(MIN_TIMER)))
            .collect();
        for (i, unit) in u.iter_mut().enumerate() {
            if tot_budget[setup.vcpu_vm[i].idx()].is_some() {
                unit.budget = 0;
            }
        }
        let mut s = Credit2 {
            ratelimit: (p.ratelimit_us * 1e3).round() as u64,
            migrate_resist: (p.migrate_resist_us * 1e3).round() as i64,
            cap_period,
            rq_of_cpu,
            rq_cpus,
            runq: vec![Vec::new(); nrq as usize],
            max_weight: vec![1; nrq as usize],
            members,
            u,
            curr: vec![None; np as usize],
            run_since: vec![Nanos::ZERO; np as usize],
            tickled: vec![false; np as usize],
            prev: vec![None; np as usize],
            resched: Vec::new(),
            pool: tot_budget.iter().map(|t| t.unwrap_or(0)).collect(),
            tot_budget,
            quota,
            setup,
        };
        for r in 0..nrq as usize {
            s.update_max_weight(r);
        }
        s
    }

    fn vm_of(&self, v: VcpuId) -> usize {
        self.setup.vcpu_vm[v.idx()].idx()
    }

    fn capped(&self, v: VcpuId) -> bool {
        self.tot_budget[self.vm_of(v)].is_some()
    }

    fn update_max_weight(&mut self, r: usize) {
        self.max_weight[r] = self.members[r]
            .iter()
            .map(|v| self.u[v.idx()].weight)
            .max()
            .unwrap_or(1);
    }

    /// burn_credits / t2c_update.
    fn burn(&mut self, v: VcpuId, now: Nanos) {
        let mw = self.max_weight[self.u[v.idx()].rq as usize];
        let capped = self.capped(v);
        let un = &mut self.u[v.idx()];
        let delta = now.0.saturating_sub(un.start_time.0);
        if delta == 0 {
            return;
        }
        let val = delta as u128 * mw as u128 + un.residual as u128;
        un.residual = (val % un.weight as u128) as u64;
        let burnt = (val / un.weight as u128) as i64;
        un.credit = (un.credit - burnt).max(CREDIT_MIN);
        if capped {
            un.budget -= delta as i64;
        }
        un.start_time = now;
    }

    /// c2t: credit at this vCPU's weight in time.
    fn c2t(&self, v: VcpuId, credit: i64) -> i64 {
        let mw = self.max_weight[self.u[v.idx()].rq as usize] as i128;
        (credit as i128 * self.u[v.idx()].weight as i128 / mw) as i64
    }

    /// runq_insert: after every vCPU with at least as much credit.
    fn runq_insert(&mut self, v: VcpuId) {
        let r = self.u[v.idx()].rq as usize;
        let c = self.u[v.idx()].credit;
        let pos = self.runq[r]
            .iter()
            .position(|w| self.u[w.idx()].credit < c)
            .unwrap_or(self.runq[r].len());
        self.runq[r].insert(pos, v);
        self.u[v.idx()].on_runq = true;
    }

    fn runq_remove(&mut self, v: VcpuId) {
        let r = self.u[v.idx()].rq as usize;
        self.runq[r].retain(|w| *w != v);
        self.u[v.idx()].on_runq = false;
    }

    /// unit_grab_budget: false (and parked) when the VM's pool is empty.
    fn grab_budget(&mut self, v: VcpuId) -> bool {
        if !self.capped(v) || self.u[v.idx()].budget > 0 {
            return true;
        }
        let vm = self.vm_of(v);
        self.pool[vm] += self.u[v.idx()].budget;
        if self.pool[vm] > 0 {
            let b = self.quota[vm].min(self.pool[vm]);
            self.u[v.idx()].budget = b;
            self.pool[vm] -= b;
            true
        } else {
            self.u[v.idx()].budget = 0;
            self.park(v);
            false
        }
    }

    fn park(&mut self, v: VcpuId) {
        if self.u[v.idx()].on_runq {
            self.runq_remove(v);
        }
        self.u[v.idx()].parked = true;
    }

    /// unit_return_budget.
    fn return_budget(&mut self, v: VcpuId) {
        if !self.capped(v) {
            return;
        }
        let vm = self.vm_of(v);
        self.pool[vm] += self.u[v.idx()].budget;
        self.u[v.idx()].budget = 0;
    }

    fn idle(&self, c: u32) -> bool {
        self.curr[c as usize].is_none() && self.prev[c as usize].is_none()
    }

    /// is_preemptable: the running vCPU has used its rate limit (less a tolerance).
    fn preemptable(&self, c: u32, now: Nanos) -> bool {
        if self.ratelimit <= TICKLE_TOLERANCE {
            return true;
        }
        now.0.saturating_sub(self.run_since[c as usize].0) > self.ratelimit - TICKLE_TOLERANCE
    }

    /// runq_tickle: the pCPU that should pick `v` up now, if any.
    fn tickle(&mut self, v: VcpuId, now: Nanos) -> Option<u32> {
        let r = self.u[v.idx()].rq as usize;
        let mask = self.setup.vcpu_mask[v.idx()];
        let home = self.u[v.idx()].cpu;
        let cpus = &self.rq_cpus[r];
        let n = cpus.len();
        let start = cpus.iter().position(|&c| c == home).unwrap_or(0);
        // An idle, untickled pCPU of the runqueue: its own first, then cycling on.
        let idle = (0..n)
            .map(|k| cpus[(start + k) % n])
            .find(|&c| mask.contains(c) && self.idle(c) && !self.tickled[c as usize]);
        let pick = match idle {
            Some(c) => Some(c),
            None => {
                let mut best: Option<(i64, u32)> = None;
                for k in 0..n {
                    let c = self.rq_cpus[r][(start + k) % n];
                    if !mask.contains(c) || self.tickled[c as usize] {
                        continue;
                    }
                    let Some(cur) = self.curr[c as usize] else {
                        continue;
                    };
                    if !self.preemptable(c, now) {
                        continue;
                    }
                    self.burn(cur, now);
                    let mut score = self.u[v.idx()].credit - self.u[cur.idx()].credit;
                    if c != home {
                        score -= self.migrate_resist;
                    }
                    if score > 0 && best.is_none_or(|(b, _)| score > b) {
                        best = Some((score, c));
                        if c == home {
                            // In the wakee's soft affinity (all pCPUs): taken at once.
                            break;
                        }
                    }
                }
                best.map(|(_, c)| c)
            }
        };
        if let Some(c) = pick {
            self.tickled[c as usize] = true;
            self.u[v.idx()].tickled_cpu = Some(c);
        }
        pick
    }

    /// reset_credit: everyone on the runqueue gets CREDIT_INIT more, clipped.
    fn reset_credit(&mut self, r: usize, now: Nanos, snext: VcpuId) {
        let mut reset = CREDIT_INIT;
        if self.u[snext.idx()].credit == CREDIT_MIN {
            reset += CREDIT_INIT;
        }
        for i in 0..self.members[r].len() {
            let v = self.members[r][i];
            if self.curr[self.u[v.idx()].cpu as usize] == Some(v) {
                self.burn(v, now);
            }
            let un = &mut self.u[v.idx()];
            un.credit = (un.credit + reset).min(CREDIT_INIT + MIN_TIMER);
            un.start_time = now;
        }
        // The queue keeps its order (everyone moved up by the same amount, clipping
        // only merges the top), so it needs no re-sort.
    }

    /// Runnable vCPUs assigned to a runqueue.
    fn rq_load(&self, r: usize) -> usize {
        self.members[r]
            .iter()
            .filter(|v| self.u[v.idx()].runnable)
            .count()
    }

    /// balance_load, simplified: move one waiting vCPU from the busiest runqueue to
    /// this one when their runnable counts differ by two or more (Xen compares decayed
    /// load averages and may also swap a pair).
    fn balance_load(&mut self, r: usize, now: Nanos) {
        if self.runq.len() < 2 {
            return;
        }
        let mine = self.rq_load(r);
        let Some((src, load)) = (0..self.runq.len())
            .filter(|&o| o != r)
            .map(|o| (o, self.rq_load(o)))
            .max_by_key(|&(o, l)| (l, std::cmp::Reverse(o)))
        else {
            return;
        };
        if load < mine + 2 {
            return;
        }
        // The first waiting vCPU allowed on a pCPU of this runqueue, and that pCPU.
        let cand = self.runq[src].iter().copied().find_map(|v| {
            self.rq_cpus[r]
                .iter()
                .copied()
                .find(|&c| self.setup.vcpu_mask[v.idx()].contains(c))
                .map(|c| (v, c))
        });
        if let Some((v, cpu)) = cand {
            self.runq_remove(v);
            self.members[src].retain(|w| *w != v);
            self.members[r].push(v);
            self.update_max_weight(src);
            self.update_max_weight(r);
            let un = &mut self.u[v.idx()];
            un.rq = r as u32;
            un.cpu = cpu;
            self.runq_insert(v);
            if let Some(c) = self.tickle(v, now) {
                self.resched.push(PcpuId(c));
            }
        }
    }

    /// The runqueue a waking vCPU joins: its own, unless it has no idle pCPU there and
    /// another runqueue does (csched2_res_pick, simplified).
    fn pick_rq(&mut self, v: VcpuId) {
        let mask = self.setup.vcpu_mask[v.idx()];
        let cur = self.u[v.idx()].rq as usize;
        let has_idle = |s: &Self, r: usize| {
            s.rq_cpus[r]
                .iter()
                .any(|&c| mask.contains(c) && s.idle(c) && !s.tickled[c as usize])
        };
        let allowed_here = self.rq_cpus[cur].iter().any(|&c| mask.contains(c));
        if allowed_here && (self.runq.len() == 1 || has_idle(self, cur)) {
            return;
        }
        let other = (0..self.runq.len())
            .filter(|&r| r != cur)
            .find(|&r| has_idle(self, r))
            .or_else(|| {
                (!allowed_here)
                    .then(|| self.rq_of_cpu[mask.iter().next().unwrap_or(0) as usize] as usize)
            });
        if let Some(r) = other {
            self.members[cur].retain(|w| *w != v);
            self.members[r].push(v);
            self.update_max_weight(cur);
            self.update_max_weight(r);
            let cpu = self.rq_cpus[r]
                .iter()
                .copied()
                .find(|&c| mask.contains(c))
                .unwrap_or(self.rq_cpus[r][0]);
            let un = &mut self.u[v.idx()];
            un.rq = r as u32;
            un.cpu = cpu;
        }
    }

    /// csched2_runtime.
    fn runtime(&self, p: u32, snext: VcpuId, now: Nanos) -> i64 {
        let mut min_time = MIN_TIMER;
        if self.ratelimit > 0 {
            let mut rl = self.ratelimit as i64;
            if self.curr[p as usize] == Some(snext) {
                rl = self.run_since[p as usize].0 as i64 + rl - now.0 as i64;
            }
            min_time = min_time.max(rl);
        }
        let r = self.u[snext.idx()].rq as usize;
        let mut rt_credit = self.u[snext.idx()].credit;
        if let Some(w) = self.runq[r].first() {
            if self.u[w.idx()].credit > 0 {
                rt_credit = self.u[snext.idx()].credit - self.u[w.idx()].credit;
            }
        }
        let mut time = if rt_credit > 0 {
            self.c2t(snext, rt_credit)
        } else {
            0
        };
        if self.capped(snext) {
            time = time.min(self.u[snext.idx()].budget);
        }
        time.clamp(min_time, MAX_TIMER.max(min_time))
    }
}

impl HostScheduler for Credit2 {
    fn name(&self) -> &'static str {
        "credit2"
    }

    fn tick_period(&self) -> Option<Nanos> {
        None
    }

    fn global_period(&self) -> Option<Nanos> {
        self.tot_budget
            .iter()
            .any(Option::is_some)
            .then_some(self.cap_period)
    }

    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement {
        self.u[v.idx()].runnable = true;
        self.pick_rq(v);
        let home = self.u[v.idx()].cpu;
        if self.u[v.idx()].parked {
            return WakePlacement {
                pcpu: PcpuId(home),
                preempt: false,
            };
        }
        self.runq_insert(v);
        match self.tickle(v, now) {
            Some(c) => WakePlacement {
                pcpu: PcpuId(c),
                preempt: true,
            },
            None => WakePlacement {
                pcpu: PcpuId(home),
                preempt: false,
            },
        }
    }

    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos) {
        self.burn(v, now);
        self.curr[p.idx()] = None;
        match why {
            StopReason::Blocked => {
                self.u[v.idx()].runnable = false;
                self.return_budget(v);
            }
            StopReason::Preempted | StopReason::Yielded => {
                self.prev[p.idx()] = Some((v, why == StopReason::Yielded));
            }
        }
    }

    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)> {
        let pi = p.0;
        self.tickled[pi as usize] = false;
        let r = self.rq_of_cpu[pi as usize] as usize;
        let scurr = self.prev[pi as usize].take();
        if let Some((s, _)) = scurr {
            // csched2_schedule runs with scurr still current.
            self.curr[pi as usize] = Some(s);
            if self.capped(s) && self.u[s.idx()].budget <= 0 {
                self.grab_budget(s);
            }
        }
        let yield_ = scurr.is_some_and(|(_, y)| y);
        let scurr_ok = scurr
            .filter(|(s, _)| !self.u[s.idx()].parked)
            .map(|(s, _)| s);
        // Rate limit: the current vCPU keeps the pCPU (not when yielding).
        let mut snext: Option<VcpuId> = None;
        let ratelimited = !yield_
            && self.ratelimit > 0
            && scurr_ok.is_some()
            && now.0.saturating_sub(self.run_since[pi as usize].0) < self.ratelimit;
        if ratelimited {
            snext = scurr_ok;
        } else {
            snext = snext.or(scurr_ok);
            let snext_credit = snext.map_or(IDLE_CREDIT, |s| self.u[s.idx()].credit);
            let mut chosen = None;
            for i in 0..self.runq[r].len() {
                let w = self.runq[r][i];
                if !self.setup.vcpu_mask[w.idx()].contains(pi) {
                    continue;
                }
                if let Some(t) = self.u[w.idx()].tickled_cpu {
                    if t != pi && self.tickled[t as usize] {
                        continue;
                    }
                }
                if self.u[w.idx()].cpu != pi
                    && snext_credit + self.migrate_resist > self.u[w.idx()].credit
                {
                    continue;
                }
                if yield_ || self.u[w.idx()].credit > snext_credit {
                    chosen = Some(w);
                }
                break;
            }
            if let Some(w) = chosen {
                if self.grab_budget(w) {
                    snext = Some(w);
                }
            }
        }
        let Some(snext) = snext else {
            self.curr[pi as usize] = None;
            return None;
        };
        if Some(snext) != scurr.map(|(s, _)| s) {
            self.runq_remove(snext);
            self.run_since[pi as usize] = now;
        }
        let top = self.runq[r]
            .first()
            .map_or(self.u[snext.idx()].credit, |w| {
                self.u[snext.idx()].credit.max(self.u[w.idx()].credit)
            });
        if top <= 0 {
            self.reset_credit(r, now, snext);
            self.balance_load(r, now);
        }
        let un = &mut self.u[snext.idx()];
        un.start_time = now;
        un.tickled_cpu = None;
        if un.cpu != pi {
            un.credit += MIGRATE_COMPENSATION;
            un.cpu = pi;
        }
        self.curr[pi as usize] = Some(snext);
        // context_saved: a preempted current vCPU goes back to the runqueue and may
        // tickle another pCPU.
        if let Some((s, _)) = scurr {
            if s != snext && !self.u[s.idx()].parked {
                self.return_budget(s);
                self.runq_insert(s);
                if let Some(c) = self.tickle(s, now) {
                    if c != pi {
                        self.resched.push(PcpuId(c));
                    }
                }
            } else if s != snext {
                self.return_budget(s);
            }
        }
        let t = self.runtime(pi, snext, now);
        Some((snext, Some(Nanos(t.max(1) as u64))))
    }

    fn tick(&mut self, _p: PcpuId, _now: Nanos) -> bool {
        false
    }

    fn global_tick(&mut self, now: Nanos, resched: &mut Vec<PcpuId>) {
        // replenish_domain_budget: the pool back up to its size (an overrun carries
        // over as a smaller pool); parked vCPUs are unparked.
        for vm in 0..self.pool.len() {
            if let Some(t) = self.tot_budget[vm] {
                self.pool[vm] = (self.pool[vm] + t).min(t);
            }
        }
        for i in 0..self.u.len() {
            let v = VcpuId(i as u32);
            if self.u[i].parked {
                self.u[i].parked = false;
                if self.u[i].runnable
                    && !self.u[i].on_runq
                    && self.curr[self.u[i].cpu as usize] != Some(v)
                {
                    self.runq_insert(v);
                    if let Some(c) = self.tickle(v, now) {
                        resched.push(PcpuId(c));
                    }
                }
            }
        }
    }

    fn queued_on(&self, p: PcpuId) -> usize {
        self.runq[self.rq_of_cpu[p.idx()] as usize].len()
    }

    fn home_of(&self, v: VcpuId) -> PcpuId {
        PcpuId(self.u[v.idx()].cpu)
    }

    fn drain_resched(&mut self, out: &mut Vec<PcpuId>) {
        out.append(&mut self.resched);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cpumask::CpuMask;
    use crate::sim::VmId;

    fn setup(pcpus: u32, weights: &[u32]) -> SchedSetup {
        SchedSetup {
            pcpus,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_vm: (0..weights.len()).map(|i| VmId(i as u32)).collect(),
            vcpu_mask: vec![CpuMask::all(pcpus); weights.len()],
            vm_weight: weights.to_vec(),
            vm_cap: vec![None; weights.len()],
        }
    }

    #[test]
    fn runqueues_hold_at_most_the_limit_spread_evenly() {
        let p = Credit2Params::default();
        let s = Credit2::new(&p, setup(40, &[256]));
        assert_eq!(s.rq_cpus.len(), 3);
        assert!(s.rq_cpus.iter().all(|c| (12..=14).contains(&c.len())));
        let s = Credit2::new(&p, setup(16, &[256]));
        assert_eq!(s.rq_cpus.len(), 1);
    }

    #[test]
    fn credit_burns_faster_at_lower_weight() {
        let mut s = Credit2::new(&Credit2Params::default(), setup(1, &[256, 512]));
        s.enqueue_wake(VcpuId(0), Nanos::ZERO);
        s.enqueue_wake(VcpuId(1), Nanos::ZERO);
        // 1 ms of running costs the half-weight vCPU 2 ms of credit.
        for v in [VcpuId(0), VcpuId(1)] {
            let before = s.u[v.idx()].credit;
            s.u[v.idx()].start_time = Nanos::ZERO;
            s.burn(v, Nanos(1_000_000));
            let spent = before - s.u[v.idx()].credit;
            let expect = if v == VcpuId(0) { 2_000_000 } else { 1_000_000 };
            assert_eq!(spent, expect);
        }
    }

    #[test]
    fn runs_until_credit_meets_the_next_waiter_within_timer_bounds() {
        let mut s = Credit2::new(&Credit2Params::default(), setup(1, &[256, 256]));
        s.u[1].credit = 7_000_000;
        s.enqueue_wake(VcpuId(0), Nanos::ZERO);
        s.enqueue_wake(VcpuId(1), Nanos::ZERO);
        let (v, t) = s.pick_next(PcpuId(0), Nanos::ZERO).unwrap();
        assert_eq!(v, VcpuId(0));
        assert_eq!(t, Some(Nanos(3_000_000)));
        // A waiter with about as much credit: the minimum timer (the rate limit, 1 ms).
        s.u[1].credit = 9_999_000;
        let t = s.runtime(0, VcpuId(0), Nanos(0));
        assert_eq!(t, 1_000_000);
    }

    #[test]
    fn reset_gives_everyone_credit_init_clipped() {
        let mut s = Credit2::new(&Credit2Params::default(), setup(1, &[256, 256]));
        s.u[0].credit = -100;
        s.u[1].credit = 2_000_000;
        s.reset_credit(0, Nanos::ZERO, VcpuId(0));
        assert_eq!(s.u[0].credit, CREDIT_INIT - 100);
        assert_eq!(s.u[1].credit, CREDIT_INIT + MIN_TIMER);
    }

    #[test]
    fn wakee_with_more_credit_preempts_past_the_rate_limit_only() {
        let mut s = Credit2::new(&Credit2Params::default(), setup(1, &[256, 256]));
        s.enqueue_wake(VcpuId(0), Nanos::ZERO);
        s.pick_next(PcpuId(0), Nanos::ZERO).unwrap();
        // VcpuId(0) has burnt 5 ms of its credit by 5 ms; VcpuId(1) wakes with full
        // credit at 0.5 ms (within the rate limit) and at 5 ms.
        s.u[1].credit = CREDIT_INIT;
        let early = s.enqueue_wake(VcpuId(1), Nanos(500_000));
        assert!(!early.preempt);
        s.runq_remove(VcpuId(1));
        s.u[1].tickled_cpu = None;
        let late = s.enqueue_wake(VcpuId(1), Nanos(5_000_000));
        assert!(late.preempt && late.pcpu == PcpuId(0));
    }

    #[test]
    fn yield_gives_way_to_the_head_whatever_its_credit() {
        let mut s = Credit2::new(&Credit2Params::default(), setup(1, &[256, 256]));
        s.enqueue_wake(VcpuId(0), Nanos::ZERO);
        s.pick_next(PcpuId(0), Nanos::ZERO).unwrap();
        s.enqueue_wake(VcpuId(1), Nanos::ZERO);
        s.u[1].credit = 1_000;
        s.put_prev(PcpuId(0), VcpuId(0), StopReason::Yielded, Nanos(10_000));
        let (v, _) = s.pick_next(PcpuId(0), Nanos(10_000)).unwrap();
        assert_eq!(v, VcpuId(1));
        // Without the yield the richer current vCPU would have stayed.
        s.put_prev(
            PcpuId(0),
            VcpuId(1),
            StopReason::Preempted,
            Nanos(2_000_000),
        );
        let (v, _) = s.pick_next(PcpuId(0), Nanos(2_000_000)).unwrap();
        assert_eq!(v, VcpuId(0));
    }
}
