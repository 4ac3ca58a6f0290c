//! The scenario: everything a run depends on besides the seed. Parsed from TOML with
//! every unknown key rejected, merged over a preset, with `--set` overrides applied,
//! then validated. Defaults live here, in the `Default` impls, and nowhere else.

mod load;
pub(crate) use load::default_preset;
pub mod modes;
pub mod platforms;
mod presets;
mod validate;

pub use load::{apply_override, resolve, ScenarioError};
pub use presets::{chain as preset_chain, preset_names, PRESETS};
pub use validate::vcpu_masks;

use crate::sim::Nanos;
use crate::workload::program::OpSpec;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as a string ("10s", "500us").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dur(pub Nanos);

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}
impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        struct DurVisitor;
        const UNITS: &str = "a number with a unit ns, us, ms or s";
        impl serde::de::Visitor<'_> for DurVisitor {
            type Value = Dur;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a duration: {UNITS}, in quotes (e.g. \"10ms\")")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Dur, E> {
                crate::sim::time::parse_duration(s).map(Dur).ok_or_else(|| {
                    E::custom(format!(
                        "{s:?} is not a duration; expected {UNITS} (e.g. \"10ms\")"
                    ))
                })
            }
            // A bare number has no unit: say so, with the number written as one.
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{n} is not a duration (no unit); expected {UNITS}, in quotes (e.g. \"{n}ms\")"
                )))
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Dur, E> {
                self.visit_i64(i64::try_from(n).unwrap_or(i64::MAX))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "{n} is not a duration (no unit); expected {UNITS}, in quotes (e.g. \"{n}ms\")"
                )))
            }
        }
        d.deserialize_any(DurVisitor)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The preset the scenario was built on (informational once resolved).
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub run: RunConfig,
    #[serde(default)]
    pub host: HostConfig,
    /// Guest defaults for every VM (a VM's own `guest` table overrides them).
    #[serde(default)]
    pub guest: GuestConfig,
    #[serde(default)]
    pub vm: Vec<VmConfig>,
}

fn default_name() -> String {
    "unnamed".into()
}
fn default_seed() -> u64 {
    1
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// Upper bound on simulated time. The run ends earlier when every fixed-work
    /// workload has finished.
    pub duration: Dur,
    /// Latency histograms (wake-up, IPI, dispatch wait, lock wait and hold, TLB
    /// shootdown, interrupts) record only after this warm-up; time accounting and
    /// counters cover the whole run.
    pub warmup: Dur,
    /// How the scenario runs: consolidated as written, or its focus VM alone natively
    /// or dedicated.
    pub mode: Mode,
    /// The VM that `native`/`dedicated` run and compare (default: the first).
    pub focus: Option<String>,
    /// Also run the focus VM in these modes and report its slowdown against them.
    pub compare: Vec<Mode>,
    /// Event budget: the run ends with an error after this many events (default
    /// `DEFAULT_MAX_EVENTS`, about half an hour of host time at 10 M events/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_events: Option<u64>,
}

/// The event budget of a run that does not set `run.max_events`.
pub const DEFAULT_MAX_EVENTS: u64 = 20_000_000_000;
impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration: Dur(Nanos::from_ms(10_000)),
            warmup: Dur(Nanos::ZERO),
            mode: Mode::Consolidated,
            focus: None,
            compare: Vec::new(),
            max_events: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// As written: VMs share the host under its scheduler.
    Consolidated,
    /// The focus VM alone, one pCPU per vCPU, each vCPU pinned.
    Dedicated,
    /// The focus VM's threads on bare metal: dedicated, without virtualization costs.
    Native,
    /// Equal-capped solo: the focus VM alone on the same host and scheduler, capped at
    /// the CPU share it had when consolidated (the reference of the micro-sliced vCPU
    /// study, Ahn et al., MICRO 2014).
    SoloCapped,
    /// The last-level-cache study (host/llc_study.rs): the VMs' single vCPUs time-share
    /// one core round-robin with the credit scheduler's slice, sharing a simulated LLC
    /// (`host.cache.llc`); the report's `llc` table has CPI, MPKI and traffic per VM.
    CacheStudy,
}
impl Mode {
    /// The name scenarios and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Consolidated => "consolidated",
            Mode::Dedicated => "dedicated",
            Mode::Native => "native",
            Mode::SoloCapped => "solo_capped",
            Mode::CacheStudy => "cache_study",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostConfig {
    /// The platform profile (scenario/platforms.rs) whose keys were filled in under the
    /// preset and the scenario: hypervisor, version and CPU generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    pub pcpus: u32,
    pub clock_ghz: f64,
    /// SMT and NUMA (host/topology.rs); written out only when not the default (one
    /// thread per core, one node).
    #[serde(skip_serializing_if = "TopologyConfig::is_default")]
    pub topology: TopologyConfig,
    pub scheduler: SchedulerConfig,
    pub costs: CostTable,
    pub cache: CacheConfig,
    pub ple: PleConfig,
    pub halt_poll: HaltPollConfig,
    /// APICv with posted interrupts (KVM `enable_apicv`): no exit to deliver an
    /// interrupt to a running vCPU and no EOI exit.
    pub posted_interrupts: bool,
    /// IPI virtualization (Intel IPIv, KVM `enable_ipiv`, Linux 5.19+): the sender's
    /// ICR write does not exit.
    pub ipi_virtualization: bool,
    /// Demand-based coordinated scheduling (hv/uvf.rs): IPIs as coordination signals.
    pub dcs: DcsConfig,
    /// Power of a pCPU, for the report's energy proxy.
    pub power: PowerConfig,
}

/// The host's SMT and NUMA layout (host/topology.rs). Its last-level caches are the
/// scheduler's `llc_pcpus`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopologyConfig {
    /// Hardware threads per core (SMT): consecutive pCPUs share a core.
    pub threads_per_core: u32,
    /// NUMA nodes: the host's pCPUs split into this many consecutive runs of whole
    /// LLCs. A scheduling domain only (the memory's placement is not modelled).
    pub numa_nodes: u32,
    /// The speed at which a hardware thread runs guest work while another thread of its
    /// core is busy, relative to running alone. 0.65: two busy threads do 1.3× a lone
    /// one's work, the upper end of Hyper-Threading's gain on server workloads (Marr et
    /// al., "Hyper-Threading Technology Architecture and Microarchitecture", Intel
    /// Technology Journal 6(1), 2002: up to 30%).
    pub sibling_busy_speed: f64,
    /// Remote over local memory latency, for a VM whose memory is bound to another
    /// node (`vm.numa_node`): the cache model's per-KiB fetch cost is this much higher.
    /// 1.6, assumed: between the idle-latency ratios measured on two-socket servers
    /// (about 1.5) and the relative distance their firmware reports (ACPI SLIT 21 against
    /// 10 local).
    pub remote_memory_ratio: f64,
}
impl Default for TopologyConfig {
    fn default() -> Self {
        TopologyConfig {
            threads_per_core: 1,
            numa_nodes: 1,
            sibling_busy_speed: 0.65,
            remote_memory_ratio: 1.6,
        }
    }
}
impl TopologyConfig {
    pub fn is_default(&self) -> bool {
        *self == TopologyConfig::default()
    }
}

/// Demand-based coordinated scheduling (Kim et al., ASPLOS 2013): which IPIs are
/// coordination signals, and urgent-vCPU-first's two parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcsConfig {
    /// TLB-Co: a TLB-shootdown IPI makes its recipients urgent.
    pub tlb_co: bool,
    /// Resched-DP: a reschedule IPI protects its sender from preemption for utslice
    /// (it likely holds a wait-queue lock).
    pub resched_dp: bool,
    /// Resched-Co: a reschedule IPI makes its recipient urgent, for the VMs named here
    /// (spin-then-block barrier workloads); `["*"]`: every VM.
    pub resched_co: Vec<String>,
    /// The urgent time slice: how long an urgent (or Resched-DP) vCPU is protected.
    pub utslice_us: f64,
    /// How far ahead of its fair share a vCPU may run and still become urgent.
    pub urgent_allowance_ms: f64,
}
impl Default for DcsConfig {
    fn default() -> Self {
        DcsConfig {
            tlb_co: false,
            resched_dp: false,
            resched_co: Vec::new(),
            utslice_us: 500.0,
            urgent_allowance_ms: 6.0,
        }
    }
}
impl DcsConfig {
    /// Whether any IPI is a coordination signal (urgent-vCPU-first is in use).
    pub fn enabled(&self) -> bool {
        self.tlb_co || self.resched_dp || !self.resched_co.is_empty()
    }
}

