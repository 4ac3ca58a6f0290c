//! Pause-loop exiting sees what the CPU lets it see: on Intel VT-x only PAUSE at CPL 0
//! (kernel spinlocks, TLB-shootdown waits), never a user-space spin; AMD's pause filter
//! (`host.ple.user_mode_exits`) counts user mode too.
mod common;
use common::*;

/// Four threads on four vCPUs over two pCPUs, meeting at a spin barrier that spins in
/// user space for up to 20 ms: the spinners keep their pCPUs from the threads they wait
/// for.
const USER_SPINS: &str = r#"
preset = "kvm-default"
seed = 3
[run]
duration = "300ms"
[host]
pcpus = 2
platform = "kvm-3.19-hsw"
[[vm]]
name = "a"
vcpus = 4
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "w"
threads = 4
ops = [{ loop = { n = "forever", body = [{ compute = "exp(500us)" }, { spin_barrier = { name = "b", spin = "20ms" } }, { count = 1 }] } }]
"#;

#[test]
fn user_space_spins_cause_no_pause_loop_exits_on_vt_x() {
    let intel = run_with(USER_SPINS, &[]);
    let amd = run_with(USER_SPINS, &["host.ple.user_mode_exits=true"]);
    let exits = |r: &vcpulab_core::Report| r.vms[0].ple_exits;
    // Only kernel-mode spins exit on VT-x (the barrier's futex bucket, rarely).
    assert!(
        exits(&intel) * 20 < exits(&amd),
        "VT-x {} exits, pause filter {}",
        exits(&intel),
        exits(&amd)
    );
    assert!(exits(&amd) > 100, "{}", exits(&amd));
    // Without exits the spinners hold their pCPUs until the barrier opens or their
    // budget ends: less work gets done.
    assert!(
        intel.vms[0].work_units < amd.vms[0].work_units,
        "units: VT-x {} pause filter {}",
        intel.vms[0].work_units,
        amd.vms[0].work_units
    );
}

#[test]
fn a_zero_window_is_refused_with_the_way_to_turn_ple_off() {
    let o = vec!["host.ple.window_cycles=0".to_string()];
    let e = vcpulab_core::resolve(USER_SPINS, &o, None).expect_err("accepted");
    assert_eq!(e.key, "host.ple.window_cycles");
    assert!(e.message.contains("policy = \"off\""), "{}", e.message);
    let o = vec![
        "host.ple.window_cycles=0".to_string(),
        "host.ple.policy=\"off\"".to_string(),
    ];
    assert!(vcpulab_core::resolve(USER_SPINS, &o, None).is_ok());
}
