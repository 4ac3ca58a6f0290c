//! Optimistic spinning of writers on kernel read-write semaphores (`guest.rwsem_spin`):
//! none before Linux 3.16; 3.16 to 3.19 spin on a running writer owner; 5.x and later
//! also on readers for a bounded time, and stop on an owner whose vCPU is preempted.
mod common;
use common::*;

/// `threads` threads on as many vCPUs (and pCPUs unless `pcpus` says fewer), taking
/// semaphore "s" with `op` for `hold` of kernel work, `gap` of user work between.
fn program(pcpus: u32, groups: &str) -> String {
    format!(
        r#"
preset = "kvm-default"
seed = 5
[run]
duration = "100ms"
[host]
pcpus = {pcpus}
platform = "kvm-6.6-spr"
[[vm]]
name = "a"
vcpus = 4
[vm.workload]
model = "program"
{groups}"#
    )
}

fn group(threads: u32, op: &str, hold: &str, gap: &str, count: bool) -> String {
    let count = if count { ", { count = 1 }" } else { "" };
    format!(
        "[[vm.workload.group]]\nname = \"{op}\"\nthreads = {threads}\nops = [{{ loop = {{ n = \
         \"forever\", body = [{{ compute = \"{gap}\" }}, {{ {op} = \"s\" }}, {{ kernel = \
         \"{hold}\" }}, {{ rw_unlock = \"s\" }}{count}] }} }}]\n"
    )
}

#[test]
fn writers_spin_on_a_running_writer_from_linux_3_16() {
    let text = program(4, &group(4, "rw_write", "20us", "exp(5us)", true));
    let off = run_with(&text, &["guest.rwsem_spin=\"off\""]);
    let spin = run_with(&text, &["guest.rwsem_spin=\"writer-owner\""]);
    let (o, s) = (&off.vms[0], &spin.vms[0]);
    // Without spinning every contended writer sleeps and is woken: a context switch
    // each way. Spinning, the writers hand the semaphore on without sleeping.
    assert!(
        s.thread_switches * 5 < o.thread_switches,
        "switches: off {} spin {}",
        o.thread_switches,
        s.thread_switches
    );
    assert!(
        s.time.spin_ns > 10 * o.time.spin_ns.max(1),
        "spin_ns: off {} spin {}",
        o.time.spin_ns,
        s.time.spin_ns
    );
    assert!(
        s.work_units > o.work_units,
        "{} vs {}",
        s.work_units,
        o.work_units
    );
}

/// Readers hold the semaphore for 2 ms at a time; one writer wants it now and then.
/// A 3.16 writer does not start spinning on readers; a 5.x writer spins on them for
/// (20 + readers) / 2 us at most, then sleeps.
#[test]
fn a_writer_spins_on_readers_only_for_the_bounded_time() {
    let text = program(
        4,
        &(group(3, "rw_read", "2ms", "exp(20us)", false)
            + &group(1, "rw_write", "10us", "exp(300us)", true)),
    );
    let bounded = run_with(&text, &["guest.rwsem_spin=\"reader-bounded\""]);
    let owner = run_with(&text, &["guest.rwsem_spin=\"writer-owner\""]);
    let per_write = |r: &vcpulab_core::Report| r.vms[0].time.spin_ns / r.vms[0].work_units.max(1);
    assert!(
        bounded.vms[0].work_units > 10,
        "{}",
        bounded.vms[0].work_units
    );
    let b = per_write(&bounded);
    assert!(
        (8_000..=14_000).contains(&b),
        "reader-bounded: {b} ns spun per write"
    );
    assert!(
        per_write(&owner) < 2_000,
        "writer-owner: {} ns",
        per_write(&owner)
    );
}

/// Four writers on four vCPUs that share two pCPUs with a busy VM: owners are often
/// preempted while they hold the semaphore. Asking vcpu_is_preempted(), spinners stop
/// at once; without it they spin on a preempted owner until PAUSE-loop exiting.
#[test]
fn writers_stop_spinning_on_an_owner_whose_vcpu_is_preempted() {
    let text = program(2, &group(4, "rw_write", "100us", "exp(20us)", true))
        + "[[vm]]\nname = \"hog\"\nvcpus = 2\n[vm.workload]\nmodel = \"cpu-bomb\"\n";
    let asks = run_with(&text, &[]);
    let blind = run_with(&text, &["guest.vcpu_is_preempted=false"]);
    let exits = |r: &vcpulab_core::Report| r.vms[0].ple_exits;
    assert!(
        exits(&asks) * 3 < exits(&blind),
        "PLE exits: vcpu_is_preempted {} without {}",
        exits(&asks),
        exits(&blind)
    );
}

/// Three readers hold the semaphore most of the time and a writer wants it every
/// 200 us, on vCPUs that share their pCPUs with a CPU hog. Linux 5.11+ readers take a
/// free semaphore ahead of a woken writer whose vCPU has not run yet (reader lock
/// stealing), so the writer gets it less often than with 3.x's queue order; the
/// hand-off bit, set once the first waiter has waited 4 ms, keeps it from starving
/// (without the hand-off this writer finishes 9 writes, with it 147).
#[test]
fn readers_steal_a_free_semaphore_until_the_first_waiter_asks_for_the_hand_off() {
    let text = r#"
preset = "kvm-default"
seed = 5
[run]
duration = "300ms"
[host]
pcpus = 4
platform = "kvm-6.6-spr"
[[vm]]
name = "a"
vcpus = 4
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "r"
threads = 3
ops = [{ loop = { n = "forever", body = [{ compute = "exp(20us)" }, { rw_read = "s" }, { kernel = "100us" }, { rw_unlock = "s" }] } }]
[[vm.workload.group]]
name = "w"
ops = [{ loop = { n = "forever", body = [{ compute = "exp(200us)" }, { rw_write = "s" }, { kernel = "10us" }, { rw_unlock = "s" }, { count = 1 }] } }]
[[vm]]
name = "hog"
vcpus = 4
workload = { model = "cpu-bomb" }
"#;
    let queued = run_with(text, &["guest.rwsem_steal=false"]).vms[0].work_units;
    let stealing = run_with(text, &["guest.rwsem_steal=true"]).vms[0].work_units;
    assert!(
        stealing * 3 < queued * 2 && stealing > 60,
        "writes: 3.x order {queued}, stealing {stealing}"
    );
}
