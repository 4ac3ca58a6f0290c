//! The report of a run: per-VM, per-vCPU and per-pCPU tables, fairness, histograms.
//! Every top-level list of flat records is a table for the Python side.

use crate::hv::preemption::PreemptCause;
use crate::hv::vcpu::{VCat, Vcpu};
use crate::metrics::hist::HistSummary;
use crate::metrics::Hist;
use crate::scenario::Scenario;
use crate::sim::world::{StopCause, World};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub seed: u64,
    pub preset: Option<String>,
    pub scheduler: String,
    pub pcpus: u32,
    /// SMT and NUMA, when not one thread per core and one node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::scenario::TopologyConfig>,
    pub duration_ns: u64,
    /// FNV-1a (64 bit, hex) of the resolved scenario as JSON, seed included: two
    /// results with the same hash come from the same input.
    pub hash: String,
}

impl ScenarioInfo {
    /// `hash`: the scenario's `scenario_hash`, computed once by the caller (the TOML of a
    /// host with thousands of VMs takes a while to write).
    pub fn of(sc: &Scenario, hash: String) -> ScenarioInfo {
        ScenarioInfo {
            name: sc.name.clone(),
            seed: sc.seed,
            preset: sc.preset.clone(),
            scheduler: sc.host.scheduler.name().to_string(),
            pcpus: sc.host.pcpus,
            topology: (!sc.host.topology.is_default()).then(|| sc.host.topology.clone()),
            duration_ns: sc.run.duration.0 .0,
            hash,
        }
    }
}

/// FNV-1a over the resolved scenario written as JSON, streamed into the hash
/// (deterministic: struct fields serialize in declaration order and maps are ordered).
/// JSON rather than TOML because a host of a thousand VMs took 12 ms to write as TOML,
/// a fifth of a 50 ms run's wall time.
pub fn scenario_hash(sc: &Scenario) -> String {
    let mut h = Fnv1a(0xcbf2_9ce4_8422_2325);
    if let Err(e) = serde_json::to_writer(&mut h, sc) {
        // Not reachable for a resolved scenario; hash the error rather than panic.
        for b in e.to_string().bytes() {
            h.byte(b);
        }
    }
    format!("{:016x}", h.0)
}

/// A 64-bit FNV-1a hash that bytes are written into.
struct Fnv1a(u64);