/// The energy proxy's power per pCPU: busy (running a vCPU, its entry/exit, or host
/// halt polling) and halted (idle in C1). Assumed values, see docs/model.md.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PowerConfig {
    pub busy_w: f64,
    pub halted_w: f64,
}
impl Default for PowerConfig {
    fn default() -> Self {
        PowerConfig {
            busy_w: 12.0,
            halted_w: 4.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlePolicy {
    /// Pause-loop exiting disabled: spinners spin until they get the lock.
    Off,
    /// A fixed window.
    Fixed,
    /// KVM's per-vCPU window: grow on every PLE exit, shrink when scheduled back in.
    Kvm,
    /// APPLE: one window per VM, searched epoch by epoch for the least inefficiency
    /// (hv/apple.rs; parameters in `host.ple.apple`).
    Apple,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PleAction {
    /// KVM's kvm_vcpu_on_spin: directed yield to a preempted sibling vCPU.
    DirectedYield,
    /// Xen: the spinner yields (behind the vCPUs of its priority and one lower-priority
    /// vCPU, as credit1's runq_insert with the yield flag).
    Yield,
    /// Yield-to-head: the spinner gives its pCPU to the next queued vCPU and is put at
    /// the head of its runqueue, so it runs again right after that one.
    YieldToHead,
    /// Yield-to-tail: the spinner is put at the tail of its runqueue, behind every
    /// queued vCPU whatever its priority.
    YieldToTail,
    /// Co-schedule the spinner's VM now: its preempted siblings run at once on pCPUs
    /// not running the VM (hv/cosched.rs).
    Coschedule,
    /// CVS: co-schedule, yield-to-head or yield-to-tail by the vCPU over-commitment
    /// rate at the exit (thresholds `cvs_coschedule_below`, `cvs_yield_head_below`).
    Cvs,
}

/// Pause-loop exiting (arch/x86/kvm/vmx/vmx.c defaults, in TSC cycles).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PleConfig {
    pub policy: PlePolicy,
    pub window_cycles: u64,
    pub grow: u64,
    pub shrink: u64,
    pub max_cycles: u64,
    pub action: PleAction,
    /// CVS: co-schedule while VOR (runnable vCPUs / pCPUs) is below this.
    pub cvs_coschedule_below: f64,
    /// CVS: else yield-to-head while VOR is below this, else yield-to-tail. Equal to
    /// `cvs_coschedule_below`: the variant without yield-to-head.
    pub cvs_yield_head_below: f64,
    /// An epoch of a VM ends after this many of its PLE exits (APPLE's epoch, and the
    /// unit of the report's `ple_epochs` series under every policy).
    pub epoch_exits: u64,
    pub apple: AppleConfig,
    /// Linux 5.3 and later (kvm_vcpu_on_spin with kvm_arch_dy_has_pending_interrupt): in
    /// yield-to-kernel mode, a candidate preempted in user mode is still a target when
    /// an interrupt is pending for it. Off on the studies' older hosts.
    pub pending_irq_counts_as_kernel: bool,
    /// Which vCPUs KVM's kvm_vcpu_on_spin looks at (virt/kvm/kvm_main.c), by kernel.
    pub candidates: PleCandidates,
    /// Linux 4.14 and later (kvm_vcpu_on_spin's `yield_to_kernel_mode`): a vCPU spinning
    /// in kernel mode passes over candidates preempted in user mode. Off on the 3.x
    /// study hosts, whose handler looks at every candidate whatever its mode.
    pub yield_to_kernel_mode: bool,
    /// Linux 3.7 and later (kvm_vcpu_eligible_for_directed_yield, "KVM: Choose better
    /// candidate for directed yield"): a candidate inside its own PLE handler is eligible
    /// every other time it is looked at. Off on DCS's 3.2 host, which tries every one.
    pub dy_eligible: bool,
    /// Linux before 3.16: when the spinner's and the candidate's runqueues each hold one
    /// task, yield_to's answer reaches kvm_vcpu_on_spin as a success — before 3.8 there
    /// is no such check and the boost succeeds (the spinner, alone, is picked again);
    /// 3.8 to 3.15 return -ESRCH through a `bool` ("sched: Fix signedness bug in
    /// yield_to()", 2014) — so the scan stops at that candidate, records it as the last
    /// boosted, and the spinner keeps its pCPU. Off (Linux 3.16+): -ESRCH uses one of
    /// three tries and the scan goes on.
    pub esrch_ends_scan: bool,
    /// Spins in user mode (a library's mutex, barrier or read-write lock spin) exit too.
    /// Off: Intel VT-x's PAUSE-loop exiting watches only CPL 0 (Intel SDM vol. 3,
    /// 25.1.3, "PAUSE-loop exiting" is ignored if CPL > 0; arch/x86/kvm/vmx/vmx.c
    /// `handle_pause` calls kvm_vcpu_on_spin(vcpu, true) for that reason), which every
    /// modelled CPU is. On: AMD's pause filter, which counts PAUSE at any CPL
    /// (arch/x86/kvm/svm/svm.c `pause_interception`: in_kernel = CPL == 0).
    pub user_mode_exits: bool,
}

/// The candidates of KVM's directed yield, as each kernel's kvm_vcpu_on_spin chooses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PleCandidates {
    /// Before the `preempted` flag: every other vCPU not blocked in halt
    /// (`waitqueue_active(&vcpu->wq)`), a running one included (its yield_to fails) and
    /// one woken from halt that has not run yet.
    NotHalted,
    /// `vcpu->preempted` (set by kvm_sched_out only when the vCPU thread was still
    /// runnable): vCPUs preempted while running; one woken from halt is not a candidate
    /// until it has run and been preempted.
    Preempted,
    /// `vcpu->ready` (July 2019, Linux 5.3 or 5.4: "KVM: Boost vCPUs that are delivering
    /// interrupts"): preempted vCPUs and vCPUs woken from halt that have not run yet.
    Ready,
}

impl PleCandidates {
    /// The scenario value (`host.ple.candidates`).
    pub fn as_str(self) -> &'static str {
        match self {
            PleCandidates::NotHalted => "not-halted",
            PleCandidates::Preempted => "preempted",
            PleCandidates::Ready => "ready",
        }
    }
}

impl Default for PleConfig {
    fn default() -> Self {
        PleConfig {
            policy: PlePolicy::Kvm,
            window_cycles: 4096,
            grow: 2,
            shrink: 0,
            max_cycles: u32::MAX as u64,
            action: PleAction::DirectedYield,
            cvs_coschedule_below: 3.0,
            cvs_yield_head_below: 5.0,
            epoch_exits: 1000,
            apple: AppleConfig::default(),
            pending_irq_counts_as_kernel: false,
            candidates: PleCandidates::Ready,
            yield_to_kernel_mode: true,
            dy_eligible: true,
            esrch_ends_scan: false,
            user_mode_exits: false,
        }
    }
}

/// APPLE's threshold search (APPLE's published algorithm and defaults), in TSC cycles.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppleConfig {
    /// T_0: the first threshold.
    pub initial_cycles: u64,
    /// T_l and T_u: the search stays within them.
    pub lower_cycles: u64,
    pub upper_cycles: u64,
    /// δ: the probes run at T_d + δ and T_d − δ.
    pub step_cycles: u64,
}
impl Default for AppleConfig {
    fn default() -> Self {
        AppleConfig {
            initial_cycles: 8192,
            lower_cycles: 4096,
            upper_cycles: 32768,
            step_cycles: 1024,
        }
    }
}

