//! Loop counters: a thread keeps its first two loops' counters in its record and the
//! others apart (guest/thread.rs, `Thread::loop_counter`). Nested and sequential loops
//! past the first two count their iterations exactly.

use vcpulab_core::{resolve, run};

/// Work units of one VM whose `threads` threads each run `ops` once.
fn units(threads: u32, ops: &str) -> u64 {
    let text = format!(
        "run = {{duration = \"1s\"}}\n[[vm]]\nvcpus = 2\nworkload = {{model = \"program\", \
         group = [{{threads = {threads}, ops = [{ops}]}}]}}\n"
    );
    let sc = resolve(&text, &[], None).unwrap_or_else(|e| panic!("{e}"));
    let report = run(&sc).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report.vms[0].finished,
        "the program ends well within the run"
    );
    report.vms[0].work_units
}

fn nest(counts: &[u32], body: &str) -> String {
    counts.iter().rev().fold(body.to_string(), |inner, n| {
        format!("{{loop = {{n = {n}, body = [{inner}]}}}}")
    })
}

#[test]
fn four_nested_loops_count_every_iteration() {
    let ops = nest(&[2, 3, 4, 5], "{compute = \"10us\"}, {count = 1}");
    assert_eq!(units(2, &ops), 2 * (2 * 3 * 4 * 5));
}

#[test]
fn loops_after_the_first_two_keep_their_own_counters() {
    // Slots 0 and 1 inline, 2 to 4 apart: a sequential loop after a nest, and a nest
    // whose inner loop runs more often than the outer ones.
    let ops = format!(
        "{}, {}, {}",
        nest(&[3, 2], "{compute = \"10us\"}, {count = 1}"),
        nest(&[7], "{compute = \"10us\"}, {count = 10}"),
        nest(&[2, 9], "{compute = \"10us\"}, {count = 100}")
    );
    assert_eq!(units(3, &ops), 3 * (3 * 2 + 7 * 10 + 2 * 9 * 100));
}
