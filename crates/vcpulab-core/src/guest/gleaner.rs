//! Gleaner (Ding et al., USENIX ATC 2014) inside the simulated guest, built from guest mechanisms.
//!
//! Resource retention: each vCPU gets a *yielding thread* at SCHED_IDLE priority,
//! pinned to it. It runs only when no workload thread is runnable there, and loops on
//! `sched_yield()`. A yield that returns at once means nothing else is runnable; the
//! thread accumulates that idle time and, once it exceeds the timeout (the measured
//! cost of a halt/wake round trip), calls `nanosleep` so the vCPU halts and frees its
//! pCPU. The loop is one timed step per idle period (a segment of `timeout`), not one
//! event per yield: a yield that would find a runnable thread is the wake-up that
//! preempts the SCHED_IDLE thread at once.
//!
//! Consolidation: every interval the guest daemon measures the active vCPUs (times
//! and context switches of the workload and yielding threads), feeds the controller
//! of guest/consolidation.rs, and applies its decision by rewriting the workload's
//! cpuset (which migrates its threads). A deactivated vCPU's yielding thread parks
//! (blocks) so the vCPU halts; reactivation wakes it.

use crate::guest::balance::BalanceClock;
use crate::guest::consolidation::{Controller, Decision, Measurement, Thresholds, VcpuSample};
use crate::guest::thread::{Thread, ThreadState};
use crate::host::cpumask::CpuMask;
use crate::hv::vcpu::VCat;
use crate::metrics::series::Thinned;
use crate::scenario::{CostTable, GleanerConfig, GleanerMode};
use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, Rng, ThreadId, VcpuId, VmId};
use crate::workload::program::{Instr, Program};
use serde::Serialize;
use std::rc::Rc;

/// No vCPU: `set_cpuset` run by the guest daemon, not by a thread of the workload.
const NO_VCPU: VcpuId = VcpuId(u32::MAX);

/// Pure retention never sleeps; its yield loop is still cut into segments of this
/// length (an event granularity, not a behaviour).
const RETENTION_SEGMENT_NS: u64 = 10_000_000;

/// A pure-retention segment from `now`: it ends at the vCPU's next periodic balance if
/// that comes first.
fn retention_segment(now: Nanos, next_balance: Nanos) -> u64 {
    RETENTION_SEGMENT_NS.min(next_balance.0.saturating_sub(now.0).max(1))
}

/// What a halt/wake round trip costs the guest, as Gleaner measures it at start-up: the
/// NOHZ timer write and the HLT exit entering idle, the host's wake-up of the vCPU
/// thread, the entry with its vCPU switch and the timer write leaving idle
/// (hv/wake_path.rs). With the default cost table this is 26 us (26.9 us on the
/// Gleaner platform), near the difference between the published wake-up latencies of a
/// halted and a running target vCPU (37 - 17 us).
pub fn halt_wake_round_trip_ns(c: &CostTable) -> u64 {
    let timer_write = c.vmexit_ns + c.timer_write_ns;
    timer_write
        + c.vmexit_ns
        + c.wake_halted_ns
        + c.vmexit_ns
        + c.vcpu_switch_same_vm_ns
        + timer_write
}

/// Per-vCPU state of the yielding thread and the counters the controller reads.
#[derive(Clone, Debug, Default)]
pub struct YielderState {
    pub thread: Option<ThreadId>,
    /// A run of immediately returning yields is in progress.
    pub in_streak: bool,
    /// Blocked because the vCPU is deactivated.
    pub parked: bool,
    /// Idle periods begun on the yielding thread, its timeouts (nanosleeps), and
    /// context switches to workload threads.
    pub streaks: u64,
    pub sleeps: u64,
    pub work_switches: u64,
    /// When the current run of yields reaches the timeout (wall-clock time, as the
    /// thread reads the clock between yields).
    deadline: Nanos,
    /// Workload switches when it last went to sleep, and the current sleep doubling.
    switches_at_sleep: u64,
    backoff: u32,
    /// The vCPU's periodic load balance, which the yielding thread's vCPU runs instead
    /// of going idle (guest/balance.rs).
    balance: BalanceClock,
    /// Counter values at the last measurement: work ns, idle ns, idle periods,
    /// workload switches.
    snap: [u64; 4],
}

