//! The simulated world and its run loop: every entity in arenas addressed by typed ids,
//! one event queue, one clock. Mechanisms live in their own files as `impl World`
//! blocks (hv/dispatch.rs, guest/kernel.rs).

use super::rng::Stream;
use super::{EventQueue, Nanos, PcpuId, Rng, ThreadId, VcpuId, VmId};
use crate::guest::spinlock::{LockClass, SpinLock};
use crate::guest::sync::{Barrier, Cond, Dispenser, Flusher, Mutex, Queue, RwSem, Sem};
use crate::guest::thread::Thread;
use crate::host::cache::Footprint;
use crate::host::pcpu::Pcpu;
use crate::host::tlb::Tlb;
use crate::hv::ple::{self, PleWindow};
use crate::hv::preemption::PreemptCause;
use crate::hv::sched::{self, HostScheduler, SchedSetup};
use crate::hv::vcpu::Vcpu;
use crate::hv::vm::Vm;
use crate::metrics::trace::TraceSink;
use crate::scenario::{CostTable, HaltPollConfig, PleAction, Scenario, ScenarioError};
use crate::sim::build::{self, SyncArenas};
use crate::sim::LockId;

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
    /// An IPI reaches its target vCPU.
    IpiArrive(VcpuId, crate::guest::ipi::IpiMsg),
    /// A TLB-shootdown target acknowledged (sender, generation).
    TlbAck(ThreadId, u32),
    /// A device finished a thread's I/O.
    IoDone(ThreadId),
    /// The warm-up is over: latency histograms start afresh.
    WarmupEnd,
    /// The run's time limit.
    End,
    /// Gleaner's consolidation controller measures this VM (guest/gleaner.rs).
    GleanerTick(VmId),
    /// A datagram reaches a NIC (guest/nic.rs).
    NicArrival(u32),
    /// A VM's idle vCPUs balance (nohz idle balance, guest/balance.rs).
    NohzBalance(VmId),
    /// A VM's busy vCPUs run their periodic balance (guest/balance.rs).
    BusyBalance(VmId),
}

/// A kernel-spinlock event, logged when `World::lock_log` is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockEvent {
    Arrive(LockId, ThreadId, Nanos),
    Acquire(LockId, ThreadId, Nanos),
    Release(LockId, ThreadId, Nanos),
    /// pv-qspinlock: the thread took the lock ahead of the queue; whether the queue
    /// head was spinning on a running vCPU at that moment.
    Steal {
        lock: LockId,
        thief: ThreadId,
        head_running: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    AllFinished,
    Duration,
    /// `run.max_events` events were dispatched before the run's end (a budget, so
    /// that an input that makes the simulation crawl ends with a clear error).
    EventBudget,
    /// A thread ran this many instructions without simulated time passing (a loop
    /// whose body takes no time): the run cannot reach its end.
    NoProgress(ThreadId),
    /// The run's abort flag was raised (Ctrl-C or a wall-clock timeout).
    Aborted,
}

/// Instructions a thread may run without simulated time passing before the run is
/// stopped with `StopCause::NoProgress` (about a tenth of a second of host time).
pub const MAX_ZERO_TIME_STEPS: u32 = 1 << 24;