impl Fnv1a {
    #[inline]
    fn byte(&mut self, b: u8) {
        self.0 ^= u64::from(b);
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

impl std::io::Write for Fnv1a {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            self.byte(b);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The version of the simulation core that wrote a report.
pub const CORE_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone, Debug, Default, Serialize)]
pub struct TimeBreakdown {
    pub user_ns: u64,
    pub kernel_ns: u64,
    pub spin_ns: u64,
    pub idle_poll_ns: u64,
    pub overhead_ns: u64,
    pub runnable_ns: u64,
    pub halted_ns: u64,
    /// Time on a pCPU: user + kernel + spin + idle_poll + overhead.
    pub cpu_ns: u64,
}

impl TimeBreakdown {
    fn of(v: &Vcpu) -> TimeBreakdown {
        let t = &v.time;
        TimeBreakdown {
            user_ns: t[VCat::User as usize],
            kernel_ns: t[VCat::Kernel as usize],
            spin_ns: t[VCat::Spin as usize],
            idle_poll_ns: t[VCat::IdlePoll as usize],
            overhead_ns: t[VCat::Overhead as usize],
            runnable_ns: t[VCat::Runnable as usize],
            halted_ns: t[VCat::Halted as usize],
            cpu_ns: v.cpu_ns(),
        }
    }
    fn add(&mut self, o: &TimeBreakdown) {
        self.user_ns += o.user_ns;
        self.kernel_ns += o.kernel_ns;
        self.spin_ns += o.spin_ns;
        self.idle_poll_ns += o.idle_poll_ns;
        self.overhead_ns += o.overhead_ns;
        self.runnable_ns += o.runnable_ns;
        self.halted_ns += o.halted_ns;
        self.cpu_ns += o.cpu_ns;
    }
    pub fn total(&self) -> u64 {
        self.cpu_ns + self.runnable_ns + self.halted_ns
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct VmRow {
    pub vm: String,
    pub model: String,
    pub vcpus: u32,
    pub weight: u32,
    pub cap_pct: Option<f64>,
    #[serde(flatten)]
    pub time: TimeBreakdown,
    /// Fraction of all pCPU time used by this VM.
    pub cpu_share: f64,
    /// Weighted max-min fair share of all pCPU time (limited by vCPUs and cap).
    pub entitlement: f64,
    pub share_ratio: f64,
    pub finished: bool,
    pub completion_ns: Option<u64>,
    pub work_units: u64,
    pub throughput_per_s: f64,
    pub vcpu_switches: u64,
    pub migrations: u64,
    pub halts: u64,
    pub wakes: u64,
    pub affine_wakes: u64,
    pub idle_transitions_per_s: f64,
    pub cache_refill_ns: u64,
    pub wake_latency_count: u64,
    /// Means and percentiles over no samples are undefined: NaN / None, null in JSON.
    pub wake_latency_mean_ns: f64,
    pub wake_latency_p50_ns: Option<u64>,
    pub wake_latency_p99_ns: Option<u64>,
    pub dispatch_wait_count: u64,
    pub dispatch_wait_mean_ns: f64,
    pub dispatch_wait_p99_ns: Option<u64>,
    pub ple_exits: u64,
    pub ple_yields_ok: u64,
    pub ple_yields_failed: u64,
    pub lhp: u64,
    pub lwp: u64,
    pub tlb_shootdowns: u64,
    pub thread_switches: u64,
    pub futex_calls: u64,
    pub guest_affine_wakes: u64,
    pub ipis_resched: u64,
    pub ipis_tlb: u64,
    pub tlb_wait_mean_ns: f64,
    /// Wake-path exits (hv/wake_path.rs): ICR writes, interrupts forcing a running vCPU
    /// out, EOI writes, timer writes.
    pub icr_exits: u64,
    pub irq_exits: u64,
    pub eoi_exits: u64,
    pub timer_exits: u64,
    pub halt_poll_hits: u64,
    pub halt_poll_misses: u64,
    /// Co-scheduling family PLE-exit actions (hv/cosched.rs).
    pub ple_coschedules: u64,
    pub ple_cosched_vcpus: u64,
    pub ple_yield_head: u64,
    pub ple_yield_tail: u64,
    pub cvs_decisions: u64,
    pub cvs_decision_ns: u64,
    /// Co-schedules that moved nobody and fell back to a yield.
    pub ple_cosched_fallbacks: u64,
    /// Gleaner: vCPUs in the workload's cpuset, time-averaged, fewest, and at the end
    /// (all vCPUs without consolidation).
    pub active_vcpus_mean: f64,
    pub active_vcpus_min: u32,
    pub active_vcpus_final: u32,
    pub gleaner_deactivations: u64,
    pub gleaner_restores: u64,
    pub gleaner_reactivations: u64,
    /// Gleaner's yielding threads: runs of idle yields, and timeouts (nanosleeps).
    pub gleaner_idle_periods: u64,
    pub gleaner_sleeps: u64,
}

/// The energy proxy: pCPU time busy (guest, entry/exit overhead, host halt polling)
/// and halted, weighted by `host.power`.
#[derive(Clone, Debug, Serialize)]
pub struct Energy {
    pub busy_pcpu_ns: u64,
    pub halted_pcpu_ns: u64,
    pub joules: f64,
    pub mean_w: f64,
}

/// The focus VM run in one execution mode, and its slowdown against it.
#[derive(Clone, Debug, Serialize)]
pub struct ModeRow {
    pub mode: String,
    pub vm: String,
    pub finished: bool,
    pub completion_ns: Option<u64>,
    pub throughput_per_s: f64,
    /// How much slower the scenario's own run is than this mode (1 = same; > 1:
    /// the run as written is slower).
    pub slowdown: f64,
}

impl ModeRow {
    pub fn of(mode: crate::scenario::Mode, r: &VmRow, base: &VmRow) -> ModeRow {
        let slowdown = match (base.completion_ns, r.completion_ns) {
            (Some(b), Some(m)) if m > 0 => b as f64 / m as f64,
            _ if base.throughput_per_s > 0.0 => r.throughput_per_s / base.throughput_per_s,
            _ => f64::NAN,
        };
        ModeRow {
            mode: mode.name().to_string(),
            vm: r.vm.clone(),
            finished: r.finished,
            completion_ns: r.completion_ns,
            throughput_per_s: r.throughput_per_s,
            slowdown,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct LockRow {
    pub vm: String,
    pub lock: String,
    /// "kernel" (a guest kernel spinlock), "user" (a workload's pthread-like mutex),
    /// "kernel-mutex", "rwsem" (a guest kernel read-write semaphore) or "user-rwlock"
    /// (InnoDB's rw_lock_t); guest/spinlock.rs `LockClassKind`.
    pub kind: &'static str,
    pub acquisitions: u64,
    pub contended: u64,
    /// Undefined (null) without contended acquisitions / without acquisitions.
    pub wait_mean_ns: f64,
    pub wait_p99_ns: Option<u64>,
    pub wait_max_ns: Option<u64>,
    pub hold_mean_ns: f64,
    pub hold_p99_ns: Option<u64>,
    pub lhp: u64,
    /// `lhp` by what took the holder off (hv/preemption.rs `PreemptCause`); they sum
    /// to `lhp`.
    pub lhp_slice: u64,
    pub lhp_wakeup: u64,
    pub lhp_directed_yield: u64,
    pub lhp_own_yield: u64,
    pub lhp_coordination: u64,
    pub lwp: u64,
    /// pv spinlocks: waiters that halted their vCPU, kicks by unlockers.
    pub halts: u64,
    pub kicks: u64,
    /// pv-qspinlock: acquisitions that stole the lock ahead of the queue.
    pub steals: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencyRow {
    pub vm: String,
    /// What was measured: a wake-up path, an IPI kind, an interrupt, a wait.
    pub kind: String,
    pub count: u64,
    /// Undefined (null) without measurements.
    pub mean_ns: f64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
}

fn latency_row(vm: &str, kind: &str, h: &Hist) -> LatencyRow {
    LatencyRow {
        vm: vm.to_string(),
        kind: kind.to_string(),
        count: h.count(),
        mean_ns: h.mean_or_nan(),
        p50_ns: h.quantile_opt(0.5),
        p99_ns: h.quantile_opt(0.99),
        max_ns: h.max_opt(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct VcpuRow {
    pub vm: String,
    pub vcpu: u32,
    #[serde(flatten)]
    pub time: TimeBreakdown,
    pub switches: u64,
    pub migrations: u64,
    pub halts: u64,
    pub wakes: u64,
    pub affine_wakes: u64,
    pub cache_refill_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PcpuRow {
    pub pcpu: u32,
    pub guest_ns: u64,
    pub overhead_ns: u64,
    pub idle_ns: u64,
    pub poll_ns: u64,
    /// Idle while some vCPU waited for a pCPU (CPU fragmentation).
    pub idle_runnable_ns: u64,
    /// Time-weighted mean run-queue length (running + queued vCPUs).
    pub runq_mean: f64,
}

/// The host's run-queue length distribution: the fraction of pCPU time (over all
/// pCPUs) spent with `length` vCPUs running or queued there (host/runq.rs; the last row
/// is that length or more).
#[derive(Clone, Debug, Serialize)]
pub struct RunqRow {
    pub length: u32,
    pub fraction: f64,
    /// Fraction of pCPU time at this length or less.
    pub cdf: f64,
}

impl RunqRow {
    fn distribution(m: &crate::host::runq::RunqMeter, pcpus: usize) -> Vec<RunqRow> {
        let mut t = [0u64; crate::host::runq::MAX_LEN + 1];
        for p in 0..pcpus {
            for (l, ns) in m.times(p).iter().enumerate() {
                t[l] += ns;
            }
        }
        let total: u64 = t.iter().sum();
        let last = t.iter().rposition(|&ns| ns > 0).unwrap_or(0);
        let mut acc = 0u64;
        t[..=last]
            .iter()
            .enumerate()
            .map(|(l, &ns)| {
                acc += ns;
                RunqRow {
                    length: l as u32,
                    fraction: ns as f64 / total.max(1) as f64,
                    cdf: acc as f64 / total.max(1) as f64,
                }
            })
            .collect()
    }
}

/// What a VM's NIC received: datagrams sent to it, received by the application,
/// dropped on a full buffer; the application's throughput and the RFC 3550 jitter
/// (its estimate at the end of the run, as iperf prints it).
#[derive(Clone, Debug, Serialize)]
pub struct NetRow {
    pub vm: String,
    pub sent: u64,
    pub received: u64,
    pub dropped: u64,
    pub drop_fraction: f64,
    pub throughput_mbps: f64,
    pub jitter_ms: f64,
    /// The RFC 3550 estimate averaged over every datagram of the run.
    pub jitter_mean_ms: f64,
    /// From the datagram's arrival at the NIC to the application's receive.
    pub delay_mean_ms: f64,
    pub delay_max_ms: f64,
}

impl NetRow {
    fn of(n: &crate::guest::nic::Nic, vm: &str, end_ns: u64) -> NetRow {
        let secs = end_ns.max(1) as f64 / 1e9;
        NetRow {
            vm: vm.to_string(),
            sent: n.arrivals,
            received: n.received,
            dropped: n.dropped,
            drop_fraction: n.dropped as f64 / n.arrivals.max(1) as f64,
            throughput_mbps: (n.received * n.packet_bytes * 8) as f64 / secs / 1e6,
            // RFC 3550's estimate needs two datagrams; delays need one.
            jitter_ms: if n.received >= 2 {
                n.jitter.j / 1e6
            } else {
                f64::NAN
            },
            jitter_mean_ms: n.jitter.mean() / 1e6,
            delay_mean_ms: if n.received > 0 {
                n.delay_sum as f64 / n.received as f64 / 1e6
            } else {
                f64::NAN
            },
            delay_max_ms: if n.received > 0 {
                n.delay_max as f64 / 1e6
            } else {
                f64::NAN
            },
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Fairness {
    pub jain_index: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: u32,
    pub core_version: &'static str,
    pub scenario: ScenarioInfo,
    pub end_ns: u64,
    pub stop_reason: &'static str,
    pub events: u64,
    pub vms: Vec<VmRow>,
    pub vcpus: Vec<VcpuRow>,
    pub pcpus: Vec<PcpuRow>,
    pub runq_length: Vec<RunqRow>,
    pub locks: Vec<LockRow>,
    pub latencies: Vec<LatencyRow>,
    pub modes: Vec<ModeRow>,
    pub fairness: Fairness,
    pub energy: Energy,
    /// Gleaner's consolidation controller, one row per VM and interval.
    pub gleaner: Vec<crate::guest::gleaner::GleanerRow>,
    pub histograms: BTreeMap<String, HistSummary>,
    /// Per VM, per epoch of PLE exits: window and inefficiency (hv/ple_epochs.rs).
    pub ple_epochs: Vec<crate::hv::ple_epochs::PleEpochRow>,
    /// The cache study (run.mode = "cache_study"): one row per VM (host/llc_study.rs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub llc: Vec<crate::host::llc_study::LlcRow>,
    /// Per VM with a NIC: the open-loop UDP stream it received (guest/nic.rs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<NetRow>,
    /// Demand-based coordinated scheduling's counters (hv/uvf.rs), when it is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcs: Option<crate::hv::uvf::UvfStats>,
    /// Mechanisms the run was too short to let act (Gleaner's controller, APPLE's
    /// window search): the figures above then show their start-up, not the mechanism;
    /// and VMs in a PLE-exit storm, whose cost rests on the exit handler's, which the
    /// cost table has only in part.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Warnings for adaptive mechanisms that had no time to act in a run ending at `end_ns`.
fn too_short_warnings(sc: &Scenario, w: &World, end_ns: u64) -> Vec<String> {
    let mut out = Vec::new();
    let ms = |ns: u64| ns as f64 / 1e6;
    for m in &w.vms {
        let Some(g) = &m.gleaner else { continue };
        if g.controller.is_some() && g.intervals < 2 {
            out.push(format!(
                "vm {}: Gleaner's controller measured {} time(s) in a {:.1} ms run (interval \
                 {:.0} ms), so consolidation had no time to act; run longer (a workload with \
                 `forever = true` and a longer run.duration) to see it",
                m.name,
                g.intervals,
                ms(end_ns),
                ms(g.interval.0)
            ));
        }
    }
    if sc.host.ple.policy == crate::scenario::PlePolicy::Apple {
        for (i, m) in w.vms.iter().enumerate() {
            let closed = w.ple_epochs.closed(i);
            if m.ple_exits > 0 && closed == 0 {
                out.push(format!(
                    "vm {}: APPLE closed no epoch ({} PLE exits, {} per epoch), so its window \
                     stayed at the initial one; with this few exits that may not matter, \
                     otherwise run longer to see APPLE adapt",
                    m.name, m.ple_exits, sc.host.ple.epoch_exits
                ));
            }
        }
    }
    out
}

/// PLE exits per vCPU-second above which a run's result rests on the cost of handling
/// an exit: 1 µs per exit of handler cost that is assumed rather than measured (the
/// candidate scan, yield_to) would be 1% of the vCPUs' time.
pub const PLE_STORM_EXITS_PER_VCPU_S: f64 = 10_000.0;

/// Warnings for VMs in a PLE-exit storm (docs/model.md, Known gaps: how deep a storm
/// goes depends on the handler's cost, which the model charges only in part and from
/// assumed figures).
fn ple_storm_warnings(w: &World, end_ns: u64) -> Vec<String> {
    let secs = end_ns as f64 / 1e9;
    if secs <= 0.0 {
        return Vec::new();
    }
    w.vms
        .iter()
        .filter_map(|m| {
            let rate = m.ple_exits as f64 / (m.nvcpus.max(1) as f64 * secs);
            (rate > PLE_STORM_EXITS_PER_VCPU_S).then(|| {
                format!(
                    "vm {}: {:.0} PLE exits per vCPU-second, a PLE-exit storm: the model \
                     charges an exit its VM exit and entry, KVM's candidate scan and its \
                     yield_to calls (assumed costs) and the schedule() that picks a lone \
                     yielder again (measured), so how much work the storm costs rests \
                     partly on assumed costs (docs/model.md, Known gaps)",
                    m.name, rate
                )
            })
        })
        .collect()
}

/// Weighted max-min fair allocation of `capacity` among claimants with (weight, max).
/// Whether the host scheduler weighs each vCPU with its VM's weight (so a VM with more
/// busy vCPUs is entitled to more), rather than each VM as a whole (a task group per VM,
/// or co-scheduling's per-VM slices).
fn per_vcpu_weights(s: &crate::scenario::SchedulerConfig) -> bool {
    use crate::scenario::SchedulerConfig as S;
    match s {
        S::Cfs(p) => !p.per_vm_groups,
        S::Eevdf(p) => !p.per_vm_groups,
        S::Credit(_) | S::Credit2(_) | S::RelaxedCo(_) => true,
        S::Gang(_) => false,
    }
}

pub fn water_fill(capacity: f64, claims: &[(f64, f64)]) -> Vec<f64> {
    let mut alloc = vec![0.0; claims.len()];
    let mut open: Vec<usize> = (0..claims.len()).filter(|&i| claims[i].0 > 0.0).collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-12 {
        let wsum: f64 = open.iter().map(|&i| claims[i].0).sum();
        let mut saturated = Vec::new();
        for &i in &open {
            let give = left * claims[i].0 / wsum;
            if alloc[i] + give >= claims[i].1 - 1e-12 {
                saturated.push(i);
            }
        }
        if saturated.is_empty() {
            for &i in &open {
                alloc[i] += left * claims[i].0 / wsum;
            }
            break;
        }
        for &i in &saturated {
            left -= claims[i].1 - alloc[i];
            alloc[i] = claims[i].1;
        }
        open.retain(|i| !saturated.contains(i));
    }
    alloc
}

/// A counter of the VM's consolidation controller (0 without one).
fn ctl(m: &crate::hv::vm::Vm, f: impl Fn(&crate::guest::consolidation::Controller) -> u64) -> u64 {
    m.gleaner
        .as_ref()
        .and_then(|g| g.controller.as_ref())
        .map_or(0, f)
}

pub fn jain(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (n * s2)
    }
}

impl Report {
    /// The report of `w`, run from `sc`; `hash` names the scenario as the user gave it
    /// (`scenario_hash`; empty for the internal runs of another mode).
    pub fn build(sc: &Scenario, w: &World, cause: StopCause, hash: String) -> Report {
        let end = w.now.0;
        let npc = w.pcpus.len() as f64;
        let total_cpu = npc * end as f64;
        let times: Vec<TimeBreakdown> = w
            .vms
            .iter()
            .map(|m| {
                let mut t = TimeBreakdown::default();
                for v in &w.vcpus[m.first_vcpu as usize..(m.first_vcpu + m.nvcpus) as usize] {
                    t.add(&TimeBreakdown::of(v));
                }
                t
            })
            .collect();
        // A VM is entitled to its weighted max-min fair share of the pCPUs, up to what
        // it can use (its vCPUs, its cap) and what it asked for: the time its vCPUs
        // were on a pCPU or waiting for one. A VM that sleeps most of the time is
        // entitled to what it wanted, not to a share it never asked for.
        let demand_of = |t: &TimeBreakdown, max: f64| {
            if end > 0 {
                (t.cpu_ns + t.runnable_ns) as f64 / end as f64
            } else {
                max
            }
        };
        let ent = if per_vcpu_weights(&sc.host.scheduler) {
            // Schedulers that weigh each vCPU with its VM's weight (Xen credit and
            // credit2, Linux without a task group per VM): the max-min share is one of
            // vCPUs, each up to one pCPU and its own demand; a VM's cap scales its
            // vCPUs' claims down together when it binds.
            let mut claims = Vec::new();
            let mut owner = Vec::new();
            for (i, m) in w.vms.iter().enumerate() {
                let vs = &w.vcpus[m.first_vcpu as usize..(m.first_vcpu + m.nvcpus) as usize];
                let wants: Vec<f64> = vs
                    .iter()
                    .map(|v| demand_of(&TimeBreakdown::of(v), 1.0).min(1.0))
                    .collect();
                let total: f64 = wants.iter().sum();
                let scale = m.cap.map_or(1.0, |c| {
                    if total > c / 100.0 {
                        c / 100.0 / total
                    } else {
                        1.0
                    }
                });
                for want in wants {
                    claims.push((m.weight as f64, want * scale));
                    owner.push(i);
                }
            }
            let per_vcpu = water_fill(npc, &claims);
            let mut ent = vec![0.0; w.vms.len()];
            for (a, i) in per_vcpu.iter().zip(owner) {
                ent[i] += a;
            }
            ent
        } else {
            let claims: Vec<(f64, f64)> = w
                .vms
                .iter()
                .zip(&times)
                .map(|(m, t)| {
                    let max = m
                        .cap
                        .map_or(m.nvcpus as f64, |c| (c / 100.0).min(m.nvcpus as f64));
                    (m.weight as f64, max.min(demand_of(t, max)))
                })
                .collect();
            water_fill(npc, &claims)
        };
        let secs = (end as f64 / 1e9).max(1e-12);
        // Lock-holder and lock-waiter preemptions per VM, in one pass over the lock
        // classes (a filter per VM was quadratic on hosts of a thousand VMs).
        let mut lock_preemptions = vec![(0u64, 0u64); w.vms.len()];
        for c in &w.lock_classes {
            let (lhp, lwp) = &mut lock_preemptions[c.vm.idx()];
            *lhp += c.lhp;
            *lwp += c.lwp;
        }
        let mut vms = Vec::new();
        let mut all_wake = Hist::default();
        // Each VM's wake-up latency over its paths, merged once (also read for the
        // histograms below).
        let vm_wake: Vec<Hist> = w.vms.iter().map(|m| m.wake_latency()).collect();
        for (i, m) in w.vms.iter().enumerate() {
            let vs = &w.vcpus[m.first_vcpu as usize..(m.first_vcpu + m.nvcpus) as usize];
            let t = times[i].clone();
            let share = if total_cpu > 0.0 {
                t.cpu_ns as f64 / total_cpu
            } else {
                0.0
            };
            let entitlement = ent[i] / npc;
            let halts: u64 = vs.iter().map(|v| v.halts).sum();
            let finished = m.finite_threads > 0 && m.finished_threads == m.finite_threads;
            let run_s = match m.completion {
                Some(c) => (c.0 as f64 / 1e9).max(1e-12),
                None => secs,
            };
            let wake_latency = &vm_wake[i];
            all_wake.merge(wake_latency);
            vms.push(VmRow {
                vm: m.name.clone(),
                model: m.model.clone(),
                vcpus: m.nvcpus,
                weight: m.weight,
                cap_pct: m.cap,
                time: t,
                cpu_share: share,
                entitlement,
                share_ratio: if entitlement > 0.0 {
                    share / entitlement
                } else {
                    f64::NAN
                },
                finished,
                completion_ns: m.completion.map(|c| c.0),
                work_units: m.units,
                throughput_per_s: m.units as f64 / run_s,
                vcpu_switches: vs.iter().map(|v| v.switches).sum(),
                migrations: vs.iter().map(|v| v.migrations).sum(),
                halts,
                wakes: vs.iter().map(|v| v.wakes).sum(),
                affine_wakes: vs.iter().map(|v| v.affine_wakes).sum(),
                idle_transitions_per_s: halts as f64 / secs / m.nvcpus.max(1) as f64,
                cache_refill_ns: vs.iter().map(|v| v.refill_ns).sum(),
                wake_latency_count: wake_latency.count(),
                wake_latency_mean_ns: wake_latency.mean_or_nan(),
                wake_latency_p50_ns: wake_latency.quantile_opt(0.5),
                wake_latency_p99_ns: wake_latency.quantile_opt(0.99),
                dispatch_wait_count: m.dispatch_wait.count(),
                dispatch_wait_mean_ns: m.dispatch_wait.mean_or_nan(),
                dispatch_wait_p99_ns: m.dispatch_wait.quantile_opt(0.99),
                ple_exits: m.ple_exits,
                ple_yields_ok: m.yields_ok,
                ple_yields_failed: m.yields_failed,
                lhp: lock_preemptions[i].0,
                lwp: lock_preemptions[i].1,
                tlb_shootdowns: m.tlb_shootdowns,
                thread_switches: m.thread_switches,
                futex_calls: m.futex_calls,
                guest_affine_wakes: m.guest_affine_wakes,
                ipis_resched: m.ipi_resched.count(),
                ipis_tlb: m.ipi_tlb.count(),
                icr_exits: m.exits.icr,
                irq_exits: m.exits.irq,
                eoi_exits: m.exits.eoi,
                timer_exits: m.exits.timer,
                tlb_wait_mean_ns: m.tlb_wait.mean_or_nan(),
                halt_poll_hits: m.halt_poll_hits,
                halt_poll_misses: m.halt_poll_misses,
                ple_coschedules: w.cosched[i].coschedules,
                ple_cosched_vcpus: w.cosched[i].cosched_vcpus,
                ple_yield_head: w.cosched[i].yield_head,
                ple_yield_tail: w.cosched[i].yield_tail,
                cvs_decisions: w.cosched[i].cvs_decisions,
                cvs_decision_ns: w.cosched[i].cvs_decision_ns,
                ple_cosched_fallbacks: w.cosched[i].cosched_fallbacks,
                active_vcpus_mean: m
                    .gleaner
                    .as_ref()
                    .map_or(m.nvcpus as f64, |g| g.mean_active(w.now)),
                active_vcpus_min: m.gleaner.as_ref().map_or(m.nvcpus, |g| g.min_active),
                active_vcpus_final: m.gleaner.as_ref().map_or(m.nvcpus, |g| g.active),
                gleaner_deactivations: ctl(m, |c| c.deactivations),
                gleaner_restores: ctl(m, |c| c.restores),
                gleaner_reactivations: ctl(m, |c| c.reactivations),
                gleaner_idle_periods: m
                    .gleaner
                    .as_ref()
                    .map_or(0, |g| g.yielders.iter().map(|y| y.streaks).sum()),
                gleaner_sleeps: m
                    .gleaner
                    .as_ref()
                    .map_or(0, |g| g.yielders.iter().map(|y| y.sleeps).sum()),
            });
        }
        let vcpus = w
            .vcpus
            .iter()
            .map(|v| VcpuRow {
                vm: w.vms[v.vm.idx()].name.clone(),
                vcpu: v.index,
                time: TimeBreakdown::of(v),
                switches: v.switches,
                migrations: v.migrations,
                halts: v.halts,
                wakes: v.wakes,
                affine_wakes: v.affine_wakes,
                cache_refill_ns: v.refill_ns,
            })
            .collect();
        let busy: u64 = w
            .pcpus
            .iter()
            .map(|p| (p.guest_ns + p.overhead_ns + p.poll_ns).min(end))
            .sum();
        let halted = (end * w.pcpus.len() as u64).saturating_sub(busy);
        let joules =
            (busy as f64 * sc.host.power.busy_w + halted as f64 * sc.host.power.halted_w) / 1e9;
        let energy = Energy {
            busy_pcpu_ns: busy,
            halted_pcpu_ns: halted,
            joules,
            mean_w: joules / secs,
        };
        let gleaner = w
            .vms
            .iter()
            .filter_map(|m| m.gleaner.as_ref())
            .flat_map(|g| g.rows.iter().cloned())
            .collect();
        let pcpus = w
            .pcpus
            .iter()
            .enumerate()
            .map(|(i, p)| PcpuRow {
                pcpu: i as u32,
                guest_ns: p.guest_ns,
                overhead_ns: p.overhead_ns,
                idle_ns: end.saturating_sub(p.guest_ns + p.overhead_ns + p.poll_ns),
                poll_ns: p.poll_ns,
                idle_runnable_ns: w.frag.idle_runnable_ns[i],
                runq_mean: w.runq.mean(i),
            })
            .collect();
        let runq_length = RunqRow::distribution(&w.runq, w.pcpus.len());
        let locks = w
            .lock_classes
            .iter()
            .filter(|c| c.acquisitions > 0)
            .map(|c| LockRow {
                vm: w.vms[c.vm.idx()].name.clone(),
                lock: c.name.clone(),
                kind: c.kind.as_str(),
                acquisitions: c.acquisitions,
                contended: c.contended,
                wait_mean_ns: c.wait.mean_or_nan(),
                wait_p99_ns: c.wait.quantile_opt(0.99),
                wait_max_ns: c.wait.max_opt(),
                hold_mean_ns: c.hold.mean_or_nan(),
                hold_p99_ns: c.hold.quantile_opt(0.99),
                lhp: c.lhp,
                lhp_slice: c.lhp_by.get(PreemptCause::Slice),
                lhp_wakeup: c.lhp_by.get(PreemptCause::Wakeup),
                lhp_directed_yield: c.lhp_by.get(PreemptCause::DirectedYield),
                lhp_own_yield: c.lhp_by.get(PreemptCause::OwnYield),
                lhp_coordination: c.lhp_by.get(PreemptCause::Coordination),
                lwp: c.lwp,
                halts: c.halts,
                kicks: c.kicks,
                steals: c.steals,
            })
            .collect();
        let mut latencies = Vec::new();
        for m in &w.vms {
            for (k, h) in crate::guest::ipi::PATH_NAMES
                .iter()
                .zip(m.wake_paths.iter())
            {
                if h.count() > 0 {
                    latencies.push(latency_row(&m.name, &format!("wake/{k}"), h));
                }
            }
            for (k, h) in [
                ("ipi/resched", &m.ipi_resched),
                ("ipi/tlb", &m.ipi_tlb),
                ("tlb_wait", &m.tlb_wait),
                ("irq", &m.irq_latency),
                ("dispatch_wait", &m.dispatch_wait),
            ] {
                if h.count() > 0 {
                    latencies.push(latency_row(&m.name, k, h));
                }
            }
        }
        let ratios: Vec<f64> = vms
            .iter()
            .filter(|r| r.entitlement > 0.0)
            .map(|r| r.share_ratio)
            .collect();
        let mut histograms = BTreeMap::new();
        histograms.insert("wake_latency".to_string(), all_wake.summary());
        for c in w.lock_classes.iter().filter(|c| c.acquisitions > 0) {
            let vm = &w.vms[c.vm.idx()].name;
            histograms.insert(format!("lock_wait/{vm}/{}", c.name), c.wait.summary());
            histograms.insert(format!("lock_hold/{vm}/{}", c.name), c.hold.summary());
        }
        for (m, wake) in w.vms.iter().zip(&vm_wake) {
            histograms.insert(format!("wake_latency/{}", m.name), wake.summary());
            histograms.insert(
                format!("dispatch_wait/{}", m.name),
                m.dispatch_wait.summary(),
            );
            for (k, h) in crate::guest::ipi::PATH_NAMES
                .iter()
                .zip(m.wake_paths.iter())
            {
                if h.count() > 0 {
                    histograms.insert(format!("wake_latency/{}/{k}", m.name), h.summary());
                }
            }
        }
        Report {
            schema: 1,
            core_version: CORE_VERSION,
            scenario: ScenarioInfo::of(sc, hash),
            end_ns: end,
            stop_reason: match cause {
                StopCause::AllFinished => "all-finished",
                StopCause::Duration => "duration",
                StopCause::EventBudget => "event-budget",
                StopCause::NoProgress(_) => "no-progress",
                StopCause::Aborted => "aborted",
            },
            events: w.events,
            vms,
            vcpus,
            pcpus,
            runq_length,
            locks,
            latencies,
            modes: Vec::new(),
            fairness: Fairness {
                jain_index: jain(&ratios),
            },
            energy,
            gleaner,
            histograms,
            ple_epochs: w.ple_epoch_rows(w.now),
            llc: Vec::new(),
            dcs: w.uvf.as_ref().map(|u| u.stats.clone()),
            net: w
                .nics
                .iter()
                .map(|n| NetRow::of(n, &w.vms[n.vm.idx()].name, end))
                .collect(),
            warnings: {
                let mut v = too_short_warnings(sc, w, end);
                v.extend(ple_storm_warnings(w, end));
                v
            },
        }
    }

    /// The report of a cache study: its `llc` table, the other tables empty.
    pub fn of_cache_study(sc: &Scenario, llc: Vec<crate::host::llc_study::LlcRow>) -> Report {
        Report {
            schema: 1,
            core_version: CORE_VERSION,
            scenario: ScenarioInfo::of(sc, scenario_hash(sc)),
            end_ns: sc.run.duration.0 .0,
            stop_reason: "duration",
            events: llc.iter().map(|r| r.simulated_accesses).sum(),
            vms: Vec::new(),
            vcpus: Vec::new(),
            pcpus: Vec::new(),
            runq_length: Vec::new(),
            locks: Vec::new(),
            latencies: Vec::new(),
            modes: Vec::new(),
            fairness: Fairness { jain_index: 1.0 },
            energy: Energy {
                busy_pcpu_ns: 0,
                halted_pcpu_ns: 0,
                joules: 0.0,
                mean_w: 0.0,
            },
            gleaner: Vec::new(),
            histograms: BTreeMap::new(),
            ple_epochs: Vec::new(),
            llc,
            dcs: None,
            net: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn water_fill_respects_weights_and_caps() {
        let a = water_fill(4.0, &[(1.0, 4.0), (1.0, 4.0), (2.0, 4.0), (4.0, 4.0)]);
        assert!((a[0] - 0.5).abs() < 1e-9 && (a[3] - 2.0).abs() < 1e-9);
        let b = water_fill(2.0, &[(1.0, 0.5), (1.0, 4.0)]);
        assert!((b[0] - 0.5).abs() < 1e-9 && (b[1] - 1.5).abs() < 1e-9);
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!(jain(&[1.0, 0.0]) < 0.51);
    }
}