/// KVM host halt polling (virt/kvm/kvm_main.c).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HaltPollConfig {
    pub enabled: bool,
    pub max_us: f64,
    pub grow: u64,
    pub grow_start_us: f64,
    pub shrink: u64,
}
impl Default for HaltPollConfig {
    fn default() -> Self {
        HaltPollConfig {
            enabled: false,
            max_us: 200.0,
            grow: 2,
            grow_start_us: 10.0,
            shrink: 2,
        }
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            platform: None,
            pcpus: 4,
            clock_ghz: 3.0,
            topology: TopologyConfig::default(),
            scheduler: SchedulerConfig::Cfs(CfsParams::default()),
            costs: CostTable::default(),
            cache: CacheConfig::default(),
            ple: PleConfig::default(),
            halt_poll: HaltPollConfig::default(),
            posted_interrupts: false,
            ipi_virtualization: false,
            dcs: DcsConfig::default(),
            power: PowerConfig::default(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SchedulerConfig {
    /// Linux CFS as KVM's host scheduler.
    Cfs(CfsParams),
    /// Linux EEVDF (6.6 and later) as KVM's host scheduler.
    Eevdf(EevdfParams),
    /// Xen's credit scheduler.
    Credit(CreditParams),
    /// Xen's credit2 scheduler (the default since Xen 4.12).
    Credit2(Credit2Params),
    /// Strict co-scheduling (gang): a VM's runnable vCPUs run together or not at all.
    Gang(GangParams),
    /// Xen credit with VMware-ESX-style relaxed co-scheduling (a skew bound).
    RelaxedCo(RelaxedCoParams),
}
impl SchedulerConfig {
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerConfig::Cfs(_) => "cfs",
            SchedulerConfig::Eevdf(_) => "eevdf",
            SchedulerConfig::Credit(_) => "credit",
            SchedulerConfig::Credit2(_) => "credit2",
            SchedulerConfig::Gang(_) => "gang",
            SchedulerConfig::RelaxedCo(_) => "relaxed_co",
        }
    }

    /// pCPUs per last-level cache: the Linux schedulers' `llc_pcpus`; other hosts have
    /// no key for it and take the same default (an LLC's worth of pCPUs).
    pub fn llc_pcpus(&self) -> u32 {
        match self {
            SchedulerConfig::Cfs(c) => c.llc_pcpus,
            SchedulerConfig::Eevdf(c) => c.llc_pcpus,
            _ => crate::hv::sched::DEFAULT_LLC_PCPUS,
        }
    }
}

/// Pre-6.6 CFS, scaled as Linux scales it for 8+ CPUs (factor 1 + log2(8) = 4).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CfsParams {
    pub latency_ms: f64,
    pub min_granularity_ms: f64,
    pub wakeup_granularity_ms: f64,
    /// A vCPU that ran this recently is cache-hot: load balancing leaves it alone.
    pub migration_cost_us: f64,
    /// The sched domains' balance intervals (hv/sched/balance.rs): "fixed" (Linux
    /// before 3.16: 1 ms, doubled while balanced up to 4 ms; SD_MC_INIT) or
    /// "domain-weight" (3.16+ sd_init: the domain's pCPU count in ms, up to twice
    /// that). Set by the platform profiles.
    pub balance_interval: BalanceInterval,
    /// A newidle balance that finds its domain balanced doubles the domain's interval,
    /// as a periodic one does (Linux before 5.0). Set by the platform profiles.
    pub newidle_doubles_interval: bool,
    /// No newidle balance (and no retiming of the domains by one) while no runqueue
    /// holds a waiting vCPU (`rd->overload`, Linux 3.16+). Set by the platform profiles.
    pub newidle_overload_gate: bool,
    /// A pCPU going idle keeps the next-balance time it set while busy unless its
    /// newidle balance pulled or that time has passed (idle_balance, Linux 3.2 and
    /// 3.9); later kernels move it forward to the idle intervals. Set by the platform
    /// profiles.
    pub idle_keeps_busy_deadline: bool,
    /// A busy pCPU (one running a vCPU) balances `balance_busy_factor` times less
    /// often (rebalance_domains: `interval *= sd->busy_factor`): 64 in Linux 3.2-3.15
    /// (SD_MC_INIT), 32 in 3.16-5.9 and 16 from 5.10 (sd_init). Set by the platform
    /// profiles.
    pub balance_busy_factor: u32,
    /// A pCPU going idle skips its newidle balance while its idle periods average
    /// less than the migration cost (idle_balance / newidle_balance: `avg_idle <
    /// sysctl_sched_migration_cost`, Linux 2.6.35-5.15). Set by the platform profiles.
    pub newidle_avg_idle_gate: bool,
    pub tick_hz: u32,
    /// CFS bandwidth control period used to enforce caps.
    pub bandwidth_period_ms: f64,
    /// Where a waking vCPU is placed: the scheduler's own choice, balance scheduling
    /// or load-conscious balance (hv/placement.rs).
    pub placement: crate::hv::placement::Placement,
    /// Each VM a task group: a cgroup per VM, as libvirt sets KVM hosts up (and as
    /// session autogroups do for VMs started from different sessions).
    pub per_vm_groups: bool,
    /// A vCPU picked again right after it was put back (a yield or a reschedule that
    /// finds nothing better) keeps its slice's start: Linux 3.15 and later
    /// (pick_next_task_fair sets only the levels that change); before, every pick
    /// restarts it. Set by the platform profiles.
    pub repick_keeps_slice: bool,
    /// pCPUs (logical CPUs) per last-level cache: the scope of wake-up placement's idle
    /// search (`select_idle_sibling()`). Consecutive pCPUs share one; a host of at most
    /// this many pCPUs is one LLC.
    pub llc_pcpus: u32,
    /// Whether and by which kernel's rule a vCPU woken by a sibling's IPI or pv kick
    /// may be queued on the waker's pCPU (hv/sched/wake_affine.rs): "off", "linux-3.2",
    /// "linux-3.12", "linux-3.16" or "linux-4.14" (4.14 and later). Set by the platform
    /// profiles.
    pub wake_affine: crate::hv::sched::wake_affine::WakeAffine,
}
impl Default for CfsParams {
    fn default() -> Self {
        CfsParams {
            latency_ms: 24.0,
            min_granularity_ms: 3.0,
            wakeup_granularity_ms: 4.0,
            migration_cost_us: 500.0,
            balance_interval: BalanceInterval::DomainWeight,
            newidle_doubles_interval: true,
            newidle_overload_gate: true,
            idle_keeps_busy_deadline: false,
            balance_busy_factor: 32,
            newidle_avg_idle_gate: true,
            tick_hz: 250,
            bandwidth_period_ms: 100.0,
            placement: Default::default(),
            per_vm_groups: true,
            repick_keeps_slice: true,
            llc_pcpus: crate::hv::sched::DEFAULT_LLC_PCPUS,
            wake_affine: Default::default(),
        }
    }
}

/// Linux EEVDF (6.6–6.12, kernel/sched/fair.c), hv/sched/eevdf.rs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EevdfParams {
    /// sysctl_sched_base_slice; unset: 0.75 ms × (1 + ilog2(min(pCPUs, 8))), as the
    /// kernel scales it.
    pub base_slice_ms: Option<f64>,
    /// Each VM a task group (a cgroup per VM, as libvirt sets KVM hosts up).
    pub per_vm_groups: bool,
    pub migration_cost_us: f64,
    /// The sched domains' balance intervals, as for CFS ("domain-weight" in 6.6).
    pub balance_interval: BalanceInterval,
    /// As for CFS (false from Linux 5.0).
    pub newidle_doubles_interval: bool,
    /// A busy pCPU balances this many times less often (sd->busy_factor: 16 from
    /// Linux 5.10).
    pub balance_busy_factor: u32,
    pub tick_hz: u32,
    /// CFS bandwidth control period used to enforce caps.
    pub bandwidth_period_ms: f64,
    /// Wake-up placement, as for CFS.
    pub placement: crate::hv::placement::Placement,
    /// pCPUs per last-level cache, as for CFS; also the balancing domain: periodic
    /// balancing looks within it every interval and across the host less often.
    pub llc_pcpus: u32,
    /// Affine wake-ups, as for CFS (EEVDF kernels follow the "linux-4.14" rule).
    pub wake_affine: crate::hv::sched::wake_affine::WakeAffine,
}
impl Default for EevdfParams {
    fn default() -> Self {
        let c = CfsParams::default();
        EevdfParams {
            base_slice_ms: None,
            per_vm_groups: true,
            migration_cost_us: c.migration_cost_us,
            balance_interval: BalanceInterval::DomainWeight,
            newidle_doubles_interval: false,
            balance_busy_factor: 16,
            tick_hz: c.tick_hz,
            bandwidth_period_ms: c.bandwidth_period_ms,
            placement: c.placement,
            llc_pcpus: c.llc_pcpus,
            wake_affine: c.wake_affine,
        }
    }
}