/// One controller interval, for the report's `gleaner` table.
#[derive(Clone, Debug, Serialize)]
pub struct GleanerRow {
    pub vm: String,
    pub t_ns: u64,
    pub active_vcpus: u32,
    pub total_util: f64,
    pub l_comp_ns: f64,
    pub g_comp_ns: f64,
    pub l_idle_ns: f64,
    pub rho: f64,
    pub eta: f64,
    pub decision: &'static str,
}

#[derive(Clone, Debug)]
pub struct GleanerVm {
    pub mode: GleanerMode,
    pub timeout_ns: u64,
    pub sleep_ns: u64,
    pub max_sleep_ns: u64,
    pub interval: Nanos,
    pub yielders: Vec<YielderState>,
    pub controller: Option<Controller>,
    /// One row per controller interval, bounded (thinned by halves so it spans the run).
    pub rows: Thinned<GleanerRow>,
    /// Controller intervals so far.
    pub intervals: u64,
    /// Active vCPUs now, the fewest seen, and their time integral (vCPU x ns).
    pub active: u32,
    pub min_active: u32,
    pub active_ns: f64,
    pub since: Nanos,
}

impl GleanerVm {
    pub fn new(
        g: &GleanerConfig,
        costs: &CostTable,
        nvcpus: u32,
        min_time_slice_ns: u64,
    ) -> Option<GleanerVm> {
        if g.mode == GleanerMode::Off {
            return None;
        }
        let timeout_ns = match g.timeout_us {
            Some(us) => (us * 1e3).round() as u64,
            None => halt_wake_round_trip_ns(costs),
        };
        let controller = (g.mode == GleanerMode::Gleaner)
            .then(|| Controller::new(Thresholds::from_config(g, min_time_slice_ns as f64), nvcpus));
        Some(GleanerVm {
            mode: g.mode,
            timeout_ns,
            sleep_ns: (g.sleep_us * 1e3).round().max(1.0) as u64,
            max_sleep_ns: (g.max_sleep_us * 1e3).round().max(1.0) as u64,
            interval: Nanos(((g.interval_ms * 1e6).round() as u64).max(1)),
            yielders: vec![YielderState::default(); nvcpus as usize],
            controller,
            rows: Thinned::default(),
            intervals: 0,
            active: nvcpus,
            min_active: nvcpus,
            active_ns: 0.0,
            since: Nanos::ZERO,
        })
    }

    /// Time-averaged active vCPUs up to `now`.
    pub fn mean_active(&self, now: Nanos) -> f64 {
        let total = self.active_ns + self.active as f64 * now.0.saturating_sub(self.since.0) as f64;
        if now.0 == 0 {
            self.active as f64
        } else {
            total / now.0 as f64
        }
    }

    fn set_active(&mut self, now: Nanos, active: u32) {
        self.active_ns += self.active as f64 * now.0.saturating_sub(self.since.0) as f64;
        self.since = now;
        self.active = active;
        self.min_active = self.min_active.min(active);
    }
}

/// The yielding thread's program: `loop { sched_yield() ... }`.
pub fn yielder_program() -> Rc<Program> {
    Rc::new(Program {
        code: vec![
            Instr::LoopStart {
                slot: 0,
                count: None,
                end: 3,
            },
            Instr::Retain,
            Instr::LoopEnd { slot: 0, start: 0 },
            Instr::Exit,
        ],
        loop_slots: 1,
        forever: true,
    })
}

/// A yielding thread for vCPU `vcpu` (index `index` in its VM).
pub fn yielder_thread(vm: VmId, vcpu: VcpuId, index: u32, rng: Rng) -> Thread {
    let mut th = Thread::new(
        vm,
        format!("gleaner-yield{index}"),
        yielder_program(),
        vcpu,
        rng,
    );
    th.idle_prio = true;
    th.yielder = true;
    th
}

