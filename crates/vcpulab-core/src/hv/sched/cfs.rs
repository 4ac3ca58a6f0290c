//! Linux CFS as KVM's host scheduler (pre-6.6 semantics, kernel/sched/fair.c): per-pCPU
//! runqueues ordered by weighted vruntime, a bounded scheduling period, tick-driven
//! preemption (check_preempt_tick), wake-up preemption with a wake-up granularity,
//! sleeper placement, next/skip buddies, idle and periodic load balancing with a
//! cache-hot migration cost, and CFS bandwidth control for caps.
//!
//! With `per_vm_groups` each VM is a task group, as libvirt puts a VM's vCPU threads in
//! one cgroup: per pCPU a group entity in the root runqueue and a group runqueue of the
//! VM's vCPUs there (`CONFIG_FAIR_GROUP_SCHED`). The group entity's weight is the VM's
//! shares times its load on this pCPU over its load on all pCPUs, at least MIN_SHARES
//! (`calc_group_shares` of Linux 4.15 and later on PELT load averages, hv/sched/groups.rs
//! and hv/sched/pelt.rs), refreshed when that group runqueue changes and at the tick of
//! the pCPU that runs it (`update_cfs_group`). Every level has its own vruntime, buddies
//! and tick check: `sched_slice` multiplies the period's share down the hierarchy,
//! `check_preempt_tick` runs at each level with more than one entity, wake-up
//! preemption compares the two entities where the wakee's and the running vCPU's
//! hierarchies meet (`find_matching_se`), and load balancing moves a vCPU by its share
//! of the root load (`task_h_load`).

use super::active_balance::ActiveBalance;
use super::balance::{
    detach_tasks, newidle_balance, rebalance_domains, Active, ActiveRule, BalanceRules,
    BalanceTiming, DomainBalancer, PcpuBalance, Pull, TickRace,
};
use super::groups::GroupSlots;
use super::wake_affine::{AffineLoads, WakeAffinity, Waker, Wakeup};
use super::{HostScheduler, SchedSetup, StopReason, WakePlacement};
use crate::host::cpumask::CpuMask;
use crate::host::topology::{Level, Topology};
use crate::hv::placement::prev_else_next_idle;
use crate::scenario::CfsParams;
use crate::sim::{Nanos, PcpuId, VcpuId};
use std::cell::Cell;

const NICE_0_LOAD: u64 = 1024;
/// vruntimes start here so that relative placement never underflows.
const VR_BASE: u64 = 1 << 50;

/// A scheduling entity: a vCPU (index < number of vCPUs) or a VM's group entity on one
/// pCPU.
type EntId = u32;
/// A runqueue: a pCPU's root (index < number of pCPUs) or a VM's group runqueue on one
/// pCPU.
type RqId = usize;

#[derive(Clone, Debug)]
struct Ent {
    vruntime: u64,
    load: u64,
    /// A vCPU's pCPU: where it is queued, or ran last.
    rq: u32,
    /// Waiting in a queue (not running, not blocked).
    queued: bool,
    /// Queued or running (Linux `on_rq`).
    on_rq: bool,
    /// When it last stopped running (for cache-hotness).
    last_ran: Nanos,
    /// Has run at least once (else it is placed like a new task).
    ran: bool,
}