/// Xen credit (xen/common/sched/credit.c defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CreditParams {
    pub slice_ms: f64,
    /// Ticks per slice (credit burn and BOOST expiry happen on ticks).
    pub ticks_per_slice: u32,
    pub ratelimit_us: f64,
    /// How the rate limit treats a reschedule of a vCPU that ran less than it
    /// (csched_schedule; set by the Xen platform profiles).
    pub ratelimit_rule: RatelimitRule,
    pub boost: bool,
}
impl Default for CreditParams {
    fn default() -> Self {
        CreditParams {
            slice_ms: 30.0,
            ticks_per_slice: 3,
            ratelimit_us: 1000.0,
            ratelimit_rule: RatelimitRule::Xen48,
            boost: true,
        }
    }
}

/// Xen credit's rate limit rule (xen/common/sched_credit.c `csched_schedule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RatelimitRule {
    /// Xen 4.2 to 4.7: a runnable vCPU that ran less than the limit keeps its pCPU at
    /// any reschedule, a yield included, and runs a whole rate-limit slice from then.
    #[serde(rename = "xen-4.2")]
    Xen42,
    /// Xen 4.8 and later: a yielding vCPU gives way (the limit exempts yields), and one
    /// kept runs only until it has run the limit ("xen: credit1: fix rate limiting when
    /// yielding", "sched: credit: ratelimit only up to the limit", 2016).
    #[serde(rename = "xen-4.8")]
    Xen48,
}

/// Xen credit2 (xen/common/sched/credit2.c defaults), hv/sched/credit2.rs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Credit2Params {
    /// sched_ratelimit_us: a running vCPU keeps its pCPU at least this long.
    pub ratelimit_us: f64,
    /// sched_credit2_migrate_resist: credit a vCPU needs over the current one to be
    /// pulled from another pCPU.
    pub migrate_resist_us: f64,
    /// sched_credit2_max_cpus_runqueue: pCPUs sharing one runqueue at most.
    pub max_cpus_per_runqueue: u32,
    /// Period of the cap budget replenishment (sched_credit2_cap_period_ms).
    pub cap_period_ms: f64,
}
impl Default for Credit2Params {
    fn default() -> Self {
        Credit2Params {
            ratelimit_us: 1000.0,
            migrate_resist_us: 500.0,
            max_cpus_per_runqueue: 16,
            cap_period_ms: 10.0,
        }
    }
}

/// Strict co-scheduling (hv/sched/gang.rs).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GangParams {
    /// A gang's time slice (all its vCPUs start and stop together).
    pub slice_ms: f64,
}
impl Default for GangParams {
    fn default() -> Self {
        GangParams { slice_ms: 30.0 }
    }
}

/// Relaxed co-scheduling on Xen credit (hv/sched/relaxed.rs).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RelaxedCoParams {
    pub slice_ms: f64,
    pub ticks_per_slice: u32,
    pub ratelimit_us: f64,
    pub ratelimit_rule: RatelimitRule,
    pub boost: bool,
    /// A vCPU whose progress leads its slowest runnable sibling by more than this is
    /// co-stopped until the sibling catches up.
    pub skew_threshold_ms: f64,
}
impl Default for RelaxedCoParams {
    fn default() -> Self {
        let c = CreditParams::default();
        RelaxedCoParams {
            slice_ms: c.slice_ms,
            ticks_per_slice: c.ticks_per_slice,
            ratelimit_us: c.ratelimit_us,
            ratelimit_rule: c.ratelimit_rule,
            boost: c.boost,
            skew_threshold_ms: 3.0,
        }
    }
}
impl RelaxedCoParams {
    pub fn credit(&self) -> CreditParams {
        CreditParams {
            slice_ms: self.slice_ms,
            ticks_per_slice: self.ticks_per_slice,
            ratelimit_us: self.ratelimit_us,
            ratelimit_rule: self.ratelimit_rule,
            boost: self.boost,
        }
    }
}