impl World {
    fn vcpu_slot(&self, v: VcpuId) -> (usize, usize) {
        let vm = self.vcpus[v.idx()].vm.idx();
        (vm, (v.0 - self.vms[vm].first_vcpu) as usize)
    }

    fn normal_queued(&self, v: VcpuId) -> bool {
        self.vcpus[v.idx()]
            .rq
            .iter()
            .any(|t| !self.threads[t.idx()].idle_prio)
    }

    /// A thread becomes `v`'s current one (`fresh`: a context switch). Counts workload
    /// switches; a yielding thread switched in starts a new run of yields.
    pub(crate) fn gleaner_switch_in(&mut self, v: VcpuId, t: ThreadId, fresh: bool) {
        let yielder = self.threads[t.idx()].yielder;
        if yielder {
            // The yielder's own wake-ups (its sleep's timer) are not the workload's.
            self.threads[t.idx()].woken_at = None;
        }
        if !fresh {
            return;
        }
        let (vm, i) = self.vcpu_slot(v);
        let Some(g) = self.vms[vm].gleaner.as_mut() else {
            return;
        };
        if yielder {
            // Something else ran since its last yield: the streak starts over.
            g.yielders[i].in_streak = false;
            self.threads[t.idx()].remaining = Nanos::ZERO;
        } else {
            g.yielders[i].work_switches += 1;
        }
    }

    /// The yielding thread resumes at `t0`: its idle time is measured on the clock, so
    /// time its vCPU spent preempted counts, and the run of yields ends at the deadline.
    pub(crate) fn yielder_clip(&mut self, v: VcpuId, t: ThreadId, t0: Nanos) {
        let (vm, i) = self.vcpu_slot(v);
        let Some(g) = self.vms[vm].gleaner.as_ref() else {
            return;
        };
        let st = &g.yielders[i];
        if g.mode == GleanerMode::Retention || !st.in_streak {
            return;
        }
        let left = st.deadline.0.saturating_sub(t0.0);
        let th = &mut self.threads[t.idx()];
        th.remaining = Nanos(th.remaining.0.min(left));
    }

    /// One round of the yielding thread `t` on `v`. True when it left the vCPU (yielded
    /// to a runnable thread, slept or parked).
    pub(crate) fn yielder_step(&mut self, t: ThreadId, v: VcpuId) -> bool {
        let (vm, i) = self.vcpu_slot(v);
        let Some(g) = self.vms[vm].gleaner.as_ref() else {
            return false;
        };
        let (mode, timeout, sleep, max_sleep) = (g.mode, g.timeout_ns, g.sleep_ns, g.max_sleep_ns);
        if mode == GleanerMode::Gleaner && !self.vms[vm].cpuset.contains(i as u32) {
            // Deactivated: block until the controller needs this vCPU again.
            if let Some(g) = self.vms[vm].gleaner.as_mut() {
                g.yielders[i].parked = true;
                g.yielders[i].in_streak = false;
            }
            let syscall = self.costs.syscall_ns;
            let th = &mut self.threads[t.idx()];
            th.state = ThreadState::Blocked;
            th.debt += Nanos(syscall);
            self.trace_thread_end(v);
            return true;
        }
        if !self.normal_queued(v) {
            // The yield itself does not balance (the yielder is on the runqueue, so
            // schedule() runs no newidle balance); the tick's periodic balance may be due.
            if let Some(mut clock) = self.vms[vm].gleaner.as_ref().map(|g| g.yielders[i].balance) {
                self.periodic_balance(v, &mut clock);
                if let Some(g) = self.vms[vm].gleaner.as_mut() {
                    g.yielders[i].balance = clock;
                }
            }
        }
        if self.normal_queued(v) {
            // sched_yield finds a runnable thread: it runs, the yielder queues behind.
            let syscall = self.costs.syscall_ns;
            self.threads[t.idx()].debt += Nanos(syscall);
            self.yield_behind_queued(v, t);
            if let Some(g) = self.vms[vm].gleaner.as_mut() {
                g.yielders[i].in_streak = false;
            }
            self.guest_preempt(v, t);
            return true;
        }
        let Some(g) = self.vms[vm].gleaner.as_mut() else {
            return false;
        };
        let st = &mut g.yielders[i];
        let th = &mut self.threads[t.idx()];
        th.in_kernel = false;
        th.in_exit = false;
        if !st.in_streak {
            // Yields start returning at once: an idle period begins.
            st.in_streak = true;
            st.streaks += 1;
            st.deadline = self.now + Nanos(timeout.max(1));
            th.remaining = Nanos(if mode == GleanerMode::Retention {
                retention_segment(self.now, st.balance.next)
            } else {
                timeout.max(1)
            });
            return false;
        }
        if mode == GleanerMode::Retention {
            th.remaining = Nanos(retention_segment(self.now, st.balance.next));
            return false;
        }
        // The idle time passed the timeout: nanosleep, and the vCPU halts. A vCPU that
        // ran no workload thread since the last sleep sleeps twice as long (its timer
        // wake-ups would otherwise preempt other vCPUs on the host for nothing).
        st.in_streak = false;
        if st.sleeps > 0 && st.work_switches == st.switches_at_sleep {
            st.backoff = (st.backoff + 1).min(40);
        } else {
            st.backoff = 0;
        }
        st.sleeps += 1;
        st.switches_at_sleep = st.work_switches;
        let dur = sleep.saturating_mul(1u64 << st.backoff).min(max_sleep);
        let slack = self.vms[vm].guest.timer_slack;
        self.block_with_timer(t, v, Ev::ThreadTimer(t, 0), dur + slack);
        true
    }

