//! Host vCPU schedulers behind one trait. The simulator core does the mechanics
//! (switching, accounting, timers); a scheduler only decides: where a waking vCPU is
//! queued and whether it preempts, which vCPU a pCPU runs next and for how long, and
//! what its periodic ticks change.

mod active_balance;
mod balance;
pub mod cfs;
pub mod credit;
pub mod credit2;
pub mod eevdf;
pub mod gang;
mod groups;
mod pelt;
pub mod relaxed;
pub mod wake_affine;

use crate::host::cpumask::CpuMask;
use crate::sim::{Nanos, PcpuId, VcpuId, VmId};

/// Why a running vCPU stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Preempted while runnable: requeue it.
    Preempted,
    /// Gave up the pCPU voluntarily while runnable (sched_yield / PLE yield).
    Yielded,
    /// Blocked (halted): do not requeue.
    Blocked,
}

/// pCPUs per last-level cache on a Linux host unless `host.scheduler.llc_pcpus` says
/// otherwise (a server CPU's LLC, or an LLC's worth): the scope of wake-up placement's
/// idle search (`select_idle_sibling()` scans the LLC domain of its target,
/// kernel/sched/fair.c) and the host EEVDF's balancing domain. Hosts of at most this
/// many pCPUs are one LLC.
pub const DEFAULT_LLC_PCPUS: u32 = 16;

/// Where a waking vCPU was queued, and whether that pCPU must reschedule now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakePlacement {
    pub pcpu: PcpuId,
    pub preempt: bool,
}

/// Static facts a scheduler is built from.
#[derive(Clone, Debug)]
pub struct SchedSetup {
    pub pcpus: u32,
    /// SMT threads per core and NUMA nodes (host/topology.rs); the LLC is the
    /// scheduler's own parameter.
    pub threads_per_core: u32,
    pub numa_nodes: u32,
    /// Per vCPU: its VM and its allowed pCPUs.
    pub vcpu_vm: Vec<VmId>,
    pub vcpu_mask: Vec<CpuMask>,
    /// Per VM: weight (Xen units, default 256) and cap (percent of one pCPU).
    pub vm_weight: Vec<u32>,
    pub vm_cap: Vec<Option<f64>>,
}

pub trait HostScheduler {
    fn name(&self) -> &'static str;

    /// Period of the per-pCPU tick, if the scheduler has one.
    fn tick_period(&self) -> Option<Nanos>;

    /// Whether every pCPU's tick fires at the same instants (Linux: each CPU's
    /// sched_timer expires on the jiffy grid, tick_setup_sched_timer, unless booted
    /// with skew_tick=1), so that the order of one instant's ticks is a race; otherwise
    /// the ticks are spread over the period (per-CPU timers started as each CPU came
    /// up).
    fn ticks_aligned(&self) -> bool {
        false
    }

    /// Period of the scheduler-wide accounting, if any.
    fn global_period(&self) -> Option<Nanos>;

    /// `v` becomes runnable (initially, or woken from halt): queue it.
    fn enqueue_wake(&mut self, v: VcpuId, now: Nanos) -> WakePlacement;

    /// As `enqueue_wake`, for a wake-up another vCPU's exit did (an IPI or a pv kick
    /// from `waker`): Linux's schedulers may queue `v` beside its waker
    /// (hv/sched/wake_affine.rs); the others ignore who woke it.
    fn enqueue_wake_by(
        &mut self,
        v: VcpuId,
        _waker: Option<wake_affine::Waker>,
        now: Nanos,
    ) -> WakePlacement {
        self.enqueue_wake(v, now)
    }

    /// The running `v` on `p` stops.
    fn put_prev(&mut self, p: PcpuId, v: VcpuId, why: StopReason, now: Nanos);

    /// The vCPU `p` runs next (taken off its queue) and how long before the core must
    /// ask again (None: until a tick or a wake-up decides).
    fn pick_next(&mut self, p: PcpuId, now: Nanos) -> Option<(VcpuId, Option<Nanos>)>;

    /// Periodic tick on `p`; true when `p` must reschedule.
    fn tick(&mut self, p: PcpuId, now: Nanos) -> bool;

    /// Scheduler-wide accounting; pushes the pCPUs that must reschedule.
    fn global_tick(&mut self, now: Nanos, resched: &mut Vec<PcpuId>);

    /// Queued (runnable, not running) vCPUs on `p`.
    fn queued_on(&self, p: PcpuId) -> usize;

    /// Directed yield (CFS `yield_to`): `from`, running on `p`, gives way to the queued
    /// `to`. Returns the pCPU whose queue holds `to` (to be rescheduled) on success.
    fn yield_to(&mut self, _p: PcpuId, _from: VcpuId, _to: VcpuId, _now: Nanos) -> Option<PcpuId> {
        None
    }

    /// Whether a directed yield from `p` to `to` fails with -ESRCH: yield_to() in
    /// kernel/sched/core.c returns it when both runqueues hold a single task, the only
    /// failure kvm_vcpu_on_spin counts against its three tries (others return 0).
    fn yield_to_esrch(&self, _p: PcpuId, _to: VcpuId) -> bool {
        false
    }