impl Ent {
    fn new(load: u64, rq: u32) -> Ent {
        Ent {
            vruntime: VR_BASE,
            load,
            rq,
            queued: false,
            on_rq: false,
            last_ran: Nanos::ZERO,
            ran: false,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Rq {
    queue: Vec<EntId>,
    curr: Option<EntId>,
    /// Root runqueues only: when the running vCPU's time was last accounted.
    exec_start: Nanos,
    /// When `curr` was picked (prev_sum_exec_runtime, for check_preempt_tick).
    picked_at: Nanos,
    /// The entity put back last and when: one picked again at once keeps its
    /// `picked_at` from Linux 3.15 (`repick_keeps_slice`: pick_next_task_fair sets only
    /// the levels that change).
    put_back: Option<(EntId, Nanos)>,
    min_vr: u64,
    next_buddy: Option<EntId>,
    skip_buddy: Option<EntId>,
    /// Root runqueues only. Urgent-vCPU-first (hv/uvf.rs): the queued vCPU this pCPU
    /// runs next.
    forced: Option<VcpuId>,
    /// Σ load of the running and queued entities, kept incrementally.
    load_sum: u64,
    /// The leftmost queued entity as last computed (None: stale). Queued entities'
    /// vruntimes do not change while they wait, so it stays right until the queue
    /// changes.
    left: Cell<Option<Option<EntId>>>,
}

pub struct Cfs {
    placement: crate::hv::placement::Placement,
    /// Whether a vCPU woken by a sibling's exit may be queued beside it.
    affinity: WakeAffinity,
    /// SMT cores, last-level caches and NUMA nodes: wake-up placement searches the
    /// previous pCPU's LLC (an idle core first), and balancing walks the domains.
    topo: Topology,
    /// Active balancing out of shared SMT cores.
    active_balance: ActiveBalance,
    /// The busiest pCPU the last balance met (what an active balance stops).
    busiest: Option<u32>,
    /// The moves of this tick instant's periodic balances, which race (balance.rs).
    race: TickRace,
    latency: u64,
    min_gran: u64,
    wakeup_gran: u64,
    migration_cost: u64,
    /// When the domains balance (min/max intervals, busy factor).
    timing: BalanceTiming,
    avg_idle_gate: bool,
    /// Per pCPU: its idle periods and its domains' balance clocks and failures.
    idle: Vec<PcpuBalance>,
    /// A vCPU pulled onto a busy pCPU preempts the running one (attach_task's
    /// check_preempt_curr), found in `pull_one`, taken by the tick.
    pull_preempts: bool,
    /// pCPUs with a vCPU waiting besides the running one (rd->overload while nonzero).
    overloaded: u32,
    tick: Nanos,
    bw_period: Nanos,
    groups: bool,
    /// Linux 3.15+: an entity picked again at once keeps its slice's start.
    repick_keeps_slice: bool,
    nv: u32,
    np: u32,
    setup: SchedSetup,
    ent: Vec<Ent>,
    rqs: Vec<Rq>,
    /// Per pCPU: the vCPU it runs.
    running: Vec<Option<VcpuId>>,
    /// Per pCPU: runnable vCPUs there, the running one included (rq->nr_running).
    nr: Vec<u32>,
    /// Per (pCPU, VM) in use: the group slot (group entity `nv + slot`, group runqueue
    /// `np + slot`), the VM's runnable vCPUs there and, with groups, the load averages
    /// the group shares come from.
    slots: GroupSlots,
    /// Per VM: task-group shares (weight 256 = 1024 shares).
    shares: Vec<u64>,
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
        let nv = setup.vcpu_vm.len() as u32;
        let nvm = setup.vm_weight.len() as u32;
        let np = setup.pcpus;
        let groups = p.per_vm_groups;
        let bw_period = Nanos(ms(p.bandwidth_period_ms));
        let shares: Vec<u64> = setup.vm_weight.iter().map(|w| *w as u64 * 4).collect();
        // Without groups a VM's weight is each vCPU thread's weight; with groups the
        // vCPU threads are nice 0 and the VM's weight is its group's shares.
        let ent = (0..nv as usize)
            .map(|i| {
                let load = if groups {
                    NICE_0_LOAD
                } else {
                    shares[setup.vcpu_vm[i].idx()]
                };
                Ent::new(load, setup.vcpu_mask[i].iter().next().unwrap_or(0))
            })
            .collect();
        let quota = setup
            .vm_cap
            .iter()
            .map(|c| c.map(|pct| (pct / 100.0 * bw_period.0 as f64).round() as u64))
            .collect();
        let topo = Topology::new(np, setup.threads_per_core, p.llc_pcpus, setup.numa_nodes);
        let timing = BalanceTiming::new(
            &topo,
            p.balance_interval,
            p.balance_busy_factor,
            BalanceRules {
                newidle_doubles: p.newidle_doubles_interval,
                overload_gate: p.newidle_overload_gate,
                idle_keeps_busy_deadline: p.idle_keeps_busy_deadline,
            },
        );
        let migration_cost = (p.migration_cost_us * 1e3).round() as u64;
        Cfs {
            placement: p.placement,
            affinity: WakeAffinity::new(p.wake_affine, nv as usize),
            active_balance: ActiveBalance::new(&topo),
            busiest: None,
            race: TickRace::default(),
            topo,
            latency: ms(p.latency_ms),
            min_gran: ms(p.min_granularity_ms),
            wakeup_gran: ms(p.wakeup_granularity_ms),
            migration_cost,
            idle: vec![PcpuBalance::new(migration_cost, &timing); np as usize],
            timing,
            avg_idle_gate: p.newidle_avg_idle_gate,
            pull_preempts: false,
            overloaded: 0,
            tick: Nanos((1e9 / p.tick_hz as f64).round() as u64),
            bw_period,
            groups,
            repick_keeps_slice: p.repick_keeps_slice,
            nv,
            np,
            rqs: vec![
                Rq {
                    min_vr: VR_BASE,
                    ..Rq::default()
                };
                np as usize
            ],
            ent,
            running: vec![None; np as usize],
            nr: vec![0; np as usize],
            slots: GroupSlots::new(np, nv as usize, nvm as usize, groups),
            shares,
            quota,
            used: vec![0; nvm as usize],
            throttled: vec![false; nvm as usize],
            running_per_vm: vec![0; nvm as usize],
            capped: setup.vm_cap.iter().any(Option::is_some),
            setup,
        }
    }

    fn vm_of(&self, v: VcpuId) -> usize {
        self.setup.vcpu_vm[v.idx()].idx()
    }

    /// The VM an entity belongs to (a vCPU's, or the group entity's).
    fn ent_vm(&self, e: EntId) -> usize {
        if e < self.nv {
            self.setup.vcpu_vm[e as usize].idx()
        } else {
            self.slots.vm(e - self.nv)
        }
    }

    #[inline]
    fn group_ent(&self, p: usize, vm: usize) -> EntId {
        self.nv + self.slots.of(p as u32, vm)
    }

    #[inline]
    fn group_rq(&self, p: usize, vm: usize) -> RqId {
        self.np as usize + self.slots.of(p as u32, vm) as usize
    }

    /// The min_vruntime of the runqueue `v` is queued on when on `p`, if it has one
    /// (with per-VM groups, its VM's group runqueue there exists once it was used).
    fn rq_min_if_any(&self, v: VcpuId, p: usize) -> Option<u64> {
        if !self.groups {
            return Some(self.rqs[p].min_vr);
        }
        let s = self.slots.get(p as u32, self.vm_of(v))?;
        Some(self.rqs[self.np as usize + s as usize].min_vr)
    }

    /// The runqueue a vCPU is queued on when it is on `p`.
    fn leaf_rq(&self, v: VcpuId, p: usize) -> RqId {
        if self.groups {
            self.group_rq(p, self.vm_of(v))
        } else {
            p
        }
    }

    /// Throttled entities (a capped VM out of quota) take no part in picking.
    #[inline]
    fn throttled(&self, e: EntId) -> bool {
        self.capped && self.throttled[self.ent_vm(e)]
    }

    fn weight(&self, e: EntId) -> u64 {
        self.ent[e as usize].load
    }

    fn vr(&self, e: EntId) -> u64 {
        self.ent[e as usize].vruntime
    }

    /// update_curr() on every level of the pCPU's running hierarchy.
    fn update_curr(&mut self, p: usize, now: Nanos) {
        let Some(c) = self.running[p] else { return };
        let delta = now.0.saturating_sub(self.rqs[p].exec_start.0);
        self.rqs[p].exec_start = now;
        let e = &mut self.ent[c.idx()];
        e.vruntime += delta * NICE_0_LOAD / e.load;
        let vm = self.vm_of(c);
        // Bandwidth use matters only on a host with caps (without, it is never read).
        if self.capped {
            self.used[vm] += delta;
            if let Some(q) = self.quota[vm] {
                if self.used[vm] >= q {
                    self.throttled[vm] = true;
                }
            }
        }
        if self.groups {
            let ge = self.group_ent(p, vm);
            let g = &mut self.ent[ge as usize];
            g.vruntime += delta * NICE_0_LOAD / g.load;
            self.update_min_vr(self.group_rq(p, vm));
        }
        self.update_min_vr(p);
    }

    /// The queued, unthrottled entity with the least vruntime (the first of equals in
    /// queue order). Cached until the queue changes; with caps, throttling changes it
    /// too, so it is recomputed every time.
    #[inline]
    fn leftmost(&self, rq: RqId) -> Option<EntId> {
        let r = &self.rqs[rq];
        if !self.capped {
            if let Some(l) = r.left.get() {
                return l;
            }
        }
        let mut best: Option<EntId> = None;
        for &e in &r.queue {
            if self.throttled(e) {
                continue;
            }
            match best {
                Some(b) if self.vr(b) <= self.vr(e) => {}
                _ => best = Some(e),
            }
        }
        if !self.capped {
            r.left.set(Some(best));
        }
        best
    }

    fn update_min_vr(&mut self, rq: RqId) {
        let r = &self.rqs[rq];
        let mut m = r.curr.map(|c| self.vr(c));
        if let Some(l) = self.leftmost(rq) {
            let lv = self.vr(l);
            m = Some(m.map_or(lv, |c| c.min(lv)));
        }
        if let Some(m) = m {
            let r = &mut self.rqs[rq];
            r.min_vr = r.min_vr.max(m);
        }
    }

    /// Weighted load of a runqueue (running + queued, throttled excluded).
    fn load(&self, rq: RqId) -> u64 {
        if !self.capped {
            return self.rqs[rq].load_sum;
        }
        let r = &self.rqs[rq];
        r.queue
            .iter()
            .chain(r.curr.iter())
            .filter(|e| !self.throttled(**e))
            .map(|e| self.weight(*e))
            .sum()
    }

    /// Entities on a runqueue (cfs_rq->nr_running), throttled excluded.
    fn nr_running(&self, rq: RqId) -> u64 {
        let r = &self.rqs[rq];
        r.queue.iter().filter(|e| !self.throttled(**e)).count() as u64 + r.curr.is_some() as u64
    }

    /// Runnable, unthrottled vCPUs on pCPU `p`, the running one included
    /// (rq->nr_running).
    fn h_nr_running(&self, p: usize) -> u64 {
        if !self.groups {
            return self.nr_running(p);
        }
        self.slots
            .active(p as u32)
            .iter()
            .filter(|&&vm| !(self.capped && self.throttled[vm as usize]))
            .map(|&vm| self.slots.nr(p as u32, vm as usize) as u64)
            .sum()
    }

    /// `x` scaled by the entity's share of its runqueue's load (counting it when it is
    /// not on the runqueue).
    fn share_of(&self, rq: RqId, e: EntId, x: u64) -> u64 {
        let r = &self.rqs[rq];
        let mut total: u64 = r
            .queue
            .iter()
            .filter(|e| !self.throttled(**e))
            .map(|e| self.weight(*e))
            .sum();
        if let Some(c) = r.curr {
            total += self.weight(c);
        }
        if !r.queue.contains(&e) && r.curr != Some(e) {
            total += self.weight(e);
        }
        x * self.weight(e) / total.max(1)
    }

    /// sched_slice(): the share of the period that entity `e` of runqueue `rq` (on
    /// pCPU `p`) gets, multiplied down the hierarchy from `rq` to the root.
    fn sched_slice(&self, p: usize, rq: RqId, e: EntId) -> u64 {
        let nr = self.nr_running(rq).max(1);
        let period = self.latency.max(nr * self.min_gran);
        let slice = self.share_of(rq, e, period);
        if rq == p {
            return slice;
        }
        self.share_of(p, self.group_ent(p, self.ent_vm(e)), slice)
    }

    /// wakeup_gran(): the wake-up granularity in `e`'s virtual time.
    fn gran_for(&self, e: EntId) -> i64 {
        (self.wakeup_gran * NICE_0_LOAD / self.weight(e)) as i64
    }

    /// check_preempt_tick() on one level: the running entity has had its slice, or
    /// runs a slice ahead of the leftmost.
    fn slice_used(&self, p: usize, rq: RqId, now: Nanos) -> bool {
        let Some(c) = self.rqs[rq].curr else {
            return false;
        };
        let ideal = self.sched_slice(p, rq, c);
        let ran = now.0.saturating_sub(self.rqs[rq].picked_at.0);
        if ran > ideal {
            return true;
        }
        if ran >= self.min_gran {
            if let Some(l) = self.leftmost(rq) {
                let d = self.vr(c) as i64 - self.vr(l) as i64;
                return d > ideal as i64;
            }
        }
        false
    }

    fn rq_idle(&self, p: usize) -> bool {
        self.nr[p] == 0
    }

    /// A vCPU of `v`'s VM other than `v` runs or waits on pCPU `p`.
    fn holds_sibling(&self, p: usize, v: VcpuId) -> bool {
        let vm = self.vm_of(v);
        if self.groups {
            let here = self.slots.nr(p as u32, vm);
            let counted_self = self.ent[v.idx()].on_rq && self.ent[v.idx()].rq as usize == p;
            return here > counted_self as u32;
        }
        let rq = &self.rqs[p];
        rq.curr
            .iter()
            .chain(rq.queue.iter())
            .any(|&o| o != v.0 && self.ent_vm(o) == vm)
    }

    fn select_rq(&mut self, v: VcpuId, waker: Option<Waker>, now: Nanos) -> usize {
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
        // select_task_rq_fair(): the waker's pCPU or the previous one (wake_affine), then
        // select_idle_sibling() around it: the target if idle (with SMT; without, the
        // scan below starts there), else (with SMT) a whole idle core of its last-level
        // cache, else the next idle one after it in the LLC (wrapping inside it); a
        // vCPU moves to another cache only by an affine wake-up or by load balancing.
        let target = if self.ent[v.idx()].ran {
            let waker_allowed = waker.is_some_and(|w| mask.contains(w.pcpu.0));
            let mut affinity = std::mem::take(&mut self.affinity);
            let wake = Wakeup {
                wakee: v,
                prev: prev as u32,
                waker,
                now,
            };
            let t = affinity.target(&self.topo, wake, waker_allowed, |this| {
                self.affine_loads(v, this as usize, prev)
            });
            self.affinity = affinity;
            t as usize
        } else {
            prev
        };
        let cache = self.llc_of(target);
        let (lo, span) = (cache.start, cache.len());
        if self.topo.threads_per_core() > 1 && mask.contains(target as u32) && self.rq_idle(target)
        {
            return target;
        }
        if let Some(q) = self.idle_core(target, mask) {
            return q;
        }
        if let Some(k) = prev_else_next_idle(
            target - lo,
            span,
            |k| mask.contains((lo + k) as u32),
            |k| self.rq_idle(lo + k),
        ) {
            return lo + k;
        }
        if target != prev {
            // An affine wake-up with no idle pCPU around the waker: queued beside it.
            return target;
        }
        if mask.contains(prev as u32) && self.ent[v.idx()].ran {
            return prev;
        }
        // First placement (fork/exec balancing) or a pCPU outside the mask: the least
        // loaded allowed pCPU (with SMT, of the least loaded core: find_idlest_group()).
        if self.topo.threads_per_core() > 1 {
            return mask
                .iter()
                .map(|q| q as usize)
                .min_by_key(|&q| (self.core_load(q), self.load(q), q))
                .unwrap_or(prev);
        }
        mask.iter()
            .map(|q| q as usize)
            .min_by_key(|&q| (self.load(q), q))
            .unwrap_or(prev)
    }

    /// What wake_affine reads of the waker's pCPU `this` and the wakee's previous one.
    fn affine_loads(&self, v: VcpuId, this: usize, prev: usize) -> AffineLoads {
        AffineLoads {
            this_load: self.load(this),
            this_nr: self.nr[this],
            this_idle: self.rq_idle(this),
            prev_load: self.load(prev),
            prev_idle: self.rq_idle(prev),
            task_load: self.wakee_h_load(v, prev),
        }
    }

    /// task_h_load() of a waking vCPU that last ran on `prev`: its weight, or with
    /// groups its share of its group entity there, as if it were runnable there again.
    fn wakee_h_load(&self, v: VcpuId, prev: usize) -> u64 {
        let w = self.weight(v.0);
        if !self.groups {
            return w;
        }
        let vm = self.vm_of(v);
        let Some(slot) = self.slots.get(prev as u32, vm) else {
            return w;
        };
        let ge = self.nv + slot;
        let gl = self.rqs[self.np as usize + slot as usize].load_sum;
        self.weight(ge) * w / (gl + w)
    }

    /// The load on `p`'s core (all its threads).
    fn core_load(&self, p: usize) -> u64 {
        self.topo
            .core_of(p as u32)
            .map(|q| self.load(q as usize))
            .sum()
    }

    /// The pCPUs of `p`'s last-level cache.
    fn llc_of(&self, p: usize) -> std::ops::Range<usize> {
        let r = self.topo.llc_of(p as u32);
        r.start as usize..r.end as usize
    }

    /// select_idle_core(): on an SMT host, the first allowed pCPU of a core whose
    /// threads are all idle, in `prev`'s LLC, from the core after `prev`'s (wrapping).
    fn idle_core(&self, prev: usize, mask: CpuMask) -> Option<usize> {
        let t = self.topo.threads_per_core() as usize;
        if t == 1 {
            return None;
        }
        let cache = self.llc_of(prev);
        let cores = cache.len() / t;
        let first = (prev - cache.start) / t + 1;
        (0..cores)
            .map(|k| cache.start + (first + k) % cores * t)
            .find_map(|c| {
                let core = c..c + t;
                if core.clone().all(|q| self.rq_idle(q)) {
                    core.into_iter().find(|&q| mask.contains(q as u32))
                } else {
                    None
                }
            })
    }

    /// calc_group_shares() on the tracked load averages (hv/sched/groups.rs), then
    /// reweight_entity(): the VM's group entity on `p` weighs its shares × its load here
    /// / its load everywhere.
    fn reweight_group(&mut self, p: usize, vm: usize) {
        let ge = self.group_ent(p, vm);
        let new_w = self.slots.shares(p as u32, vm, self.shares[vm]);
        let g = &mut self.ent[ge as usize];
        let old_w = g.load;
        g.load = new_w;
        if g.on_rq {
            let r = &mut self.rqs[p];
            r.load_sum = r.load_sum - old_w + new_w;
        }
    }

    /// Puts entity `e` on runqueue `rq` as a waker would (no placement).
    fn push_ent(&mut self, rq: RqId, e: EntId) {
        let en = &mut self.ent[e as usize];
        en.queued = true;
        en.on_rq = true;
        let w = en.load;
        let r = &mut self.rqs[rq];
        r.queue.push(e);
        r.left.set(None);
        r.load_sum += w;
    }

    /// The VM's slot on `p`; with groups, its group entity and runqueue are created on
    /// first use (slot order: entity nv + slot, runqueue np + slot).
    fn ensure_group(&mut self, p: usize, vm: usize) {
        if self.slots.ensure(p as u32, vm).1 && self.groups {
            self.ent.push(Ent::new(self.shares[vm], p as u32));
            self.rqs.push(Rq {
                min_vr: VR_BASE,
                ..Rq::default()
            });
        }
    }

    /// Counts a vCPU runnable on `p`; with groups, queues its group entity on the root
    /// (placed as a sleeper, enqueue_entity with ENQUEUE_WAKEUP) if it was not there.
    fn count_in(&mut self, v: VcpuId, p: usize) {
        self.nr[p] += 1;
        if self.nr[p] == 2 {
            self.overloaded += 1;
        }
        if !self.groups {
            return;
        }
        let vm = self.vm_of(v);
        self.ensure_group(p, vm);
        self.slots.add(p as u32, vm, v.idx());
        self.reweight_group(p, vm);
        let ge = self.group_ent(p, vm);
        if !self.ent[ge as usize].on_rq {
            let min_vr = self.rqs[p].min_vr;
            let g = &mut self.ent[ge as usize];
            g.vruntime = g.vruntime.max(min_vr.saturating_sub(self.latency / 2));
            self.push_ent(p, ge);
        }
    }

    /// Uncounts a vCPU that left `p` (blocked, or `moving` elsewhere); with groups, takes
    /// its group entity off the root when the group runqueue is empty.
    fn count_out(&mut self, v: VcpuId, p: usize, moving: bool) {
        self.nr[p] -= 1;
        if self.nr[p] == 1 {
            self.overloaded -= 1;
        }
        if !self.groups {
            return;
        }
        let vm = self.vm_of(v);
        let (_, left) = self.slots.remove(p as u32, vm, v.idx(), moving);
        let ge = self.group_ent(p, vm);
        if left == 0 && self.ent[ge as usize].on_rq {
            let g = &mut self.ent[ge as usize];
            g.on_rq = false;
            g.queued = false;
            let w = g.load;
            let r = &mut self.rqs[p];
            r.queue.retain(|x| *x != ge);
            if r.curr == Some(ge) {
                r.curr = None;
            }
            r.left.set(None);
            r.load_sum -= w;
            self.forget_buddies(p, ge);
            self.update_min_vr(p);
        }
        self.reweight_group(p, vm);
    }

    fn migrate(&mut self, v: VcpuId, from: usize, to: usize) {
        self.ensure_group(to, self.vm_of(v));
        self.forget_vcpu_buddies(from, v);
        let (lf, lt) = (self.leaf_rq(v, from), self.leaf_rq(v, to));
        let e = &mut self.ent[v.idx()];
        let rel = e.vruntime as i64 - self.rqs[lf].min_vr as i64;
        e.vruntime = (self.rqs[lt].min_vr as i64 + rel).max(0) as u64;
        e.rq = to as u32;
        let w = e.load;
        self.rqs[lf].load_sum -= w;
        self.rqs[lt].load_sum += w;
        self.rqs[lf].queue.retain(|x| *x != v.0);
        self.rqs[lt].queue.push(v.0);
        self.rqs[lf].left.set(None);
        self.rqs[lt].left.set(None);
        self.count_out(v, from, true);
        self.count_in(v, to);
    }

    /// A vCPU's share of its pCPU's root load (task_h_load).
    fn h_load(&self, v: VcpuId, p: usize) -> u64 {
        let w = self.weight(v.0);
        if !self.groups {
            return w;
        }
        let ge = self.group_ent(p, self.vm_of(v));
        let gl = self.rqs[self.leaf_rq(v, p)].load_sum.max(1);
        self.weight(ge) * w / gl
    }

    /// One balance of `p` over `scope` (hv/sched/balance.rs `detach_tasks`).
    fn balance(
        &mut self,
        p: usize,
        now: Nanos,
        only_cold: bool,
        scope: std::ops::Range<usize>,
    ) -> Pull {
        self.busiest = None;
        detach_tasks(|| self.pull_one(p, now, only_cold, scope.clone()))
    }

    /// task_hot(): `v` ran within the migration cost (one that never ran is cold).
    fn cache_hot(&self, v: VcpuId, now: Nanos) -> bool {
        let e = &self.ent[v.idx()];
        e.ran && now.0.saturating_sub(e.last_ran.0) < self.migration_cost
    }

    /// newidle balance (idle_balance before 3.17, newidle_balance after): `p` found
    /// nothing to run. Unless its idle periods average less than the migration cost
    /// (the avg_idle gate, Linux 2.6.35-5.15), it pulls a vCPU from its own core, LLC,
    /// node, then the host, stopping at the first pull — a cache-hot one only after
    /// the domain's periodic balances failed more than cache_nice_tries times (a
    /// newidle balance never counts a failure; its outcome retimes the domain's periodic
    /// balance, balance.rs). Pulling nothing, it goes idle (idle_stamp).
    fn newidle_balance(&mut self, pi: usize, now: Nanos) {
        // The avg_idle gate, and from 3.16 rd->overload: no runqueue holds a waiting
        // vCPU, so there is nothing to pull.
        let gated = (self.avg_idle_gate && self.idle[pi].avg_idle < self.migration_cost)
            || (self.timing.rules().overload_gate && self.overloaded == 0);
        if !newidle_balance(self, pi as u32, now, gated) {
            self.idle[pi].go_idle(now);
        }
    }

    /// Pulls one queued vCPU allowed on `p` from the most loaded runqueue when that
    /// reduces the weighted-load imbalance (Linux balances load, not task counts).
    /// `only_cold` leaves cache-hot vCPUs (ran within migration_cost) where they are.
    /// `scope`: the pCPUs looked at (`p`'s last-level cache, or the host).
    fn pull_one(
        &mut self,
        p: usize,
        now: Nanos,
        only_cold: bool,
        scope: std::ops::Range<usize>,
    ) -> Pull {
        // Loads as this balance reads them: without the moves other pCPUs' balances of
        // this tick instant made (they race; balance.rs `TickRace`).
        let seen = |c: &Cfs, q: usize| c.race.load_seen(q as u32, c.load(q));
        let mine = seen(self, p);
        let span = scope.len() as u32;
        // load_balance's redo: a busiest runqueue whose queued vCPUs are all pinned away
        // from `p` is left out and the next busiest tried (LBF_ALL_PINNED).
        let mut pinned = CpuMask::default();
        // The domain's load (sds->total_load), for its average per pCPU.
        let mut total: u64;
        let (src, src_load) = loop {
            let mut best: Option<(usize, u64)> = None;
            total = 0;
            for q in scope.clone() {
                let l = seen(self, q);
                total += l;
                let nr = self.race.nr_seen(q as u32, self.nr[q]);
                if q == p || nr <= self.running[q].is_some() as u32 {
                    continue;
                }
                if l > mine && best.is_none_or(|(_, bl)| l > bl) && !pinned.contains(q as u32) {
                    best = Some((q, l));
                }
            }
            let Some((src, src_load)) = best else {
                return if pinned.is_empty() {
                    Pull::Balanced
                } else {
                    Pull::AllPinned
                };
            };
            // can_migrate_task clears LBF_ALL_PINNED for the running vCPU too (its
            // affinity is tested before task_running): then the balance fails, and
            // enough failures move it (active balance, `active_balance`).
            let running_allowed =
                self.running[src].is_some_and(|c| self.setup.vcpu_mask[c.idx()].contains(p as u32));
            if self.any_allowed_queued(src, p) || running_allowed {
                break (src, src_load);
            }
            pinned.insert(src as u32);
        };
        self.busiest = Some(src as u32);
        let diff = src_load - mine;
        let active: &[u32] = if self.groups {
            self.slots.active(src as u32)
        } else {
            &[]
        };
        let leaves = active
            .iter()
            .map(|&vm| self.group_rq(src, vm as usize))
            .chain((!self.groups).then_some(src));
        // find_busiest_group's out_balanced tests: the domain is balanced for `p` when
        // its load is at or above the domain's average, or the busiest is within the
        // domain's imbalance_pct of it (125, 117 within an LLC from 3.16; an idle `p`
        // passes both).
        let level = match span {
            n if n <= self.topo.threads_per_core() => Level::Smt,
            n if n <= self.topo.llc_pcpus() => Level::Llc,
            _ => Level::Host,
        };
        let beyond_pct = src_load * 100 > self.affinity.imbalance_pct(level) * mine;
        let below_avg = mine * u64::from(span) < total;
        if !(beyond_pct && below_avg) {
            return Pull::Balanced;
        }
        // Moving load w changes the gap to |diff - 2w|: it helps iff 0 < w < diff.
        // Without groups any such move is made; with groups at most half the gap moves
        // (the source stays at least as loaded), since group shares follow the vCPUs.
        // A move that only mirrors the gap (two vCPUs against one) is made as 3.x-5.4's
        // fix_small_imbalance makes it: when the gap is at least the source's load per
        // vCPU (busiest_load_per_task; imbn 2), or at all if the local vCPUs are heavier
        // than the source's (imbn 1), a vCPU of up to twice that load moves (move_tasks
        // skips a task whose load/2 exceeds the imbalance; with groups
        // load_balance_fair scales both into the group alike). N + 1 equal vCPUs on N
        // pCPUs take turns on the shared one, with a task group per VM too. Take the
        // queued vCPU whose load is closest to half the gap.
        let nr_seen =
            |c: &Cfs, q: usize| u64::from(c.race.nr_seen(q as u32, c.h_nr_running(q) as u32));
        let per_task = src_load / nr_seen(self, src).max(1);
        let mine_per_task = mine / nr_seen(self, p).max(1);
        let imbn = if mine_per_task > per_task { 1 } else { 2 };
        let small_imbalance = diff + per_task >= imbn * per_task;
        let mut cand: Option<(u64, VcpuId)> = None;
        for rq in leaves {
            for &e in &self.rqs[rq].queue {
                let v = VcpuId(e);
                let w = self.h_load(v, src);
                let reduces = if self.groups { 2 * w <= diff } else { w < diff };
                let helps = reduces || (small_imbalance && w <= 2 * per_task);
                let fits = helps
                    && self.setup.vcpu_mask[v.idx()].contains(p as u32)
                    && !self.throttled(e)
                    && (!only_cold || !self.cache_hot(v, now));
                let key = (w as i64 - (diff / 2) as i64).unsigned_abs();
                if fits && cand.is_none_or(|c| key < c.0) {
                    cand = Some((key, v));
                }
            }
        }
        match cand {
            Some((_, v)) => {
                let w = self.h_load(v, src);
                self.race.record(now, src as u32, p as u32, w);
                // dequeue_entity's update_curr: the source's min_vruntime is current
                // when the vCPU's vruntime is taken relative to it.
                self.update_curr(src, now);
                self.migrate(v, src, p);
                // attach_task → check_preempt_curr on a busy pCPU: the pulled vCPU
                // preempts as a wakee would (a newidle or idle pCPU picks anyway).
                if self.running[p].is_some() && !self.pull_preempts {
                    self.update_curr(p, now);
                    if self.wakeup_preempts(v, p) {
                        self.pull_preempts = true;
                        self.set_preempting_buddy(p, v);
                    }
                }
                Pull::Moved
            }
            None => Pull::Failed,
        }
    }

    /// Whether some vCPU queued on `src` may run on `p` (can_migrate_task's affinity
    /// test, which clears LBF_ALL_PINNED).
    fn any_allowed_queued(&self, src: usize, p: usize) -> bool {
        let allowed = |e: &u32| self.setup.vcpu_mask[*e as usize].contains(p as u32);
        if !self.groups {
            return self.rqs[src].queue.iter().any(allowed);
        }
        self.slots.active(src as u32).iter().any(|&vm| {
            self.rqs[self.group_rq(src, vm as usize)]
                .queue
                .iter()
                .any(allowed)
        })
    }

    /// pick_next_entity() on one level (Linux 3.2-6.5): the forced entity, else the
    /// leftmost; if that is the skip buddy (it yielded), the second leftmost when close
    /// enough; then a queued next buddy when close enough. "Close enough" is
    /// wakeup_preempt_entity(e, left) < 1: at most a wake-up granularity, in the
    /// leftmost's virtual time, to its right. Returns the entity's position in the queue.
    fn pick_level(&self, rq: RqId, forced: Option<EntId>) -> Option<(usize, EntId)> {
        let lv = self.leftmost(rq)?;
        let r = &self.rqs[rq];
        if let Some(f) = forced.and_then(|f| r.queue.iter().position(|x| *x == f).map(|i| (i, f))) {
            return Some(f);
        }
        let li = r.queue.iter().position(|x| *x == lv).unwrap_or(0);
        let l_vr = self.vr(lv) as i64;
        let gran = self.gran_for(lv);
        let close = |e: EntId| !self.throttled(e) && self.vr(e) as i64 - l_vr <= gran;
        let mut pick = (li, lv);
        if r.skip_buddy == Some(lv) {
            // Yield semantics: the second-leftmost instead, when close enough.
            let second = r
                .queue
                .iter()
                .enumerate()
                .filter(|(_, x)| **x != lv && !self.throttled(**x))
                .min_by_key(|(_, x)| self.vr(**x));
            if let Some((si, &s)) = second {
                if close(s) {
                    pick = (si, s);
                }
            }
        }
        if let Some(b) = r.next_buddy {
            if let Some(bi) = r.queue.iter().position(|x| *x == b) {
                if close(b) {
                    pick = (bi, b);
                }
            }
        }
        Some(pick)
    }

    /// clear_buddies on one level: the hints that name `e` go (when it is picked or
    /// leaves the runqueue); others stay until their entity is picked or dequeued.
    fn forget_buddies(&mut self, rq: RqId, e: EntId) {
        let r = &mut self.rqs[rq];
        if r.next_buddy == Some(e) {
            r.next_buddy = None;
        }
        if r.skip_buddy == Some(e) {
            r.skip_buddy = None;
        }
    }

    /// clear_buddies when vCPU `v` leaves its leaf runqueue on `p` (dequeue_entity): a
    /// hint naming it goes, and (`__clear_buddies_next` / `_skip` walk up) so does the
    /// root's same hint while it names the vCPU's group entity.
    fn forget_vcpu_buddies(&mut self, p: usize, v: VcpuId) {
        let leaf = self.leaf_rq(v, p);
        let (next, skip) = {
            let r = &self.rqs[leaf];
            (r.next_buddy == Some(v.0), r.skip_buddy == Some(v.0))
        };
        self.forget_buddies(leaf, v.0);
        if self.groups && (next || skip) {
            let ge = self.group_ent(p, self.vm_of(v));
            let root = &mut self.rqs[p];
            if next && root.next_buddy == Some(ge) {
                root.next_buddy = None;
            }
            if skip && root.skip_buddy == Some(ge) {
                root.skip_buddy = None;
            }
        }
    }

    /// Sets the buddy hint `set` on every level of `v`'s hierarchy on `p`
    /// (set_next_buddy / set_skip_buddy walk up with for_each_sched_entity).
    fn set_buddy(&mut self, p: usize, v: VcpuId, next: bool) {
        let leaf = self.leaf_rq(v, p);
        let mut levels = [(leaf, v.0), (usize::MAX, 0)];
        if self.groups {
            levels[1] = (p, self.group_ent(p, self.vm_of(v)));
        }
        for (rq, e) in levels {
            if rq == usize::MAX {
                continue;
            }
            if next {
                self.rqs[rq].next_buddy = Some(e);
            } else {
                self.rqs[rq].skip_buddy = Some(e);
            }
        }
    }

    /// check_preempt_wakeup()'s set_next_buddy(pse) after find_matching_se: a wakee
    /// that preempts the running vCPU is the next buddy from the level where their
    /// hierarchies meet up — its group entity on the root when the two are of different
    /// VMs, itself and its group entity when of one VM (or without groups).
    fn set_preempting_buddy(&mut self, p: usize, v: VcpuId) {
        match self.running[p] {
            Some(c) if self.groups && self.vm_of(c) != self.vm_of(v) => {
                self.rqs[p].next_buddy = Some(self.group_ent(p, self.vm_of(v)));
            }
            _ => self.set_buddy(p, v, true),
        }
    }

    /// check_preempt_wakeup(): the entities where the wakee's and the running vCPU's
    /// hierarchies meet (find_matching_se); the wakee preempts when the running one is
    /// more than a wake-up granularity (in the wakee's virtual time) to its right.
    fn wakeup_preempts(&self, v: VcpuId, p: usize) -> bool {
        let Some(c) = self.running[p] else {
            return true;
        };
        if self.throttled(c.0) {
            return true;
        }
        let (curr, wakee) = if !self.groups || self.vm_of(c) == self.vm_of(v) {
            (c.0, v.0)
        } else {
            (
                self.group_ent(p, self.vm_of(c)),
                self.group_ent(p, self.vm_of(v)),
            )
        };
        let vdiff = self.vr(curr) as i64 - self.vr(wakee) as i64;
        vdiff > self.gran_for(wakee)
    }
}

impl DomainBalancer for Cfs {
    fn topo(&self) -> &Topology {
        &self.topo
    }

    fn balance_state(&mut self, p: u32) -> (&mut PcpuBalance, &BalanceTiming) {
        (&mut self.idle[p as usize], &self.timing)
    }

    fn pcpu_idle(&self, q: u32) -> bool {
        self.nr[q as usize] == 0
    }

    fn balance_level(&mut self, p: u32, l: usize, now: Nanos, only_cold: bool) -> Pull {
        let d = self.topo.domain_of(p, self.topo.levels()[l].span);
        self.balance(p as usize, now, only_cold, d.start as usize..d.end as usize)
    }

    fn active_balance(&mut self, p: u32) -> Active {
        let Some(src) = self.busiest.take() else {
            return Active::NotNeeded;
        };
        let masks = &self.setup.vcpu_mask;
        let running = self.running[src as usize];
        self.active_balance
            .kick(running, |c| masks[c.idx()].contains(p), src, p)
    }

    fn tick_race(&mut self) -> &mut TickRace {
        &mut self.race
    }

    fn active_rule(&self) -> ActiveRule {
        ActiveRule::AnyFailure
    }
}

impl HostScheduler for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }

