//! The simulated world and its run loop: every entity in arenas addressed by typed ids,
//! one event queue, one clock. Mechanisms live in their own files as `impl World`
//! blocks (hv/dispatch.rs, guest/kernel.rs).

use super::rng::Stream;
use super::{EventQueue, Nanos, PcpuId, Rng, ThreadId, VcpuId, VmId};
use crate::guest::thread::{Thread, ThreadState};
use crate::host::cache::Footprint;
use crate::host::pcpu::Pcpu;
use crate::hv::sched::{self, HostScheduler, SchedSetup};
use crate::hv::vcpu::Vcpu;
use crate::hv::vm::{GuestParams, Vm};
use crate::metrics::trace::TraceSink;
use crate::scenario::{CostTable, IdleMode, Scenario, ScenarioError};

#[derive(Clone, Copy, Debug)]
pub enum Ev {
    /// A pCPU must pick again (wake-up preemption, idle pCPU given work).
    Resched(PcpuId),
    /// The slice the scheduler gave the running vCPU is over.
    SliceEnd(PcpuId, u32),
    /// The host scheduler's periodic per-pCPU tick.
    Tick(PcpuId),
    /// The host scheduler's periodic global accounting.
    GlobalTick,
    /// A running vCPU's current activity reaches its next point.
    Step(VcpuId, u32),
    /// A sleeping thread's timer expires.
    ThreadTimer(ThreadId, u32),
    /// The run's time limit.
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    AllFinished,
    Duration,
}

pub struct World {
    pub now: Nanos,
    pub q: EventQueue<Ev>,
    pub costs: CostTable,
    pub cache: Footprint,
    pub pcpus: Vec<Pcpu>,
    pub vms: Vec<Vm>,
    pub vcpus: Vec<Vcpu>,
    pub threads: Vec<Thread>,
    pub sched: Box<dyn HostScheduler>,
    pub trace: Option<Box<dyn TraceSink>>,
    pub events: u64,
    pub finite_left: u64,
    pub stop: Option<StopCause>,
    pub limit: Nanos,
    pub(crate) resched_buf: Vec<PcpuId>,
}

fn ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

impl World {
    /// Builds the world of a resolved scenario.
    pub fn new(sc: &Scenario) -> Result<World, ScenarioError> {
        let npcpu = sc.host.pcpus;
        let mut vms = Vec::new();
        let mut vcpus = Vec::new();
        let mut threads = Vec::new();
        for (vi, vc) in sc.vm.iter().enumerate() {
            let vm_id = VmId(vi as u32);
            let masks = crate::scenario::vcpu_masks(&vc.pin, vc.vcpus, npcpu)
                .map_err(|m| ScenarioError::new(format!("vm.{vi}.pin"), m))?;
            let w = crate::workload::build(&vc.workload, vc.vcpus).map_err(|e| {
                ScenarioError::new(format!("vm.{vi}.workload.{}", e.key), e.message)
            })?;
            let first = vcpus.len() as u32;
            for (i, m) in masks.into_iter().enumerate() {
                vcpus.push(Vcpu::new(vm_id, i as u32, m));
            }
            let g = &vc.guest;
            let mut finite = 0;
            let mut t_in_vm = 0u64;
            for grp in &w.groups {
                for k in 0..grp.threads {
                    let vcpu = VcpuId(first + (t_in_vm % vc.vcpus as u64) as u32);
                    let is_finite = !grp.program.forever;
                    finite += is_finite as u32;
                    threads.push(Thread {
                        vm: vm_id,
                        name: format!("{}{}", grp.name, k),
                        program: grp.program.clone(),
                        pc: 0,
                        loops: vec![0; grp.program.loop_slots as usize],
                        state: ThreadState::Runnable,
                        vcpu,
                        remaining: Nanos::ZERO,
                        in_kernel: false,
                        debt: Nanos::ZERO,
                        vruntime: 0,
                        slice_used: 0,
                        timer_gen: 0,
                        woken_at: None,
                        rng: Rng::stream(sc.seed, Stream::Thread, ((vi as u64) << 32) | t_in_vm),
                        finite: is_finite,
                    });
                    t_in_vm += 1;
                }
            }
            vms.push(Vm {
                name: vc.name.clone().unwrap_or_else(|| format!("vm{vi}")),
                weight: vc.weight,
                cap: vc.cap,
                first_vcpu: first,
                nvcpus: vc.vcpus,
                guest: GuestParams {
                    idle_poll: g.idle == IdleMode::Poll,
                    latency: ns(g.latency_ms),
                    min_gran: ns(g.min_granularity_ms),
                    wakeup_gran: ns(g.wakeup_granularity_ms),
                    timer_slack: (g.timer_slack_us * 1e3).round() as u64,
                },
                model: w.model.clone(),
                footprint_kib: w.footprint_kib,
                finite_threads: finite,
                finished_threads: 0,
                completion: None,
                units: 0,
                wake_latency: Default::default(),
                dispatch_wait: Default::default(),
            });
        }
        let setup = SchedSetup {
            pcpus: npcpu,
            vcpu_vm: vcpus.iter().map(|v| v.vm).collect(),
            vcpu_mask: vcpus.iter().map(|v| v.mask).collect(),
            vm_weight: vms.iter().map(|v| v.weight).collect(),
            vm_cap: vms.iter().map(|v| v.cap).collect(),
        };
        let finite_left = vms.iter().map(|v| v.finite_threads as u64).sum();
        Ok(World {
            now: Nanos::ZERO,
            q: EventQueue::new(),
            costs: sc.host.costs.clone(),
            cache: Footprint::new(&sc.host.cache),
            pcpus: (0..npcpu).map(|_| Pcpu::new()).collect(),
            vms,
            vcpus,
            threads,
            sched: sched::build(&sc.host.scheduler, setup),
            trace: None,
            events: 0,
            finite_left,
            stop: None,
            limit: sc.run.duration.0,
            resched_buf: Vec::new(),
        })
    }