/// Costs of hypervisor and guest mechanisms, in nanoseconds. Sources in docs/model.md.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostTable {
    /// A VM exit + entry round trip (null hypercall).
    pub vmexit_ns: u64,
    /// Host switch between two vCPU threads of the same VM (beyond the exit/entry).
    pub vcpu_switch_same_vm_ns: u64,
    /// Host switch between vCPUs of different VMs (adds EPT/VPID and state switching).
    pub vcpu_switch_cross_vm_ns: u64,
    /// Host side of waking a halted vCPU, from the kick until its pCPU switches to it:
    /// the host IPI, the idle exit, schedule() and the switch to the vCPU thread,
    /// kvm_vcpu_block's return and vcpu_load (calibrated).
    pub wake_halted_ns: u64,
    /// KVM's emulation of an ICR write after its exit (kvm_apic_send_ipi,
    /// kvm_irq_delivery_to_apic, __apic_accept_irq, kvm_vcpu_kick); the sender's exit
    /// costs `vmexit_ns` + this.
    pub ipi_send_ns: u64,
    /// kvm_vcpu_kick of a halted target: the host try_to_wake_up of its vCPU thread,
    /// done inside the sender's exit.
    pub kick_wake_ns: u64,
    /// The host's yield_to in a PLE exit's successful directed yield (double_rq_lock,
    /// yield_task_fair's update_curr, set_next_buddy, resched_curr): hypervisor work on
    /// the yielder's pCPU that its next switch-in pays.
    pub yield_to_ns: u64,
    /// A Linux schedule() that picks again the task it took off (prev == next: no
    /// context switch): the runqueue lock, update_curr, putting the entity back and
    /// picking it. The host's at a vCPU's re-pick (a lone yielder's, a preempted vCPU
    /// found still the one to run); the guest's in a sched_yield() alone on its vCPU.
    /// Measured (scripts/sched_yield_cost.c).
    pub repick_ns: u64,
    /// KVM's PLE handler (kvm_vcpu_on_spin) looking at one vCPU of its VM: the loop
    /// reads the candidate's `kvm_vcpu` (its preempted/ready flag first), a line the
    /// candidate's own pCPU writes at each of its switches.
    pub ple_scan_per_vcpu_ns: u64,
    /// Forcing a running vCPU out for an interrupt without posted interrupts: the kick's
    /// physical IPI, the external-interrupt exit's handling and the injection (the
    /// target pays `vmexit_ns` + this).
    pub ipi_deliver_ns: u64,
    /// Injecting an interrupt that is pending when the vCPU enters (inject_pending_event,
    /// no exit of its own).
    pub inject_ns: u64,
    /// KVM's emulation of an EOI write (apic_set_eoi) after its exit; no EOI exit with
    /// APICv or the guest's PV EOI.
    pub eoi_ns: u64,
    /// KVM's emulation of a TSC-deadline timer write (kvm_set_lapic_tscdeadline_msr,
    /// start_apic_timer) after its exit: the guest reprograms its timer when it enters
    /// and leaves idle (NOHZ).
    pub timer_write_ns: u64,
    /// A guest thread context switch.
    pub guest_switch_ns: u64,
    /// A guest system call's entry and exit.
    pub syscall_ns: u64,
    /// Kernel work of a futex operation besides its bucket lock.
    pub futex_ns: u64,
    /// Kernel work of waking a thread (try_to_wake_up).
    pub wake_ns: u64,
    /// Flushing the local TLB in a shootdown handler.
    pub tlb_flush_ns: u64,
    /// A cross-CPU wake-up beyond the IPI: the remote runqueue's lock and the task's
    /// and futex's cache lines moving between CPUs.
    pub remote_wake_ns: u64,
    /// Handing a contended lock's cache line to the next spinner.
    pub spin_handoff_ns: u64,
    /// Native (unvirtualized) IPI send-to-handler latency.
    pub native_ipi_ns: u64,
    /// A native CPU's wake-up from C1 halt.
    pub native_c1_exit_ns: u64,
    /// A thread context switch on bare metal (no two-dimensional page walks).
    pub native_switch_ns: u64,
    /// CVS decision at a PLE exit: fixed part (compare VOR, pick the action).
    pub cvs_decision_ns: u64,
    /// CVS decision: reading one pCPU runqueue's count of runnable vCPUs (VOR is their
    /// sum over the pCPUs).
    pub cvs_per_runqueue_ns: u64,
}
impl Default for CostTable {
    fn default() -> Self {
        CostTable {
            vmexit_ns: 500,
            vcpu_switch_same_vm_ns: 1_000,
            vcpu_switch_cross_vm_ns: 2_000,
            wake_halted_ns: 22_000,
            ipi_send_ns: 2_500,
            kick_wake_ns: 400,
            yield_to_ns: 400,
            repick_ns: 165,
            ple_scan_per_vcpu_ns: 20,
            ipi_deliver_ns: 3_500,
            inject_ns: 300,
            eoi_ns: 200,
            timer_write_ns: 500,
            guest_switch_ns: 4_500,
            syscall_ns: 200,
            futex_ns: 300,
            wake_ns: 400,
            tlb_flush_ns: 500,
            spin_handoff_ns: 100,
            remote_wake_ns: 3_000,
            native_ipi_ns: 1_000,
            native_c1_exit_ns: 1_000,
            native_switch_ns: 2_500,
            cvs_decision_ns: 100,
            cvs_per_runqueue_ns: 20,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheModel {
    None,
    Footprint,
    /// The set-associative LLC simulator's access profiles (host/llc.rs, host/access.rs).
    Llc,
}

/// The simulated last-level cache (host/llc.rs) of the cache study and of
/// `host.cache.model = "llc"`. Defaults and sources in docs/model.md.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlcConfig {
    pub size_kib: u64,
    pub ways: u32,
    pub line_bytes: u64,
    /// Set sampling: simulate 1 in `sample` sets (and the matching share of each
    /// context's lines); a power of two, 1 for the whole cache.
    pub sample: u64,
    /// Insertion policy: "mru", "lru", "preservation", "prefetch",
    /// "preservation+prefetch" or "sip-best".
    pub insertion: crate::host::llc_study::StudyPolicy,
    /// LLC hit latency, core cycles.
    pub hit_cycles: f64,
    /// Memory latency of an LLC miss, core cycles.
    pub miss_cycles: f64,
}
impl Default for LlcConfig {
    fn default() -> Self {
        LlcConfig {
            size_kib: 4_096,
            ways: 16,
            line_bytes: 64,
            sample: 32,
            insertion: crate::host::llc_study::StudyPolicy::Mru,
            hit_cycles: 30.0,
            miss_cycles: 200.0,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub model: CacheModel,
    /// Cache capacity a pCPU's running context can hold (its L2 plus its share of the LLC).
    pub kib_per_pcpu: u64,
    /// Time to refetch one KiB of evicted working set on switch-in.
    pub refill_ns_per_kib: f64,
    /// A core's private caches (L1 data + L2), part of `kib_per_pcpu`: what a vCPU
    /// moved to another core of the same last-level cache re-fetches (from that LLC);
    /// the rest of its working set is still there. Set by the platform profiles from
    /// the CPU generation.
    pub private_kib: u64,
    /// Time to refetch one KiB from the last-level cache into a core's private caches
    /// (after a move within the LLC).
    pub private_refill_ns_per_kib: f64,
    /// How fast a running context touches (and so loads) its working set, KiB per
    /// microsecond: a run of t us loads min(footprint, t x rate) into the cache.
    pub touch_kib_per_us: f64,
    /// Translations a CPU's TLB holds (second-level TLB entries, 4 KiB pages).
    pub tlb_entries: u64,
    /// Distinct pages a running context brings into the TLB per microsecond.
    pub tlb_touch_pages_per_us: f64,
    /// Pages a context touches first when it resumes (kernel entry, scheduler, wake
    /// path, its stack): the translations it must re-walk once evicted. 0 turns the
    /// TLB model off.
    pub tlb_resume_pages: u64,
    /// Mean time of one page-table memory reference during a refill walk.
    pub page_walk_ref_ns: f64,
    /// The simulated LLC (the cache study, and `model = "llc"`).
    pub llc: LlcConfig,
}
impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            model: CacheModel::Footprint,
            kib_per_pcpu: 2_560,
            refill_ns_per_kib: 150.0,
            private_kib: 288,
            private_refill_ns_per_kib: 24.0,
            touch_kib_per_us: 4.0,
            tlb_entries: 512,
            tlb_touch_pages_per_us: 16.0,
            tlb_resume_pages: 64,
            page_walk_ref_ns: 40.0,
            llc: LlcConfig::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleMode {
    /// Execute HLT: exit to the hypervisor, which deschedules the vCPU.
    Hlt,
    /// idle=poll: spin in the guest idle loop, never halt.
    Poll,
    /// The cpuidle-haltpoll driver: poll an adaptive time, then HLT.
    Haltpoll,
}

/// The guest kernel's fair scheduler (guest/runqueue.rs, guest/eevdf.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestScheduler {
    /// CFS as in Linux 2.6.23 to 6.5: least vruntime first, slices from
    /// `latency_ms` / `min_granularity_ms`, wake-up preemption past
    /// `wakeup_granularity_ms`.
    Cfs,
    /// EEVDF as in Linux 6.6 to 6.12: eligible earliest virtual deadline first, lag kept
    /// across sleep, run to parity, slice ends noticed at the tick.
    Eevdf,
}

/// CONFIG_PREEMPT_*: whether a wake-up preemption interrupts a thread running in the
/// kernel (a thread in user mode is preempted on the interrupt's return in every model;
/// a spinlock section is never preempted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptionModel {
    /// PREEMPT_NONE (server kernels): at the return to user mode.
    None,
    /// PREEMPT_VOLUNTARY (most distribution kernels): also at cond_resched() points,
    /// which the model's kernel paths do not have, so as `none`.
    Voluntary,
    /// PREEMPT (full): at once.
    Full,
    /// PREEMPT_LAZY (Linux 6.13+): a fair-class preemption of kernel code waits for the
    /// next tick (or the return to user mode, if sooner).
    Lazy,
}

/// The CPU topology the VMM gives a VM (what its guest kernel builds its scheduling
/// domains from; guest/ipi.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GuestTopology {
    /// The vCPUs are cores of one socket sharing its last-level cache (QEMU's `-smp N`
    /// from machine types 6.2 on, which prefer cores over sockets).
    #[default]
    OneSocket,
    /// Each vCPU is a socket of its own with its own last-level cache (QEMU's `-smp N`
    /// before 6.2, which preferred sockets; libvirt without `<topology>`), or at least
    /// shares no cache with another (Xen's HVM CPUID policy of 4.1 and 4.2 zeroes the
    /// caches' sharing count): the guest's wake-ups search no idle vCPU beyond the
    /// target, cross its cache boundaries with an IPI, and take wake_affine's load test
    /// at the top domain.
    SocketPerVcpu,
}

/// When a cross-vCPU wake-up sends the target a reschedule IPI (guest/ipi.rs
/// `send_wake`; kernel/sched/core.c ttwu_queue).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeIpi {
    /// Linux 3.0 to 3.2 (TTWU_QUEUE for every remote CPU): the wakee is queued on the
    /// target's wake list and an IPI always tells it.
    Always,
    /// Linux 3.3 onwards on vCPUs that share a last-level cache (`guest.topology =
    /// "one-socket"`; with a socket per vCPU every remote wake-up sends one) ("sched:
    /// Only queue remote wakeups when crossing cache boundaries"): the waker enqueues
    /// the wakee itself and sends an IPI only when the target must reschedule — it
    /// idles (the idle task is always preempted; a polling idle loop needs none) or the
    /// wakee preempts its current thread (check_preempt_curr → resched_curr).
    OnPreempt,
}