    /// Where `v` is queued or last ran (its runqueue).
    fn home_of(&self, v: VcpuId) -> PcpuId;

    /// Co-scheduling: the queued `v` is the next vCPU `p` runs, whatever its priority
    /// (the core then reschedules `p`). False when the scheduler cannot do it.
    fn run_next(&mut self, _p: PcpuId, _v: VcpuId) -> bool {
        false
    }

    /// Yield-to-head / yield-to-tail: the queued `v` moves to the head (or the tail)
    /// of its runqueue, whatever its priority. False when `v` is not queued or the
    /// scheduler cannot.
    fn requeue(&mut self, _v: VcpuId, _head: bool) -> bool {
        false
    }

    /// An idle pCPU the last `enqueue_wake` tickled besides the pCPU it queued the vCPU
    /// on (Xen credit's `__runq_tickle`: the idle pCPU then steals queued work), which
    /// the core wakes as it would the woken vCPU's own.
    fn take_wake_tickle(&mut self) -> Option<PcpuId> {
        None
    }

    /// Whether the last `enqueue_wake_by` chose the waker's side (an affine wake-up).
    fn take_affine(&mut self) -> bool {
        false
    }

    /// pCPUs the scheduler itself decided must pick again now (a gang starts or ends,
    /// a co-stopped vCPU is released); drained by the core after each decision.
    fn drain_resched(&mut self, _out: &mut Vec<PcpuId>) {}

    /// Whether the pCPUs returned by `drain_resched` other than the deciding one learn
    /// of it by a reschedule IPI (and pick again after the host's IPI latency). Strict
    /// co-scheduling says no: a gang's start and stop are one decision applied on all
    /// of its pCPUs at the boundary (their slice timers fire together), and its planner
    /// would otherwise see a gang half stopped.
    fn resched_by_ipi(&self) -> bool {
        true
    }

    /// How far ahead of its fair share `v` has run, in nanoseconds of CPU time
    /// (negative: behind). Urgent-vCPU-first's allowance is measured against it.
    fn lead_ns(&self, _v: VcpuId) -> i64 {
        0
    }
}

