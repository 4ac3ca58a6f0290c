//! Value checks that serde's types cannot express. Every error names the key, the value
//! and what is allowed.

use super::{CreditParams, PinSpec, PleAction, Scenario, ScenarioError, SchedulerConfig};
use crate::host::cpumask::{CpuMask, MAX_PCPUS};

fn range_f(key: &str, v: f64, lo: f64, hi: f64, unit: &str) -> Result<(), ScenarioError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ScenarioError::new(
            key,
            format!("{v} is not allowed; expected {lo} to {hi}{unit}"),
        ))
    }
}

fn range_u(key: &str, v: u64, lo: u64, hi: u64) -> Result<(), ScenarioError> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ScenarioError::new(
            key,
            format!("{v} is not allowed; expected {lo} to {hi}"),
        ))
    }
}

/// The pCPU set of each vCPU of a VM.
pub fn vcpu_masks(pin: &Option<PinSpec>, vcpus: u32, pcpus: u32) -> Result<Vec<CpuMask>, String> {
    match pin {
        None => Ok(vec![CpuMask::all(pcpus); vcpus as usize]),
        Some(PinSpec::All(s)) => Ok(vec![CpuMask::parse(s, pcpus)?; vcpus as usize]),
        Some(PinSpec::PerVcpu(list)) => {
            if list.len() != vcpus as usize {
                return Err(format!(
                    "has {} entries but the VM has {vcpus} vCPUs: give one CPU list per vCPU",
                    list.len()
                ));
            }
            list.iter().map(|s| CpuMask::parse(s, pcpus)).collect()
        }
    }
}

/// Xen credit's parameters (also those relaxed co-scheduling runs on).
fn credit(c: &CreditParams) -> Result<(), ScenarioError> {
    range_f("host.scheduler.slice_ms", c.slice_ms, 0.1, 1_000.0, " ms")?;
    range_u(
        "host.scheduler.ticks_per_slice",
        c.ticks_per_slice as u64,
        1,
        100,
    )?;
    range_f(
        "host.scheduler.ratelimit_us",
        c.ratelimit_us,
        0.0,
        500_000.0,
        " us",
    )?;
    Ok(())
}

/// Largest number of VMs, and of threads in one VM's workload: scenario input must not
/// be able to ask for unbounded memory.
pub const MAX_VMS: usize = 4096;
pub const MAX_THREADS_PER_VM: u64 = 100_000;
/// Largest cost or duration in nanoseconds a scenario may give as an integer (10^12 ns,
/// about 17 minutes): beyond it sums of costs overflow 64-bit time.
pub const MAX_INT_NS: u64 = 1_000_000_000_000;
/// Largest float anywhere in a scenario.
pub const MAX_FLOAT: f64 = 1e12;

/// Every number of the resolved scenario: floats finite, not negative and at most
/// `MAX_FLOAT`; integer costs (keys ending in `_ns`) at most `MAX_INT_NS`.
fn numbers(key: &str, v: &toml::Value) -> Result<(), ScenarioError> {
    let sub = |k: &str| {
        if key.is_empty() {
            k.to_string()
        } else {
            format!("{key}.{k}")
        }
    };
    match v {
        toml::Value::Table(m) => {
            for (k, x) in m {
                numbers(&sub(k), x)?;
            }
        }
        toml::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                numbers(&sub(&i.to_string()), x)?;
            }
        }
        toml::Value::Integer(i) if key.ends_with("_ns") && (*i < 0 || *i as u64 > MAX_INT_NS) => {
            return Err(ScenarioError::new(
                key,
                format!("{i} is not allowed; expected 0 to {MAX_INT_NS} ns"),
            ));
        }
        toml::Value::Float(f) if !(f.is_finite() && (0.0..=MAX_FLOAT).contains(f)) => {
            return Err(ScenarioError::new(
                key,
                format!("{f} is not allowed; expected a finite number from 0 to {MAX_FLOAT:e}"),
            ));
        }
        _ => {}
    }
    Ok(())
}

