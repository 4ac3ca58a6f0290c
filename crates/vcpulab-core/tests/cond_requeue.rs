//! pthread_cond_broadcast as the guest's C library does it: glibc 2.25+ wakes every
//! waiter; glibc 2.3–2.24 (`guest.cond_requeue`) wakes one and requeues the others onto
//! the mutex's futex, so they are woken one by one by each other's unlocks.
mod common;
use common::*;

/// Seven threads wait on a condition variable under mutex `m` and do 2 us of work
/// holding it once woken; an eighth broadcasts every 300 us.
fn program(rounds: u32) -> String {
    format!(
        r#"
seed = 3
[run]
duration = "20s"
[host]
pcpus = 8
[[vm]]
name = "app"
vcpus = 8
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "waiter"
threads = 7
ops = [{{loop = {{n = {rounds}, body = [{{lock = "m"}}, {{cond_wait = {{cond = "c", mutex = "m"}}}}, {{compute = "2us"}}, {{unlock = "m"}}, {{count = 1}}]}}}}]
[[vm.workload.group]]
name = "caster"
ops = [{{loop = {{n = "forever", body = [{{compute = "300us"}}, {{lock = "m"}}, {{cond_broadcast = "c"}}, {{unlock = "m"}}]}}}}]
"#
    )
}

/// The app VM's row of lock class `name`.
fn lock_row<'a>(
    r: &'a vcpulab_core::Report,
    name: &str,
) -> &'a vcpulab_core::metrics::report::LockRow {
    common::lock_row(r, "app", name).unwrap_or_else(|| panic!("lock class {name} is reported"))
}

fn bucket_hold_p99(r: &vcpulab_core::Report) -> u64 {
    lock_row(r, "futex-bucket")
        .hold_p99_ns
        .expect("futex bucket locks are taken")
}

#[test]
fn a_requeueing_broadcast_wakes_one_waiter_and_the_unlocks_wake_the_rest() {
    let text = program(200);
    let all = run_with(&text, &["guest.cond_requeue=false"]);
    let requeue = run_with(&text, &["guest.cond_requeue=true"]);
    for r in [&all, &requeue] {
        assert_eq!(r.stop_reason, "all-finished");
        assert_eq!(r.vms[0].work_units, 7 * 200);
    }
    // Waking every waiter holds the condition variable's bucket lock across seven
    // wake-ups; the requeue wakes one under it (and the unlocks one each under the
    // mutex's bucket).
    let (a, q) = (bucket_hold_p99(&all), bucket_hold_p99(&requeue));
    assert!(
        q * 3 < a,
        "bucket hold p99: requeue {q} ns, wake-all {a} ns"
    );
    // Requeued, the waiters are woken one after another, each by the unlock of the one
    // before it (a halted vCPU's wake-up apiece): they wait longer for the mutex than
    // when all are woken at once.
    let wait = |r: &vcpulab_core::Report| lock_row(r, "m").wait_mean_ns;
    let (wa, wq) = (wait(&all), wait(&requeue));
    assert!(
        wq > 1.5 * wa,
        "mutex wait mean: requeue {wq} ns, wake-all {wa} ns"
    );
}

#[test]
fn the_platform_profiles_set_the_glibc_of_their_time() {
    let text = program(20);
    for (kernel, requeue) in [
        ("linux-3.2", true),
        ("linux-3.19", true),
        ("linux-6.6", false),
    ] {
        let sc = vcpulab_core::resolve(&text, &[format!("guest.kernel={kernel:?}")], None)
            .expect("a known kernel");
        assert_eq!(sc.vm[0].guest.cond_requeue, requeue, "{kernel}");
    }
}

/// glibc's lock word: a waiter returning from pthread_cond_wait retakes the mutex with
/// __pthread_mutex_cond_lock, which leaves the word at 2, so its unlock calls
/// futex_wake even when nobody waits (nptl/lowlevellock.h `lll_unlock`).
#[test]
fn a_waiter_back_from_a_condition_variable_calls_futex_wake_at_its_unlock() {
    let text = r#"
seed = 1
[run]
duration = "1s"
[host]
pcpus = 2
[[vm]]
name = "app"
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "waiter"
ops = [{loop = {n = 100, body = [{lock = "m"}, {cond_wait = {cond = "c", mutex = "m"}}, {unlock = "m"}, {count = 1}]}}]
[[vm.workload.group]]
name = "signaler"
ops = [{loop = {n = "forever", body = [{compute = "100us"}, {lock = "m"}, {cond_signal = "c"}, {unlock = "m"}]}}]
"#;
    let r = run_toml(text);
    assert_eq!(r.stop_reason, "all-finished");
    assert_eq!(r.vms[0].work_units, 100);
    // Per round: the wait, the signal and the waiter's unlock (the signaler's unlock
    // finds the word at 1: the waiter had not slept on the mutex).
    assert_eq!(r.vms[0].futex_calls, 3 * 100);
}
