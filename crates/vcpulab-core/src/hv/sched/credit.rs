//! Xen's credit scheduler (xen/common/sched/credit.c): per-pCPU runqueues ordered by
//! priority (BOOST > UNDER > OVER), FIFO within a priority; credits burnt by running
//! and handed out by domain weight every accounting period (one slice, three ticks);
//! BOOST on wake for a vCPU with credit left; BOOST ends at the next tick; a rate limit
//! keeps a just-scheduled vCPU running; caps park a domain's vCPUs; an idle or
//! OVER-only pCPU steals higher-priority work from its peers. Credits are kept in
//! nanoseconds of run time (Xen: 10 credits per ms).

use super::{HostScheduler, SchedSetup, StopReason, WakePlacement};
use crate::hv::placement::prev_else_next_idle;
use crate::scenario::{CreditParams, RatelimitRule};
use crate::sim::{Nanos, PcpuId, VcpuId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pri {
    Over = 0,
    Under = 1,
    Boost = 2,
}

#[derive(Clone, Debug)]
struct Svc {
    credit: i64,
    pri: Pri,
    active: bool,
    parked: bool,
    /// Co-stopped by relaxed co-scheduling: queued but not eligible to run.
    held: bool,
    /// Blocked (halted): not queued, not running.
    blocked: bool,
    cpu: u32,
    start: Nanos,
    /// Has been queued before: a wake-up queues it where it ran last (Xen's
    /// `vc->processor`); the first placement looks for an idle pCPU.
    placed: bool,
}

#[derive(Clone, Debug, Default)]
struct Pcpu {
    runq: Vec<VcpuId>,
    curr: Option<VcpuId>,
    /// When `curr` was picked (the rate limit measures from here).
    picked_at: Nanos,
    /// The vCPU preempted at the last put_prev and how long it had run (rate limit).
    last_preempted: Option<(VcpuId, Nanos)>,
    /// Co-scheduling: the vCPU this pCPU runs next, ahead of its runqueue.
    forced: Option<VcpuId>,
    /// When the runqueue is next re-sorted: the pCPU's first tick after the last
    /// accounting pass (csched_runq_sort from csched_tick), MAX once done.
    sort_due: Nanos,
}

pub struct Credit {
    slice: Nanos,
    /// csched_tick's period. Ticks are not simulated as events: their effects on the
    /// running vCPU (burn, BOOST ending, becoming active) are applied when it is next
    /// observed, as of the last tick boundary it ran across (`catch_up`).
    tick: Nanos,
    /// Per pCPU: its first tick (ticks are staggered across pCPUs, as real timers are).
    first_tick: Vec<Nanos>,
    /// Per pCPU: the latest time the running vCPU's tick effects are applied up to.
    applied: Vec<Nanos>,
    ratelimit: Nanos,
    ratelimit_rule: RatelimitRule,
    boost: bool,
    setup: SchedSetup,
    svc: Vec<Svc>,
    pcpus: Vec<Pcpu>,
    credit_balance: i64,
    /// Per VM: its vCPUs, in order (accounting visits each VM's vCPUs).
    vm_vcpus: Vec<Vec<u32>>,
    /// Per VM: its active vCPUs, kept as vCPUs become active (`catch_up`) and stop
    /// earning (`acct`), so the accounting pass need not count them.
    active_count: Vec<i64>,
    /// The VMs with active vCPUs in the order accounting visits them (Xen's
    /// `active_sdom` list): a VM joins at the head when its first vCPU becomes active
    /// and leaves when its last stops earning; a VM that leaves credit unused after one
    /// that wanted more moves to the head, so that next period its surplus reaches the
    /// others (csched_acct's "lazily keep domains with extra credits at the head").
    active_vms: Vec<u32>,
    /// The idle pCPU the last wake-up tickled (`__runq_tickle`), for the core to
    /// reschedule: it steals the work queued on busy peers.
    tickled: Option<PcpuId>,
    /// The idle pCPU tickled last (opt_tickle_one_idle cycles through the idle ones).
    last_tickle: usize,
    /// The latest time the scheduler was called at (for `requeue`, which is called at
    /// the time of the `put_prev` or `pick_next` before it).
    clock: Nanos,
}

impl Credit {
    pub fn new(p: &CreditParams, setup: SchedSetup) -> Credit {
        let slice = Nanos((p.slice_ms * 1e6).round() as u64);
        // csched_init (Xen 4.2 and later; 4.1's slice is fixed at 30 ms): a slice of
        // fewer milliseconds than ticks per slice gets one tick.
        let ticks = if p.slice_ms < f64::from(p.ticks_per_slice) {
            1
        } else {
            p.ticks_per_slice
        };
        let tick = Nanos(slice.0 / ticks as u64);
        // Xen refuses a rate limit longer than the slice.
        let ratelimit = Nanos(((p.ratelimit_us * 1e3).round() as u64).min(slice.0));
        let svc = (0..setup.vcpu_vm.len())
            .map(|i| Svc {
                credit: 0,
                pri: Pri::Under,
                active: false,
                parked: false,
                held: false,
                blocked: true,
                cpu: setup.vcpu_mask[i].iter().next().unwrap_or(0),
                start: Nanos::ZERO,
                placed: false,
            })
            .collect();
        let np = setup.pcpus as u64;
        let first_tick = (0..np)
            .map(|i| Nanos(tick.0 + tick.0 * i / np.max(1)))
            .collect();
        let nvm = setup.vm_weight.len();
        let mut vm_vcpus = vec![Vec::new(); nvm];
        for (i, vm) in setup.vcpu_vm.iter().enumerate() {
            vm_vcpus[vm.idx()].push(i as u32);
        }
        Credit {
            vm_vcpus,
            active_count: vec![0; nvm],
            active_vms: Vec::new(),
            tickled: None,
            last_tickle: 0,
            clock: Nanos::ZERO,
            slice,
            tick,
            first_tick,
            applied: vec![Nanos::ZERO; setup.pcpus as usize],
            ratelimit,
            ratelimit_rule: p.ratelimit_rule,
            boost: p.boost,
            pcpus: vec![
                Pcpu {
                    sort_due: Nanos::MAX,
                    ..Pcpu::default()
                };
                setup.pcpus as usize
            ],
            svc,
            setup,
            credit_balance: 0,
        }
    }

    /// csched_tick → csched_runq_sort: a pCPU re-sorts its runqueue by the priorities
    /// of the last accounting pass at its first tick after that pass (ticks are not
    /// events here: this runs before anything that reads or changes the queue's order
    /// at or after that tick, which comes to the same). Until then a pick, a steal or an
    /// insertion sees the queue in its old order, as on Xen. The sort is stable and has
    /// two classes: UNDER or BOOST ahead of OVER.
    #[inline(always)]
    fn sort_if_due(&mut self, p: usize, now: Nanos) {
        if now >= self.pcpus[p].sort_due {
            self.sort_runq(p);
        }
    }

    /// csched_runq_sort on `p`'s runqueue (see `sort_if_due`).
    #[inline(never)]
    fn sort_runq(&mut self, p: usize) {
        self.pcpus[p].sort_due = Nanos::MAX;
        let svc = &self.svc;
        let key = |v: &VcpuId| svc[v.idx()].pri == Pri::Over;
        let q = &mut self.pcpus[p].runq;
        // Most are in order already (a stable sort leaves them as they are).
        if !q.is_sorted_by_key(key) {
            q.sort_by_key(key);
        }
    }

    /// __runq_insert: after every vCPU of equal or higher priority.
    fn runq_insert(&mut self, p: usize, v: VcpuId) {
        let pri = self.svc[v.idx()].pri;
        let q = &self.pcpus[p].runq;
        let pos = q
            .iter()
            .position(|x| self.svc[x.idx()].pri < pri)
            .unwrap_or(q.len());
        self.pcpus[p].runq.insert(pos, v);
        self.svc[v.idx()].cpu = p as u32;
    }

    /// __runq_insert of a vCPU with CSCHED_FLAG_UNIT_YIELD: after every vCPU of equal
    /// or higher priority and, if there is one, behind the first lower-priority one
    /// ("try to put it behind one lower-priority runnable unit"), so that a spinner
    /// yielding ahead of OVER vCPUs does not get its pCPU straight back.
    fn runq_insert_yielded(&mut self, p: usize, v: VcpuId) {
        let pri = self.svc[v.idx()].pri;
        let q = &self.pcpus[p].runq;
        let pos = match q.iter().position(|x| self.svc[x.idx()].pri < pri) {
            Some(i) => i + 1,
            None => q.len(),
        };
        self.pcpus[p].runq.insert(pos, v);
        self.svc[v.idx()].cpu = p as u32;
    }

    /// The latest tick of pCPU `p` at or before `now`.
    fn last_tick(&self, p: usize, now: Nanos) -> Option<Nanos> {
        let first = self.first_tick[p];
        if now < first || self.tick.0 == 0 {
            return None;
        }
        Some(Nanos(
            first.0 + (now.0 - first.0) / self.tick.0 * self.tick.0,
        ))
    }

    /// csched_tick → csched_vcpu_acct for the running vCPU, for every tick of `p` since
    /// the effects were last applied: burn its credit up to the last tick, end its
    /// BOOST, make it active. A tick at the very time the vCPU was picked does not
    /// count (ticks take effect before other events at the same instant).
    fn catch_up(&mut self, p: usize, now: Nanos) {
        let Some(c) = self.pcpus[p].curr else {
            return;
        };
        let Some(b) = self.last_tick(p, now) else {
            return;
        };
        if b <= self.applied[p] {
            return;
        }
        self.applied[p] = b;
        self.burn(c, b);
        let s = &mut self.svc[c.idx()];
        if s.pri == Pri::Boost {
            s.pri = Pri::Under;
        }
        if !s.active {
            s.active = true;
            let d = self.setup.vcpu_vm[c.idx()].idx();
            self.active_count[d] += 1;
            if self.active_count[d] == 1 {
                self.active_vms.insert(0, d as u32);
            }
        }
    }

    /// Marks `v` as `p`'s running vCPU from `now`.
    fn set_curr(&mut self, p: usize, v: VcpuId, now: Nanos) {
        self.pcpus[p].curr = Some(v);
        self.applied[p] = now;
    }

    /// The tick period, for schedulers built on credit that act at ticks themselves.
    pub(crate) fn tick_len(&self) -> Nanos {
        self.tick
    }

    fn burn(&mut self, v: VcpuId, now: Nanos) {
        let s = &mut self.svc[v.idx()];
        let ran = now.0.saturating_sub(s.start.0);
        s.credit -= ran as i64;
        s.start = now;
    }

    fn runnable_head(&self, p: usize) -> Option<(usize, VcpuId)> {
        self.pcpus[p]
            .runq
            .iter()
            .enumerate()
            .find(|(_, v)| !self.svc[v.idx()].parked && !self.svc[v.idx()].held)
            .map(|(i, v)| (i, *v))
    }

    fn is_idle(&self, p: usize) -> bool {
        self.pcpus[p].curr.is_none()
            && self.pcpus[p].forced.is_none()
            && self.runnable_head(p).is_none()
    }

    /// csched_cpu_pick: the previous pCPU if idle, else an idle one, else the previous.
    fn pick_cpu(&self, v: VcpuId) -> usize {
        let mask = self.setup.vcpu_mask[v.idx()];
        let prev = self.svc[v.idx()].cpu as usize;
        let allowed = |q: usize| mask.contains(q as u32);
        if let Some(q) = prev_else_next_idle(prev, self.pcpus.len(), allowed, |q| self.is_idle(q)) {
            return q;
        }
        if mask.contains(prev as u32) {
            prev
        } else {
            mask.iter().next().map(|q| q as usize).unwrap_or(prev)
        }
    }

    /// csched_load_balance: from each busy peer in turn, starting with the next pCPU,
    /// csched_runq_steal walks its queue and takes the first vCPU it may run here; it
    /// gives up on that peer at the first vCPU not of strictly higher priority than
    /// `pri` (the queue is in priority order, so nothing better follows).
    fn steal(&mut self, p: usize, pri: Option<Pri>, now: Nanos) -> Option<VcpuId> {
        let n = self.pcpus.len();
        for k in 1..n {
            let q = (p + k) % n;
            if self.pcpus[q].curr.is_none() {
                continue; // an idle peer picks up its own work
            }
            self.sort_if_due(q, now);
            let mut found = None;
            for (i, v) in self.pcpus[q].runq.iter().enumerate() {
                let s = &self.svc[v.idx()];
                if Some(s.pri) <= pri {
                    break;
                }
                if !s.parked && !s.held && self.setup.vcpu_mask[v.idx()].contains(p as u32) {
                    found = Some(i);
                    break;
                }
            }
            if let Some(i) = found {
                let v = self.pcpus[q].runq.remove(i);
                return Some(v);
            }
        }
        None
    }

    /// csched_acct: hand out one period's credit. Xen weighs every active vCPU with its
    /// domain's weight ("Make weight per-vcpu": `__csched_vcpu_acct_start` adds the
    /// domain's weight to the total once per vCPU that becomes active), so a domain's
    /// fair share is its weight times its active vCPUs over the total, and its peak is
    /// one period per active vCPU. Credit is kept in nanoseconds, so a product of
    /// credit and weight can pass i64 on a large host: `mul_div_ceil` falls back to
    /// i128 then (accounting runs every slice; i128 division is a library call).
    fn acct(&mut self) {
        let period = self.slice.0 as i64;
        let mut active_count = std::mem::take(&mut self.active_count);
        debug_assert!(active_count.iter().enumerate().all(|(d, &c)| c
            == self.vm_vcpus[d]
                .iter()
                .filter(|&&i| self.svc[i as usize].active)
                .count() as i64));
        debug_assert!(self
            .active_vms
            .iter()
            .all(|&d| active_count[d as usize] > 0));
        debug_assert_eq!(
            self.active_vms.len(),
            active_count.iter().filter(|&&c| c > 0).count()
        );
        let weight_of = |d: usize, active: i64| i64::from(self.setup.vm_weight[d]) * active;
        let weight_total: i64 = self
            .active_vms
            .iter()
            .map(|&d| weight_of(d as usize, active_count[d as usize]))
            .sum();
        if weight_total == 0 {
            self.credit_balance = 0;
            self.active_count = active_count;
            return;
        }
        let prev_balance = self.credit_balance;
        let mut credit_total = period * self.pcpus.len() as i64;
        if prev_balance < 0 {
            credit_total -= prev_balance;
        }
        let mut weight_left = weight_total;
        let mut balance = 0i64;
        let mut xtra = false;
        let order = std::mem::take(&mut self.active_vms);
        let mut to_head: Vec<u32> = Vec::new();
        let mut gone: Vec<u32> = Vec::new();
        for &d32 in &order {
            let d = d32 as usize;
            let active = active_count[d];
            let weight = weight_of(d, active);
            weight_left -= weight;
            let mut peak = active * period;
            if prev_balance < 0 {
                peak += mul_div_ceil(-prev_balance, weight, weight_total);
            }
            let mut cap_per_vcpu = i64::MAX;
            if let Some(cap) = self.setup.vm_cap[d] {
                let c = (cap / 100.0 * period as f64).round() as i64;
                peak = peak.min(c);
                cap_per_vcpu = mul_div_ceil(c, 1, active);
            }
            let mut fair = mul_div_ceil(credit_total, weight, weight_total);
            if fair < peak {
                xtra = true;
            } else {
                if weight_left != 0 {
                    credit_total += mul_div_ceil(fair - peak, weight_total, weight_left);
                }
                if xtra {
                    to_head.push(d32);
                }
                fair = peak;
            }
            let per_vcpu = mul_div_ceil(fair, 1, active);
            let count = &mut active_count[d];
            for &i in &self.vm_vcpus[d] {
                let s = &mut self.svc[i as usize];
                if !s.active {
                    continue;
                }
                s.credit += per_vcpu;
                if s.credit < 0 {
                    s.pri = Pri::Over;
                    if cap_per_vcpu != i64::MAX && s.credit < -cap_per_vcpu {
                        s.parked = true;
                    }
                    s.credit = s.credit.max(-period);
                } else {
                    // Every active vCPU with credit is UNDER after accounting: a BOOST
                    // it still had ends here.
                    s.pri = Pri::Under;
                    s.parked = false;
                    if s.credit > period {
                        // Upper bound: stops earning, credit halved.
                        s.active = false;
                        s.credit /= 2;
                        *count -= 1;
                    }
                }
                balance += s.credit;
            }
            if *count == 0 {
                gone.push(d32);
            }
        }
        self.credit_balance = balance;
        self.active_count = active_count;
        // The list after the pass: each VM moved to the head went there in turn (the
        // last moved first), the others keep their order; VMs whose every vCPU stopped
        // earning leave it.
        self.active_vms = if to_head.is_empty() && gone.is_empty() {
            order
        } else {
            let mut list: Vec<u32> = to_head.iter().rev().copied().collect();
            list.extend(order.iter().filter(|d| !to_head.contains(d)));
            list.retain(|d| !gone.contains(d));
            list
        };
    }

    /// After an accounting pass at `now`: each pCPU re-sorts its runqueue at its first
    /// tick strictly after it (a tick at the same instant came first; `sort_if_due`).
    fn sorts_due_after(&mut self, now: Nanos) {
        for p in 0..self.pcpus.len() {
            let first = self.first_tick[p];
            self.pcpus[p].sort_due = if self.tick.0 == 0 {
                now
            } else if now < first {
                first
            } else {
                Nanos(first.0 + ((now.0 - first.0) / self.tick.0 + 1) * self.tick.0)
            };
        }
    }
}

/// ⌈a·b / d⌉ for a, b ≥ 0 and d > 0, as Xen's `(a * b + d - 1) / d`: in i64, or in
/// i128 when the product would overflow (credit in nanoseconds times weights on a large
/// host).
#[inline]
fn mul_div_ceil(a: i64, b: i64, d: i64) -> i64 {
    match a.checked_mul(b) {
        Some(p) if p <= i64::MAX - d => (p + d - 1) / d,
        _ => ((i128::from(a) * i128::from(b) + i128::from(d) - 1) / i128::from(d)) as i64,
    }
}

impl HostScheduler for Credit {
    fn name(&self) -> &'static str {
        "credit"
    }

    fn take_wake_tickle(&mut self) -> Option<PcpuId> {
        self.tickled.take()
    }

    fn tick_period(&self) -> Option<Nanos> {
        None
    }

    fn global_period(&self) -> Option<Nanos> {
        Some(self.slice)
    }

    /// csched_vcpu_wake (Xen 4.1/4.2): the vCPU is queued where it ran last
    /// (`vc->processor`; its first placement looks for an idle pCPU), BOOSTed if UNDER,
    /// and `__runq_tickle` reschedules that pCPU if the vCPU's priority is strictly
    /// higher than its current one's and, when that pCPU is busy, tickles one idle pCPU
    /// the vCPU may run on, which steals work queued on busy peers.
    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement {
        let own = self.svc[v.idx()].cpu;
        let p = if self.svc[v.idx()].placed && self.setup.vcpu_mask[v.idx()].contains(own) {
            own as usize
        } else {
            self.pick_cpu(v)
        };
        self.clock = now;
        self.catch_up(p, now);
        self.sort_if_due(p, now);
        let s = &mut self.svc[v.idx()];
        s.blocked = false;
        s.placed = true;
        if self.boost && s.pri == Pri::Under && !s.parked {
            s.pri = Pri::Boost;
        }
        let pri = s.pri;
        self.runq_insert(p, v);
        let preempt = match self.pcpus[p].curr {
            None => true,
            Some(c) => pri > self.svc[c.idx()].pri,
        };
        if self.pcpus[p].curr.is_some() {
            let n = self.pcpus.len();
            let mask = self.setup.vcpu_mask[v.idx()];
            let idle = (1..=n)
                .map(|k| (self.last_tickle + k) % n)
                .find(|&q| q != p && mask.contains(q as u32) && self.is_idle(q));
            if let Some(q) = idle {
                self.last_tickle = q;
                self.tickled = Some(PcpuId(q as u32));
            }
        }
        WakePlacement {
            pcpu: PcpuId(p as u32),
            preempt,
        }
    }

    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos) {
        let pi = p.idx();
        let ran = now.0.saturating_sub(self.pcpus[pi].picked_at.0);
        self.clock = now;
        self.catch_up(pi, now);
        self.sort_if_due(pi, now);
        self.burn(v, now);
        self.pcpus[pi].curr = None;
        self.pcpus[pi].last_preempted = None;
        match why {
            StopReason::Preempted => {
                self.pcpus[pi].last_preempted = Some((v, Nanos(ran)));
                self.runq_insert(pi, v);
            }
            StopReason::Yielded => {
                if self.ratelimit_rule == RatelimitRule::Xen42 {
                    // Xen 4.2's limit does not exempt a yield.
                    self.pcpus[pi].last_preempted = Some((v, Nanos(ran)));
                }
                self.runq_insert_yielded(pi, v);
            }
            StopReason::Blocked => {
                self.svc[v.idx()].blocked = true;
            }
        }
    }

    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)> {
        let pi = p.idx();
        self.clock = now;
        self.sort_if_due(pi, now);
        if let Some(v) = self.pcpus[pi].forced.take() {
            // Co-scheduling: run the chosen vCPU now, whatever the queue says.
            self.pcpus[pi].last_preempted = None;
            let s = &mut self.svc[v.idx()];
            s.cpu = pi as u32;
            s.start = now;
            self.set_curr(pi, v, now);
            self.pcpus[pi].picked_at = now;
            return Some((v, Some(self.slice)));
        }
        // Rate limit: a runnable vCPU that ran less than the limit keeps the pCPU (a
        // yielding one only under Xen 4.2's rule: `put_prev` records it then).
        if let Some((prev, ran)) = self.pcpus[pi].last_preempted.take() {
            if ran < self.ratelimit && !self.svc[prev.idx()].parked && !self.svc[prev.idx()].held {
                if let Some(i) = self.pcpus[pi].runq.iter().position(|x| *x == prev) {
                    self.pcpus[pi].runq.remove(i);
                    self.set_curr(pi, prev, now);
                    self.pcpus[pi].picked_at = now - ran;
                    self.svc[prev.idx()].start = now;
                    let slice = match self.ratelimit_rule {
                        // A whole rate-limit slice from now.
                        RatelimitRule::Xen42 => self.ratelimit,
                        // Until it has run the limit.
                        RatelimitRule::Xen48 => Nanos(self.ratelimit.0 - ran.0),
                    };
                    return Some((prev, Some(slice)));
                }
            }
        }
        let head = self.runnable_head(pi);
        let head_pri = head.map(|(_, v)| self.svc[v.idx()].pri);
        let v = if head_pri > Some(Pri::Over) {
            let (i, v) = head?;
            self.pcpus[pi].runq.remove(i);
            v
        } else {
            match self.steal(pi, head_pri, now) {
                Some(v) => v,
                None => {
                    let (i, v) = head?;
                    self.pcpus[pi].runq.remove(i);
                    v
                }
            }
        };
        let s = &mut self.svc[v.idx()];
        s.cpu = pi as u32;
        s.start = now;
        self.set_curr(pi, v, now);
        self.pcpus[pi].picked_at = now;
        Some((v, Some(self.slice)))
    }

    fn tick(&mut self, p: PcpuId, now: Nanos) -> bool {
        // Only schedulers built on credit that keep ticks of their own call this.
        let pi = p.idx();
        self.clock = now;
        self.catch_up(pi, now);
        self.sort_if_due(pi, now);
        if let Some(c) = self.pcpus[pi].curr {
            // A parked (capped-out) vCPU stops at once.
            return self.svc[c.idx()].parked;
        }
        // An idle pCPU with queued work (e.g. unparked vCPUs) reschedules.
        self.runnable_head(pi).is_some()
    }

    fn global_tick(&mut self, now: Nanos, resched: &mut Vec<PcpuId>) {
        self.clock = now;
        for p in 0..self.pcpus.len() {
            self.catch_up(p, now);
            // A sort whose tick has come runs by the old priorities, before this pass
            // changes them.
            self.sort_if_due(p, now);
        }
        self.acct();
        self.sorts_due_after(now);
        for p in 0..self.pcpus.len() {
            match self.pcpus[p].curr {
                Some(c) if self.svc[c.idx()].parked => resched.push(PcpuId(p as u32)),
                None if self.runnable_head(p).is_some() => resched.push(PcpuId(p as u32)),
                _ => {}
            }
        }
    }

    fn queued_on(&self, p: PcpuId) -> usize {
        self.pcpus[p.idx()].runq.len() + self.pcpus[p.idx()].forced.is_some() as usize
    }

    fn home_of(&self, v: VcpuId) -> PcpuId {
        PcpuId(self.svc[v.idx()].cpu)
    }

    fn run_next(&mut self, p: PcpuId, v: VcpuId) -> bool {
        let pi = p.idx();
        if self.pcpus[pi].forced.is_some() {
            return false;
        }
        let home = self.svc[v.idx()].cpu as usize;
        let Some(i) = self.pcpus[home].runq.iter().position(|x| *x == v) else {
            return false;
        };
        self.pcpus[home].runq.remove(i);
        self.pcpus[pi].forced = Some(v);
        self.svc[v.idx()].cpu = pi as u32;
        true
    }

    fn requeue(&mut self, v: VcpuId, head: bool) -> bool {
        let home = self.svc[v.idx()].cpu as usize;
        self.sort_if_due(home, self.clock);
        let Some(i) = self.pcpus[home].runq.iter().position(|x| *x == v) else {
            return false;
        };
        self.pcpus[home].runq.remove(i);
        // Out of priority order until the pCPU's first tick after the next accounting
        // pass re-sorts the queue (csched_runq_sort).
        if head {
            self.pcpus[home].runq.insert(0, v);
        } else {
            self.pcpus[home].runq.push(v);
        }
        true
    }
}