    fn tick_period(&self) -> Option<Nanos> {
        Some(self.tick)
    }

    fn ticks_aligned(&self) -> bool {
        true
    }

    fn global_period(&self) -> Option<Nanos> {
        self.quota
            .iter()
            .any(Option::is_some)
            .then_some(self.bw_period)
    }

    fn take_affine(&mut self) -> bool {
        self.affinity.take_affine()
    }

    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement {
        self.enqueue_wake_by(v, None, now)
    }

    fn enqueue_wake_by(&mut self, v: VcpuId, waker: Option<Waker>, now: Nanos) -> WakePlacement {
        self.slots.set_clock(now);
        // task_waking_fair() (3.x) and migrate_task_rq_fair() (4.x-6.5): a sleeper
        // that moves keeps its vruntime relative to its old runqueue's min_vruntime as
        // that minimum is *now* — it went on while the vCPU slept, so a long sleeper
        // arrives far to the left and gets the sleeper credit it would have had at home.
        let prev_rq = self.ent[v.idx()].rq as usize;
        let old_min = self.ent[v.idx()]
            .ran
            .then(|| self.rq_min_if_any(v, prev_rq));
        let p = self.select_rq(v, waker, now);
        self.idle[p].end_idle_period(now, self.migration_cost);
        self.update_curr(p, now);
        self.ensure_group(p, self.vm_of(v));
        let leaf = self.leaf_rq(v, p);
        let min_vr = self.rqs[leaf].min_vr;
        let e = &mut self.ent[v.idx()];
        let placed = match old_min.flatten() {
            _ if prev_rq == p => e.vruntime,
            Some(old) => (min_vr as i128 + e.vruntime as i128 - old as i128).max(0) as u64,
            // Never queued before: placed at the queue's minimum.
            None => min_vr,
        };
        // GENTLE_FAIR_SLEEPERS: a sleeper gets at most half a latency of credit.
        e.vruntime = placed.max(min_vr.saturating_sub(self.latency / 2));
        e.rq = p as u32;
        self.push_ent(leaf, v.0);
        self.count_in(v, p);
        let preempt = self.wakeup_preempts(v, p);
        if preempt && self.running[p].is_some() {
            self.set_preempting_buddy(p, v);
        }
        WakePlacement {
            pcpu: PcpuId(p as u32),
            preempt,
        }
    }

    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos) {
        self.slots.set_clock(now);
        let pi = p.idx();
        self.update_curr(pi, now);
        self.running[pi] = None;
        let leaf = self.leaf_rq(v, pi);
        self.rqs[leaf].curr = None;
        let vm = self.vm_of(v);
        if self.capped {
            self.running_per_vm[vm] = self.running_per_vm[vm].saturating_sub(1);
        }
        let ge = self.group_ent(pi, vm);
        if self.groups {
            // put_prev_entity on the root level: the group entity goes back to the
            // queue (count_out below takes it off if its group runqueue empties).
            self.rqs[pi].curr = None;
            self.rqs[pi].put_back = Some((ge, now));
            let g = &mut self.ent[ge as usize];
            g.queued = true;
            self.rqs[pi].queue.push(ge);
            self.rqs[pi].left.set(None);
        }
        let e = &mut self.ent[v.idx()];
        e.last_ran = now;
        match why {
            StopReason::Preempted | StopReason::Yielded => {
                e.queued = true;
                self.rqs[leaf].queue.push(v.0);
                self.rqs[leaf].left.set(None);
                self.rqs[leaf].put_back = Some((v.0, now));
                if why == StopReason::Yielded {
                    self.set_buddy(pi, v, false);
                }
            }
            StopReason::Blocked => {
                e.queued = false;
                e.on_rq = false;
                self.rqs[leaf].load_sum -= e.load;
                self.forget_vcpu_buddies(pi, v);
                self.update_min_vr(leaf);
                self.count_out(v, pi, false);
            }
        }
        // An active balance's push (active_balance.rs): the vCPU moves to its target
        // (the SMT trigger's only while that is idle) and preempts there as a wakee.
        if let Some((dst, only_if_idle)) = self.active_balance.take(v, pi as u32) {
            let d = dst as usize;
            let idle = self.nr[d] == 0;
            if why != StopReason::Blocked
                && (idle || !only_if_idle)
                && self.setup.vcpu_mask[v.idx()].contains(dst)
            {
                self.migrate(v, pi, d);
                if idle {
                    self.active_balance.out.push(PcpuId(dst));
                } else {
                    self.update_curr(d, now);
                    if self.wakeup_preempts(v, d) {
                        self.set_preempting_buddy(d, v);
                        self.active_balance.out.push(PcpuId(dst));
                    }
                }
            }
        }
    }

    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)> {
        self.slots.set_clock(now);
        let pi = p.idx();
        if self.leftmost(pi).is_none() {
            self.newidle_balance(pi, now);
        }
        let forced = self.rqs[pi].forced;
        let mut rq = pi;
        let v = loop {
            let want = forced.map(|f| {
                if rq == self.leaf_rq(f, pi) {
                    f.0
                } else {
                    self.group_ent(pi, self.vm_of(f))
                }
            });
            let (i, e) = self.pick_level(rq, want)?;
            debug_assert_eq!(self.rqs[rq].queue.get(i), Some(&e));
            self.forget_buddies(rq, e);
            let keeps = self.repick_keeps_slice;
            let r = &mut self.rqs[rq];
            let put_back = r.put_back.take();
            // remove, not swap_remove: the queue stays in enqueue order, so of equal
            // vruntimes the first queued is leftmost (the rbtree puts an equal key to
            // the right of those already there, `entity_before`).
            r.queue.remove(i);
            r.left.set(None);
            r.curr = Some(e);
            // set_next_entity: from Linux 3.15 pick_next_task_fair sets only the levels
            // that change, so an entity picked again right after it was put back keeps
            // its start (prev_sum_exec_runtime, the base of check_preempt_tick); before,
            // put_prev_task and set_next_entity ran on every level.
            if !(keeps && put_back == Some((e, now))) {
                r.picked_at = now;
            }
            let en = &mut self.ent[e as usize];
            en.queued = false;
            if e < self.nv {
                break VcpuId(e);
            }
            self.update_min_vr(rq);
            rq = self.group_rq(pi, self.ent_vm(e));
        };
        self.rqs[pi].forced = None;
        self.rqs[pi].exec_start = now;
        self.running[pi] = Some(v);
        let e = &mut self.ent[v.idx()];
        e.ran = true;
        e.rq = pi as u32;
        self.update_min_vr(rq);
        if !self.capped {
            // Preemption is decided at ticks.
            return Some((v, None));
        }
        let vm = self.vm_of(v);
        self.running_per_vm[vm] += 1;
        // With a cap, stop exactly when the VM's remaining quota (shared among its
        // running vCPUs) runs out.
        let limit = self.quota[vm].map(|q| {
            let left = q.saturating_sub(self.used[vm]);
            Nanos((left / self.running_per_vm[vm].max(1) as u64).max(1_000))
        });
        Some((v, limit))
    }

    fn tick(&mut self, p: PcpuId, now: Nanos) -> bool {
        self.slots.set_clock(now);
        let pi = p.idx();
        self.update_curr(pi, now);
        let mut resched = false;
        if let Some(c) = self.running[pi] {
            if self.throttled(c.0) {
                return true;
            }
            // entity_tick on every level, leaf first: update_cfs_shares for the group
            // entity, then check_preempt_tick where more than one entity competes.
            let leaf = self.leaf_rq(c, pi);
            if self.groups {
                self.reweight_group(pi, self.vm_of(c));
            }
            if self.nr_running(leaf) > 1 {
                resched |= self.slice_used(pi, leaf, now);
            }
            if self.groups && self.nr_running(pi) > 1 {
                resched |= self.slice_used(pi, pi, now);
            }
        }
        // Periodic balancing (rebalance_domains, balance.rs): each domain whose interval
        // has passed, bottom up, while this pCPU is its group's balancer; a pull makes it
        // busy for the levels above.
        let was_idle = self.running[pi].is_none();
        let widest = rebalance_domains(self, pi as u32, now, was_idle);
        if std::mem::take(&mut self.pull_preempts) {
            resched = true;
        }
        if let Some((l, pulled)) = widest {
            let d = self.topo.domain_of(pi as u32, self.topo.levels()[l].span);
            if pulled && was_idle {
                resched = true;
            }
            if self.active_balance.enabled() {
                let mut sb = std::mem::take(&mut self.active_balance);
                sb.after_periodic(
                    &self.topo,
                    pi as u32,
                    pulled,
                    d,
                    |q| self.nr[q as usize] > 0,
                    |q| self.running[q as usize].filter(|_| self.nr[q as usize] == 1),
                    |v, q| self.setup.vcpu_mask[v.idx()].contains(q) && !self.throttled(v.0),
                );
                self.active_balance = sb;
            }
        }
        if self.running[pi].is_none() && self.leftmost(pi).is_some() {
            resched = true;
        }
        resched
    }

    fn global_tick(&mut self, now: Nanos, resched: &mut Vec<PcpuId>) {
        self.slots.set_clock(now);
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
            for p in 0..self.np as usize {
                if self.running[p].is_none() && !self.rqs[p].queue.is_empty() {
                    resched.push(PcpuId(p as u32));
                }
            }
        }
    }

    fn yield_to(&mut self, p: PcpuId, from: VcpuId, to: VcpuId, now: Nanos) -> Option<PcpuId> {
        self.slots.set_clock(now);
        let e = &self.ent[to.idx()];
        if !e.queued || self.throttled(to.0) {
            return None; // running, blocked or throttled
        }
        let tp = e.rq as usize;
        if self.h_nr_running(p.idx()) == 1 && self.h_nr_running(tp) == 1 {
            return None;
        }
        // yield_to_task_fair: next buddy on the target's hierarchy, skip buddy on ours.
        self.set_buddy(tp, to, true);
        self.set_buddy(p.idx(), from, false);
        Some(PcpuId(tp as u32))
    }

    fn queued_on(&self, p: PcpuId) -> usize {
        (self.nr[p.idx()] - self.running[p.idx()].is_some() as u32) as usize
    }

    fn yield_to_esrch(&self, p: PcpuId, to: VcpuId) -> bool {
        let tp = self.ent[to.idx()].rq as usize;
        self.h_nr_running(p.idx()) == 1 && self.h_nr_running(tp) == 1
    }

    fn home_of(&self, v: VcpuId) -> PcpuId {
        PcpuId(self.ent[v.idx()].rq)
    }

    /// Urgent-vCPU-first: the queued `v` runs next on `p` (moved there if queued
    /// elsewhere).
    fn run_next(&mut self, p: PcpuId, v: VcpuId) -> bool {
        let e = &self.ent[v.idx()];
        if !e.queued || self.throttled(v.0) || !self.setup.vcpu_mask[v.idx()].contains(p.0) {
            return false;
        }
        let from = e.rq as usize;
        if from != p.idx() {
            self.migrate(v, from, p.idx());
        }
        self.rqs[p.idx()].forced = Some(v);
        true
    }

    /// vruntime beyond its runqueue's min_vruntime, in CPU time at its weight (with
    /// groups: its VM's group entity on the root).
    #[inline]
    fn drain_resched(&mut self, out: &mut Vec<PcpuId>) {
        if !self.active_balance.out.is_empty() {
            out.append(&mut self.active_balance.out);
        }
    }

    fn lead_ns(&self, v: VcpuId) -> i64 {
        let p = self.ent[v.idx()].rq as usize;
        let (rq, e) = if self.groups {
            (p, self.group_ent(p, self.vm_of(v)))
        } else {
            (p, v.0)
        };
        let min_vr = self.rqs[rq].min_vr;
        (self.vr(e) as i64 - min_vr as i64) * self.weight(e) as i64 / NICE_0_LOAD as i64
    }
}

