//! Group commit (`group_flush`): one flush at a time; a thread whose writes came after
//! the flush under way began sleeps until it ends and is covered by the next, which the
//! first of the woken starts for all of them (InnoDB's log_write_up_to).
mod common;
use common::*;
use vcpulab_core::resolve;

fn scenario(threads: u32, commit: &str) -> String {
    format!(
        r#"
seed = 3
[run]
duration = "10s"
[host]
pcpus = 8
[[vm]]
name = "db"
vcpus = 8
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = {threads}
ops = [{{loop = {{n = 10, body = [{{compute = "100us"}}, {commit}, {{count = 1}}]}}}}]
"#
    )
}

const GROUP: &str = r#"{group_flush = {name = "redo", io = "1ms"}}"#;
const SERIAL: &str = r#"{lock = "log"}, {io = "1ms"}, {unlock = "log"}"#;

#[test]
fn one_thread_flushes_for_each_commit() {
    let r = run_toml(&scenario(1, GROUP));
    assert_eq!(r.vms[0].work_units, 10);
    // Ten rounds of 0.1 ms of work and a 1 ms flush of its own (no waiting), plus
    // the system calls and the completion interrupt waking the halted vCPU.
    let done = r.vms[0].completion_ns.expect("finished");
    assert!((11_000_000..11_600_000).contains(&done), "{done} ns");
    assert_eq!(r.vms[0].futex_calls, 0);
}

#[test]
fn concurrent_commits_share_flushes() {
    // Eight threads commit together: the first flushes alone, the other seven sleep
    // through it and share the next. Flushes one at a time without sharing would take
    // 80 ms; sharing needs about two a round.
    let g = run_toml(&scenario(8, GROUP));
    let s = run_toml(&scenario(8, SERIAL));
    assert_eq!(g.vms[0].work_units, 80);
    assert_eq!(s.vms[0].work_units, 80);
    let (tg, ts) = (
        g.vms[0].completion_ns.expect("finished"),
        s.vms[0].completion_ns.expect("finished"),
    );
    assert!(ts > 80_000_000, "serial flushes: {ts} ns");
    assert!(tg < 25_000_000, "shared flushes: {tg} ns");
    // The woken sleep on the flush event again while the next flush runs.
    assert!(g.vms[0].futex_calls > 0);
}

#[test]
fn a_log_has_one_flush_time() {
    let ops = r#"{group_flush = {name = "redo", io = "1ms"}}, {group_flush = {name = "redo", io = "2ms"}}"#;
    let err = match resolve(&scenario(2, ops), &[], None) {
        Ok(_) => panic!("two flush times for one log were accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("two flush times"), "{err}");
}

#[test]
fn the_flushing_thread_alone_runs_the_flush_body() {
    // The body counts 1,000 per flush: one thread flushes for each of its ten commits;
    // eight threads committing together share flushes (the first alone, the other
    // seven the next), so a round takes about two flushes, not eight.
    let commit = r#"{group_flush = {name = "journal", io = "1ms", body = [{kernel = "10us"}, {count = 1000}]}}"#;
    let flushes = |threads: u32| {
        let r = run_toml(&scenario(threads, commit));
        assert_eq!(r.stop_reason, "all-finished");
        (r.vms[0].work_units - 10 * threads as u64) / 1000
    };
    assert_eq!(flushes(1), 10);
    let eight = flushes(8);
    assert!((15..=30).contains(&eight), "{eight} flushes for 80 commits");
}

#[test]
fn a_group_flush_inside_its_own_body_is_refused() {
    let ops = r#"{group_flush = {name = "a", io = "1ms", body = [{group_flush = {name = "b", io = "1ms"}}]}}"#;
    let err = match resolve(&scenario(2, ops), &[], None) {
        Ok(_) => panic!("a nested group_flush was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("holds another group_flush"), "{err}");
}