pub struct World {
    pub now: Nanos,
    pub q: EventQueue<Ev>,
    pub costs: CostTable,
    pub cache: Footprint,
    pub tlb: Tlb,
    pub pcpus: Vec<Pcpu>,
    /// Hardware threads sharing cores (host/smt.rs); `None`: one thread per core.
    pub smt: Option<crate::host::smt::Smt>,
    /// VMs' memory bound to NUMA nodes (host/numa.rs); `None`: none is.
    pub numa: Option<crate::host::numa::Numa>,
    pub vms: Vec<Vm>,
    pub vcpus: Vec<Vcpu>,
    pub threads: Vec<Thread>,
    pub sched: Box<dyn HostScheduler>,
    pub trace: Option<Box<dyn TraceSink>>,
    pub locks: Vec<SpinLock>,
    pub lock_classes: Vec<LockClass>,
    pub mutexes: Vec<Mutex>,
    pub barriers: Vec<Barrier>,
    pub conds: Vec<Cond>,
    pub queues: Vec<Queue>,
    pub sems: Vec<Sem>,
    pub rwsems: Vec<RwSem>,
    pub dispensers: Vec<Dispenser>,
    pub flushers: Vec<Flusher>,
    /// Writers spinning optimistically on read-write semaphores now (any VM): when
    /// none, a thread leaving its vCPU has no spinner to tell.
    pub rwsem_spinning: u32,
    pub ple: Box<dyn PleWindow>,
    pub ple_action: PleAction,
    /// `host.ple.pending_irq_counts_as_kernel` (Linux 5.3+ directed-yield rule).
    pub ple_pending_irq_counts: bool,
    /// `host.ple.candidates` and `host.ple.yield_to_kernel_mode` (the kernel's
    /// kvm_vcpu_on_spin rules).
    pub ple_candidates: crate::scenario::PleCandidates,
    pub ple_yield_to_kernel_mode: bool,
    pub ple_dy_eligible: bool,
    pub ple_esrch_ends_scan: bool,
    /// `host.ple.user_mode_exits`: user-mode spins exit too (AMD's pause filter).
    pub ple_user_mode_exits: bool,
    /// PLE exits counted in epochs, per VM (APPLE's input, the report's series).
    pub ple_epochs: crate::hv::ple_epochs::PleEpochs,
    pub clock_ghz: f64,
    pub halt_poll: HaltPollConfig,
    pub posted_interrupts: bool,
    pub ipi_virtualization: bool,
    /// False in native mode: no VM exits (hv/wake_path.rs counts none).
    pub virtualized: bool,
    /// The hypervisor's interrupt policy (hv/irq.rs): observes every send and delivery.
    pub irq_policy: Box<dyn crate::hv::irq::IrqPolicy>,
    /// A reused buffer: the recipients of the IPI being sent.
    pub irq_recipients: Vec<VcpuId>,
    /// The guests' record_wakee() counts per thread (guest/ipi.rs `select_wake_vcpu`).
    pub thread_flips: crate::hv::sched::wake_affine::WakeeFlips,
    /// When set, every kernel-spinlock arrival, acquisition and release is logged
    /// (for tests of mutual exclusion and FIFO order).
    pub lock_log: Option<Vec<LockEvent>>,
    pub events: u64,
    /// Cancelled entries popped and dropped (not counted as events).
    pub stale_events: u64,
    /// Steps queued in place of the vCPU's earlier, cancelled step (never popped).
    pub superseded_steps: u64,
    /// vCPU steps are re-armed in place (`EventQueue::push_slot`) rather than pushed
    /// anew with the old one left to be dropped: on while cancellations are frequent
    /// (`World::choose_step_queue`).
    pub(crate) slotted_steps: bool,
    /// Whether `choose_step_queue` may turn `slotted_steps` on (tests turn it off to
    /// compare).
    pub(crate) allow_slotted_steps: bool,
    /// Cancellations (stale pops and superseded steps) at the last choice.
    cancels_seen: u64,
    /// Stop after this many events (live and stale), `run.max_events`.
    pub max_events: u64,
    /// Raised from another thread to stop the run (checked every 4096 events).
    pub abort: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    pub finite_left: u64,
    pub stop: Option<StopCause>,
    pub limit: Nanos,
    pub warmup: Nanos,
    /// Prefetch the next events' records (sim/prefetch.rs): a host large enough that
    /// they miss the caches. A speed hint only: results do not depend on it.
    pub(crate) prefetch_records: bool,
    pub(crate) resched_buf: Vec<PcpuId>,
    /// A bit per vCPU, set for every vCPU whose current thread spins where a release
    /// pokes it (guest/sync.rs `poke_spinners`): a superset, cleared lazily, so a
    /// release looks at the spinners' vCPUs instead of all of its VM's.
    pub(crate) spin_watch: Vec<u64>,
    /// pCPUs the host scheduler asked to reschedule (drained after its decisions).
    pub(crate) sched_resched: Vec<PcpuId>,
    /// Idle pCPU time while vCPUs wait (CPU fragmentation).
    pub frag: crate::host::frag::FragMeter,
    /// Time-weighted run-queue length per pCPU.
    pub runq: crate::host::runq::RunqMeter,
    /// Open-loop network devices (guest/nic.rs), of the VMs that receive.
    pub nics: Vec<crate::guest::nic::Nic>,
    /// Demand-based coordinated scheduling: urgent-vCPU-first's state (None: off).
    pub uvf: Option<crate::hv::uvf::Uvf>,
    pub dcs_tlb_co: bool,
    pub dcs_resched_dp: bool,
    /// Per VM: Resched-Co applies.
    pub dcs_resched_co: Vec<bool>,
    /// Per VM: co-scheduling family PLE-exit actions.
    pub cosched: Vec<crate::hv::cosched::CoschedStats>,
    pub cvs_coschedule_below: f64,
    pub cvs_yield_head_below: f64,
    /// The host's ticks fire at the same instants on every pCPU
    /// (`HostScheduler::ticks_aligned`); their order at each instant is drawn from
    /// `tick_order`.
    ticks_aligned: bool,
    tick_order: Rng,
}