/// How a sched domain's periodic load-balance interval is set (the guest's, guest/balance.rs;
/// a Linux host's, hv/sched/balance.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BalanceInterval {
    /// Linux before 3.16 (include/linux/topology.h SD_CPU_INIT / SD_MC_INIT): 1 ms,
    /// doubled after each balance that moved nothing, up to 4 ms.
    Fixed,
    /// Linux 3.16+ (kernel/sched/topology.c sd_init): the domain's CPU count in ms, up
    /// to twice that.
    DomainWeight,
}

/// Optimistic spinning of a writer on a kernel read-write semaphore (guest/sync.rs;
/// docs/model.md, "Read-write semaphores").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RwsemSpin {
    /// A writer that finds the semaphore taken queues and sleeps at once (Linux before
    /// 3.16).
    Off,
    /// Linux 3.16 to 3.19 (kernel/locking/rwsem-xadd.c rwsem_optimistic_spin): a writer
    /// spins only if a writer holds the semaphore and is on a CPU (`owner->on_cpu`, a
    /// preempted vCPU's current thread included); it stops when that owner leaves its
    /// CPU or need_resched is set, takes the semaphore when it is free (ahead of the
    /// queue), and spins on while readers hold it (the owner field is NULL) until
    /// need_resched.
    WriterOwner,
    /// Linux 5.x and 6.x (kernel/locking/rwsem.c): also spins when the semaphore is free
    /// or readers hold it; on readers for (20 + readers) / 2 us at most
    /// (rwsem_rspin_threshold), then marks it non-spinnable until the readers are gone;
    /// owner_on_cpu() also asks vcpu_is_preempted() where the guest has it.
    ReaderBounded,
}

/// The guest kernel's spinlock implementation (guest/spinlock.rs; docs/model.md has a
/// section per kind with its kernel source). The old names are aliases: `pv` reads as
/// `pv-ticket` (what it always modelled) and `queued` as `qspinlock`; the resolved
/// scenario (`vcpulab explain`) shows the kind they stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpinlockKind {
    /// FIFO ticket lock (x86 Linux 2.6.25 to 4.1, arch/x86/include/asm/spinlock.h):
    /// handed to the next ticket at release; suffers lock-waiter preemption.
    Ticket,
    /// Paravirtual ticket lock (Linux 3.12 to 4.1, arch/x86/kernel/kvm.c
    /// kvm_lock_spinning / kvm_unlock_kick): spin SPIN_THRESHOLD, then halt; the
    /// unlocker hands the lock over and kicks the next ticket's vCPU.
    #[serde(alias = "pv")]
    PvTicket,
    /// Queued spinlock (Linux 4.2+, kernel/locking/qspinlock.c): a pending waiter, then
    /// an MCS queue whose head spins on the lock word and takes a released lock.
    #[serde(alias = "queued")]
    Qspinlock,
    /// Paravirtual queued spinlock (kernel/locking/qspinlock_paravirt.h): queue nodes
    /// and the head halt after SPIN_THRESHOLD spins (nodes earlier when the previous
    /// node is not running), the unlocker kicks a halted head, and arrivals may steal a
    /// free lock while the head is not actively spinning.
    PvQspinlock,
    /// Unfair test-and-set (virt_spin_lock, arch/x86/include/asm/qspinlock.h: a guest
    /// under a hypervisor without PV spinlocks).
    Tas,
}