    /// The controller's periodic measurement of VM `vm` and its decision.
    pub(crate) fn on_gleaner_tick(&mut self, vm: VmId) {
        let now = self.now;
        let m = vm.idx();
        let (first, n) = (self.vms[m].first_vcpu, self.vms[m].nvcpus);
        let cpuset = self.vms[m].cpuset;
        let Some(mut g) = self.vms[m].gleaner.take() else {
            return;
        };
        let mut samples = Vec::with_capacity(n as usize);
        for i in 0..n {
            let vc = &mut self.vcpus[(first + i) as usize];
            vc.charge(now);
            let t = &vc.time;
            let work = t[VCat::User as usize] + t[VCat::Kernel as usize] + t[VCat::Spin as usize];
            let idle = t[VCat::IdlePoll as usize] + t[VCat::Halted as usize];
            let st = &mut g.yielders[i as usize];
            // Idle periods: runs of yields, plus halts not caused by a yielder's sleep.
            let periods = (st.streaks + vc.halts).saturating_sub(st.sleeps);
            let cur = [work, idle, periods, st.work_switches];
            // (A sleep that ended without a halt makes the period count step back.)
            let d: Vec<u64> = cur
                .iter()
                .zip(st.snap)
                .map(|(c, s)| c.saturating_sub(s))
                .collect();
            st.snap = cur;
            if cpuset.contains(i) {
                samples.push(VcpuSample {
                    work_ns: d[0],
                    idle_ns: d[1],
                    idle_periods: d[2],
                    work_switches: d[3],
                });
            }
        }
        let measurement = Measurement::from_samples(&samples);
        let decision = match g.controller.as_mut() {
            Some(c) => c.step(measurement.clone()),
            None => Decision::Keep,
        };
        let (rho, eta) = g
            .controller
            .as_ref()
            .map_or((f64::NAN, f64::NAN), |c| (c.rho, c.eta));
        let mm = measurement.as_ref();
        let index = g.intervals;
        g.intervals += 1;
        if g.rows.wants(index) {
            let row = GleanerRow {
                vm: self.vms[m].name.clone(),
                t_ns: now.0,
                active_vcpus: samples.len() as u32,
                total_util: mm.map_or(0.0, |x| x.total_util),
                l_comp_ns: mm.map_or(f64::NAN, |x| x.l_comp),
                g_comp_ns: mm.map_or(f64::NAN, |x| x.g_comp),
                l_idle_ns: mm.map_or(f64::NAN, |x| x.l_idle),
                rho,
                eta,
                decision: match decision {
                    Decision::Keep => "keep",
                    Decision::Deactivate => "deactivate",
                    Decision::Restore => "restore",
                    Decision::ReactivateAll => "reactivate-all",
                },
            };
            g.rows.offer(index, row);
        }
        let interval = g.interval;
        self.vms[m].gleaner = Some(g);
        let full = CpuMask::all(n);
        let active = cpuset.and(full);
        match decision {
            Decision::Keep => {}
            Decision::Deactivate if active.count() > 1 => {
                // The highest-numbered active vCPU leaves.
                let mut fewer = active;
                if let Some(last) = active.last() {
                    fewer.remove(last);
                }
                self.gleaner_set_cpuset(m, fewer);
            }
            Decision::Restore if active != full => {
                // The lowest-numbered inactive vCPU comes back.
                let mut more = active;
                if let Some(next) = (0..n).find(|&i| !active.contains(i)) {
                    more.insert(next);
                }
                self.gleaner_set_cpuset(m, more);
            }
            Decision::Deactivate | Decision::Restore => {}
            Decision::ReactivateAll => self.gleaner_set_cpuset(m, full),
        }
        if self.vms[m].completion.is_none() {
            self.q.push(now + interval, Ev::GleanerTick(vm));
        }
    }

