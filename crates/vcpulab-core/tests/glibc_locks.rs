//! The internal locks of glibc before 2.25. A condition variable's (`guest.cond_lock`;
//! nptl/pthread_cond_wait.c, pthread_cond_signal.c, pthread_cond_broadcast.c): every
//! wait takes `cond->__data.__lock` twice (to count in and drop the mutex, and when
//! woken), every signal and broadcast once; a thread that finds it taken sleeps on its
//! futex (`__lll_lock_wait`, no spinning); a signal releases it inside FUTEX_WAKE_OP.
//! A barrier's (`guest.barrier_lock`; nptl/pthread_barrier_wait.c): held from the last
//! arrival until the last thread has left.
mod common;
use common::*;

/// `waiters` threads wait on `c` under `m`, `rounds` times each; a caster, every 50 us,
/// takes `m` and signals `c` `signals` times (or broadcasts, with `signals = 0`).
fn program(waiters: u32, rounds: u32, signals: u32) -> String {
    let cast = if signals == 0 {
        r#"{cond_broadcast = "c"}"#.to_string()
    } else {
        format!(r#"{{loop = {{n = {signals}, body = [{{cond_signal = "c"}}]}}}}"#)
    };
    format!(
        r#"
seed = 5
[run]
duration = "5s"
[host]
pcpus = 8
[[vm]]
name = "app"
vcpus = 8
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "waiter"
threads = {waiters}
ops = [{{loop = {{n = {rounds}, body = [{{lock = "m"}}, {{cond_wait = {{cond = "c", mutex = "m"}}}}, {{compute = "1us"}}, {{unlock = "m"}}, {{count = 1}}]}}}}]
[[vm.workload.group]]
name = "caster"
ops = [{{loop = {{n = "forever", body = [{{compute = "50us"}}, {{lock = "m"}}, {cast}, {{unlock = "m"}}]}}}}]
"#
    )
}

fn cond_lock_row(r: &vcpulab_core::Report) -> Option<&vcpulab_core::metrics::report::LockRow> {
    r.locks
        .iter()
        .find(|l| l.vm == "app" && l.lock == "c.cond_lock")
}

#[test]
fn every_wait_and_signal_takes_the_internal_lock() {
    let text = program(1, 200, 1);
    let with = run_with(&text, &["guest.cond_lock=true"]);
    assert_eq!(with.stop_reason, "all-finished");
    assert_eq!(with.vms[0].work_units, 200);
    let row = cond_lock_row(&with).expect("the internal lock is reported");
    assert_eq!(row.kind, "user");
    // Two acquisitions per completed wait, one per signal (at least one per wait: a
    // signal with no waiter is lost, and the waiter needs one per round).
    assert!(
        row.acquisitions >= 3 * 200,
        "{} acquisitions for 200 waits",
        row.acquisitions
    );
    let without = run_with(&text, &["guest.cond_lock=false"]);
    assert_eq!(without.vms[0].work_units, 200);
    assert!(
        cond_lock_row(&without).is_none(),
        "glibc 2.25+ has no internal lock"
    );
}

/// Seven waiters woken together by a broadcast (glibc 2.25's wake-all, so that they
/// come back at once) each take the internal lock on the way out: they find it taken
/// and sleep on its futex, and each release wakes the next — every wait still ends.
#[test]
fn waiters_woken_together_queue_on_the_internal_lock() {
    let text = program(7, 100, 0);
    let r = run_with(&text, &["guest.cond_requeue=false", "guest.cond_lock=true"]);
    assert_eq!(r.stop_reason, "all-finished");
    assert_eq!(r.vms[0].work_units, 700);
    let row = cond_lock_row(&r).expect("the internal lock is reported");
    assert!(row.contended > 0, "no waiter found the internal lock taken");
    assert!(row.wait_mean_ns > 0.0);
}

/// A caster signalling every 2 us and six waiters on a 4-vCPU VM beside a 4-vCPU
/// CPU-bound VM on 4 pCPUs: now and then a thread comes for the internal lock while a
/// preempted signaller holds it inside its futex call, sleeps on it, and must be woken
/// by the kernel's release of the lock in FUTEX_WAKE_OP. A release that woke no one
/// would leave such a waiter asleep until the next contended release (tried on an
/// earlier, smaller setup: a quarter of the work went). Three waiters on two pCPUs,
/// the setup until 2026-11-29, met the taken internal lock once in 5 s, and not at all
/// once the host's balancer let N + 1 vCPUs take turns.
#[test]
fn a_signal_releases_the_internal_lock_in_the_kernel_and_wakes_its_sleepers() {
    let text = r#"
seed = 5
[run]
duration = "5s"
[host]
pcpus = 4
[[vm]]
name = "app"
vcpus = 4
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "waiter"
threads = 6
ops = [{loop = {n = "forever", body = [{lock = "m"}, {cond_wait = {cond = "c", mutex = "m"}}, {compute = "1us"}, {unlock = "m"}, {count = 1}]}}]
[[vm.workload.group]]
name = "caster"
ops = [{loop = {n = "forever", body = [{compute = "2us"}, {lock = "m"}, {cond_signal = "c"}, {unlock = "m"}]}}]
[[vm]]
vcpus = 4
workload = { model = "cpu-bomb" }
"#;
    let with = run_with(text, &["guest.cond_lock=true"]);
    let without = run_with(text, &["guest.cond_lock=false"]);
    let row = cond_lock_row(&with).expect("the internal lock is reported");
    assert!(row.contended > 0, "no thread found the internal lock taken");
    let (w, n) = (with.vms[0].work_units, without.vms[0].work_units);
    assert!(
        w as f64 > 0.9 * n as f64,
        "waits completed: internal lock {w}, none {n}"
    );
}

/// Four threads meet at a futex barrier every ~20 us on four pCPUs. Before glibc 2.25
/// the last arrival keeps the barrier's lock until every woken thread has left, so a
/// thread quick to come back for the next round (the last arrival itself, which does
/// not sleep) finds it taken and sleeps on it. A lock taken only to count in would
/// almost never be found taken.
#[test]
fn a_barriers_lock_is_held_until_the_last_thread_leaves() {
    let text = r#"
seed = 2
[run]
duration = "5s"
[host]
pcpus = 4
[[vm]]
name = "app"
vcpus = 4
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "w"
threads = 4
ops = [{loop = {n = 500, body = [{compute = "exp(20us)"}, {barrier = "b"}, {count = 1}]}}]
"#;
    let with = run_with(text, &["guest.barrier_lock=true"]);
    assert_eq!(with.stop_reason, "all-finished");
    assert_eq!(with.vms[0].work_units, 2000);
    let row = with
        .locks
        .iter()
        .find(|l| l.vm == "app" && l.lock == "b.lock")
        .expect("the barrier's lock is reported");
    assert_eq!(row.acquisitions, 2000, "one acquisition per arrival");
    assert!(
        row.contended * 20 > row.acquisitions,
        "{} of {} arrivals found the lock taken",
        row.contended,
        row.acquisitions
    );
    let without = run_with(text, &["guest.barrier_lock=false"]);
    assert_eq!(without.vms[0].work_units, 2000);
    assert!(without.locks.iter().all(|l| l.lock != "b.lock"));
}

#[test]
fn the_platform_profiles_set_the_glibc_of_their_time() {
    let text = program(1, 10, 1);
    for (kernel, lock) in [
        ("linux-3.2", true),
        ("linux-3.5", true),
        ("linux-3.9", true),
        ("linux-3.19", true),
        ("linux-6.6", false),
    ] {
        let sc = vcpulab_core::resolve(&text, &[format!("guest.kernel={kernel:?}")], None)
            .expect("a known kernel");
        assert_eq!(sc.vm[0].guest.cond_lock, lock, "{kernel}");
        assert_eq!(sc.vm[0].guest.barrier_lock, lock, "{kernel}");
    }
}