#[cfg(test)]
mod tests {
    //! CFS on its own, on hand-made situations (as credit.rs is tested): the pick, the
    //! tick, wake-up placement and preemption, directed yield.
    use super::*;
    use crate::host::cpumask::CpuMask;
    use crate::scenario::BalanceInterval;
    use crate::sim::VmId;

    /// `weights[i]` is VM i's weight (one vCPU each), on `pcpus` pCPUs, without groups
    /// (one vCPU per VM: groups change nothing but the bookkeeping).
    fn cfs(pcpus: u32, weights: &[u32]) -> Cfs {
        let vms: Vec<(u32, u32)> = weights.iter().map(|&w| (1, w)).collect();
        cfs_vms(pcpus, &vms, false)
    }

    /// VMs of (vCPUs, weight) on `pcpus` pCPUs, with or without a task group per VM.
    fn cfs_vms(pcpus: u32, vms: &[(u32, u32)], groups: bool) -> Cfs {
        let mut vcpu_vm = Vec::new();
        for (i, &(n, _)) in vms.iter().enumerate() {
            vcpu_vm.extend((0..n).map(|_| VmId(i as u32)));
        }
        let setup = SchedSetup {
            pcpus,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_mask: vec![CpuMask::all(pcpus); vcpu_vm.len()],
            vcpu_vm,
            vm_weight: vms.iter().map(|v| v.1).collect(),
            vm_cap: vec![None; vms.len()],
        };
        let p = CfsParams {
            per_vm_groups: groups,
            ..CfsParams::default()
        };
        Cfs::new(&p, setup)
    }