/// Hooks for schedulers built on credit's accounting (relaxed co-scheduling).
impl Credit {
    /// Co-stops (`held`) or releases `v`; returns the pCPU it is queued on.
    pub(crate) fn set_held(&mut self, v: VcpuId, held: bool) -> PcpuId {
        self.svc[v.idx()].held = held;
        PcpuId(self.svc[v.idx()].cpu)
    }

    pub(crate) fn is_held(&self, v: VcpuId) -> bool {
        self.svc[v.idx()].held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cpumask::CpuMask;
    use crate::sim::VmId;

    /// `n` one-vCPU VMs of equal weight on `pcpus` pCPUs.
    fn setup(pcpus: u32, n: usize) -> SchedSetup {
        SchedSetup {
            pcpus,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_vm: (0..n).map(|i| VmId(i as u32)).collect(),
            vcpu_mask: vec![CpuMask::all(pcpus); n],
            vm_weight: vec![256; n],
            vm_cap: vec![None; n],
        }
    }

    fn one_pcpu(n: usize) -> Credit {
        on_pcpus(1, n)
    }

    fn on_pcpus(pcpus: u32, n: usize) -> Credit {
        Credit::new(&CreditParams::default(), setup(pcpus, n))
    }

    #[test]
    fn a_yielding_vcpu_goes_behind_one_lower_priority_vcpu() {
        let mut c = one_pcpu(4);
        let (me, under, over1, over2) = (VcpuId(0), VcpuId(1), VcpuId(2), VcpuId(3));
        c.svc[under.idx()].pri = Pri::Under;
        c.svc[over1.idx()].pri = Pri::Over;
        c.svc[over2.idx()].pri = Pri::Over;
        for v in [under, over1, over2] {
            c.runq_insert(0, v);
        }
        c.svc[me.idx()].pri = Pri::Under;
        c.pcpus[0].curr = Some(me);
        c.put_prev(PcpuId(0), me, StopReason::Yielded, Nanos(1_000));
        assert_eq!(c.pcpus[0].runq, vec![under, over1, me, over2]);
        // Preempted (not yielding): after its priority only.
        let mut c2 = one_pcpu(4);
        for (v, p) in [(under, Pri::Under), (over1, Pri::Over), (over2, Pri::Over)] {
            c2.svc[v.idx()].pri = p;
            c2.runq_insert(0, v);
        }
        c2.svc[me.idx()].pri = Pri::Under;
        c2.pcpus[0].curr = Some(me);
        c2.put_prev(PcpuId(0), me, StopReason::Preempted, Nanos(1_000));
        assert_eq!(c2.pcpus[0].runq, vec![under, me, over1, over2]);
    }

    fn recount_active(c: &Credit) -> Vec<i64> {
        c.vm_vcpus
            .iter()
            .map(|vs| vs.iter().filter(|&&i| c.svc[i as usize].active).count() as i64)
            .collect()
    }

    proptest::proptest! {
        /// The per-VM active counts kept as vCPUs change match a count from scratch
        /// after any sequence of wake-ups, stops, picks and accounting periods.
        #[test]
        fn active_counts_kept_match_a_recount(
            ops in proptest::collection::vec((0u8..4, 0usize..6, 0u8..3, 1u64..2_000_000), 1..200)
        ) {
            let setup = SchedSetup {
                pcpus: 2,
                threads_per_core: 1,
                numa_nodes: 1,
                vcpu_vm: (0..6).map(|i| VmId(i / 3)).collect(),
                vcpu_mask: vec![CpuMask::all(2); 6],
                vm_weight: vec![256, 512],
                vm_cap: vec![None, Some(50.0)],
            };
            let mut c = Credit::new(&CreditParams::default(), setup);
            let mut now = Nanos::ZERO;
            let mut resched = Vec::new();
            for (op, x, why, dt) in ops {
                now = Nanos(now.0 + dt);
                let p = PcpuId((x % 2) as u32);
                match op {
                    0 => {
                        let v = VcpuId(x as u32);
                        if c.svc[x].blocked {
                            c.enqueue_wake(v, now);
                        }
                    }
                    1 => {
                        if let Some(v) = c.pcpus[p.idx()].curr {
                            let why = [StopReason::Preempted, StopReason::Yielded, StopReason::Blocked]
                                [why as usize];
                            c.put_prev(p, v, why, now);
                        }
                    }
                    2 => {
                        if c.pcpus[p.idx()].curr.is_none() {
                            c.pick_next(p, now);
                        }
                    }
                    _ => c.global_tick(now, &mut resched),
                }
                proptest::prop_assert_eq!(recount_active(&c), c.active_count.clone());
                // The accounting list holds exactly the VMs with active vCPUs, once each.
                let mut listed = c.active_vms.clone();
                listed.sort_unstable();
                let with_active: Vec<u32> = (0..2u32)
                    .filter(|&d| c.active_count[d as usize] > 0)
                    .collect();
                proptest::prop_assert_eq!(listed, with_active);
            }
        }
    }

    #[test]
    fn a_yielding_vcpu_among_equals_goes_to_their_tail() {
        let mut c = one_pcpu(3);
        for v in [VcpuId(1), VcpuId(2)] {
            c.runq_insert(0, v);
        }
        c.pcpus[0].curr = Some(VcpuId(0));
        c.put_prev(PcpuId(0), VcpuId(0), StopReason::Yielded, Nanos(1_000));
        assert_eq!(c.pcpus[0].runq, vec![VcpuId(1), VcpuId(2), VcpuId(0)]);
    }

    /// Two pCPUs; VM 0 has vCPU 0, VM 1 vCPUs 1-3; equal weights.
    fn widths_one_and_three() -> Credit {
        let setup = SchedSetup {
            pcpus: 2,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_vm: vec![VmId(0), VmId(1), VmId(1), VmId(1)],
            vcpu_mask: vec![CpuMask::all(2); 4],
            vm_weight: vec![256, 256],
            vm_cap: vec![None, None],
        };
        Credit::new(&CreditParams::default(), setup)
    }

    fn make_active(c: &mut Credit, vs: &[usize]) {
        for &i in vs {
            c.svc[i].active = true;
            c.svc[i].blocked = false;
            let d = c.setup.vcpu_vm[i].idx();
            c.active_count[d] += 1;
            if c.active_count[d] == 1 {
                c.active_vms.insert(0, d as u32);
            }
        }
    }

    /// csched_acct weighs every active vCPU with its domain's weight: four active vCPUs
    /// of equal weight share two pCPUs' period equally, whichever VM they belong to
    /// (split per domain, the 1-vCPU VM's vCPU would get a whole period).
    #[test]
    fn accounting_weighs_each_active_vcpu() {
        let mut c = widths_one_and_three();
        make_active(&mut c, &[0, 1, 2, 3]);
        c.acct();
        let period = c.slice.0 as i64;
        let credits: Vec<i64> = c.svc.iter().map(|s| s.credit).collect();
        assert_eq!(credits, vec![period / 2; 4], "each gets half a period");
    }

    /// A VM that leaves credit unused after one that wanted more goes to the head of
    /// the accounting list (csched_acct's reorder); one whose vCPUs all stop earning
    /// leaves it.
    #[test]
    fn accounting_moves_a_vm_with_unused_credit_to_the_head() {
        let mut c = widths_one_and_three();
        make_active(&mut c, &[0, 1, 2, 3]);
        // VM 1 joined last, so it is first: [1, 0]. Weight VM 1 low enough that its
        // fair share is under its peak (it wants more) while VM 0's exceeds its one
        // vCPU's peak.
        c.setup.vm_weight = vec![1024, 256];
        assert_eq!(c.active_vms, vec![1, 0]);
        c.acct();
        assert_eq!(c.active_vms, vec![0, 1]);
    }

    #[test]
    fn accounting_ends_boost() {
        let mut c = widths_one_and_three();
        make_active(&mut c, &[0]);
        c.svc[0].pri = Pri::Boost;
        c.acct();
        assert_eq!(c.svc[0].pri, Pri::Under);
    }

    /// Rate limit, Xen 4.2 to 4.7: a vCPU that yields before it has run the limit keeps
    /// its pCPU for a whole limit; from 4.8 the yield goes through.
    #[test]
    fn a_yield_within_the_rate_limit_keeps_the_pcpu_under_xen_42_only() {
        for (rule, keeps) in [(RatelimitRule::Xen42, true), (RatelimitRule::Xen48, false)] {
            let mut c = one_pcpu(2);
            c.ratelimit_rule = rule;
            let (me, other) = (VcpuId(0), VcpuId(1));
            c.runq_insert(0, me);
            c.runq_insert(0, other);
            let (first, _) = c.pick_next(PcpuId(0), Nanos::ZERO).expect("a vCPU");
            assert_eq!(first, me);
            c.put_prev(PcpuId(0), me, StopReason::Yielded, Nanos(200_000));
            let (next, slice) = c.pick_next(PcpuId(0), Nanos(200_000)).expect("a vCPU");
            if keeps {
                assert_eq!((next, slice), (me, Some(c.ratelimit)), "{rule:?}");
            } else {
                assert_eq!(next, other, "{rule:?}");
            }
        }
    }

    /// csched_init: a slice of fewer milliseconds than ticks per slice has one tick.
    #[test]
    fn a_slice_under_three_ms_has_one_tick() {
        for (slice_ms, tick_ns) in [
            (30.0, 10_000_000),
            (3.0, 1_000_000),
            (1.0, 1_000_000),
            (0.1, 100_000),
        ] {
            let p = CreditParams {
                slice_ms,
                ..CreditParams::default()
            };
            assert_eq!(
                Credit::new(&p, setup(1, 1)).tick,
                Nanos(tick_ns),
                "slice {slice_ms} ms"
            );
        }
    }

    /// csched_vcpu_wake: a vCPU that ran before is queued where it ran last, even when
    /// another pCPU idles; that idle pCPU is tickled and steals it.
    #[test]
    fn a_wake_queues_where_it_ran_and_tickles_an_idle_pcpu_to_steal() {
        let mut c = on_pcpus(2, 2);
        let (a, b) = (VcpuId(0), VcpuId(1));
        // a runs on pCPU 0 and blocks; b runs on pCPU 0.
        c.svc[a.idx()].placed = true;
        c.svc[a.idx()].cpu = 0;
        c.svc[b.idx()].pri = Pri::Boost;
        c.runq_insert(0, b);
        c.svc[b.idx()].blocked = false;
        c.pick_next(PcpuId(0), Nanos::ZERO).expect("b runs");
        // a wakes: BOOST does not beat b's BOOST, so it waits on pCPU 0...
        let w = c.enqueue_wake(a, Nanos(1_000));
        assert_eq!((w.pcpu, w.preempt), (PcpuId(0), false));
        // ...and idle pCPU 1 is tickled; picking, it steals a.
        assert_eq!(c.take_wake_tickle(), Some(PcpuId(1)));
        assert_eq!(c.take_wake_tickle(), None, "taken once");
        let (v, _) = c.pick_next(PcpuId(1), Nanos(2_000)).expect("stolen");
        assert_eq!(v, a);
    }

    /// csched_runq_steal gives up on a peer at the first queued vCPU that is not of
    /// strictly higher priority, although a better one may sit behind it in a queue put
    /// out of order (by yield-to-head, say).
    #[test]
    fn a_steal_stops_at_the_first_vcpu_not_of_higher_priority() {
        let mut c = on_pcpus(2, 3);
        let (run, over, under) = (VcpuId(0), VcpuId(1), VcpuId(2));
        c.runq_insert(0, run);
        c.svc[run.idx()].blocked = false;
        c.pick_next(PcpuId(0), Nanos::ZERO).expect("runs");
        c.svc[over.idx()].pri = Pri::Over;
        c.svc[under.idx()].pri = Pri::Under;
        c.pcpus[0].runq = vec![over, under];
        // pCPU 1's own best is OVER: only strictly better work is stolen, and the
        // peer's head is OVER, so nothing.
        assert_eq!(c.steal(1, Some(Pri::Over), Nanos::ZERO), None);
        // Idle (nothing of its own): the head is taken.
        assert_eq!(c.steal(1, None, Nanos::ZERO), Some(over));
    }

    /// csched_runq_sort runs from csched_tick: after an accounting pass a pCPU picks
    /// from its queue in the old order until its next tick, then by the new priorities.
    #[test]
    fn a_runqueue_is_sorted_at_its_first_tick_after_accounting() {
        let pick_at = |t: Nanos| {
            let mut c = one_pcpu(3);
            let (run, a, b) = (VcpuId(0), VcpuId(1), VcpuId(2));
            for v in [run, a, b] {
                c.svc[v.idx()].blocked = false;
                c.runq_insert(0, v);
            }
            c.pick_next(PcpuId(0), Nanos::ZERO).expect("runs");
            // An accounting pass at 25 ms leaves a OVER and b UNDER (a ahead of b).
            let mut resched = Vec::new();
            c.global_tick(Nanos(25_000_000), &mut resched);
            c.svc[a.idx()].pri = Pri::Over;
            c.svc[b.idx()].pri = Pri::Under;
            assert_eq!(c.pcpus[0].runq, vec![a, b]);
            c.put_prev(PcpuId(0), run, StopReason::Blocked, t);
            c.pick_next(PcpuId(0), t).expect("a vCPU").0
        };
        // 30 ms slices, three ticks each: the one pCPU ticks at 10, 20, 30 ms ...
        let c = one_pcpu(1);
        assert_eq!(
            (c.first_tick[0], c.tick),
            (Nanos(10_000_000), Nanos(10_000_000))
        );
        let due = Nanos(30_000_000);
        let (a, b) = (VcpuId(1), VcpuId(2));
        assert_eq!(
            pick_at(Nanos(due.0 - 1)),
            a,
            "before the tick: the old order"
        );
        assert_eq!(pick_at(due), b, "at the tick: UNDER first");
    }
}
