//! Work dispensers (`dispense`): threads take tickets from a shared counter and run the
//! body once per ticket while the episode's tickets last (bodytrack's TicketDispenser,
//! raytrace's tile counter, OpenMP's `schedule(dynamic)`).
mod common;
use common::*;
use vcpulab_core::resolve;

/// `groups` is the TOML of the workload's thread groups.
fn scenario(vcpus: u32, pcpus: u32, groups: &str, extra: &str) -> String {
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
{groups}
{extra}
"#
    )
}

#[test]
fn each_episode_hands_out_its_tickets_once_whatever_the_thread_count() {
    for threads in [1, 3, 4] {
        let groups = format!(
            r#"[[vm.workload.group]]
threads = {threads}
ops = [{{loop = {{n = 10, body = [{{dispense = {{tickets = "d", n = 100, body = [{{compute = "10us"}}, {{count = 1}}]}}}}, {{barrier = "b"}}]}}}}]
"#
        );
        let r = run_toml(&scenario(4, 4, &groups, ""));
        assert_eq!(r.stop_reason, "all-finished");
        // 10 episodes of 100 tickets: 1,000 bodies in all, not 1,000 per thread.
        assert_eq!(r.vms[0].work_units, 1_000, "{threads} threads");
        // The work is shared: 10 ms of it in about 10 / threads ms.
        let done = r.vms[0].completion_ns.expect("finished") as f64;
        let ideal = 10e6 / threads as f64;
        assert!(
            done > ideal && done < ideal * 1.2 + 0.2e6,
            "{threads} threads: {done} ns"
        );
    }
}

#[test]
fn a_late_thread_finds_the_work_taken() {
    // Three threads start at once; a fourth sleeps 5 ms first. The three take all 100
    // tickets (10 ms of work) in about 3.4 ms; the late one finds none and the run ends
    // at its wake-up, where a static split (25 tickets each) would end at 7.5 ms.
    let groups = r#"[[vm.workload.group]]
name = "early"
threads = 3
ops = [{dispense = {tickets = "d", n = 100, body = [{compute = "100us"}, {count = 1}]}}]
[[vm.workload.group]]
name = "late"
threads = 1
ops = [{sleep = "5ms"}, {dispense = {tickets = "d", n = 100, body = [{compute = "100us"}, {count = 1}]}}]
"#;
    let r = run_toml(&scenario(4, 4, groups, ""));
    assert_eq!(r.vms[0].work_units, 100);
    let done = r.vms[0].completion_ns.expect("finished");
    assert!((5_000_000..5_200_000).contains(&done), "{done} ns");
}

#[test]
fn on_a_shared_host_the_running_threads_take_a_preempted_ones_share() {
    // Four threads on four vCPUs, one per pCPU; a two-vCPU CPU hog shares pCPUs 2 and
    // 3, so two of the vCPUs run half the time. With a
    // dispenser the vCPUs that run take the tickets the preempted ones would have had;
    // with a static split every thread must do its quarter at its vCPU's share. (With
    // a barrier after every few tickets both would wait for the preempted vCPU's
    // ticket in progress alike.)
    let dynamic = r#"[[vm.workload.group]]
threads = 4
ops = [{dispense = {tickets = "d", n = 800, body = [{compute = "250us"}, {count = 1}]}}]
"#;
    let fixed = r#"[[vm.workload.group]]
threads = 4
ops = [{loop = {n = 200, body = [{compute = "250us"}, {count = 1}]}}]
"#;
    let hog = r#"
[[vm]]
name = "hog"
vcpus = 2
pin = ["2", "3"]
workload = { model = "cpu-bomb" }
"#;
    let pinned = |groups: &str| {
        scenario(4, 4, groups, hog).replace(
            "vcpus = 4\n",
            "vcpus = 4\npin = [\"0\", \"1\", \"2\", \"3\"]\n",
        )
    };
    let d = run_toml(&pinned(dynamic));
    let f = run_toml(&pinned(fixed));
    assert_eq!(d.vms[0].work_units, 800);
    assert_eq!(f.vms[0].work_units, 800);
    let (td, tf) = (
        d.vms[0].completion_ns.expect("finished") as f64,
        f.vms[0].completion_ns.expect("finished") as f64,
    );
    // 200 ms of work: about 67 ms on three pCPUs' worth, against 100 ms for the
    // quarters on the half-speed vCPUs.
    assert!(td < 0.8 * tf, "dispensed {td} ns vs static {tf} ns");
}

#[test]
fn a_dispenser_with_a_mutex_locks_it_for_every_take() {
    // 4 threads, 100 tickets: 100 takes that get one and 4 that find none.
    let groups = r#"[[vm.workload.group]]
threads = 4
ops = [{dispense = {tickets = "d", n = 100, mutex = "tm", hold = "200ns", body = [{compute = "10us"}, {count = 1}]}}]
"#;
    let r = run_toml(&scenario(4, 4, groups, ""));
    assert_eq!(r.vms[0].work_units, 100);
    let m = r
        .locks
        .iter()
        .find(|l| l.vm == "app" && l.lock == "tm")
        .expect("the dispenser's mutex is reported");
    assert_eq!(m.acquisitions, 104);
}

#[test]
fn bad_dispensers_are_refused_with_the_reason() {
    let cases = [
        (
            r#"{dispense = {tickets = "d", n = 0, body = [{compute = "1us"}]}}"#,
            "n = 0",
        ),
        (
            r#"{dispense = {tickets = "d", n = 4, body = []}}"#,
            "body is empty",
        ),
        (
            r#"{dispense = {tickets = "d", n = 4, hold = "1us", body = [{compute = "1us"}]}}"#,
            "give mutex too",
        ),
        (
            r#"{dispense = {tickets = "d", n = 4, body = [{loop = {n = 2, body = [{dispense = {tickets = "e", n = 2, body = [{compute = "1us"}]}}]}}]}}"#,
            "another dispense",
        ),
        (
            r#"{dispense = {tickets = "d", n = 4, body = [{compute = "1us"}]}}, {dispense = {tickets = "d", n = 5, body = [{compute = "1us"}]}}"#,
            "one number of tickets",
        ),
    ];
    for (ops, want) in cases {
        let groups = format!("[[vm.workload.group]]\nthreads = 2\nops = [{ops}]\n");
        let err = match resolve(&scenario(2, 2, &groups, ""), &[], None) {
            Ok(_) => panic!("accepted: {ops}"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(want), "{ops}: {err}");
    }
}

#[test]
fn a_trace_can_dispense() {
    let text = "0-2 dispense tiles 30\\n0-2 compute 20us\\n0-2 count 1\\n0-2 end\\n";
    let toml = format!(
        r#"
seed = 1
[run]
duration = "1s"
[host]
pcpus = 3
[[vm]]
name = "app"
vcpus = 3
workload = {{ model = "trace", params = {{ text = "{text}" }} }}
"#
    );
    let r = run_toml(&toml);
    assert_eq!(r.vms[0].work_units, 30);
    let bad = toml.replace("tiles 30", "tiles");
    let err = match resolve(&bad, &[], None) {
        Ok(_) => panic!("a dispense without its number of tickets was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("dispense NAME N [MUTEX]"), "{err}");
}
