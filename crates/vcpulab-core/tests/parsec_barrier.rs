//! PARSEC's own barrier (`parsec_barrier`: parsec_barrier_wait of PARSEC's
//! parsec_barrier.cpp with ENABLE_SPIN_BARRIER): a mutex taken to arrive and again to
//! leave, a phase flag spun on, a trylock loop and a condition variable.
mod common;
use common::*;
use vcpulab_core::resolve;

fn program(vcpus: u32, pcpus: u32, threads: u32, rounds: u32, work: &str, extra: &str) -> String {
    format!(
        r#"
seed = 2
[run]
duration = "20s"
[host]
pcpus = {pcpus}
[[vm]]
name = "app"
vcpus = {vcpus}
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = {threads}
ops = [{{loop = {{n = {rounds}, body = [{{compute = "{work}"}}, {{parsec_barrier = {{name = "b", spin = "100us"}}}}, {{count = 1}}]}}}}]
{extra}
"#
    )
}

fn mutex_row(r: &vcpulab_core::Report) -> &vcpulab_core::metrics::report::LockRow {
    r.locks
        .iter()
        .find(|l| l.vm == "app" && l.lock == "b.mutex")
        .expect("the barrier's mutex is reported as b.mutex")
}

#[test]
fn every_thread_passes_every_episode_taking_the_mutex_to_arrive_and_to_leave() {
    let r = run_toml(&program(4, 4, 4, 200, "50us", ""));
    assert_eq!(r.stop_reason, "all-finished");
    assert_eq!(r.vms[0].work_units, 800);
    // Each wait takes the mutex twice (arrive, leave), but the last to arrive leaves
    // without dropping it: 2 x 4 - 1 = 7 per episode; more when a thread has to wait on
    // the condition variable (woken, it takes the mutex again).
    let m = mutex_row(&r);
    assert!(m.acquisitions >= 1_400, "{} acquisitions", m.acquisitions);
    // A dedicated VM's threads doing equal work arrive within the flag spin's 100 us:
    // nobody sleeps.
    assert_eq!(r.vms[0].futex_calls, 0);
    // With unequal work (exponential) a late thread keeps the others past their flag
    // spin: they sleep on the condition variable.
    let r = run_toml(&program(4, 4, 4, 200, "exp(50us)", ""));
    assert_eq!(r.vms[0].work_units, 800);
    assert!(r.vms[0].futex_calls > 0);
}

#[test]
fn a_guest_with_more_threads_than_vcpus_gets_through() {
    // Six threads on two vCPUs: a trylock spinner that shares its vCPU with the
    // mutex's holder gives way at the guest tick, and a thread spinning for the next
    // arrival phase on the vCPU of a thread that has not left yet does too; waiters
    // that spun out sleep on the condition variable and are broadcast awake.
    let r = run_toml(&program(2, 2, 6, 100, "exp(50us)", ""));
    assert_eq!(r.stop_reason, "all-finished");
    assert_eq!(r.vms[0].work_units, 600);
    assert!(r.vms[0].futex_calls > 0);
}

#[test]
fn on_a_shared_host_waiters_spin_out_and_sleep_on_the_condvar() {
    // The app's vCPUs share two pCPUs with a CPU hog: a thread whose vCPU is preempted
    // keeps the others beyond their 100 us flag spin, so they take the mutex with the
    // trylock loop and wait on the condition variable; the broadcast wakes them.
    let hog = r#"
[[vm]]
name = "hog"
vcpus = 2
workload = { model = "cpu-bomb" }
"#;
    let r = run_toml(&program(4, 2, 4, 200, "exp(50us)", hog));
    assert_eq!(r.stop_reason, "all-finished");
    assert_eq!(r.vms[0].work_units, 800);
    let m = mutex_row(&r);
    assert!(m.contended > 0);
    assert!(m.acquisitions > 1_400, "{} acquisitions", m.acquisitions);
    assert!(r.vms[0].futex_calls > 0 && r.vms[0].halts > 0);
}

#[test]
fn a_barrier_name_is_either_a_parsec_barrier_or_another_barrier() {
    let text = r#"
[[vm]]
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 2
ops = [{barrier = "b"}, {parsec_barrier = {name = "b", spin = "10us"}}]
"#;
    let Err(e) = resolve(text, &[], None) else {
        panic!("mixing barrier kinds is refused");
    };
    let e = e.to_string();
    assert!(e.contains("\"b\"") && e.contains("parsec_barrier"), "{e}");
}

#[test]
fn a_trace_can_wait_at_a_parsec_barrier() {
    let text = r#"
[run]
duration = "1s"
[host]
pcpus = 2
[[vm]]
name = "app"
vcpus = 2
[vm.workload]
model = "trace"
params = { text = """
0-1 loop 50
0-1 compute 20us
0-1 parsec_barrier b 100us
0-1 count 1
0-1 end
""" }
"#;
    let r = run_toml(text);
    assert_eq!(r.stop_reason, "all-finished");
    assert_eq!(r.vms[0].work_units, 100);
    assert!(mutex_row(&r).acquisitions >= 150);
}