    /// An idle pCPU's newidle balance looks in its own last-level cache first: with
    /// LLCs of two pCPUs it pulls the vCPU queued beside it in its LLC although the
    /// other LLC has a busier pCPU; with one LLC of four it pulls from the busiest.
    #[test]
    fn newidle_balance_pulls_from_its_own_llc_first() {
        for (llc, want) in [(2, [1].as_slice()), (4, [3, 4].as_slice())] {
            let pin = |ps: &[u32]| {
                let mut m = CpuMask::default();
                ps.iter().for_each(|&p| m.insert(p));
                m
            };
            let masks = [
                pin(&[0]),
                pin(&[0]),
                pin(&[2]),
                pin(&[2]),
                pin(&[2]),
                pin(&[3]),
            ];
            let setup = SchedSetup {
                pcpus: 4,
                threads_per_core: 1,
                numa_nodes: 1,
                vcpu_vm: (0..6).map(VmId).collect(),
                vcpu_mask: masks.to_vec(),
                vm_weight: vec![256; 6],
                vm_cap: vec![None; 6],
            };
            let p = CfsParams {
                per_vm_groups: false,
                llc_pcpus: llc,
                ..CfsParams::default()
            };
            let mut c = Cfs::new(&p, setup);
            for v in 0..6 {
                c.enqueue_wake(VcpuId(v), Nanos(0));
            }
            for p in [0, 2, 3] {
                assert!(c.pick_next(PcpuId(p), Nanos(0)).is_some());
            }
            // Now free to move: the queued vCPUs of pCPUs 0 and 2.
            for v in [1, 3, 4] {
                c.setup.vcpu_mask[v] = CpuMask::all(4);
            }
            let got = c.pick_next(PcpuId(1), Nanos(1_000)).map(|r| r.0 .0);
            assert!(
                got.is_some_and(|v| want.contains(&v)),
                "LLC of {llc}: pCPU 1 picked {got:?}, expected one of {want:?}"
            );
        }
    }