impl SpinlockKind {
    /// Waiters halt after a bounded spin and are kicked by the unlocker.
    pub fn is_pv(self) -> bool {
        matches!(self, SpinlockKind::PvTicket | SpinlockKind::PvQspinlock)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuestConfig {
    /// The guest-kernel profile (scenario/platforms.rs) whose keys were filled in under
    /// the preset and the scenario; default: the host platform's guest kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub idle: IdleMode,
    /// The guest kernel's fair scheduler: CFS (Linux before 6.6) or EEVDF (6.6 and
    /// later); guest/eevdf.rs.
    pub scheduler: GuestScheduler,
    /// EEVDF's base slice before the kernel scales it by 1 + ilog2(min(vCPUs, 8))
    /// (sysctl_sched_base_slice, 0.75 ms; SCHED_TUNABLESCALING_LOG).
    pub base_slice_ms: f64,
    /// CONFIG_HZ: EEVDF notices a used-up slice at the tick (no HRTICK).
    pub tick_hz: u32,
    /// The kernel's preemption model: when a wake-up preemption of a thread in kernel
    /// mode takes effect.
    pub preemption: PreemptionModel,
    /// Guest CFS: latency and minimum granularity of thread time slices.
    pub latency_ms: f64,
    pub min_granularity_ms: f64,
    pub wakeup_granularity_ms: f64,
    /// Added to every nanosleep (Linux default 50 us).
    pub timer_slack_us: f64,
    pub spinlock: SpinlockKind,
    /// pv spinlocks (`pv-ticket`, `pv-qspinlock`): spin this long before halting
    /// (SPIN_THRESHOLD = 2^15 iterations of the spin loop).
    pub pv_spin_us: f64,
    /// futex_wake sends the reschedule IPI while holding the bucket lock (Linux 3.x);
    /// false defers it after the unlock (wake_q, Linux 4.x+).
    pub ipi_under_lock: bool,
    /// User mutexes (`lock`) spin this long before sleeping in the futex. 0 by default:
    /// glibc's default mutex (PTHREAD_MUTEX_TIMED_NP) tries one atomic exchange and
    /// then sleeps (nptl/lowlevellock.c `__lll_lock_wait`); an adaptive mutex
    /// (PTHREAD_MUTEX_ADAPTIVE_NP) spins up to 100 tries, about a microsecond.
    pub mutex_spin_us: f64,
    /// cpuidle-haltpoll: maximum poll, start of growth.
    pub haltpoll_max_us: f64,
    pub haltpoll_start_us: f64,
    /// KVM PV TLB flush: preempted vCPUs are not sent shootdown IPIs.
    pub pv_tlb_flush: bool,
    /// Shootdowns skip vCPUs in lazy TLB mode (idle, the mm of the process they last ran
    /// still loaded): Linux 4.19+ native_flush_tlb_others (arch/x86/mm/tlb.c, condition
    /// tlb_is_not_lazy). Before, a lazy vCPU takes the IPI and leaves the mm (leave_mm).
    pub tlb_skip_lazy: bool,
    /// Queued rwlocks (CONFIG_QUEUED_RWLOCKS, x86 since Linux 3.16,
    /// kernel/locking/qrwlock.c): a writer queues behind the kernel's spinlock kind.
    /// Before, x86's rwlock_t writer spins unfairly (test-and-set).
    pub queued_rwlocks: bool,
    /// KVM PV EOI (guest Linux 3.6+): the guest skips the EOI write (and its exit) when
    /// the host says none is needed.
    pub pv_eoi: bool,
    /// vcpu_is_preempted() (KVM steal time, Linux 4.10+): wake-up placement does not
    /// count a preempted idle vCPU as idle (available_idle_cpu).
    pub vcpu_is_preempted: bool,
    /// When a cross-vCPU wake-up sends an IPI: `always` (Linux 3.2) or `on-preempt`
    /// (3.3+, vCPUs sharing a last-level cache).
    pub wake_ipi: WakeIpi,
    /// The scheduler feature TTWU_QUEUE (on by default since Linux 3.0; off in
    /// PREEMPT_RT kernels or through sched_features): a wake-up onto another vCPU that
    /// `wake_ipi` and the topology send through the target's wake list waits there, on
    /// no runqueue, until the target handles the IPI. Off: the waker enqueues every
    /// wakee itself and sends an IPI only when the target must reschedule (the
    /// `on-preempt` rule).
    pub ttwu_queue: bool,
    /// A wake-up onto an idle vCPU that shares the waker's last-level cache waits on
    /// the target's wake list too (Linux 6.0+, kernel/sched/core.c `ttwu_queue_cond`:
    /// `!cpu_rq(cpu)->nr_running`, "sched: Remove the limitation of WF_ON_CPU on
    /// wakelist if wakee cpu is idle"); before, such a wakee is enqueued by its waker.
    /// Needs `ttwu_queue`.
    pub wake_list_idle: bool,
    /// Optimistic spinning of writers on kernel read-write semaphores (mmap_sem): `off`
    /// before Linux 3.16, `writer-owner` in 3.16 to 3.19, `reader-bounded` from 5.x.
    pub rwsem_spin: RwsemSpin,
    /// Kernel read-write semaphores as Linux 5.11+ runs them (kernel/locking/rwsem.c):
    /// a reader that finds the semaphore free takes it ahead of the queued waiters
    /// (reader lock stealing), queued readers are all woken together (phase-fair), a
    /// woken waiter that finds it taken keeps its place, and the first waiter that has
    /// waited RWSEM_WAIT_TIMEOUT sets the hand-off bit, after which nobody takes it
    /// ahead of that waiter. Off: Linux 3.x (rwsem-xadd.c), readers queue behind any
    /// waiter.
    pub rwsem_steal: bool,
    /// The kernel mutex hands itself to its first waiter (Linux 4.10+,
    /// kernel/locking/mutex.c: MUTEX_FLAG_HANDOFF): a waiter woken that finds the mutex
    /// taken again sets the hand-off flag and spins on the owner, and the owner's unlock
    /// then makes that waiter the owner, whether it runs or not, instead of freeing the
    /// mutex for whoever comes first. Off: Linux 3.x, where a woken waiter that loses
    /// sleeps again at the head of the queue.
    pub mutex_handoff: bool,
    /// The kernel mutex's spinners queue on an OSQ (Linux 3.15+,
    /// kernel/locking/osq_lock.c): the head spins on the owner and takes the freed
    /// mutex, the others wait their turn in order. Off (before 3.10): every spinner
    /// watches the owner and they race for the freed mutex. (3.10–3.14 queued them on a
    /// plain MCS lock, which no profile has; `true` is the closest.)
    pub mutex_osq: bool,
    /// A file mapping's i_mmap lock is an rw-semaphore (`i_mmap_rwsem`, Linux 3.19+,
    /// "mm: convert i_mmap_mutex to rwsem"; mm/mmap.c takes it with
    /// i_mmap_lock_write): `i_mmap_lock_write` ops take it for writing. Off: the kernel
    /// mutex `i_mmap_mutex` of earlier kernels.
    pub i_mmap_rwsem: bool,
    /// An inode's lock is an rw-semaphore (`i_rwsem`, Linux 4.7+; inode_lock() is
    /// down_write): `inode_lock` ops take it for writing. Off: the kernel mutex
    /// `i_mutex` of earlier kernels.
    pub i_rwsem: bool,
    /// Dentry reference counts are lockrefs (Linux 3.12+, lib/lockref.c): a path walk
    /// takes its reference on the final dentry with a cmpxchg, not under `d_lock`
    /// (`kspin` sections with `dentry = "get"` take no lock).
    pub lockref: bool,
    /// dput drops the last reference of a cached dentry without `d_lock` (fast_dput,
    /// Linux 4.0+, fs/dcache.c; `kspin` sections with `dentry = "put"` take no lock).
    pub fast_dput: bool,
    /// The guest's C library requeues a condition variable's waiters onto the mutex at
    /// a broadcast: glibc 2.3 to 2.24 (nptl/pthread_cond_broadcast.c) wakes one waiter
    /// and moves the others to the mutex's futex (FUTEX_CMP_REQUEUE), so each is woken
    /// by the unlock of the one before it. glibc 2.25+ (the condition variable of
    /// nptl/pthread_cond_common.c) wakes every waiter (`false`).
    pub cond_requeue: bool,
    /// A condition variable has the C library's internal lock: glibc 2.3 to 2.24
    /// (nptl/pthread_cond_wait.c, pthread_cond_signal.c, pthread_cond_broadcast.c)
    /// serializes every wait, signal and broadcast on `cond->__data.__lock`, a
    /// low-level lock (nptl/lowlevellock.c `__lll_lock_wait`: no spinning, a futex
    /// sleep when taken). A waiter holds it while it drops the mutex (its futex_wake
    /// included) and takes it again when woken; a signal releases it in the kernel
    /// (FUTEX_WAKE_OP). glibc 2.25+ has none (`false`).
    pub cond_lock: bool,
    /// `pthread_barrier_wait` serializes on the barrier's internal lock: glibc 2.3 to
    /// 2.24 (nptl/pthread_barrier_wait.c) takes `ibarrier->lock` to count in; the last
    /// arrival wakes the others and keeps it, and the last thread to leave releases it,
    /// so the next round's early arrivals sleep on it until the round has emptied.
    /// glibc 2.25+ (a new barrier without that lock) is `false`.
    pub barrier_lock: bool,
    /// Buckets of the guest kernel's futex hash table (kernel/futex.c `futex_hash`):
    /// 256 up to Linux 3.12 (FUTEX_HASHBITS 8); from 3.13 256 per possible CPU, rounded
    /// up to a power of two (`0` asks for that). Futexes whose addresses hash alike share
    /// a bucket lock.
    pub futex_hash_buckets: u32,
    /// The guest kernel has the cpuidle-haltpoll driver (Linux 5.4+): `idle =
    /// "haltpoll"` is refused without it (the `guest-haltpoll` preset sets it, as a
    /// backport).
    pub haltpoll_available: bool,
    /// Guest load balancing: an idle vCPU pulls a queued thread from a busy sibling.
    pub load_balance: bool,
    /// A vCPU running only SCHED_IDLE threads (Gleaner's yielding thread) counts as
    /// idle: wake-up placement may choose it (select_idle_sibling's sched_idle_cpu(),
    /// Linux 5.4+) and its periodic load balance runs at the idle interval
    /// (rebalance_domains, 5.6+). Before, it is a busy CPU to both.
    pub sched_idle_cpu: bool,
    /// sysctl_sched_migration_cost (kernel/sched/fair.c; 500 us in every version): a
    /// thread that ran within it is cache-hot (task_hot), and a newidle balance does
    /// not pull a cache-hot thread.
    pub migration_cost_us: f64,
    /// A vCPU going idle skips its newidle balance while its average idle period
    /// (rq->avg_idle) is shorter than `migration_cost_us` (idle_balance, Linux before
    /// 5.16; from 5.16, "sched/fair: Remove sysctl_sched_migration_cost condition", the
    /// bar is the balance's own cost, microseconds).
    pub newidle_avg_idle_gate: bool,
    /// The periodic load balance of a CPU that is not idle runs `balance_busy_factor`
    /// times less often (sd->busy_factor: 64 before Linux 3.16, 32 to 5.9, 16 from
    /// 5.10).
    pub balance_busy_factor: u32,
    /// The sched domain's balance interval: `fixed` (before 3.16) or `domain-weight`.
    pub balance_interval: BalanceInterval,
    /// The guest kernel's affine wake-up rule (select_task_rq_fair → wake_affine,
    /// hv/sched/wake_affine.rs): a thread woken by a thread on another vCPU may be
    /// queued on the waker's vCPU. "off", "linux-3.2", "linux-3.12", "linux-3.16" or
    /// "linux-4.14"; set by the guest kernel profiles.
    pub wake_affine: crate::hv::sched::wake_affine::WakeAffine,
    /// The VM's CPU topology as the VMM presents it: "one-socket" or "socket-per-vcpu";
    /// set by the host platform profiles (the VMM of the study's time).
    pub topology: GuestTopology,
    /// vCPUs the workload's threads may use (a cpuset), e.g. "0-3"; all when absent.
    pub cpuset: Option<String>,
    /// Gleaner: resource retention by yielding threads, and consolidation.
    pub gleaner: GleanerConfig,
}
impl Default for GuestConfig {
    fn default() -> Self {
        GuestConfig {
            kernel: None,
            idle: IdleMode::Hlt,
            scheduler: GuestScheduler::Cfs,
            base_slice_ms: 0.75,
            tick_hz: 250,
            preemption: PreemptionModel::Voluntary,
            latency_ms: 6.0,
            min_granularity_ms: 0.75,
            wakeup_granularity_ms: 1.0,
            timer_slack_us: 50.0,
            spinlock: SpinlockKind::Ticket,
            pv_spin_us: 100.0,
            ipi_under_lock: true,
            mutex_spin_us: 0.0,
            haltpoll_max_us: 200.0,
            haltpoll_start_us: 50.0,
            pv_tlb_flush: false,
            tlb_skip_lazy: false,
            queued_rwlocks: false,
            pv_eoi: false,
            vcpu_is_preempted: false,
            rwsem_spin: RwsemSpin::Off,
            rwsem_steal: false,
            mutex_handoff: false,
            mutex_osq: false,
            i_mmap_rwsem: false,
            i_rwsem: false,
            lockref: false,
            fast_dput: false,
            cond_requeue: true,
            cond_lock: true,
            barrier_lock: true,
            futex_hash_buckets: 256,
            wake_ipi: WakeIpi::Always,
            ttwu_queue: true,
            wake_list_idle: false,
            haltpoll_available: true,
            load_balance: true,
            sched_idle_cpu: false,
            migration_cost_us: 500.0,
            newidle_avg_idle_gate: true,
            balance_busy_factor: 64,
            balance_interval: BalanceInterval::Fixed,
            wake_affine: crate::hv::sched::wake_affine::WakeAffine::Linux3_2,
            topology: GuestTopology::OneSocket,
            cpuset: None,
            gleaner: GleanerConfig::default(),
        }
    }
}

/// Which of Gleaner's techniques the guest runs (guest/gleaner.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GleanerMode {
    /// No yielding threads: the guest idles as `idle` says.
    Off,
    /// A yielding thread per vCPU that never sleeps (the "idle daemon" workaround).
    Retention,
    /// Yielding threads that sleep once the vCPU has been idle for the timeout.
    RetentionTimeout,
    /// Retention with timeout plus consolidation of the workload's cpuset.
    Gleaner,
}

/// Gleaner's parameters (Gleaner, USENIX ATC 2014); sources and assumptions in docs/model.md.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GleanerConfig {
    pub mode: GleanerMode,
    /// Retention timeout; absent: the cost of a halt/wake round trip as the guest
    /// measures it (HLT exit + host wake + entry + vCPU switch, from host.costs).
    pub timeout_us: Option<f64>,
    /// How long a yielding thread sleeps (nanosleep) once the timeout has passed; each
    /// further timeout with no workload thread run on its vCPU in between doubles it, up
    /// to `max_sleep_us`.
    pub sleep_us: f64,
    pub max_sleep_us: f64,
    /// Period of the consolidation controller's measurements.
    pub interval_ms: f64,
    /// Initial rho and eta of the two deactivation conditions, in (0, 1].
    pub rho: f64,
    pub eta: f64,
    /// Factor applied when lowering rho or eta after a failed deactivation.
    pub lower_factor: f64,
    /// A relative change of the active vCPUs' total utilization above this is major.
    pub major_util_change: f64,
    /// A vCPU rising above this utilization is a major change.
    pub major_vcpu_util: f64,
    /// g_comp growing or shrinking by more than this factor is a major change.
    pub major_gcomp_factor: f64,
    /// A vCPU at or above this utilization counts as fully used (100%).
    pub full_util: f64,
    /// After a deactivation, a relative drop of total utilization above this fails it.
    pub util_drop: f64,
    /// Never fewer active vCPUs than this.
    pub min_active: u32,
}
impl Default for GleanerConfig {
    fn default() -> Self {
        GleanerConfig {
            mode: GleanerMode::Off,
            timeout_us: None,
            sleep_us: 1_000.0,
            max_sleep_us: 50_000.0,
            interval_ms: 50.0,
            rho: 1.0,
            eta: 1.0,
            lower_factor: 0.9,
            major_util_change: 0.2,
            major_vcpu_util: 0.9,
            major_gcomp_factor: 2.0,
            full_util: 0.99,
            util_drop: 0.05,
            min_active: 1,
        }
    }
}

