//! The guest's load balancing besides wake-up placement (kernel/sched/fair.c): the
//! newidle balance of a vCPU going idle and the nohz idle balance that busy vCPUs' ticks
//! start for idle ones (`GuestBalance`), and the periodic balance (scheduler_tick →
//! trigger_load_balance → rebalance_domains → load_balance): of vCPUs running workload
//! threads (`on_busy_balance`: without it, threads crowded on one vCPU while every
//! sibling is busy stay crowded, as no vCPU goes idle to pull them), and of vCPUs that
//! never go idle because a SCHED_IDLE thread runs there (Gleaner's yielding thread,
//! `periodic_balance`).
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

use crate::scenario::{BalanceInterval, GuestConfig};
use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, ThreadId, VcpuId, VmId};

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

/// rq->avg_idle after an idle period of `idle` ns, for a kernel whose migration cost is
/// `cost` (ttwu_do_wakeup: update_avg's 1/8 step, capped at twice the cost) — the
/// guest's vCPUs and a Linux host's pCPUs alike.
pub fn next_avg_idle(avg: u64, idle: u64, cost: u64) -> u64 {
    let max = 2 * cost;
    let avg = avg.min(max);
    if idle > max {
        max
    } else {
        (avg as i64 + (idle as i64 - avg as i64) / 8) as u64
    }
}

/// How a VM's guest balances its vCPUs' runqueues (besides wake-up placement), with its
/// kernel's settings (`guest.sched_idle_cpu`, `guest.balance_interval`,
/// `guest.balance_busy_factor`, `guest.migration_cost_us`,
/// `guest.newidle_avg_idle_gate`).
///
/// Periodic (a vCPU running only Gleaner's yielding thread, `periodic_balance`): every
/// domain interval, times the busy factor unless SCHED_IDLE CPUs count as idle.
///
/// Newidle (newidle_balance, idle_balance before 3.17; kernel/sched/fair.c): a vCPU
/// going idle pulls a queued thread, except a cache-hot one — one that ran within the
/// migration cost (`can_migrate_task` → task_hot; a newidle balance never counts a
/// failure, so never overrides it) — and, before Linux 5.16, not at all while the
/// vCPU's idle periods average less than that cost.
///
/// Nohz idle balance (nohz_balancer_kick → nohz_idle_balance): an idle vCPU halts
/// with its tick stopped; a busy vCPU whose tick finds threads queued while a vCPU idles
/// kicks an idle one, which balances on behalf of every idle vCPU, at the idle
/// vCPUs' next balance time (the domain's interval). Here: when a vCPU goes idle or a
/// thread is queued while threads wait and a vCPU idles, a balance of the VM's idle
/// vCPUs is armed one interval on, at a tick; each idle vCPU pulls one queued thread
/// (hot ones too: the periodic balance's failures soon override task_hot) and is
/// kicked awake.
#[derive(Clone, Copy, Debug)]
pub struct GuestBalance {
    /// A CPU running only SCHED_IDLE threads counts as idle (placement, balance interval).
    pub sched_idle_cpu: bool,
    pub busy_factor: u64,
    pub migration_cost: u64,
    pub avg_idle_gate: bool,
    /// The domain's least and greatest balance interval (ns).
    pub interval: u64,
    pub max_interval: u64,
    /// A nohz balance of the VM is armed (`Ev::NohzBalance`).
    pub pending: bool,
    /// vCPUs of the VM in the idle loop or halted (between idle entry and exit).
    pub idle_vcpus: u32,
    /// The busy vCPUs' periodic balance is armed (`Ev::BusyBalance`).
    pub busy_pending: bool,
    /// The earliest time a busy vCPU's periodic balance is due, as the last round left
    /// it (the next round is armed no earlier).
    pub busy_next: Nanos,
}

