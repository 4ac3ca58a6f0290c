//! Affine wake-ups on a Linux host (hv/sched/wake_affine.rs) in whole runs: two
//! dedup-like VMs over-committing a Linux 3.2 host, whose vCPUs wake each other with
//! IPIs.

mod common;
use common::*;

fn pair(platform: &str, extra: &[&str]) -> vcpulab_core::Report {
    let text = format!(
        r#"
preset = "kvm-default"
seed = 1
[run]
duration = "1500ms"
[host]
platform = "{platform}"
pcpus = 8
[[vm]]
name = "dedup"
vcpus = 8
count = 2
workload = {{ model = "dedup" }}
"#
    );
    run_with(&text, extra)
}

fn affine(r: &vcpulab_core::Report) -> Vec<u64> {
    r.vms.iter().map(|v| v.affine_wakes).collect()
}

/// On the DCS platform (Linux 3.2) some IPI wake-ups go to the waker's pCPU; none with
/// the rule off, none under balance scheduling (its placement decides first), and the
/// per-vCPU counts add up to the VM's.
#[test]
fn sibling_wake_ups_go_affine_only_where_the_rule_is_on() {
    let on = pair("kvm-3.2-wsm", &[]);
    assert!(affine(&on).iter().all(|&n| n > 0), "{:?}", affine(&on));
    for vm in &on.vms {
        let per_vcpu: u64 = on
            .vcpus
            .iter()
            .filter(|c| c.vm == vm.vm)
            .map(|c| c.affine_wakes)
            .sum();
        assert_eq!(per_vcpu, vm.affine_wakes);
        assert!(vm.affine_wakes < vm.wakes);
    }
    let off = pair("kvm-3.2-wsm", &["host.scheduler.wake_affine=off"]);
    assert_eq!(affine(&off), vec![0, 0]);
    let balance = pair("kvm-3.2-wsm", &["host.scheduler.placement=balance"]);
    assert_eq!(affine(&balance), vec![0, 0]);
}

/// With IPI virtualization an IPI's wake-up has no waker (the posted-interrupt wake-up
/// handler runs on the pCPU the target blocked on): with pv kicks gone too (ticket
/// spinlocks without pv), nothing goes affine; the emulated ICR write of the same host
/// without IPIv gives affine wake-ups.
#[test]
fn ipi_virtualization_leaves_ipi_wake_ups_without_a_waker() {
    let common = ["guest.spinlock=ticket"];
    let with = pair("kvm-6.6-spr", &[common[0], "host.ipi_virtualization=true"]);
    assert_eq!(affine(&with), vec![0, 0]);
    let without = pair("kvm-6.6-spr", &[common[0], "host.ipi_virtualization=false"]);
    assert!(
        affine(&without).iter().sum::<u64>() > 0,
        "{:?}",
        affine(&without)
    );
}

/// The guest's own wake_affine (guest.wake_affine, set by the guest kernel profile):
/// dedup-like's pipeline threads, more than its vCPUs, are sometimes woken onto their
/// waker's vCPU; never with the rule off.
#[test]
fn guest_wake_ups_go_affine_only_where_the_guest_rule_is_on() {
    let guest = |r: &vcpulab_core::Report| -> Vec<u64> {
        r.vms.iter().map(|v| v.guest_affine_wakes).collect()
    };
    let on = pair("kvm-3.2-wsm", &[]);
    assert!(guest(&on).iter().all(|&n| n > 0), "{:?}", guest(&on));
    let off = pair("kvm-3.2-wsm", &["guest.wake_affine=off"]);
    assert_eq!(guest(&off), vec![0, 0]);
    let modern = pair("kvm-6.6-spr", &[]);
    assert!(
        guest(&modern).iter().all(|&n| n > 0),
        "{:?}",
        guest(&modern)
    );
}