    pub fn set_trace(&mut self, t: Box<dyn TraceSink>) {
        self.trace = Some(t);
    }

    fn start(&mut self) {
        // Threads start queued on their vCPUs; vCPUs with threads become runnable.
        for t in 0..self.threads.len() {
            let v = self.threads[t].vcpu;
            self.vcpus[v.idx()].rq.push(ThreadId(t as u32));
        }
        for v in 0..self.vcpus.len() {
            if !self.vcpus[v].rq.is_empty() {
                self.hv_wake_vcpu(VcpuId(v as u32), false);
            }
        }
        if let Some(p) = self.sched.tick_period() {
            for i in 0..self.pcpus.len() {
                // Stagger ticks across pCPUs as real timers are not aligned.
                let off = Nanos(p.0 * i as u64 / self.pcpus.len() as u64);
                self.q.push(p + off, Ev::Tick(PcpuId(i as u32)));
            }
        }
        if let Some(g) = self.sched.global_period() {
            self.q.push(g, Ev::GlobalTick);
        }
        self.q.push(self.limit, Ev::End);
        if self.finite_left == 0 {
            // Fixed-time run: nothing to finish.
        }
    }

    /// Runs to the end and returns why it stopped.
    pub fn run(&mut self) -> StopCause {
        self.start();
        while let Some((t, ev)) = self.q.pop() {
            self.now = t;
            let live = self.dispatch_event(ev);
            if live {
                self.events += 1;
            }
            if let Some(c) = self.stop {
                self.finish();
                return c;
            }
        }
        self.stop = Some(StopCause::Duration);
        self.finish();
        StopCause::Duration
    }

    /// Dispatches one event; false when it was stale (cancelled).
    #[inline]
    fn dispatch_event(&mut self, ev: Ev) -> bool {
        match ev {
            Ev::Step(v, gen) => {
                if self.vcpus[v.idx()].gen != gen {
                    return false;
                }
                self.on_step(v);
            }
            Ev::ThreadTimer(t, gen) => {
                if self.threads[t.idx()].timer_gen != gen {
                    return false;
                }
                self.on_thread_timer(t);
            }
            Ev::Resched(p) => {
                if self.pcpus[p.idx()].resched_at != self.now {
                    return false;
                }
                self.pcpus[p.idx()].resched_at = Nanos::MAX;
                self.resched(p);
            }
            Ev::SliceEnd(p, gen) => {
                if self.pcpus[p.idx()].timer_gen != gen {
                    return false;
                }
                self.resched(p);
            }
            Ev::Tick(p) => {
                if let Some(period) = self.sched.tick_period() {
                    self.q.push(self.now + period, Ev::Tick(p));
                }
                if self.sched.tick(p, self.now) {
                    self.resched(p);
                }
            }
            Ev::GlobalTick => {
                if let Some(period) = self.sched.global_period() {
                    self.q.push(self.now + period, Ev::GlobalTick);
                }
                let mut buf = std::mem::take(&mut self.resched_buf);
                buf.clear();
                self.sched.global_tick(self.now, &mut buf);
                for &p in &buf {
                    self.resched(p);
                }
                self.resched_buf = buf;
            }
            Ev::End => {
                self.stop = Some(StopCause::Duration);
            }
        }
        true
    }

    /// Closes the books at `now`: accounting and trace slices of whatever still runs.
    fn finish(&mut self) {
        let now = self.now;
        for p in 0..self.pcpus.len() {
            if let Some(v) = self.pcpus[p].cur {
                self.sync_progress(v);
                let start = self.pcpus[p].run_start;
                let entry = self.pcpus[p].entry_until;
                self.pcpus[p].book_run(now);
                self.trace_vcpu_run(PcpuId(p as u32), v, start, entry, now);
                self.trace_thread_end(v);
            }
        }
        for v in &mut self.vcpus {
            v.charge(now);
        }
        if let Some(t) = self.trace.as_mut() {
            t.finish();
        }
    }

    pub fn vcpu_label(&self, v: VcpuId) -> String {
        let vc = &self.vcpus[v.idx()];
        format!("{}/vcpu{}", self.vms[vc.vm.idx()].name, vc.index)
    }
}
