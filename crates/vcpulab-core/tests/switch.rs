//! A host context switch is not preemptible: a reschedule asked while a pCPU switches
//! vCPUs waits until the switch is done (hv/dispatch.rs `resched`).
mod common;
use common::*;

/// Two CPU-bound one-vCPU VMs round-robin on one pCPU with 0.1 ms slices.
fn pair(switch_ns: u64) -> String {
    bombs(
        "credit",
        1,
        &[256, 256],
        &format!("slice_ms = 0.1\n[host.costs]\nvcpu_switch_cross_vm_ns = {switch_ns}"),
    )
}

#[test]
fn a_slice_end_during_a_switch_waits_for_the_switch() {
    // Each switch takes 1 ms, ten slices: the slice end comes in the middle of it. Cut
    // there, the pCPU would switch every 0.1 ms (200 switches in 20 ms); the switch
    // runs to its end, then the pCPU picks again: one switch per ms.
    let r = run_with(&pair(1_000_000), &["run.duration=20ms"]);
    let switches: u64 = r.vms.iter().map(|v| v.vcpu_switches).sum();
    assert!(
        (18..=21).contains(&switches),
        "{switches} switches of 1 ms in 20 ms"
    );
    // A switch shorter than the slice: the vCPUs run the rest of each slice.
    let r = run_with(&pair(20_000), &["run.duration=20ms"]);
    let switches: u64 = r.vms.iter().map(|v| v.vcpu_switches).sum();
    assert!(
        (150..=210).contains(&switches),
        "{switches} switches with 0.1 ms slices in 20 ms"
    );
    assert!(r.vms.iter().all(|v| v.time.user_ns > 5_000_000));
}