pub fn build(cfg: &crate::scenario::SchedulerConfig, setup: SchedSetup) -> Box<dyn HostScheduler> {
    match cfg {
        crate::scenario::SchedulerConfig::Cfs(p) => Box::new(cfs::Cfs::new(p, setup)),
        crate::scenario::SchedulerConfig::Eevdf(p) => Box::new(eevdf::Eevdf::new(p, setup)),
        crate::scenario::SchedulerConfig::Credit(p) => Box::new(credit::Credit::new(p, setup)),
        crate::scenario::SchedulerConfig::Credit2(p) => Box::new(credit2::Credit2::new(p, setup)),
        crate::scenario::SchedulerConfig::Gang(p) => Box::new(gang::Gang::new(p, setup)),
        crate::scenario::SchedulerConfig::RelaxedCo(p) => {
            Box::new(relaxed::RelaxedCo::new(p, setup))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{CfsParams, EevdfParams};

    type Make = dyn Fn(SchedSetup, u32) -> Box<dyn HostScheduler>;

    /// Two LLCs of `llc` pCPUs each. vCPU 0 may run anywhere and last ran on pCPU 0;
    /// vCPUs 1..=`busy` are pinned one per pCPU of the first LLC and running. Returns
    /// where vCPU 0 is queued when it wakes again.
    fn wake_beside_a_busy_llc(make: &Make, llc: u32, busy: u32) -> u32 {
        let pcpus = 2 * llc;
        let mut vcpu_mask = vec![CpuMask::all(pcpus)];
        for k in 0..busy {
            let mut m = CpuMask::default();
            m.insert(k);
            vcpu_mask.push(m);
        }
        let n = vcpu_mask.len();
        let setup = SchedSetup {
            pcpus,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_vm: (0..n as u32).map(VmId).collect(),
            vcpu_mask,
            vm_weight: vec![256; n],
            vm_cap: vec![None; n],
        };
        let mut s = make(setup, llc);
        let ms = |m: u64| Nanos(m * 1_000_000);
        let first = s.enqueue_wake(VcpuId(0), ms(0)).pcpu;
        assert_eq!(first, PcpuId(0));
        assert_eq!(s.pick_next(first, ms(0)).map(|r| r.0), Some(VcpuId(0)));
        s.put_prev(first, VcpuId(0), StopReason::Blocked, ms(1));
        for v in 1..=busy {
            let p = s.enqueue_wake(VcpuId(v), ms(1)).pcpu;
            assert_eq!(p, PcpuId(v - 1));
            assert_eq!(s.pick_next(p, ms(1)).map(|r| r.0), Some(VcpuId(v)));
        }
        s.enqueue_wake(VcpuId(0), ms(2)).pcpu.0
    }

    /// select_idle_sibling() searches the previous pCPU's last-level cache only: with
    /// that LLC busy, a waking vCPU stays there (load balancing moves it later) although
    /// the other LLC is idle; with one pCPU of it idle, it goes there. For the default
    /// LLC and for `llc_pcpus = 8`.
    #[test]
    fn wake_up_placement_searches_the_previous_llc_only() {
        let eevdf = |s: SchedSetup, llc: u32| -> Box<dyn HostScheduler> {
            let p = EevdfParams {
                llc_pcpus: llc,
                ..EevdfParams::default()
            };
            Box::new(eevdf::Eevdf::new(&p, s))
        };
        let cfs = |s: SchedSetup, llc: u32| -> Box<dyn HostScheduler> {
            let p = CfsParams {
                llc_pcpus: llc,
                ..CfsParams::default()
            };
            Box::new(cfs::Cfs::new(&p, s))
        };
        for (name, make) in [("eevdf", &eevdf as &Make), ("cfs", &cfs)] {
            for llc in [DEFAULT_LLC_PCPUS, 8] {
                let full = wake_beside_a_busy_llc(make, llc, llc);
                assert!(
                    full < llc,
                    "{name}, LLC {llc}: left its LLC for pCPU {full}"
                );
                let one_idle = wake_beside_a_busy_llc(make, llc, llc - 1);
                assert_eq!(one_idle, llc - 1, "{name}, LLC {llc}");
            }
        }
    }

    /// Two pCPUs, no idle one: vCPU 0 last ran on pCPU 0, which runs and queues
    /// `others` more vCPUs; its waker, vCPU 1, runs alone on pCPU 1. Returns where
    /// vCPU 0 is queued when vCPU 1 wakes it.
    fn woken_by_a_lone_waker(
        make: &dyn Fn(SchedSetup) -> Box<dyn HostScheduler>,
        others: u32,
    ) -> u32 {
        let pin = |p: u32| {
            let mut m = CpuMask::default();
            m.insert(p);
            m
        };
        let mut vcpu_mask = vec![CpuMask::all(2), pin(1)];
        vcpu_mask.extend((0..others).map(|_| pin(0)));
        let n = vcpu_mask.len();
        let setup = SchedSetup {
            pcpus: 2,
            threads_per_core: 1,
            numa_nodes: 1,
            vcpu_vm: vec![VmId(0); n],
            vcpu_mask,
            vm_weight: vec![256],
            vm_cap: vec![None],
        };
        let mut s = make(setup);
        let ms = |m: u64| Nanos(m * 1_000_000);
        assert_eq!(s.enqueue_wake(VcpuId(0), ms(0)).pcpu, PcpuId(0));
        assert_eq!(s.pick_next(PcpuId(0), ms(0)).map(|r| r.0), Some(VcpuId(0)));
        s.put_prev(PcpuId(0), VcpuId(0), StopReason::Blocked, ms(1));
        for v in 1..n as u32 {
            let p = s.enqueue_wake(VcpuId(v), ms(1)).pcpu;
            if s.queued_on(p) == 1 && v < 3 {
                s.pick_next(p, ms(1));
            }
        }
        let waker = wake_affine::Waker {
            vcpu: VcpuId(1),
            pcpu: PcpuId(1),
        };
        s.enqueue_wake_by(VcpuId(0), Some(waker), ms(2)).pcpu.0
    }

    /// wake_affine(): with no idle pCPU, a vCPU woken by a sibling goes to the waker's
    /// pCPU when that is enough lighter than its own (two others there against the
    /// waker alone), and stays with one other there; with the rule off, or woken by
    /// nobody, it stays. For CFS (3.2's and 4.14's rules) and EEVDF, without groups.
    #[test]
    fn a_vcpu_woken_by_a_sibling_joins_it_when_its_pcpu_is_lighter() {
        use wake_affine::WakeAffine;
        for rule in [
            WakeAffine::Linux3_2,
            WakeAffine::Linux3_16,
            WakeAffine::Linux4_14,
            WakeAffine::Off,
        ] {
            let cfs = move |s: SchedSetup| -> Box<dyn HostScheduler> {
                let p = CfsParams {
                    per_vm_groups: false,
                    wake_affine: rule,
                    ..CfsParams::default()
                };
                Box::new(cfs::Cfs::new(&p, s))
            };
            let eevdf = move |s: SchedSetup| -> Box<dyn HostScheduler> {
                let p = EevdfParams {
                    per_vm_groups: false,
                    wake_affine: rule,
                    ..EevdfParams::default()
                };
                Box::new(eevdf::Eevdf::new(&p, s))
            };
            for (name, make) in [
                ("cfs", &cfs as &dyn Fn(SchedSetup) -> Box<dyn HostScheduler>),
                ("eevdf", &eevdf),
            ] {
                let on = rule != WakeAffine::Off;
                assert_eq!(
                    woken_by_a_lone_waker(make, 2),
                    on as u32,
                    "{name} {rule:?}, two others"
                );
                assert_eq!(
                    woken_by_a_lone_waker(make, 1),
                    0,
                    "{name} {rule:?}, one other"
                );
            }
        }
    }
}