pub fn validate(sc: &Scenario) -> Result<(), ScenarioError> {
    if sc.seed > i64::MAX as u64 {
        return Err(ScenarioError::new(
            "seed",
            format!("{} is not allowed; expected 0 to {}", sc.seed, i64::MAX),
        ));
    }
    let value = toml::Value::try_from(sc).map_err(|e| {
        ScenarioError::new(
            "scenario",
            format!("a value cannot be written back as TOML ({e}); integers must be below 2^63"),
        )
    })?;
    numbers("", &value)?;
    if let Some(m) = sc.run.max_events {
        range_u("run.max_events", m, 4096, u64::MAX / 2)?;
    }
    if sc.vm.len() > MAX_VMS {
        return Err(ScenarioError::new(
            "vm",
            format!(
                "{} VMs are not allowed; expected at most {MAX_VMS}",
                sc.vm.len()
            ),
        ));
    }
    let h = &sc.host;
    range_u("host.pcpus", h.pcpus as u64, 1, MAX_PCPUS as u64)?;
    range_f("host.clock_ghz", h.clock_ghz, 0.1, 10.0, " GHz")?;
    validate_topology(sc)?;
    validate_dcs(sc)?;
    if sc.run.duration.0 .0 == 0 {
        return Err(ScenarioError::new(
            "run.duration",
            "0 is not allowed; expected a positive duration",
        ));
    }
    if sc.run.warmup.0 >= sc.run.duration.0 {
        return Err(ScenarioError::new(
            "run.warmup",
            format!(
                "{} is not allowed; expected a warm-up shorter than run.duration ({})",
                sc.run.warmup.0, sc.run.duration.0
            ),
        ));
    }
    match &h.scheduler {
        SchedulerConfig::Cfs(c) => {
            range_f(
                "host.scheduler.latency_ms",
                c.latency_ms,
                0.01,
                10_000.0,
                " ms",
            )?;
            range_f(
                "host.scheduler.min_granularity_ms",
                c.min_granularity_ms,
                0.01,
                10_000.0,
                " ms",
            )?;
            range_f(
                "host.scheduler.wakeup_granularity_ms",
                c.wakeup_granularity_ms,
                0.0,
                10_000.0,
                " ms",
            )?;
            linux_balancing(c.migration_cost_us, c.tick_hz, c.bandwidth_period_ms)?;
            range_u(
                "host.scheduler.balance_busy_factor",
                c.balance_busy_factor as u64,
                1,
                1024,
            )?;
            range_u(
                "host.scheduler.llc_pcpus",
                c.llc_pcpus as u64,
                1,
                MAX_PCPUS as u64,
            )?;
        }
        SchedulerConfig::Eevdf(c) => {
            if let Some(s) = c.base_slice_ms {
                range_f("host.scheduler.base_slice_ms", s, 0.01, 1_000.0, " ms")?;
            }
            linux_balancing(c.migration_cost_us, c.tick_hz, c.bandwidth_period_ms)?;
            range_u(
                "host.scheduler.balance_busy_factor",
                c.balance_busy_factor as u64,
                1,
                1024,
            )?;
            range_u(
                "host.scheduler.llc_pcpus",
                c.llc_pcpus as u64,
                1,
                MAX_PCPUS as u64,
            )?;
        }
        SchedulerConfig::Credit(c) => credit(c)?,
        SchedulerConfig::Credit2(c) => {
            range_f(
                "host.scheduler.ratelimit_us",
                c.ratelimit_us,
                0.0,
                500_000.0,
                " us",
            )?;
            range_f(
                "host.scheduler.migrate_resist_us",
                c.migrate_resist_us,
                0.0,
                100_000.0,
                " us",
            )?;
            range_u(
                "host.scheduler.max_cpus_per_runqueue",
                c.max_cpus_per_runqueue as u64,
                1,
                MAX_PCPUS as u64,
            )?;
            range_f(
                "host.scheduler.cap_period_ms",
                c.cap_period_ms,
                1.0,
                1_000.0,
                " ms",
            )?;
        }
        SchedulerConfig::Gang(c) => {
            range_f("host.scheduler.slice_ms", c.slice_ms, 0.1, 1_000.0, " ms")?;
            // A strict gang needs a pCPU per vCPU at once.
            for (i, vm) in sc.vm.iter().enumerate() {
                if vm.vcpus > h.pcpus {
                    return Err(ScenarioError::new(
                        format!("vm.{i}.vcpus"),
                        format!(
                            "{} is not allowed with host.scheduler.kind = \"gang\"; a gang runs all its vCPUs at once, so expected at most host.pcpus = {}",
                            vm.vcpus, h.pcpus
                        ),
                    ));
                }
            }
        }
        SchedulerConfig::RelaxedCo(c) => {
            credit(&c.credit())?;
            range_f(
                "host.scheduler.skew_threshold_ms",
                c.skew_threshold_ms,
                0.01,
                10_000.0,
                " ms",
            )?;
        }
    }
    range_f(
        "host.ple.cvs_coschedule_below",
        h.ple.cvs_coschedule_below,
        0.0,
        1e6,
        " (a VOR: runnable vCPUs per pCPU)",
    )?;
    range_f(
        "host.ple.cvs_yield_head_below",
        h.ple.cvs_yield_head_below,
        h.ple.cvs_coschedule_below,
        1e6,
        " (a VOR, at least host.ple.cvs_coschedule_below)",
    )?;
    range_u("host.cache.kib_per_pcpu", h.cache.kib_per_pcpu, 1, 1 << 30)?;
    crate::hv::apple::validate(&h.ple)?;
    validate_ple_action(&h.scheduler, &h.ple)?;
    range_f(
        "host.cache.refill_ns_per_kib",
        h.cache.refill_ns_per_kib,
        0.0,
        1e6,
        " ns",
    )?;
    range_u("host.cache.private_kib", h.cache.private_kib, 0, 1 << 30)?;
    range_f(
        "host.cache.private_refill_ns_per_kib",
        h.cache.private_refill_ns_per_kib,
        0.0,
        1e6,
        " ns",
    )?;
    range_f(
        "host.cache.touch_kib_per_us",
        h.cache.touch_kib_per_us,
        0.0,
        1e6,
        " KiB/us",
    )?;
    range_u("host.cache.tlb_entries", h.cache.tlb_entries, 1, 1 << 24)?;
    range_f(
        "host.cache.tlb_touch_pages_per_us",
        h.cache.tlb_touch_pages_per_us,
        0.0,
        1e6,
        " pages/us",
    )?;
    range_u(
        "host.cache.tlb_resume_pages",
        h.cache.tlb_resume_pages,
        0,
        1 << 24,
    )?;
    range_f(
        "host.cache.page_walk_ref_ns",
        h.cache.page_walk_ref_ns,
        0.0,
        1e6,
        " ns",
    )?;
    if sc.vm.is_empty() {
        return Err(ScenarioError::new(
            "vm",
            "the scenario has no VM; add at least one [[vm]] section",
        ));
    }
    super::modes::focus_index(sc)?;
    let mut names = std::collections::HashSet::new();
    // A workload spec and vCPU count already built without error (the copies of a
    // `count = N` table are consecutive): built once, as sim/world.rs builds them.
    let mut last_built: Option<(String, u32)> = None;
    for (i, vm) in sc.vm.iter().enumerate() {
        let k = |f: &str| format!("vm.{i}.{f}");
        range_u(&k("vcpus"), vm.vcpus as u64, 1, 1024)?;
        range_u(&k("weight"), vm.weight as u64, 1, 65_535)?;
        range_f(&k("nic.rate_mbps"), vm.nic.rate_mbps, 0.001, 1e6, " Mbit/s")?;
        range_u(
            &k("nic.packet_bytes"),
            vm.nic.packet_bytes as u64,
            1,
            65_507,
        )?;
        range_u(&k("nic.ring"), vm.nic.ring as u64, 1, 1_000_000)?;
        range_f(&k("nic.rx_us"), vm.nic.rx_us, 0.0, 1e6, " us")?;
        if let Some(c) = vm.cap {
            range_f(
                &k("cap"),
                c,
                0.1,
                100.0 * vm.vcpus as f64,
                " percent of one pCPU",
            )?;
        }
        let name = vm.name.clone().unwrap_or_default();
        if !names.insert(name.clone()) {
            return Err(ScenarioError::new(
                k("name"),
                format!("{name:?} is used by two VMs; names must be unique"),
            ));
        }
        vcpu_masks(&vm.pin, vm.vcpus, h.pcpus).map_err(|m| ScenarioError::new(k("pin"), m))?;
        let g = &vm.guest;
        if let Some(c) = &g.cpuset {
            CpuMask::parse_vcpus(c, vm.vcpus)
                .map_err(|m| ScenarioError::new(k("guest.cpuset"), m))?;
        }
        range_f(&k("guest.latency_ms"), g.latency_ms, 0.01, 10_000.0, " ms")?;
        range_f(
            &k("guest.base_slice_ms"),
            g.base_slice_ms,
            0.05,
            1_000.0,
            " ms",
        )?;
        if g.scheduler == crate::scenario::GuestScheduler::Cfs
            && g.preemption == crate::scenario::PreemptionModel::Lazy
        {
            return Err(ScenarioError::new(
                k("guest.preemption"),
                "\"lazy\" needs guest.scheduler = \"eevdf\": PREEMPT_LAZY came in Linux 6.13, \
                 after CFS was replaced (use none, voluntary or full with cfs)"
                    .to_string(),
            ));
        }
        if g.futex_hash_buckets != 0
            && (!g.futex_hash_buckets.is_power_of_two() || g.futex_hash_buckets > 1 << 20)
        {
            return Err(ScenarioError::new(
                k("guest.futex_hash_buckets"),
                format!(
                    "{} is not allowed; the futex hash table has a power of two of buckets \
                     up to 1048576 (256 before Linux 3.13), or 0 for 256 per vCPU",
                    g.futex_hash_buckets
                ),
            ));
        }
        if !matches!(g.tick_hz, 100 | 250 | 300 | 1000) {
            return Err(ScenarioError::new(
                k("guest.tick_hz"),
                format!(
                    "{} is not allowed; CONFIG_HZ is one of 100, 250, 300, 1000",
                    g.tick_hz
                ),
            ));
        }
        range_f(
            &k("guest.migration_cost_us"),
            g.migration_cost_us,
            0.0,
            1e6,
            " us",
        )?;
        range_u(
            &k("guest.balance_busy_factor"),
            g.balance_busy_factor as u64,
            1,
            1024,
        )?;
        range_f(
            &k("guest.min_granularity_ms"),
            g.min_granularity_ms,
            0.01,
            10_000.0,
            " ms",
        )?;
        range_f(
            &k("guest.wakeup_granularity_ms"),
            g.wakeup_granularity_ms,
            0.0,
            10_000.0,
            " ms",
        )?;
        range_f(
            &k("guest.timer_slack_us"),
            g.timer_slack_us,
            0.0,
            1e6,
            " us",
        )?;
        let total: u64 = vm.workload.group.iter().map(|g| g.threads as u64).sum();
        if total > MAX_THREADS_PER_VM {
            return Err(ScenarioError::new(
                k("workload.group"),
                format!("{total} threads in all are not allowed; expected at most {MAX_THREADS_PER_VM} per VM"),
            ));
        }
        let spec = serde_json::to_string(&vm.workload).unwrap_or_default();
        let built =
            matches!(&last_built, Some((s, n)) if !spec.is_empty() && *s == spec && *n == vm.vcpus);
        if !built {
            crate::workload::build(&vm.workload, vm.vcpus)
                .map_err(|e| ScenarioError::new(k(&format!("workload.{}", e.key)), e.message))?;
            last_built = Some((spec, vm.vcpus));
        }
        validate_gleaner(&g.gleaner, vm.vcpus, &|f: &str| {
            k(&format!("guest.gleaner.{f}"))
        })?;
        if g.idle == super::IdleMode::Haltpoll && !g.haltpoll_available {
            let kernel = g.kernel.as_deref().unwrap_or("this guest kernel");
            return Err(ScenarioError::new(
                k("guest.idle"),
                format!(
                    "\"haltpoll\" needs the cpuidle-haltpoll driver (Linux 5.4+), which {kernel} does not have; choose \"hlt\" or \"poll\", a newer guest.kernel, or set guest.haltpoll_available = true to run it as a backport (the guest-haltpoll preset does)"
                ),
            ));
        }
        if g.gleaner.mode == super::GleanerMode::Gleaner && g.cpuset.is_some() {
            return Err(ScenarioError::new(
                k("guest.cpuset"),
                "guest.gleaner.mode = \"gleaner\" manages the workload's cpuset itself; remove guest.cpuset or choose mode \"retention-timeout\"",
            ));
        }
    }
    range_f("host.power.busy_w", h.power.busy_w, 0.0, 1e4, " W")?;
    range_f("host.power.halted_w", h.power.halted_w, 0.0, 1e4, " W")?;
    Ok(())
}

