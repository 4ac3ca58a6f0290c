//! A kernel rwlock_t taken for writing: before Linux 3.16 an unfair test-and-set spin
//! on x86 (arch/x86/lib/rwlock.S), from 3.16 a queued rwlock whose writers wait behind
//! the kernel's spinlock (kernel/locking/qrwlock.c).

mod common;
use common::run_with;

/// Four vCPUs of a VM on two pCPUs beside a CPU hog, contending for kernel lock "k".
fn contended(rwlock: bool, kernel: &str) -> String {
    format!(
        r#"
seed = 2
[run]
duration = "30s"
[host]
platform = "kvm-3.9-snb"
pcpus = 2
[[vm]]
name = "bench"
vcpus = 4
guest = {{ kernel = "{kernel}", spinlock = "ticket" }}
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 4
ops = [{{loop = {{n = 3000, body = [
  {{compute = "exp(20us)"}},
  {{kspin = {{lock = "k", hold = "exp(2us)", rwlock = {rwlock}}}}},
  {{count = 1}},
]}}}}]
[[vm]]
name = "hog"
vcpus = 2
workload = {{ model = "cpu-bomb" }}
"#
    )
}

fn lwp(rwlock: bool, kernel: &str) -> u64 {
    let r = run_with(&contended(rwlock, kernel), &[]);
    assert!(r.vms[0].finished, "{kernel} rwlock={rwlock}");
    r.locks
        .iter()
        .filter(|l| l.vm == "bench" && l.lock == "k")
        .map(|l| l.lwp)
        .sum()
}

#[test]
fn an_rwlock_writer_spins_unfairly_before_3_16_and_queues_after() {
    // Ticket order hands the lock to a preempted waiter (lock-waiter preemption)...
    let ticket = lwp(false, "linux-3.9");
    assert!(ticket > 0, "ticket spinlock: {ticket} waiter preemptions");
    // ...an unfair test-and-set never does.
    assert_eq!(lwp(true, "linux-3.9"), 0);
    // Linux 3.19's queued rwlock queues its writers behind the ticket lock.
    assert!(lwp(true, "linux-3.19") > 0);
}

#[test]
fn a_lock_is_an_rwlock_or_a_spinlock_not_both() {
    let text = contended(true, "linux-3.9").replace(
        "{count = 1},",
        "{kspin = {lock = \"k\", hold = \"1us\"}}, {count = 1},",
    );
    let err = vcpulab_core::resolve(&text, &[], None)
        .and_then(|sc| vcpulab_core::run(&sc).map(|_| ()))
        .expect_err("mixed use is refused");
    let msg = err.to_string();
    assert!(msg.contains("\"k\"") && msg.contains("rwlock"), "{msg}");
}
