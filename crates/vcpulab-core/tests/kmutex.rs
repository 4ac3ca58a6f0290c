//! The guest kernel's mutex (`kmutex_lock` / `kmutex_unlock`; Linux's struct mutex,
//! kernel/locking/mutex.c): a taker spins while the owner runs (mutex_optimistic_spin,
//! every kernel since 2.6.29), then sleeps under the mutex's wait_lock; the unlock wakes
//! the first waiter. No futex, no system call — unlike the user mutex (`lock`), whose
//! glibc slow path goes through futex(2).
mod common;
use common::*;

/// Four threads on four vCPUs (pCPUs: `pcpus`) of a Linux 3.2 guest taking "m" with
/// `lock`/`unlock` around 20 us of kernel work, `gap` of user work between.
fn program(pcpus: u32, lock: &str, unlock: &str, gap: &str) -> String {
    format!(
        r#"
preset = "kvm-default"
seed = 3
[run]
duration = "100ms"
[host]
pcpus = {pcpus}
[[vm]]
name = "a"
vcpus = 4
guest = {{ kernel = "linux-3.2" }}
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 4
ops = [{{ loop = {{ n = "forever", body = [{{ compute = "{gap}" }}, {{ {lock} = "m" }}, {{ kernel = "20us" }}, {{ {unlock} = "m" }}, {{ count = 1 }}] }} }}]
"#
    )
}

#[test]
fn a_kernel_mutex_spins_on_its_running_owner_and_makes_no_futex_calls() {
    let user = run_toml(&program(4, "lock", "unlock", "exp(5us)"));
    let kernel = run_toml(&program(4, "kmutex_lock", "kmutex_unlock", "exp(5us)"));
    let (u, k) = (&user.vms[0], &kernel.vms[0]);
    assert!(
        u.futex_calls > 1_000,
        "user mutex futex calls {}",
        u.futex_calls
    );
    assert_eq!(k.futex_calls, 0);
    // Every owner runs on its own pCPU: the takers spin it out instead of sleeping.
    assert!(
        k.thread_switches * 10 < u.thread_switches,
        "switches: user {} kernel {}",
        u.thread_switches,
        k.thread_switches
    );
    assert!(
        k.time.spin_ns > 0 && u.halts > 10 * k.halts.max(1),
        "{} {}",
        u.halts,
        k.halts
    );
    // One holder at a time either way: 20 us each, at most 5,000 in 100 ms.
    assert!(
        k.work_units <= 5_000 && k.work_units > 4_000,
        "{}",
        k.work_units
    );
}

/// An owner whose vCPU the host preempted is still "on its CPU" to a Linux 3.x guest,
/// so the takers spin on (in kernel mode: PAUSE-loop exits); a guest with
/// vcpu_is_preempted (Linux 4.10+) stops spinning and sleeps.
#[test]
fn takers_stop_spinning_on_a_preempted_owner_only_with_vcpu_is_preempted() {
    let text = program(2, "kmutex_lock", "kmutex_unlock", "exp(5us)");
    let blind = run_with(&text, &["vm.0.guest.vcpu_is_preempted=false"]);
    let seeing = run_with(&text, &["vm.0.guest.vcpu_is_preempted=true"]);
    let (b, s) = (&blind.vms[0], &seeing.vms[0]);
    // Blind, a taker spins until the mutex is free, whatever the owner's vCPU does: it
    // never sleeps, and its spins on a preempted owner end in PAUSE-loop exits.
    assert_eq!(b.halts, 0);
    assert!(s.halts > 0, "seeing: no taker slept");
    assert!(
        s.ple_exits * 2 < b.ple_exits,
        "PLE exits: blind {} seeing {}",
        b.ple_exits,
        s.ple_exits
    );
}

#[test]
fn a_lock_is_a_kernel_mutex_or_a_semaphore_not_both() {
    let text = program(4, "kmutex_lock", "rw_unlock", "5us").replace(
        "{ kmutex_lock = \"m\" }",
        "{ kmutex_lock = \"m\" }, { rw_write = \"m\" }",
    );
    let err = vcpulab_core::resolve(&text, &[], None)
        .err()
        .map(|e| e.to_string());
    let err = err.unwrap_or_default();
    assert!(
        err.contains("\"m\"") && err.contains("kmutex_lock") && err.contains("rw_write"),
        "{err}"
    );
}