fn validate_gleaner(
    g: &super::GleanerConfig,
    vcpus: u32,
    k: &dyn Fn(&str) -> String,
) -> Result<(), ScenarioError> {
    if g.mode == super::GleanerMode::Off {
        return Ok(());
    }
    if let Some(t) = g.timeout_us {
        range_f(&k("timeout_us"), t, 0.0, 1e7, " us")?;
    }
    range_f(&k("sleep_us"), g.sleep_us, 1.0, 1e7, " us")?;
    range_f(
        &k("max_sleep_us"),
        g.max_sleep_us,
        g.sleep_us,
        1e8,
        " us (at least sleep_us)",
    )?;
    range_f(&k("interval_ms"), g.interval_ms, 1.0, 1e5, " ms")?;
    for (name, v) in [
        ("rho", g.rho),
        ("eta", g.eta),
        ("lower_factor", g.lower_factor),
    ] {
        if !(v > 0.0 && v <= 1.0) {
            return Err(ScenarioError::new(
                k(name),
                format!("{v} is not allowed; expected a number in (0, 1]"),
            ));
        }
    }
    range_f(&k("major_util_change"), g.major_util_change, 0.0, 10.0, "")?;
    range_f(&k("major_vcpu_util"), g.major_vcpu_util, 0.0, 1.0, "")?;
    range_f(&k("major_gcomp_factor"), g.major_gcomp_factor, 1.0, 1e3, "")?;
    range_f(&k("full_util"), g.full_util, 0.0, 1.0, "")?;
    range_f(&k("util_drop"), g.util_drop, 0.0, 1.0, "")?;
    range_u(&k("min_active"), g.min_active as u64, 1, vcpus as u64)?;
    Ok(())
}