/// Pinning: a CPU list for all vCPUs ("0-3", "0,2,4"), or one list per vCPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PinSpec {
    All(String),
    PerVcpu(Vec<String>),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    #[serde(default)]
    pub name: Option<String>,
    pub vcpus: u32,
    /// Relative CPU weight (Xen credit's unit: default 256).
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Cap in percent of one pCPU (Xen semantics); absent means uncapped.
    #[serde(default)]
    pub cap: Option<f64>,
    #[serde(default)]
    pub pin: Option<PinSpec>,
    /// Instantiate this VM `count` times (names get a suffix); 0 leaves it out.
    #[serde(default = "default_count")]
    pub count: u32,
    /// This VM's guest kernel settings (the scenario's `guest` table, then the VM's own).
    #[serde(default)]
    pub guest: GuestConfig,
    /// Its network device, used by `net_recv` (guest/nic.rs).
    #[serde(default)]
    pub nic: NicConfig,
    /// The NUMA node its memory is bound to (libvirt's `<numatune><memory
    /// mode='strict' nodeset='N'/>`): a vCPU running on another node's pCPU fetches
    /// from remote memory (host/numa.rs). Unset: not bound, modelled as local wherever
    /// the vCPU runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    pub workload: WorkloadSpec,
}

/// An open-loop UDP stream into the VM (guest/nic.rs).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicConfig {
    /// The sender's rate (iperf -u -b).
    pub rate_mbps: f64,
    /// Datagram size (iperf's default UDP payload 1470 bytes).
    pub packet_bytes: u32,
    /// Datagrams the NIC ring and socket buffer hold before dropping.
    pub ring: u32,
    /// Guest-kernel work per datagram received (protocol and copy).
    pub rx_us: f64,
}
impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            rate_mbps: 1000.0,
            packet_bytes: 1470,
            ring: 256,
            rx_us: 2.0,
        }
    }
}
fn default_weight() -> u32 {
    256
}
fn default_count() -> u32 {
    1
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// A catalog model name, or "program" for explicit thread groups.
    pub model: String,
    /// Threads for catalog models (default: one per vCPU).
    #[serde(default)]
    pub threads: Option<u32>,
    /// Model parameters (each model lists its own; unknown ones are rejected).
    #[serde(default)]
    pub params: toml::Table,
    /// Cache-resident working set per thread, KiB (model default if absent).
    #[serde(default)]
    pub footprint_kib: Option<u64>,
    /// Explicit thread groups, for model = "program".
    #[serde(default)]
    pub group: Vec<GroupSpec>,
    /// Capacity of the workload's bounded queues (items); default: the model's (20, or
    /// PARSEC's 52,428 batches for dedup), 20 for a program.
    #[serde(default)]
    pub queue_capacity: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    #[serde(default = "default_count")]
    pub threads: u32,
    #[serde(default)]
    pub name: Option<String>,
    /// "normal", or "idle" (SCHED_IDLE: runs only when nothing else is runnable and is
    /// preempted at once by any wake-up).
    #[serde(default)]
    pub priority: Priority,
    /// The process (address space) the group's threads belong to; groups without one
    /// share the workload's main process. Threads of different processes evict each
    /// other's TLB entries when they share a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    pub ops: Vec<OpSpec>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    #[default]
    Normal,
    Idle,
}

impl Scenario {
    /// The resolved scenario as TOML text: deterministic, complete (every default
    /// filled), and accepted back by `resolve`.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
    }
}