impl GuestBalance {
    pub fn of(g: &GuestConfig, vcpus: u32) -> GuestBalance {
        let (interval, max_interval) = domain_interval_ns(g.balance_interval, vcpus);
        GuestBalance {
            sched_idle_cpu: g.sched_idle_cpu,
            busy_factor: g.balance_busy_factor as u64,
            migration_cost: (g.migration_cost_us * 1e3).round() as u64,
            avg_idle_gate: g.newidle_avg_idle_gate,
            interval,
            max_interval,
            pending: false,
            // Every vCPU starts in the idle loop.
            idle_vcpus: vcpus,
            busy_pending: false,
            busy_next: Nanos::ZERO,
        }
    }

    /// rq->avg_idle after an idle period of `idle` ns (`next_avg_idle`).
    pub fn next_avg_idle(&self, avg: u64, idle: u64) -> u64 {
        next_avg_idle(avg, idle, self.migration_cost)
    }

    /// The time from one periodic balance to the next (rebalance_domains): the domain's
    /// interval, times `factor` on a CPU that is not idle, at most HZ × CPUs / 10
    /// jiffies (max_load_balance_interval: 100 ms per vCPU).
    pub fn period(&self, interval: u64, factor: u64, vcpus: u32) -> u64 {
        (interval * factor).min(100 * MS * vcpus.max(1) as u64)
    }