impl World {
    /// Builds the world of a resolved scenario.
    pub fn new(sc: &Scenario) -> Result<World, ScenarioError> {
        let npcpu = sc.host.pcpus;
        let mut vms = Vec::new();
        // VMs with equal settings share one record of each (hv/vm.rs `Vm`).
        let mut guest_settings: Vec<std::sync::Arc<crate::hv::vm::GuestParams>> = Vec::new();
        let mut cache_profiles: Vec<std::sync::Arc<crate::host::cache::CacheProfile>> = Vec::new();
        let mut vcpus = Vec::new();
        let mut threads = Vec::new();
        let mut sync = SyncArenas::default();
        let mut nics: Vec<crate::guest::nic::Nic> = Vec::new();
        // VMs with the same workload spec and vCPU count (a `count = N` table) share one
        // built workload: their threads run the same compiled programs (read-only,
        // VM-local object indices), so a host of a thousand such VMs compiles once and
        // its event loop reads one copy of the code instead of a thousand.
        let mut last_built: Option<(String, u32, crate::workload::BuiltWorkload)> = None;
        for (vi, vc) in sc.vm.iter().enumerate() {
            let vm_id = VmId(vi as u32);
            let masks = crate::scenario::vcpu_masks(&vc.pin, vc.vcpus, npcpu)
                .map_err(|m| ScenarioError::new(format!("vm.{vi}.pin"), m))?;
            let spec = serde_json::to_string(&vc.workload).unwrap_or_default();
            let w = match &last_built {
                Some((s, n, w)) if !spec.is_empty() && *s == spec && *n == vc.vcpus => w.clone(),
                _ => {
                    let w = crate::workload::build(&vc.workload, vc.vcpus).map_err(|e| {
                        ScenarioError::new(format!("vm.{vi}.workload.{}", e.key), e.message)
                    })?;
                    last_built = Some((spec, vc.vcpus, w.clone()));
                    w
                }
            };
            let first = vcpus.len() as u32;
            let processes = w.groups.iter().map(|g| g.processes_end()).max();
            for (i, m) in masks.into_iter().enumerate() {
                let mut v = Vcpu::new(vm_id, i as u32, m);
                v.set_processes(processes.unwrap_or(1));
                vcpus.push(v);
            }
            let g = &vc.guest;
            let cpuset = build::vm_cpuset(vi, g, vc.vcpus)?;
            let allowed: Vec<u32> = cpuset.iter().collect();
            let dispenser_base = sync.dispensers.len() as u32;
            let flusher_base = sync.flushers.len() as u32;
            let bases = sync.add_vm(vm_id, g, &w, sc.seed, vc.vcpus);
            let uses_nic = w.groups.iter().any(|g| {
                g.program
                    .code
                    .iter()
                    .any(|i| matches!(i, crate::workload::program::Instr::NetRecv(_)))
            });
            let nic = uses_nic.then(|| {
                nics.push(crate::guest::nic::Nic::new(vm_id, &vc.nic));
                nics.len() as u32 - 1
            });
            let (finite, mut t_in_vm) =
                build::vm_threads(&mut threads, &w, (vi, vm_id, first), &allowed, sc.seed);
            let gleaner = crate::guest::gleaner::GleanerVm::new(
                &g.gleaner,
                &sc.host.costs,
                vc.vcpus,
                build::guest_cfs_tunable(g.min_granularity_ms, vc.vcpus),
            )
            .map(|mut gv| {
                // One yielding thread per vCPU, after the workload's threads.
                for i in 0..vc.vcpus {
                    gv.yielders[i as usize].thread = Some(build::next_thread(&threads));
                    threads.push(crate::guest::gleaner::yielder_thread(
                        vm_id,
                        VcpuId(first + i),
                        i,
                        Rng::stream(sc.seed, Stream::Thread, ((vi as u64) << 32) | t_in_vm),
                    ));
                    t_in_vm += 1;
                }
                Box::new(gv)
            });
            let params = build::guest_params(g, vc.vcpus);
            // Where this guest's ticks fall (`Vm::tick_phase_us`).
            let tick_phase_us = {
                let phase = Rng::stream(sc.seed, Stream::TickOrder, 1 + vi as u64)
                    .below((params.tick / 1_000).max(1));
                u16::try_from(phase).unwrap_or(u16::MAX)
            };
            vms.push(Vm {
                name: vc.name.clone().unwrap_or_else(|| format!("vm{vi}")),
                weight: vc.weight,
                cap: vc.cap,
                first_vcpu: first,
                nvcpus: vc.vcpus,
                guest: shared(&mut guest_settings, params),
                model: w.model.clone(),
                footprint_kib: w.footprint_kib,
                cache: shared(
                    &mut cache_profiles,
                    crate::host::access::cache_profile(&sc.host, &w.model, w.footprint_kib),
                ),
                finite_threads: finite,
                finished_threads: 0,
                completion: None,
                units: 0,
                dispatch_wait: Default::default(),
                wake_paths: Default::default(),
                ipi_resched: Default::default(),
                ipi_tlb: Default::default(),
                tlb_wait: Default::default(),
                irq_latency: Default::default(),
                tlb_shootdowns: 0,
                thread_switches: 0,
                futex_calls: 0,
                guest_affine_wakes: 0,
                exits: Default::default(),
                ple_exits: 0,
                yields_ok: 0,
                yields_failed: 0,
                halt_poll_hits: 0,
                halt_poll_misses: 0,
                last_boosted: 0,
                tick_phase_us,
                cpuset,
                bases,
                queued: 0,
                gleaner,
                nic,
                mem_node: vc.numa_node,
                remote_speed: crate::host::speed::ONE,
                dispenser_base,
                flusher_base,
                balance: crate::guest::balance::GuestBalance::of(g, vc.vcpus),
            });
        }
        let numa = crate::host::numa::Numa::new(
            npcpu,
            sc.host.topology.numa_nodes,
            sc.host.topology.remote_memory_ratio,
            vms.iter().any(|v| v.mem_node.is_some()),
        );
        let cache = Footprint::new(
            &sc.host.cache,
            crate::host::topology::Topology::new(
                npcpu,
                sc.host.topology.threads_per_core,
                sc.host.scheduler.llc_pcpus(),
                sc.host.topology.numa_nodes,
            ),
        );
        if let Some(n) = numa {
            let fp = &cache;
            for vm in vms.iter_mut().filter(|v| v.mem_node.is_some()) {
                vm.remote_speed = n.remote_speed(fp, &vm.cache);
            }
        }
        let setup = SchedSetup {
            pcpus: npcpu,
            threads_per_core: sc.host.topology.threads_per_core,
            numa_nodes: sc.host.topology.numa_nodes,
            vcpu_vm: vcpus.iter().map(|v| v.vm).collect(),
            vcpu_mask: vcpus.iter().map(|v| v.mask).collect(),
            vm_weight: vms.iter().map(|v| v.weight).collect(),
            vm_cap: vms.iter().map(|v| v.cap).collect(),
        };
        let nvcpus = vcpus.len();
        let nvms = vms.len();
        let vcpu_vm: Vec<VmId> = vcpus.iter().map(|v| v.vm).collect();
        let finite_left = vms.iter().map(|v| v.finite_threads as u64).sum();
        let counts_flips = vms.iter().any(|m| m.guest.wake_affine.counts_flips());
        let thread_flips = crate::hv::sched::wake_affine::WakeeFlips::new(
            if counts_flips {
                crate::hv::sched::wake_affine::WakeAffine::Linux4_14
            } else {
                crate::hv::sched::wake_affine::WakeAffine::Off
            },
            threads.len(),
        );
        let sched = sched::build(&sc.host.scheduler, setup);
        Ok(World {
            now: Nanos::ZERO,
            q: EventQueue::new(),
            costs: sc.host.costs.clone(),
            cache,
            tlb: Tlb::new(&sc.host.cache, sc.run.mode != crate::scenario::Mode::Native),
            pcpus: (0..npcpu).map(|_| Pcpu::new()).collect(),
            smt: crate::host::smt::Smt::new(&sc.host.topology),
            numa,
            vms,
            vcpus,
            threads,
            ticks_aligned: sched.ticks_aligned(),
            tick_order: Rng::stream(sc.seed, Stream::TickOrder, 0),
            sched,
            trace: None,
            ple: ple::build(&sc.host.ple, &vcpu_vm),
            ple_action: sc.host.ple.action,
            ple_pending_irq_counts: sc.host.ple.pending_irq_counts_as_kernel,
            ple_candidates: sc.host.ple.candidates,
            ple_yield_to_kernel_mode: sc.host.ple.yield_to_kernel_mode,
            ple_dy_eligible: sc.host.ple.dy_eligible,
            ple_esrch_ends_scan: sc.host.ple.esrch_ends_scan,
            ple_user_mode_exits: sc.host.ple.user_mode_exits,
            ple_epochs: crate::hv::ple_epochs::PleEpochs::new(&sc.host.ple, sc.vm.len(), nvcpus),
            clock_ghz: sc.host.clock_ghz,
            halt_poll: sc.host.halt_poll.clone(),
            posted_interrupts: sc.host.posted_interrupts,
            ipi_virtualization: sc.host.ipi_virtualization,
            virtualized: sc.run.mode != crate::scenario::Mode::Native,
            irq_policy: Box::new(crate::hv::irq::NoIrqPolicy),
            irq_recipients: Vec::new(),
            thread_flips,
            locks: sync.locks,
            lock_classes: sync.lock_classes,
            mutexes: sync.mutexes,
            barriers: sync.barriers,
            conds: sync.conds,
            queues: sync.queues,
            sems: sync.sems,
            rwsems: sync.rwsems,
            dispensers: sync.dispensers,
            flushers: sync.flushers,
            rwsem_spinning: 0,
            lock_log: None,
            events: 0,
            stale_events: 0,
            superseded_steps: 0,
            slotted_steps: false,
            allow_slotted_steps: true,
            cancels_seen: 0,
            max_events: sc
                .run
                .max_events
                .unwrap_or(crate::scenario::DEFAULT_MAX_EVENTS),
            abort: None,
            finite_left,
            stop: None,
            limit: sc.run.duration.0,
            warmup: sc.run.warmup.0,
            prefetch_records: nvcpus >= crate::sim::prefetch::PREFETCH_MIN_VCPUS,
            resched_buf: Vec::new(),
            spin_watch: vec![0; nvcpus.div_ceil(64)],
            sched_resched: Vec::new(),
            frag: crate::host::frag::FragMeter::new(npcpu as usize),
            runq: crate::host::runq::RunqMeter::new(npcpu as usize, nvcpus),
            nics,
            uvf: sc.host.dcs.enabled().then(|| {
                crate::hv::uvf::Uvf::new(
                    npcpu as usize,
                    nvcpus,
                    Nanos((sc.host.dcs.utslice_us * 1e3).round() as u64),
                    Nanos((sc.host.dcs.urgent_allowance_ms * 1e6).round() as u64),
                )
            }),
            dcs_tlb_co: sc.host.dcs.tlb_co,
            dcs_resched_dp: sc.host.dcs.resched_dp,
            dcs_resched_co: sc
                .vm
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let name = v.name.clone().unwrap_or_else(|| format!("vm{i}"));
                    sc.host
                        .dcs
                        .resched_co
                        .iter()
                        .any(|n| n == "*" || *n == name)
                })
                .collect(),
            cosched: vec![Default::default(); nvms],
            cvs_coschedule_below: sc.host.ple.cvs_coschedule_below,
            cvs_yield_head_below: sc.host.ple.cvs_yield_head_below,
        })
    }

    /// Queues `p`'s tick at `at` on the aligned grid, ranked at random among the pCPUs'
    /// ticks of that instant: on Linux every CPU's tick interrupt and its
    /// rebalance_domains softirq run at once, and which takes a runqueue's lock first
    /// (a pull, a preemption) is a race; a fixed order would let the same pCPU win it
    /// at every tick.
    fn push_aligned_tick(&mut self, at: Nanos, p: PcpuId) {
        let rank = self.tick_order.next_u64() as u16;
        self.q.push_ranked(at, rank, Ev::Tick(p));
    }

    pub fn set_trace(&mut self, t: Box<dyn TraceSink>) {
        self.trace = Some(t);
        // What the trace shows beyond slices is buffered where it changes (vCPU states,
        // run-queue lengths) and written every 4096 events: no trace hook in those paths.
        for v in &mut self.vcpus {
            v.trace_states = Some(Vec::new());
            v.tracing = true;
            v.state_since = v.cat_since;
        }
        self.runq.trace_changes = Some(Vec::new());
    }

    /// Writes the buffered vCPU states and run-queue lengths (at the end: the open
    /// state segments too).
    fn trace_drain(&mut self, at_end: bool) {
        let Some(t) = self.trace.as_mut() else {
            return;
        };
        let now = self.now;
        for v in &mut self.vcpus {
            let Some(buf) = v.trace_states.as_mut() else {
                continue;
            };
            for (start, end, cat) in buf.drain(..) {
                t.vcpu_state(v.vm, v.index, cat.name(), start, end);
            }
            if at_end && now > v.state_since {
                t.vcpu_state(v.vm, v.index, v.cat.name(), v.state_since, now);
                v.state_since = now;
            }
        }
        if let Some(buf) = self.runq.trace_changes.as_mut() {
            for (p, at, len) in buf.drain(..) {
                t.counter(
                    crate::metrics::trace::CounterOwner::Pcpu(PcpuId(p)),
                    "run queue",
                    at,
                    len as f64,
                );
            }
        }
    }

    /// A flow arrow's end on vCPU `v`'s track (`start`: its source), at `at`; `key`
    /// pairs the two ends (see `ipi_flow_key`, `wake_flow_key`).
    pub(crate) fn trace_flow(&mut self, v: VcpuId, name: &str, key: u64, start: bool, at: Nanos) {
        if let Some(t) = self.trace.as_mut() {
            let vc = &self.vcpus[v.idx()];
            t.vcpu_flow(vc.vm, vc.index, name, key, start, at);
        }
    }

    /// The flow key of an IPI sent at `sent` to `target`.
    pub(crate) fn ipi_flow_key(sent: Nanos, target: VcpuId) -> u64 {
        (sent.0 << 20) | u64::from(target.0 & 0x7_FFFF)
    }

    /// The flow key of thread `t`'s wake-up at `woken_at`.
    pub(crate) fn wake_flow_key(woken_at: Nanos, t: ThreadId) -> u64 {
        (woken_at.0 << 20) | (1 << 19) | u64::from(t.0 & 0x7_FFFF)
    }

    /// An instant naming lock class `class` on the track of the vCPU thread `t` is on
    /// (lock-holder and lock-waiter preemptions).
    pub(crate) fn trace_lock_event(&mut self, what: &str, t: ThreadId, class: usize) {
        if self.trace.is_some() {
            let name = format!(
                "{what}: {} ({})",
                self.lock_classes[class].name,
                self.threads[t.idx()].name
            );
            self.trace_instant(self.threads[t.idx()].vcpu, &name);
        }
    }

    /// A counter on vCPU `v`'s track.
    pub(crate) fn trace_vcpu_counter(&mut self, v: VcpuId, name: &str, value: f64) {
        if let Some(t) = self.trace.as_mut() {
            let vc = &self.vcpus[v.idx()];
            t.counter(
                crate::metrics::trace::CounterOwner::Vcpu(vc.vm, vc.index),
                name,
                self.now,
                value,
            );
        }
    }

    fn start(&mut self) {
        // Threads start queued on their vCPUs; vCPUs with threads become runnable.
        for t in 0..self.threads.len() {
            let v = self.threads[t].vcpu;
            if self.guest_eevdf(v) {
                self.eevdf_initial_deadline(ThreadId(t as u32));
            }
            self.rq_push(v, ThreadId(t as u32));
        }
        for v in 0..self.vcpus.len() {
            if !self.vcpus[v].rq.is_empty() {
                self.hv_wake_vcpu(VcpuId(v as u32), false, None);
            }
        }
        if let Some(p) = self.sched.tick_period() {
            // The host's jiffy grid has its own phase (each kernel booted at its own
            // time; each guest's grid has its own too, `Vm::tick_phase_us`).
            let phase = Nanos(self.tick_order.below(p.0));

            for i in 0..self.pcpus.len() {
                if self.ticks_aligned {
                    self.push_aligned_tick(p + phase, PcpuId(i as u32));
                } else {
                    // Per-CPU timers started as each CPU came up: spread over the period.
                    let off = Nanos(p.0 * i as u64 / self.pcpus.len() as u64);
                    self.q.push(p + off, Ev::Tick(PcpuId(i as u32)));
                }
            }
        }
        if let Some(g) = self.sched.global_period() {
            self.q.push(g, Ev::GlobalTick);
        }
        for i in 0..self.nics.len() {
            self.q.push(self.nics[i].interval, Ev::NicArrival(i as u32));
        }
        if self.warmup > Nanos::ZERO && self.warmup < self.limit {
            self.q.push(self.warmup, Ev::WarmupEnd);
        }
        self.q.push(self.limit, Ev::End);
        self.gleaner_start();
        if self.finite_left == 0 {
            // Fixed-time run: nothing to finish.
        }
    }

    /// Discards the latency samples recorded during the warm-up.
    fn end_warmup(&mut self) {
        for vm in &mut self.vms {
            vm.dispatch_wait.clear();
            for h in &mut vm.wake_paths {
                h.clear();
            }
            vm.ipi_resched.clear();
            vm.ipi_tlb.clear();
            vm.tlb_wait.clear();
            vm.irq_latency.clear();
        }
        for c in &mut self.lock_classes {
            c.wait.clear();
            c.hold.clear();
        }
    }

    /// Runs to the end and returns why it stopped.
    pub fn run(&mut self) -> StopCause {
        self.start();
        while let Some((t, ev)) = self.q.pop() {
            self.now = t;
            if self.prefetch_records {
                self.prefetch_reached(ev);
                if let Some(next) = self.q.peek_following() {
                    self.prefetch_event(next);
                }
            }
            let live = self.dispatch_event(ev);
            if live {
                self.events += 1;
            } else {
                self.stale_events += 1;
            }
            if let Some(c) = self.stop {
                self.finish();
                return c;
            }
            let n = self.events + self.stale_events;
            if n & 0xFFF == 0 {
                self.choose_step_queue();
                if self.trace.is_some() {
                    self.trace_drain(false);
                }
                if n >= self.max_events {
                    self.stop = Some(StopCause::EventBudget);
                } else if let Some(a) = &self.abort {
                    if a.load(std::sync::atomic::Ordering::Relaxed) {
                        self.stop = Some(StopCause::Aborted);
                    }
                }
                if let Some(c) = self.stop {
                    self.finish();
                    return c;
                }
            }
        }
        self.stop = Some(StopCause::Duration);
        self.finish();
        StopCause::Duration
    }

    /// Every 4,096 pops: steps are re-armed in place while more than one pop in four
    /// (on) or one in eight (off) would be a cancelled step. In place, a cancelled step
    /// never reaches the top of the queue, but every step moves in a heap of steps
    /// only, where a new one sinks deeper than among the far timers of the one heap:
    /// on the reference (4% of pops cancelled) that costs 6% more instructions, on a
    /// 288-vCPU VM of spin-then-block barriers (half the pops cancelled: each released
    /// spinner's spin-end step) it saves 12%. Either way the live events come in the
    /// same order (same keys), so the choice changes no result.
    fn choose_step_queue(&mut self) {
        let cancels = self.stale_events + self.superseded_steps;
        let recent = cancels - self.cancels_seen;
        self.cancels_seen = cancels;
        let threshold = if self.slotted_steps {
            4096 / 8
        } else {
            4096 / 4
        };
        self.slotted_steps = self.allow_slotted_steps && recent >= threshold;
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
                self.resched(p, self.pcpus[p.idx()].resched_cause);
            }
            Ev::SliceEnd(p, gen) => {
                if self.pcpus[p.idx()].timer_gen != gen {
                    return false;
                }
                self.resched(p, PreemptCause::Slice);
            }
            Ev::Tick(p) => {
                if let Some(period) = self.sched.tick_period() {
                    if self.ticks_aligned {
                        self.push_aligned_tick(self.now + period, p);
                    } else {
                        self.q.push(self.now + period, Ev::Tick(p));
                    }
                }
                if self.sched.tick(p, self.now) {
                    self.resched(p, PreemptCause::Slice);
                }
                self.drain_sched_resched(Some(p), PreemptCause::Slice);
            }
            Ev::GlobalTick => {
                if let Some(period) = self.sched.global_period() {
                    self.q.push(self.now + period, Ev::GlobalTick);
                }
                let mut buf = std::mem::take(&mut self.resched_buf);
                buf.clear();
                self.sched.global_tick(self.now, &mut buf);
                for &p in &buf {
                    self.resched(p, PreemptCause::Slice);
                }
                self.resched_buf = buf;
                self.drain_sched_resched(None, PreemptCause::Slice);
            }
            Ev::WarmupEnd => self.end_warmup(),
            Ev::TlbAck(t, gen) => self.on_tlb_ack(t, gen),
            Ev::IpiArrive(v, msg) => self.on_ipi_arrive(v, msg),
            Ev::IoDone(t) => self.on_io_done(t),
            Ev::End => {
                self.stop = Some(StopCause::Duration);
            }
            Ev::GleanerTick(vm) => self.on_gleaner_tick(vm),
            Ev::NohzBalance(vm) => self.on_nohz_balance(vm),
            Ev::BusyBalance(vm) => self.on_busy_balance(vm),
            Ev::NicArrival(i) => self.on_nic_arrival(i),
        }
        true
    }

    /// Closes the books at `now`: accounting and trace slices of whatever still runs.
    fn finish(&mut self) {
        let now = self.now;
        for p in 0..self.pcpus.len() {
            if let Some(v) = self.pcpus[p].cur {
                self.sync_progress(v);
                // A host halt poll still going on is poll time, not the vCPU's run.
                let pc = &mut self.pcpus[p];
                if let Some(s) = pc.poll_since.take() {
                    pc.poll_ns += (now - s).0;
                    pc.run_start = now;
                    pc.entry_until = now;
                }
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
        self.frag.finish(now);
        self.runq.finish(now);
        self.trace_drain(true);
        if let Some(t) = self.trace.as_mut() {
            t.finish();
        }
    }

    pub(crate) fn trace_instant(&mut self, v: VcpuId, name: &str) {
        if let Some(t) = self.trace.as_mut() {
            let vc = &self.vcpus[v.idx()];
            t.vcpu_instant(vc.vm, vc.index, name, self.now);
        }
    }

    pub fn vcpu_label(&self, v: VcpuId) -> String {
        let vc = &self.vcpus[v.idx()];
        format!("{}/vcpu{}", self.vms[vc.vm.idx()].name, vc.index)
    }
}

/// `value` as a record shared with the equal ones already made (`pool`).
fn shared<T: PartialEq>(pool: &mut Vec<std::sync::Arc<T>>, value: T) -> std::sync::Arc<T> {
    if let Some(a) = pool.iter().find(|a| ***a == value) {
        return a.clone();
    }
    let a = std::sync::Arc::new(value);
    pool.push(a.clone());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VMs of one table share their guest settings and cache profile; a VM whose
    /// settings differ has its own, with its own values.
    #[test]
    fn vms_with_equal_settings_share_one_record() {
        let text = r#"
preset = "kvm-default"
[run]
duration = "1ms"
[host]
pcpus = 8
[[vm]]
vcpus = 2
count = 3
workload = { model = "compute-sleep", params = { compute = "exp(200us)", sleep = "exp(300us)" } }
[[vm]]
vcpus = 4
workload = { model = "dedup" }
"#;
        let sc = crate::resolve(text, &[], None).expect("scenario resolves");
        let w = World::new(&sc).expect("world builds");
        let same = |a: usize, b: usize| {
            std::sync::Arc::ptr_eq(&w.vms[a].guest, &w.vms[b].guest)
                && std::sync::Arc::ptr_eq(&w.vms[a].cache, &w.vms[b].cache)
        };
        assert!(same(0, 1) && same(1, 2), "one table, one record");
        assert!(!same(0, 3), "other vCPUs and workload, other settings");
        // Four vCPUs scale the guest's base slice differently from two.
        assert_ne!(w.vms[0].guest.base_slice, w.vms[3].guest.base_slice);
        assert_ne!(*w.vms[0].cache, *w.vms[3].cache);
    }
}

#[cfg(test)]
mod event_size {
    /// An event is 16 bytes (the variant's tag lives in an IPI's kind byte): the
    /// event heap moves events at every push and sift, and 20 cost the reference 2%
    /// more instructions.
    #[test]
    fn an_event_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<super::Ev>(), 16);
    }
}