    /// Applies a new workload cpuset: threads leave deactivated vCPUs, those vCPUs'
    /// yielding threads park, newly active vCPUs' yielding threads wake up.
    fn gleaner_set_cpuset(&mut self, vm: usize, mask: CpuMask) {
        let now = self.now;
        self.set_cpuset(vm, mask, NO_VCPU);
        let (first, n) = (self.vms[vm].first_vcpu, self.vms[vm].nvcpus);
        if let Some(g) = self.vms[vm].gleaner.as_mut() {
            g.set_active(now, mask.count());
        }
        for i in 0..n {
            let v = VcpuId(first + i);
            let Some(y) = self.vms[vm]
                .gleaner
                .as_ref()
                .and_then(|g| g.yielders[i as usize].thread)
            else {
                continue;
            };
            let allowed = mask.contains(i);
            let running = self.vcpus[v.idx()].is_running();
            let cur_is_yielder = self.vcpus[v.idx()].cur == Some(y);
            if !allowed {
                if running && cur_is_yielder {
                    // End its current run of yields now: its next round parks it.
                    self.sync_progress(v);
                    self.threads[y.idx()].remaining = Nanos::ZERO;
                    self.vcpu_continue(v);
                }
                continue;
            }
            let parked = self.vms[vm]
                .gleaner
                .as_ref()
                .is_some_and(|g| g.yielders[i as usize].parked);
            if parked && self.threads[y.idx()].state == ThreadState::Blocked {
                if let Some(g) = self.vms[vm].gleaner.as_mut() {
                    g.yielders[i as usize].parked = false;
                }
                self.threads[y.idx()].state = ThreadState::Runnable;
                self.rq_push(v, y);
                self.kick_vcpu(v, None);
            } else if running && cur_is_yielder && self.normal_queued(v) {
                // A thread migrated here: the SCHED_IDLE yielder gives way at once.
                self.sync_progress(v);
                self.guest_preempt(v, y);
                self.vcpu_continue(v);
            }
        }
    }

    /// Creates the yielding threads' bookkeeping (the threads themselves exist already)
    /// and the first controller tick.
    pub(crate) fn gleaner_start(&mut self) {
        for m in 0..self.vms.len() {
            let Some(g) = self.vms[m].gleaner.as_ref() else {
                continue;
            };
            if g.controller.is_some() {
                let at = g.interval;
                self.q.push(at, Ev::GleanerTick(VmId(m as u32)));
            }
        }
    }
}