    /// Every vCPU always runnable, every pCPU driven tick by tick for `ms` (no switch
    /// costs); returns each vCPU's CPU time (ns).
    fn simulate(c: &mut Cfs, ms: u64) -> Vec<u64> {
        let nv = c.nv as usize;
        let np = c.np as usize;
        let mut cpu = vec![0u64; nv];
        let mut running: Vec<Option<(VcpuId, u64)>> = vec![None; np];
        for v in 0..nv {
            c.enqueue_wake(VcpuId(v as u32), Nanos(0));
        }
        for (p, r) in running.iter_mut().enumerate() {
            *r = c.pick_next(PcpuId(p as u32), Nanos(0)).map(|(v, _)| (v, 0));
        }
        let tick = c.tick.0;
        let mut now = 0;
        while now < ms * 1_000_000 {
            now += tick;
            for (p, r) in running.iter_mut().enumerate() {
                let pc = PcpuId(p as u32);
                if c.tick(pc, Nanos(now)) {
                    if let Some((v, since)) = r.take() {
                        cpu[v.idx()] += now - since;
                        c.put_prev(pc, v, StopReason::Preempted, Nanos(now));
                    }
                    *r = c.pick_next(pc, Nanos(now)).map(|(v, _)| (v, now));
                }
            }
        }
        for (v, since) in running.iter().flatten() {
            cpu[v.idx()] += now - since;
        }
        cpu
    }

    #[test]
    fn groups_share_per_vm_not_per_vcpu() {
        // VM 0: four vCPUs, VM 1: one, equal weights, one pCPU: half each with groups,
        // 4:1 without.
        for (groups, want) in [(true, 0.5), (false, 0.8)] {
            let mut c = cfs_vms(1, &[(4, 256), (1, 256)], groups);
            let cpu = simulate(&mut c, 3_000);
            let vm0: u64 = cpu[..4].iter().sum();
            let share = vm0 as f64 / (vm0 + cpu[4]) as f64;
            assert!(
                (share - want).abs() < 0.01,
                "groups {groups}: VM 0 gets {share}, {cpu:?}"
            );
            // Within the VM its vCPUs share equally.
            let (lo, hi) = (cpu[..4].iter().min(), cpu[..4].iter().max());
            let (lo, hi) = (*lo.unwrap() as f64, *hi.unwrap() as f64);
            assert!(hi / lo < 1.15, "groups {groups}: {cpu:?}");
        }
    }

    #[test]
    fn a_wide_and_a_narrow_vm_of_equal_weight_get_equal_cpu_with_groups() {
        // 16 vCPUs and 1 vCPU, both saturated, on 2 pCPUs: with groups load balancing
        // leaves the narrow VM a pCPU of its own; without, CPU goes per vCPU thread.
        for (groups, lo, hi) in [(true, 0.45, 0.55), (false, 0.0, 0.15)] {
            let mut c = cfs_vms(2, &[(16, 256), (1, 256)], groups);
            let cpu = simulate(&mut c, 4_000);
            let total: u64 = cpu.iter().sum();
            let narrow = cpu[16] as f64 / total as f64;
            assert!(
                (lo..=hi).contains(&narrow),
                "groups {groups}: the 1-vCPU VM gets {narrow} of the host"
            );
        }
    }

    #[test]
    fn group_weight_follows_the_vms_load_on_each_pcpu() {
        let mut c = cfs_vms(2, &[(4, 256)], true);
        for v in 0..4 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        // Saturated for 2 s (load averages converged), each group entity weighs the VM's
        // 1024 shares × its runnable vCPUs there / 4, refreshed by the tick of the pCPU
        // that runs it.
        let mut now = 2_000_000_000;
        for p in 0..2 {
            c.pick_next(PcpuId(p), Nanos(0)).unwrap();
            c.tick(PcpuId(p), Nanos(now));
            let ge = c.group_ent(p as usize, 0);
            assert_eq!(c.weight(ge), 1024 * c.nr[p as usize] as u64 / 4);
        }
        // The vCPUs on pCPU 0 block one by one within microseconds; the group keeps its
        // weight (its load average has not decayed yet: calc_group_shares uses the larger
        // of the runnable weight and the average), and the last takes the group entity
        // off the root runqueue; pCPU 0 then pulls from pCPU 1 when it looks for work.
        let full = c.weight(c.group_ent(0, 0));
        while c.nr[0] > 0 {
            let v = match c.running[0] {
                Some(v) => v,
                None => c.pick_next(PcpuId(0), Nanos(now)).unwrap().0,
            };
            now += 1_000;
            c.put_prev(PcpuId(0), v, StopReason::Blocked, Nanos(now));
            let w = c.weight(c.group_ent(0, 0));
            assert!((full * 99 / 100..=full).contains(&w), "{w} vs {full}");
        }
        assert!(!c.ent[c.group_ent(0, 0) as usize].on_rq);
        assert_eq!(c.load(0), 0);
        if c.nr[1] > 1 {
            assert!(c.pick_next(PcpuId(0), Nanos(now)).is_some(), "newidle pull");
        }
    }

