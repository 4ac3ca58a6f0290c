//! Execution modes. `dedicated` keeps only the focus VM, gives it one pCPU per vCPU
//! and pins each vCPU; `native` is dedicated without virtualization: no VM exits, no
//! vCPU switches, no pause-loop exiting or halt polling, a halted CPU wakes from C1,
//! an IPI costs what it costs on bare metal; `solo_capped` keeps only the focus VM on
//! the same host, capped at the share it had consolidated. All are transformations of
//! the scenario.

use super::{Mode, PinSpec, PlePolicy, Scenario, ScenarioError};

/// Index of the focus VM. A VM written with `count` copies is named by its first copy
/// (`NAME-0`), so that sweeping the count keeps the focus where it was.
pub fn focus_index(sc: &Scenario) -> Result<usize, ScenarioError> {
    match &sc.run.focus {
        None => Ok(0),
        Some(name) => {
            let first_copy = format!("{name}-0");
            let named = |n: &str| sc.vm.iter().position(|v| v.name.as_deref() == Some(n));
            named(name).or_else(|| named(&first_copy)).ok_or_else(|| {
                let names: Vec<String> = sc.vm.iter().filter_map(|v| v.name.clone()).collect();
                ScenarioError::new(
                    "run.focus",
                    format!("no VM is named {name:?}; the VMs are: {}", names.join(", ")),
                )
            })
        }
    }
}

/// Equal-capped solo: the focus VM alone on the same host, scheduler and pinning, with
/// a cap (percent of one pCPU) equal to `share` (its fraction of all pCPU time when
/// consolidated) — the same CPU, without the co-runners' interference.
pub fn derive_solo_capped(sc: &Scenario, share: f64) -> Result<Scenario, ScenarioError> {
    let f = focus_index(sc)?;
    if !(share.is_finite() && share > 0.0) {
        return Err(ScenarioError::new(
            "run.mode",
            format!(
                "\"solo_capped\" needs the focus VM to use CPU when consolidated; it used a share of {share}"
            ),
        ));
    }
    let mut s = sc.clone();
    s.run.mode = Mode::SoloCapped;
    s.run.compare.clear();
    let mut vm = sc.vm[f].clone();
    let cap = share * sc.host.pcpus as f64 * 100.0;
    vm.cap = Some(cap.min(vm.vcpus as f64 * 100.0));
    s.vm = vec![vm];
    Ok(s)
}

/// The scenario as it runs in `mode` (`solo_capped`: see `derive_solo_capped`).
pub fn derive(sc: &Scenario, mode: Mode) -> Result<Scenario, ScenarioError> {
    if mode == Mode::SoloCapped {
        return Err(ScenarioError::new(
            "run.mode",
            "\"solo_capped\" is derived from a consolidated run (api::run does both)",
        ));
    }
    if mode == Mode::Consolidated {
        let mut s = sc.clone();
        s.run.mode = Mode::Consolidated;
        s.run.compare.clear();
        return Ok(s);
    }
    let f = focus_index(sc)?;
    let mut s = sc.clone();
    s.run.mode = mode;
    s.run.compare.clear();
    let mut vm = sc.vm[f].clone();
    if vm.vcpus > crate::host::cpumask::MAX_PCPUS {
        return Err(ScenarioError::new(
            format!("vm.{f}.vcpus"),
            format!(
                "{} vCPUs cannot each get a dedicated pCPU (at most {})",
                vm.vcpus,
                crate::host::cpumask::MAX_PCPUS
            ),
        ));
    }
    s.host.pcpus = vm.vcpus;
    vm.pin = Some(PinSpec::PerVcpu(
        (0..vm.vcpus).map(|i| i.to_string()).collect(),
    ));
    vm.cap = None;
    s.vm = vec![vm];
    if mode == Mode::Native {
        let c = &mut s.host.costs;
        c.vmexit_ns = 0;
        c.vcpu_switch_same_vm_ns = 0;
        c.vcpu_switch_cross_vm_ns = 0;
        // `repick_ns` stays: a native thread's lone sched_yield() runs the same
        // schedule() (and with a pCPU per vCPU there is no host re-pick to charge).
        c.wake_halted_ns = c.native_c1_exit_ns;
        c.ipi_send_ns = 0;
        c.ipi_deliver_ns = c.native_ipi_ns;
        // Natively the IPI itself wakes a halted CPU and its handler runs at once; no
        // vCPU thread to wake, timer writes and EOIs do not exit.
        c.kick_wake_ns = 0;
        c.inject_ns = c.native_ipi_ns;
        c.eoi_ns = 0;
        c.timer_write_ns = 0;
        c.guest_switch_ns = c.native_switch_ns;
        s.host.ple.policy = PlePolicy::Off;
        s.host.halt_poll.enabled = false;
        s.host.posted_interrupts = false;
        s.host.ipi_virtualization = false;
    }
    Ok(s)
}