/// SMT and NUMA (host/topology.rs): whole cores per LLC, whole LLCs per node, and a
/// scheduler whose placement knows them.
fn validate_topology(sc: &Scenario) -> Result<(), ScenarioError> {
    let h = &sc.host;
    let t = &h.topology;
    range_u(
        "host.topology.threads_per_core",
        t.threads_per_core as u64,
        1,
        8,
    )?;
    range_u("host.topology.numa_nodes", t.numa_nodes as u64, 1, 64)?;
    range_f(
        "host.topology.sibling_busy_speed",
        t.sibling_busy_speed,
        0.05,
        1.0,
        "",
    )?;
    if !h.pcpus.is_multiple_of(t.threads_per_core) {
        return Err(ScenarioError::new(
            "host.topology.threads_per_core",
            format!(
                "{} is not allowed with host.pcpus = {}; expected a divisor of host.pcpus (whole cores)",
                t.threads_per_core, h.pcpus
            ),
        ));
    }
    if !h.pcpus.is_multiple_of(t.numa_nodes) {
        return Err(ScenarioError::new(
            "host.topology.numa_nodes",
            format!(
                "{} is not allowed with host.pcpus = {}; expected a divisor of host.pcpus (nodes of equal size)",
                t.numa_nodes, h.pcpus
            ),
        ));
    }
    range_f(
        "host.topology.remote_memory_ratio",
        t.remote_memory_ratio,
        1.0,
        10.0,
        "",
    )?;
    for (i, vm) in sc.vm.iter().enumerate() {
        if let Some(n) = vm.numa_node {
            if n >= t.numa_nodes {
                return Err(ScenarioError::new(
                    format!("vm.{i}.numa_node"),
                    format!(
                        "{n} is not allowed with host.topology.numa_nodes = {}; expected 0 to {}",
                        t.numa_nodes,
                        t.numa_nodes - 1
                    ),
                ));
            }
        }
    }
    if t.threads_per_core == 1 && t.numa_nodes == 1 {
        return Ok(());
    }
    let llc = match &h.scheduler {
        SchedulerConfig::Cfs(c) => c.llc_pcpus,
        SchedulerConfig::Eevdf(c) => c.llc_pcpus,
        other => {
            let key = if t.threads_per_core > 1 {
                "host.topology.threads_per_core"
            } else {
                "host.topology.numa_nodes"
            };
            let v = if t.threads_per_core > 1 {
                t.threads_per_core
            } else {
                t.numa_nodes
            };
            return Err(ScenarioError::new(
                key,
                format!(
                    "{v} is not allowed with host.scheduler.kind = {:?}; expected 1, or the scheduler \"cfs\" or \"eevdf\" (SMT- and NUMA-aware placement is modelled for the Linux schedulers only)",
                    other.name()
                ),
            ));
        }
    };
    let llc = llc.min(h.pcpus);
    if !llc.is_multiple_of(t.threads_per_core) {
        return Err(ScenarioError::new(
            "host.scheduler.llc_pcpus",
            format!(
                "{llc} is not allowed with host.topology.threads_per_core = {}; expected a multiple of it (an LLC holds whole cores)",
                t.threads_per_core
            ),
        ));
    }
    let node = h.pcpus / t.numa_nodes;
    if t.numa_nodes > 1 && !node.is_multiple_of(llc) {
        return Err(ScenarioError::new(
            "host.scheduler.llc_pcpus",
            format!(
                "{llc} is not allowed with host.topology.numa_nodes = {} ({node} pCPUs per node); expected a divisor of {node} (a node holds whole LLCs)",
                t.numa_nodes
            ),
        ));
    }
    Ok(())
}

