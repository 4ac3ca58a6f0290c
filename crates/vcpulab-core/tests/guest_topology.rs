//! The CPU topology a VM's guest sees (`guest.topology`, guest/ipi.rs): with a socket per
//! vCPU (QEMU's `-smp N` before machine type 6.2) each vCPU is a cache domain of its
//! own, so a wake-up searches no idle vCPU beyond its target and crosses to another
//! vCPU with an IPI; with one socket the guest looks for an idle vCPU in the whole VM.
mod common;
use common::*;

/// Six threads computing and sleeping on four vCPUs of their own pCPUs: a thread
/// waking (its timer, on its previous vCPU) finds that vCPU busy now and then while
/// another idles.
const SLEEPERS: &str = r#"
[run]
duration = "200ms"
[host]
pcpus = 4
platform = "kvm-3.19-hsw"
[[vm]]
name = "a"
vcpus = 4
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "w"
threads = 6
ops = [{ loop = { n = "forever", body = [{ compute = "exp(100us)" }, { sleep = "exp(100us)" }, { count = 1 }] } }]
"#;

#[test]
fn with_a_socket_per_vcpu_a_wakeup_stays_on_its_busy_vcpu() {
    let one = run_with(SLEEPERS, &["guest.topology=one-socket"]);
    let apart = run_with(SLEEPERS, &["guest.topology=socket-per-vcpu"]);
    let (o, a) = (
        wakes_on(&one, "running_target"),
        wakes_on(&apart, "running_target"),
    );
    // With one socket a wake-up goes to an idle vCPU when there is one: only when all
    // four are busy does it queue behind a running thread.
    assert!(
        a > 2 * o,
        "onto a running vCPU: {a} apart, {o} in one socket"
    );
    // Queued behind busy vCPUs while others idle, the VM gets less done.
    assert!(
        apart.vms[0].work_units < one.vms[0].work_units,
        "{} apart, {} in one socket",
        apart.vms[0].work_units,
        one.vms[0].work_units
    );
}

/// `PRODUCERS_CONSUMERS` (tests/common, as tests/wake_path.rs uses it): most wake-ups
/// land on a vCPU busy with a thread about as far along as the wakee, and preempt
/// nothing. From Linux 3.3 such a wake-up within a cache domain sends no IPI; across
/// cache domains (a socket per vCPU) the wakee is queued on the target's wake list
/// behind one, as Linux 3.2 does for every remote wake-up. The guest's wake_affine is
/// off, as there: it would queue many wakees behind their wakers, with no IPI.
#[test]
fn with_a_socket_per_vcpu_every_cross_vcpu_wakeup_sends_an_ipi() {
    let ipis = |topology: &str, wake_ipi: &str| {
        let o = [
            format!("guest.topology={topology}"),
            format!("guest.wake_ipi={wake_ipi}"),
            "guest.wake_affine=off".to_string(),
        ];
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        run_with(PRODUCERS_CONSUMERS, &o).vms[0].ipis_resched
    };
    let one = ipis("one-socket", "on-preempt");
    let apart = ipis("socket-per-vcpu", "on-preempt");
    let always = ipis("one-socket", "always");
    assert!(
        one * 3 < apart * 2,
        "reschedule IPIs: {apart} apart, {one} in one socket"
    );
    // As many as Linux 3.2's rule sends (within the runs' different courses).
    let ratio = apart as f64 / always as f64;
    assert!(
        (0.8..1.25).contains(&ratio),
        "{apart} apart, {always} always"
    );
}

#[test]
fn the_platforms_give_the_topology_of_their_vmm() {
    let topology = |platform: &str| {
        let sc = vcpulab_core::resolve(SLEEPERS, &[format!("host.platform={platform}")], None)
            .expect("resolves");
        sc.vm[0].guest.topology
    };
    use vcpulab_core::scenario::GuestTopology::{OneSocket, SocketPerVcpu};
    for p in [
        "kvm-3.2-wsm",
        "kvm-3.9-snb",
        "kvm-3.19-hsw",
        "xen-4.1.2",
        "xen-4.2.3",
    ] {
        assert_eq!(topology(p), SocketPerVcpu, "{p}");
    }
    for p in ["kvm-6.6-spr", "xen-4.19-spr"] {
        assert_eq!(topology(p), OneSocket, "{p}");
    }
    // The scenario's word wins over the platform's.
    let sc = vcpulab_core::resolve(SLEEPERS, &["guest.topology=one-socket".to_string()], None)
        .expect("resolves");
    assert_eq!(sc.vm[0].guest.topology, OneSocket);
}