    /// Whether a vCPU whose average idle is `avg` runs its newidle balance.
    pub fn balances(&self, avg: u64) -> bool {
        !self.avg_idle_gate || avg.min(2 * self.migration_cost) >= self.migration_cost
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
    pub(crate) fn periodic_balance(&mut self, v: VcpuId, clock: &mut BalanceClock) -> bool {
        if self.now < clock.next {
            return false;
        }
        let pulled = self.guest_pull(v, false);
        let vmi = self.vcpus[v.idx()].vm.idx();
        let vm = &self.vms[vmi];
        let b = &vm.balance;
        clock.interval = if pulled || clock.interval == 0 {
            b.interval
        } else {
            (clock.interval * 2).min(b.max_interval)
        };
        let factor = if b.sched_idle_cpu { 1 } else { b.busy_factor };
        let period = b.period(clock.interval, factor, vm.nvcpus);
        clock.next = self.guest_tick_after(vmi, self.now + Nanos(period));
        pulled
    }

    /// Threads may wait on busy vCPUs of VM `vm` while another idles: arm its nohz
    /// balance if it is not armed.
    pub(crate) fn nohz_arm(&mut self, vm: usize) {
        #[cfg(test)]
        self.assert_idle_count(vm);
        let m = &self.vms[vm];
        let b = &m.balance;
        if b.pending || b.idle_vcpus == 0 || m.queued == 0 || !m.guest.load_balance {
            return;
        }
        let at = self.guest_tick_after(vm, self.now + Nanos(b.interval));
        self.vms[vm].balance.pending = true;
        self.q.push(at, Ev::NohzBalance(VmId(vm as u32)));
    }

    /// The nohz balance of VM `vm`: each idle vCPU of its cpuset pulls a queued thread
    /// from the busiest sibling and is kicked to run it. Armed again while threads
    /// wait and a vCPU idles.
    pub(crate) fn on_nohz_balance(&mut self, vm: VmId) {
        let m = vm.idx();
        #[cfg(test)]
        self.assert_idle_count(m);
        self.vms[m].balance.pending = false;
        let (first, n) = (self.vms[m].first_vcpu, self.vms[m].nvcpus);
        for i in 0..n {
            if self.vms[m].queued == 0 {
                break;
            }
            let v = VcpuId(first + i);
            let vc = &self.vcpus[v.idx()];
            if vc.cur.is_some() || !vc.rq.is_empty() || vc.idle_since == Nanos::MAX {
                continue;
            }
            if self.guest_pull(v, false) {
                self.kick_vcpu_for_work(v);
            }
        }
        // Armed again while threads wait and a vCPU idles, whether or not this round
        // moved any: on Linux a busy CPU's tick kicks the idle balance again once
        // nohz.next_balance (the idle CPUs' earliest due balance) has passed, so a round
        // that found no idle vCPU's balance due is not the last. (Re-armed only after a
        // move until 2026-11-29: a round that came before the idle vCPUs' balances were
        // due left the threads crowded for good.)
        self.nohz_arm(m);
    }

    /// Threads are queued in VM `vm`: arm its busy vCPUs' periodic balance if it is not
    /// armed, at the earliest balance time the last one left (`GuestBalance::busy_next`).
    #[inline]
    pub(crate) fn busy_arm(&mut self, vm: usize) {
        let m = &self.vms[vm];
        if m.balance.busy_pending || !m.guest.load_balance {
            return;
        }
        let at = m
            .balance
            .busy_next
            .max(self.guest_tick_after(vm, self.now + Nanos(1)));
        self.vms[vm].balance.busy_pending = true;
        self.q.push(at, Ev::BusyBalance(VmId(vm as u32)));
    }

    /// The periodic balance of VM `vm`'s busy vCPUs (scheduler_tick →
    /// trigger_load_balance → rebalance_domains → load_balance on a CPU that is not
    /// idle): each vCPU running a workload thread on its pCPU, when its balance is due,
    /// pulls queued threads from the sibling with the most runnable ones
    /// (`busy_pull`); its next balance comes an interval times the busy factor on,
    /// the interval reset after a balance that moved a thread and doubled (up to the
    /// domain's maximum) after one that did not. A vCPU the host has descheduled takes
    /// no tick and balances at a later round. Armed again while threads are queued.
    pub(crate) fn on_busy_balance(&mut self, vm: VmId) {
        let m = vm.idx();
        self.vms[m].balance.busy_pending = false;
        if self.vms[m].queued == 0 {
            // Re-armed by the next thread queued (`rq_push`).
            return;
        }
        let (first, n) = (self.vms[m].first_vcpu, self.vms[m].nvcpus);
        let b = self.vms[m].balance;
        let mut next = Nanos::MAX;
        for i in 0..n {
            let v = VcpuId(first + i);
            let vc = &self.vcpus[v.idx()];
            let Some(c) = vc.cur else {
                continue;
            };
            if !vc.is_running() || self.threads[c.idx()].idle_prio {
                // Not ticking, or a yielding vCPU (its own balance: `periodic_balance`).
                continue;
            }
            let mut clock = vc.busy_balance;
            if self.now >= clock.next {
                let pulled = self.busy_pull(v);
                clock.interval = if pulled || clock.interval == 0 {
                    b.interval
                } else {
                    (clock.interval * 2).min(b.max_interval)
                };
                let period = b.period(clock.interval, b.busy_factor, n);
                clock.next = self.guest_tick_after(m, self.now + Nanos(period));
                self.vcpus[v.idx()].busy_balance = clock;
            }
            next = next.min(clock.next);
        }
        if next == Nanos::MAX {
            next =
                self.guest_tick_after(m, self.now + Nanos(b.period(b.interval, b.busy_factor, n)));
        }
        self.vms[m].balance.busy_next = next;
        if self.vms[m].queued > 0 {
            self.busy_arm(m);
        }
    }

    /// Runnable threads on `v`, the current one included, SCHED_IDLE ones left out:
    /// the kernel weighs threads by load, and a SCHED_IDLE thread's (3) is next to
    /// nothing beside a nice-0 one's (load balancing and wake_affine count these).
    pub(crate) fn normal_runnable(&self, v: VcpuId) -> usize {
        let vc = &self.vcpus[v.idx()];
        let normal = |t: &ThreadId| !self.threads[t.idx()].idle_prio;
        vc.rq.iter().filter(|t| normal(t)).count() + vc.cur.iter().filter(|t| normal(t)).count()
    }

    /// load_balance() run by the busy `v` (calculate_imbalance and detach_tasks with
    /// nice-0 threads, the VM's one sched domain whose groups are single vCPUs): the
    /// sibling with the most runnable threads gives up queued ones while it holds at
    /// least two more than `v`, as many as take neither past the VM's average (at least
    /// one). Each moved thread is checked for wake-up preemption of `v`'s current one
    /// (attach_task → check_preempt_curr). True when a thread moved.
    fn busy_pull(&mut self, v: VcpuId) -> bool {
        let vm = self.vcpus[v.idx()].vm.idx();
        let m = &self.vms[vm];
        if !m.cpuset.contains(v.0 - m.first_vcpu) {
            return false;
        }
        let (first, n) = (m.first_vcpu, m.nvcpus);
        let allowed = (0..n).filter(|&i| m.cpuset.contains(i)).count();
        let total: usize = (0..n)
            .filter(|&i| m.cpuset.contains(i))
            .map(|i| self.normal_runnable(VcpuId(first + i)))
            .sum();
        let busiest = (first..first + n)
            .map(VcpuId)
            .filter(|&s| {
                s != v
                    && self.vcpus[s.idx()]
                        .rq
                        .iter()
                        .any(|t| !self.threads[t.idx()].idle_prio)
            })
            .max_by_key(|&s| (self.normal_runnable(s), std::cmp::Reverse(s.0)));
        let Some(s) = busiest else {
            return false;
        };
        let (this, most) = (self.normal_runnable(v), self.normal_runnable(s));
        if most < this + 2 {
            return false;
        }
        // Threads to move: the busiest's excess over the average or this vCPU's
        // shortfall, whichever is less (in threads × vCPUs, to stay in integers).
        let excess = (most * allowed).saturating_sub(total);
        let shortfall = total.saturating_sub(this * allowed);
        let want = (excess.min(shortfall) / allowed.max(1)).max(1);
        let mut moved = 0;
        self.sync_progress(v);
        while moved < want {
            let Some(i) = self.vcpus[s.idx()]
                .rq
                .iter()
                .position(|t| !self.threads[t.idx()].idle_prio)
            else {
                break;
            };
            let t = self.vcpus[s.idx()].rq.remove(i);
            self.move_thread(t, v);
            self.vcpus[v.idx()].rq.push(t);
            moved += 1;
            if let Some(c) = self.vcpus[v.idx()].cur {
                if self.wakeup_preempts(v, c, Some(t)) && self.resched_now(v, c, false) {
                    self.guest_preempt(v, c);
                }
            }
        }
        if moved > 0 {
            self.vcpu_continue(v);
        }
        moved > 0
    }

    /// `GuestBalance::idle_vcpus` counts the VM's vCPUs between idle entry and exit.
    #[cfg(test)]
    fn assert_idle_count(&self, vm: usize) {
        let m = &self.vms[vm];
        let idle = (m.first_vcpu..m.first_vcpu + m.nvcpus)
            .filter(|&i| self.vcpus[i as usize].idle_since != Nanos::MAX)
            .count() as u32;
        assert_eq!(idle, m.balance.idle_vcpus, "idle vCPUs of VM {vm}");
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

    /// The idle-vCPU count the nohz balance relies on stays exact (`assert_idle_count`
    /// runs at every arming and balance) through halts, polling, Gleaner's parking and
    /// cpuset changes.
    #[test]
    fn the_idle_vcpu_count_stays_exact() {
        let crowd = r#"
preset = "kvm-default"
[run]
duration = "50ms"
[host]
pcpus = 3
[[vm]]
vcpus = 4
guest = { idle = "haltpoll" }
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 5
ops = [{ cpuset = "0" }, { compute = "1ms" }, { cpuset = "0-3" }, { loop = { n = "forever", body = [{ compute = "exp(200us)" }, { sleep = "exp(100us)" }, { lock = "m" }, { compute = "5us" }, { unlock = "m" }, { count = 1 }] } }]
[[vm]]
vcpus = 2
workload = { model = "cpu-bomb" }
"#;
        let gleaner = r#"
preset = "kvm-default"
[run]
duration = "300ms"
[host]
pcpus = 8
[[vm]]
vcpus = 8
guest = { gleaner = { mode = "gleaner", interval_ms = 20 } }
workload = { model = "dedup", params = { forever = true } }
[[vm]]
vcpus = 8
workload = { model = "matmul", params = { forever = true } }
"#;
        for text in [crowd, gleaner] {
            let sc = crate::resolve(text, &[], None).expect("scenario resolves");
            let mut w = World::new(&sc).expect("world builds");
            w.run();
            assert!(w.events > 300, "the run did something: {}", w.events);
        }
    }

    /// Eight CPU-bound threads of a four-vCPU VM, all moved onto vCPU 0 by a cpuset
    /// and then let go (after 0.5 ms, within the first thread's first slice wherever
    /// the guest's ticks fall): the three idle vCPUs take one each (newidle and nohz balance)
    /// and are busy from then on, so only the busy vCPUs' periodic balance can move the
    /// four left crowded on vCPU 0 (5 / 1 / 1 / 1 runnable) — at the busy interval.
    #[test]
    fn busy_vcpus_even_out_a_crowded_sibling_at_their_periodic_balance() {
        let text = r#"
preset = "kvm-default"
seed = 1
[run]
duration = "DURATION"
[host]
pcpus = 4
[[vm]]
vcpus = 4
guest = { kernel = "KERNEL" }
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 1
ops = [{ cpuset = "0" }, { compute = "0.5ms" }, { cpuset = "0-3" }, { loop = { n = "forever", body = [{ compute = "1ms" }, { count = 1 }] } }]
[[vm.workload.group]]
threads = 7
ops = [{ loop = { n = "forever", body = [{ compute = "1ms" }, { count = 1 }] } }]
"#;
        // Today's guest (EEVDF; 4 vCPUs × 16 ms) and Linux 3.9's (CFS; 1 ms × 64): the
        // same busy interval, two runqueue models.
        for kernel in ["linux-6.6", "linux-3.9"] {
            let runnable = |duration: &str| {
                let text = text.replace("DURATION", duration).replace("KERNEL", kernel);
                let sc = crate::resolve(&text, &[], None).expect("scenario resolves");
                let mut w = World::new(&sc).expect("world builds");
                w.run();
                w.vcpus
                    .iter()
                    .map(|vc| vc.rq.len() + vc.cur.is_some() as usize)
                    .collect::<Vec<_>>()
            };
            let early = runnable("20ms");
            assert_eq!(early.iter().sum::<usize>(), 8);
            assert_eq!(
                early.iter().max(),
                Some(&5),
                "{kernel}: crowded at first: {early:?}"
            );
            let later = runnable("400ms");
            assert_eq!(later, vec![2, 2, 2, 2], "{kernel}: balanced by then");
        }
    }

    #[test]
    fn avg_idle_is_an_eighth_weighted_average_capped_at_twice_the_cost() {
        let g = GuestBalance {
            migration_cost: 500_000,
            avg_idle_gate: true,
            sched_idle_cpu: false,
            busy_factor: 64,
            interval: 1_000_000,
            max_interval: 4_000_000,
            pending: false,
            idle_vcpus: 0,
            busy_pending: false,
            busy_next: Nanos::ZERO,
        };
        // The first period starts from the cap (rq->avg_idle's initial value).
        assert_eq!(g.next_avg_idle(u64::MAX, 200_000), 1_000_000 - 100_000);
        assert_eq!(g.next_avg_idle(400_000, 5_000_000), 1_000_000);
        assert_eq!(g.next_avg_idle(400_000, 0), 350_000);
        assert!(g.balances(u64::MAX) && g.balances(500_000) && !g.balances(499_999));
        let open = GuestBalance {
            avg_idle_gate: false,
            ..g
        };
        assert!(open.balances(0));
    }
}