/// DCS's urgent-vCPU-first is built into the Linux schedulers (CFS, EEVDF), as the
/// paper built it on KVM; placement likewise.
fn validate_dcs(sc: &Scenario) -> Result<(), ScenarioError> {
    let h = &sc.host;
    let linux = matches!(
        h.scheduler,
        SchedulerConfig::Cfs(_) | SchedulerConfig::Eevdf(_)
    );
    if h.dcs.enabled() && !linux {
        return Err(ScenarioError::new(
            "host.dcs",
            format!(
                "demand-based coordinated scheduling is not allowed with host.scheduler.kind = {:?}; expected \"cfs\" or \"eevdf\" (urgent-vCPU-first is built into the Linux schedulers, as on KVM)",
                h.scheduler.name()
            ),
        ));
    }
    range_f(
        "host.dcs.utslice_us",
        h.dcs.utslice_us,
        0.0,
        100_000.0,
        " us",
    )?;
    range_f(
        "host.dcs.urgent_allowance_ms",
        h.dcs.urgent_allowance_ms,
        0.0,
        1_000.0,
        " ms",
    )?;
    let names: Vec<String> = sc
        .vm
        .iter()
        .enumerate()
        .map(|(i, v)| v.name.clone().unwrap_or_else(|| format!("vm{i}")))
        .collect();
    for n in &h.dcs.resched_co {
        if n != "*" && !names.contains(n) {
            return Err(ScenarioError::new(
                "host.dcs.resched_co",
                format!(
                    "{n:?} is not a VM of the scenario; expected VM names ({}) or \"*\"",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The PLE exit actions a host scheduler can carry out (docs/model.md, the scheduler x
/// action table): yield-to-head/-tail need a runqueue order the action can override
/// (`requeue`), co-scheduling needs `run_next`, CVS needs both; a plain yield and a
/// directed yield work everywhere (a scheduler without `yield_to` fails the directed
/// yield, as a failed kvm_vcpu_on_spin does).
pub fn ple_actions_allowed(sched: &SchedulerConfig) -> &'static [PleAction] {
    use PleAction as A;
    use SchedulerConfig as S;
    match sched {
        S::Credit(_) | S::RelaxedCo(_) => &[
            A::DirectedYield,
            A::Yield,
            A::YieldToHead,
            A::YieldToTail,
            A::Coschedule,
            A::Cvs,
        ],
        S::Cfs(_) | S::Eevdf(_) => &[A::DirectedYield, A::Yield, A::Coschedule],
        S::Credit2(_) | S::Gang(_) => &[A::DirectedYield, A::Yield],
    }
}

fn ple_action_name(a: PleAction) -> &'static str {
    match a {
        PleAction::DirectedYield => "directed-yield",
        PleAction::Yield => "yield",
        PleAction::YieldToHead => "yield-to-head",
        PleAction::YieldToTail => "yield-to-tail",
        PleAction::Coschedule => "coschedule",
        PleAction::Cvs => "cvs",
    }
}

fn validate_ple_action(
    sched: &SchedulerConfig,
    ple: &crate::scenario::PleConfig,
) -> Result<(), ScenarioError> {
    if ple.policy == crate::scenario::PlePolicy::Off {
        return Ok(());
    }
    if ple.window_cycles == 0
        && matches!(
            ple.policy,
            crate::scenario::PlePolicy::Fixed | crate::scenario::PlePolicy::Kvm
        )
    {
        // A window of 0 would exit at every PAUSE, the opposite of what is usually meant.
        return Err(ScenarioError::new(
            "host.ple.window_cycles",
            "0 is not allowed; expected at least 1 cycle (to turn pause-loop exiting off, \
             set host.ple.policy = \"off\")",
        ));
    }
    let allowed = ple_actions_allowed(sched);
    if allowed.contains(&ple.action) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|a| ple_action_name(*a)).collect();
    Err(ScenarioError::new(
        "host.ple.action",
        format!(
            "{} cannot be carried out by host.scheduler.kind = {}; allowed with it: {}",
            ple_action_name(ple.action),
            sched.name(),
            names.join(", ")
        ),
    ))
}

/// The load-balancing, tick and bandwidth-control parameters CFS and EEVDF share.
fn linux_balancing(
    migration_cost_us: f64,
    tick_hz: u32,
    bandwidth_period_ms: f64,
) -> Result<(), ScenarioError> {
    range_f(
        "host.scheduler.migration_cost_us",
        migration_cost_us,
        0.0,
        1e7,
        " us",
    )?;
    range_u("host.scheduler.tick_hz", tick_hz as u64, 10, 10_000)?;
    range_f(
        "host.scheduler.bandwidth_period_ms",
        bandwidth_period_ms,
        1.0,
        1_000.0,
        " ms",
    )
}