    #[test]
    fn a_lone_entity_is_not_preempted_by_the_tick() {
        // entity_tick checks preemption only where more than one entity competes.
        let mut c = cfs(1, &[256]);
        c.enqueue_wake(VcpuId(0), Nanos(0));
        c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        for t in 1..20 {
            assert!(!c.tick(PcpuId(0), Nanos(t * 4_000_000)));
        }
    }

    #[test]
    fn wakeup_preemption_compares_the_group_entities_across_vms() {
        // VM 0's vCPU has run 20 ms alone on the pCPU; VM 1's vCPU wakes: its group
        // entity is placed half a latency behind, far enough to preempt.
        let mut c = cfs_vms(1, &[(1, 256), (1, 256)], true);
        c.enqueue_wake(VcpuId(0), Nanos(0));
        c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        assert!(!c.tick(PcpuId(0), Nanos(20_000_000)));
        let w = c.enqueue_wake(VcpuId(1), Nanos(20_000_000));
        assert!(w.preempt);
        assert_eq!(c.rqs[0].next_buddy, Some(c.group_ent(0, 1)));
        c.put_prev(
            PcpuId(0),
            VcpuId(0),
            StopReason::Preempted,
            Nanos(20_000_000),
        );
        assert_eq!(
            c.pick_next(PcpuId(0), Nanos(20_000_000)).map(|x| x.0),
            Some(VcpuId(1))
        );
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

    /// Of equal vruntimes the first queued runs first: the rbtree puts an equal key to
    /// the right of those already there (entity_before is strict).
    #[test]
    fn equal_vruntimes_run_in_the_order_they_were_queued() {
        let mut c = cfs(1, &[256, 256, 256]);
        for v in 0..3 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        let mut order = vec![];
        for _ in 0..3 {
            let (v, _) = c.pick_next(PcpuId(0), Nanos(0)).unwrap();
            order.push(v.0);
            c.put_prev(PcpuId(0), v, StopReason::Blocked, Nanos(0));
        }
        assert_eq!(order, [0, 1, 2]);
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

    /// fix_small_imbalance (3.x-5.4): two equal vCPUs against one is an imbalance worth
    /// a move, though the move only mirrors it — N + 1 vCPUs on N pCPUs take turns.
    /// pCPU 0 runs vCPU 0 with vCPU 1 queued (never run: cold); busy pCPU 1, running
    /// vCPU 2, takes vCPU 1 at its first busy balance. The same with a task group per
    /// VM (what libvirt gives each guest), one VM's three vCPUs: the shared pCPU's group
    /// entity weighs twice the other's, its vCPUs' task_h_load is that of the lone one,
    /// and load_balance_fair scales the imbalance into the group (half a vCPU's weight
    /// fits), so they take turns as without groups.
    #[test]
    fn two_vcpus_against_one_move_one_at_a_busy_balance() {
        for grouped in [false, true] {
            let mut c = if grouped {
                cfs_vms(2, &[(3, 256)], true)
            } else {
                cfs(2, &[256, 256, 256])
            };
            c.setup.vcpu_mask = vec![CpuMask::all(1), CpuMask::all(1), CpuMask::all(2)];
            for v in 0..2 {
                c.enqueue_wake(VcpuId(v), Nanos(0));
            }
            c.pick_next(PcpuId(0), Nanos(0)).unwrap();
            assert_eq!(c.enqueue_wake(VcpuId(2), Nanos(0)).pcpu, PcpuId(1));
            c.pick_next(PcpuId(1), Nanos(0)).unwrap();
            c.setup.vcpu_mask = vec![CpuMask::all(2); 3];
            // Linux 3.2-3.15: SD_MC_INIT's 1 ms × busy_factor 64.
            retime(&mut c, BalanceInterval::Fixed, 64);
            c.tick(PcpuId(1), Nanos(64_000_000));
            assert_eq!((c.nr[0], c.nr[1]), (1, 2), "grouped {grouped}");
        }
    }

    /// The busy pCPUs' balances of one tick instant race: each reads the loads as they
    /// were before the others of that instant moved anything, so of three pCPUs meeting
    /// the one holding two vCPUs, one takes the queued vCPU and the other two find
    /// nothing there (a failed balance each) — no vCPU is passed on from one to the next
    /// within the instant.
    #[test]
    fn one_instants_busy_balances_race_for_the_queued_vcpu() {
        let mut c = cfs(4, &[256; 5]);
        c.setup.vcpu_mask = (0..5).map(|v| CpuMask::single(v.min(3))).collect();
        for v in 0..5 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        for p in 0..4 {
            c.pick_next(PcpuId(p), Nanos(0)).unwrap();
        }
        assert_eq!(c.nr, [1, 1, 1, 2]);
        c.setup.vcpu_mask = vec![CpuMask::all(4); 5];
        retime(&mut c, BalanceInterval::Fixed, 64);
        // Linux 3.2-3.15: the 4-pCPU domain's 1 ms × busy_factor 64 (the MC level).
        let at = Nanos(64_000_000);
        for p in [1, 0, 2, 3] {
            c.tick(PcpuId(p), at);
        }
        assert_eq!(c.nr.iter().sum::<u32>(), 5);
        assert_eq!(c.nr[3], 1, "the queued vCPU left");
        assert_eq!(c.nr[1], 2, "the first to balance took it, and kept it");
        let failed: Vec<u32> = [0, 2].iter().map(|&p| c.idle[p].failed(0)).collect();
        assert_eq!(failed, [1, 1], "the others found nothing to move");
    }

    /// Sets the domains' balance timing (balance.rs) of a CFS built by `cfs`.
    fn retime(c: &mut Cfs, rule: BalanceInterval, busy_factor: u32) {
        let rules = BalanceRules {
            newidle_doubles: true,
            overload_gate: true,
            idle_keeps_busy_deadline: false,
        };
        c.timing = BalanceTiming::new(&c.topo, rule, busy_factor, rules);
        c.idle = vec![PcpuBalance::new(c.migration_cost, &c.timing); c.np as usize];
    }

    /// attach_task → check_preempt_curr: a vCPU pulled onto a busy pCPU preempts the
    /// running one as a wakee would. vCPU 1, a long sleeper woken onto pCPU 0 (where
    /// vCPU 0 runs) with GENTLE_FAIR_SLEEPERS' credit, is pulled by busy pCPU 1 at its
    /// balance and, 12 ms of vruntime left of vCPU 2 there, preempts it.
    #[test]
    fn a_vcpu_pulled_onto_a_busy_pcpu_preempts_as_a_wakee() {
        const MS: u64 = 1_000_000;
        let mut c = cfs(2, &[256, 256, 256]);
        retime(&mut c, BalanceInterval::Fixed, 1);
        c.setup.vcpu_mask = vec![CpuMask::all(1), CpuMask::all(1), CpuMask::single(1)];
        // vCPU 1 runs a millisecond on pCPU 0 and sleeps; vCPUs 0 and 2 run on.
        assert_eq!(c.enqueue_wake(VcpuId(1), Nanos(0)).pcpu, PcpuId(0));
        c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        c.put_prev(PcpuId(0), VcpuId(1), StopReason::Blocked, Nanos(MS));
        assert_eq!(c.enqueue_wake(VcpuId(0), Nanos(MS)).pcpu, PcpuId(0));
        c.pick_next(PcpuId(0), Nanos(MS)).unwrap();
        assert_eq!(c.enqueue_wake(VcpuId(2), Nanos(MS)).pcpu, PcpuId(1));
        c.pick_next(PcpuId(1), Nanos(MS)).unwrap();
        let t = 100 * MS;
        assert_eq!(c.enqueue_wake(VcpuId(1), Nanos(t)).pcpu, PcpuId(0));
        c.setup.vcpu_mask[1] = CpuMask::all(2);
        assert!(c.tick(PcpuId(1), Nanos(t + 4 * MS)), "vCPU 2 is preempted");
        assert_eq!((c.nr[0], c.nr[1]), (1, 2));
    }

    /// load_balance's redo: when every vCPU queued on the busiest runqueue is pinned
    /// away, the next busiest is tried. pCPU 0 holds three vCPUs pinned to it, pCPU 1
    /// two with one free to move; pCPU 2, going idle, takes that one.
    #[test]
    fn a_balance_passes_over_a_runqueue_whose_vcpus_are_all_pinned() {
        let mut c = cfs(3, &[256; 5]);
        c.setup.vcpu_mask = [0, 0, 0, 1, 1].map(CpuMask::single).to_vec();
        for v in 0..5 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        c.pick_next(PcpuId(1), Nanos(0)).unwrap();
        assert_eq!((c.nr[0], c.nr[1]), (3, 2));
        c.setup.vcpu_mask[4] = CpuMask::all(3);
        let picked = c.pick_next(PcpuId(2), Nanos(1_000)).map(|(v, _)| v);
        assert_eq!(picked, Some(VcpuId(4)));
    }

    /// Active balance (3.x): pCPU 0 runs vCPU 0, free to run anywhere, with vCPU 1
    /// pinned to it queued behind; idle pCPU 1's periodic balances fail (the queued
    /// vCPU is pinned away, the running one clears LBF_ALL_PINNED), and the fourth
    /// failure in a row (more than cache_nice_tries 1 + 2) stops pCPU 0's vCPU and
    /// moves it to pCPU 1.
    #[test]
    fn an_idle_pcpu_takes_a_running_vcpu_after_four_failed_balances() {
        const MS: u64 = 1_000_000;
        let mut c = cfs(2, &[256, 256]);
        retime(&mut c, BalanceInterval::Fixed, 1);
        c.setup.vcpu_mask = vec![CpuMask::single(0); 2];
        c.enqueue_wake(VcpuId(0), Nanos(0));
        c.enqueue_wake(VcpuId(1), Nanos(0));
        assert_eq!(c.pick_next(PcpuId(0), Nanos(0)).unwrap().0, VcpuId(0));
        c.setup.vcpu_mask[0] = CpuMask::all(2);
        let mut out = Vec::new();
        let mut t = 0;
        while out.is_empty() && t < 100 * MS {
            t += MS;
            c.tick(PcpuId(1), Nanos(t));
            c.drain_resched(&mut out);
        }
        assert_eq!(out, [PcpuId(0)], "pCPU 0 is stopped");
        assert!(t > 3 * MS, "not before the fourth failure ({t} ns)");
        out.clear();
        c.put_prev(PcpuId(0), VcpuId(0), StopReason::Preempted, Nanos(t));
        c.drain_resched(&mut out);
        assert_eq!(out, [PcpuId(1)]);
        assert_eq!((c.nr[0], c.nr[1]), (1, 1));
        assert_eq!(c.pick_next(PcpuId(1), Nanos(t)).unwrap().0, VcpuId(0));
    }

    /// find_busiest_group's out_balanced: a busiest pCPU within imbalance_pct of the
    /// local one is no imbalance, so its balances do not fail and nothing turns active.
    /// pCPU 0 runs two vCPUs of loads 1,024 and 128, pCPU 1 one of 1,024: 1,152 is not
    /// beyond 117% of 1,024 (the LLC's imbalance_pct from 3.16), and in 100 balances
    /// nothing moves or is stopped.
    #[test]
    fn a_gap_within_imbalance_pct_is_balanced_not_a_failure() {
        const MS: u64 = 1_000_000;
        let mut c = cfs(2, &[256, 256, 32]);
        retime(&mut c, BalanceInterval::Fixed, 1);
        c.setup.vcpu_mask = [0, 1, 0].map(CpuMask::single).to_vec();
        for v in 0..3 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        c.pick_next(PcpuId(0), Nanos(0)).unwrap();
        c.pick_next(PcpuId(1), Nanos(0)).unwrap();
        c.setup.vcpu_mask = vec![CpuMask::all(2); 3];
        let mut out = Vec::new();
        for k in 1..=100 {
            c.tick(PcpuId(1), Nanos(k * MS));
            c.drain_resched(&mut out);
        }
        assert!(
            out.is_empty(),
            "reschedules {out:?} loads {} {}",
            c.load(0),
            c.load(1)
        );
        assert_eq!((c.nr[0], c.nr[1]), (2, 1));
    }

    /// rebalance_domains: a busy pCPU balances `balance_busy_factor` times less often
    /// than an idle one. pCPU 0 runs one vCPU with two queued (never run: cold); busy
    /// pCPU 1 pulls one at its first tick after 1 ms (SD_MC_INIT) × the factor.
    #[test]
    fn a_busy_pcpu_balances_busy_factor_times_less_often() {
        for factor in [1u32, 32] {
            let mut c = cfs(2, &[256, 256, 256, 256]);
            retime(&mut c, BalanceInterval::Fixed, factor);
            c.setup.vcpu_mask = vec![CpuMask::all(1), CpuMask::all(1), CpuMask::all(1)];
            c.setup.vcpu_mask.push(CpuMask::all(2));
            for v in 0..3 {
                c.enqueue_wake(VcpuId(v), Nanos(0));
            }
            c.pick_next(PcpuId(0), Nanos(0)).unwrap();
            let w = c.enqueue_wake(VcpuId(3), Nanos(0));
            assert_eq!(w.pcpu, PcpuId(1));
            c.pick_next(PcpuId(1), Nanos(0)).unwrap();
            c.setup.vcpu_mask = vec![CpuMask::all(2); 4];
            let first_pull = (1..100u64)
                .map(|k| k * 4_000_000)
                .find(|&t| {
                    c.tick(PcpuId(1), Nanos(t));
                    c.nr[1] == 2
                })
                .expect("it pulls");
            let due = (1_000_000 * factor as u64).next_multiple_of(4_000_000);
            assert_eq!(first_pull, due, "factor {factor}");
        }
    }

    /// task_waking_fair (3.x) / migrate_task_rq_fair (4.x-6.5): a sleeper woken onto
    /// another pCPU is placed by its vruntime against its old queue's min_vruntime as
    /// it is at the wake-up. vCPU 0 sleeps 100 ms while vCPU 1 runs on its pCPU; woken
    /// onto the idle pCPU it gets the full sleeper credit there, as it would at home —
    /// not the lag it had when it blocked (none: it ran alone).
    #[test]
    fn a_sleeper_moving_on_wake_up_keeps_its_credit_against_its_old_queue_now() {
        let mut c = cfs(2, &[256, 256]);
        let home = c.enqueue_wake(VcpuId(0), Nanos(0)).pcpu;
        c.pick_next(home, Nanos(0)).unwrap();
        c.put_prev(home, VcpuId(0), StopReason::Blocked, Nanos(5_000_000));
        assert_eq!(c.enqueue_wake(VcpuId(1), Nanos(5_000_000)).pcpu, home);
        c.pick_next(home, Nanos(5_000_000)).unwrap();
        c.tick(home, Nanos(105_000_000));
        let w = c.enqueue_wake(VcpuId(0), Nanos(105_000_000));
        assert_ne!(w.pcpu, home, "its own pCPU is busy, the other idle");
        let there = c.rqs[w.pcpu.idx()].min_vr;
        assert_eq!(c.ent[0].vruntime, there - c.latency / 2);
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
        let curr = c.running[tp.idx()].expect("something runs there");
        c.put_prev(tp, curr, StopReason::Preempted, Nanos(20));
        assert_eq!(c.pick_next(tp, Nanos(20)).map(|x| x.0), Some(VcpuId(2)));
    }

    /// pick_next_entity (Linux 3.2-6.5): a next buddy too far right of the leftmost
    /// loses the pick but stays set, and wins a later pick once it is close enough; the
    /// hint goes when its entity is picked.
    #[test]
    fn a_next_buddy_that_loses_a_pick_stays_until_picked() {
        let mut c = cfs(1, &[256, 256, 256]);
        for v in 0..3 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        // vCPU 2 far right (20 ms of vruntime) and the next buddy.
        c.ent[2].vruntime += 20_000_000;
        c.rqs[0].left.set(None);
        c.rqs[0].next_buddy = Some(2);
        let (first, _) = c.pick_next(PcpuId(0), Nanos(0)).expect("a vCPU");
        assert_ne!(first, VcpuId(2), "too far right of the leftmost");
        assert_eq!(c.rqs[0].next_buddy, Some(2), "the hint stays");
        // Close enough now: the buddy wins over the leftmost.
        c.ent[2].vruntime -= 19_000_000;
        c.rqs[0].left.set(None);
        c.put_prev(PcpuId(0), first, StopReason::Preempted, Nanos(1_000));
        let (second, _) = c.pick_next(PcpuId(0), Nanos(1_000)).expect("a vCPU");
        assert_eq!(second, VcpuId(2));
        assert_eq!(c.rqs[0].next_buddy, None, "cleared once picked");
    }

    /// Skip buddy first, next buddy last: a yielder at the left gives way to the
    /// second-leftmost also while a next buddy is set that is too far right to win, and a
    /// next buddy close enough wins over both.
    #[test]
    fn the_skip_buddy_counts_whatever_the_next_buddy() {
        let mut c = cfs(1, &[256, 256, 256]);
        for v in 0..3 {
            c.enqueue_wake(VcpuId(v), Nanos(0));
        }
        c.ent[1].vruntime += 1_000;
        c.ent[2].vruntime += 20_000_000;
        c.rqs[0].left.set(None);
        c.rqs[0].skip_buddy = Some(0);
        c.rqs[0].next_buddy = Some(2);
        let (p, _) = c.pick_next(PcpuId(0), Nanos(0)).expect("a vCPU");
        assert_eq!(
            p,
            VcpuId(1),
            "the yielder's neighbour, the buddy being too far"
        );
        c.put_prev(PcpuId(0), p, StopReason::Preempted, Nanos(0));
        c.ent[2].vruntime -= 19_998_000;
        c.rqs[0].left.set(None);
        c.rqs[0].skip_buddy = Some(0);
        let (p, _) = c.pick_next(PcpuId(0), Nanos(0)).expect("a vCPU");
        assert_eq!(p, VcpuId(2), "the next buddy, close enough now");
    }

    /// From Linux 3.15 a vCPU picked again right after it was put back keeps its slice's
    /// start, so the tick still preempts it when the slice is up; before, the pick
    /// restarted it.
    #[test]
    fn a_repicked_vcpu_keeps_its_slice_from_linux_3_15() {
        for (keeps, preempted) in [(true, true), (false, false)] {
            let mut c = cfs(1, &[256, 256]);
            c.repick_keeps_slice = keeps;
            c.enqueue_wake(VcpuId(0), Nanos(0));
            c.enqueue_wake(VcpuId(1), Nanos(0));
            let (first, _) = c.pick_next(PcpuId(0), Nanos(0)).expect("a vCPU");
            // 10 ms in, it is put back and picked again at once (the other is far
            // right, so it wins the pick).
            let other = if first == VcpuId(0) { 1 } else { 0 };
            c.ent[other].vruntime += 20_000_000;
            c.rqs[0].left.set(None);
            c.put_prev(PcpuId(0), first, StopReason::Preempted, Nanos(10_000_000));
            let (again, _) = c.pick_next(PcpuId(0), Nanos(10_000_000)).expect("a vCPU");
            assert_eq!(again, first);
            // 14 ms in all: past the 12 ms ideal slice only counted from the first pick
            // (the other 4 ms of vruntime behind it, within a slice).
            c.ent[other].vruntime -= 10_000_000;
            c.rqs[0].left.set(None);
            assert_eq!(
                c.tick(PcpuId(0), Nanos(14_000_000)),
                preempted,
                "keeps {keeps}"
            );
        }
    }
}
