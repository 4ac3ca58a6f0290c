//! The TLB refill model and the warm-up, on Gleaner's wake-up micro-benchmark: a wake-up
//! after another address space ran on the wakee's CPU re-walks page tables, and a walk
//! costs six times more under nested paging than natively.

mod common;
use common::run_with;

fn scenario(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../scenarios/gleaner/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Mean wake-up latency (ns) of VM `bench`.
fn wake_mean(text: &str, overrides: &[&str]) -> f64 {
    let r = run_with(text, overrides);
    let vm = r.vms.iter().find(|v| v.vm == "bench").unwrap();
    assert!(vm.wake_latency_count > 1000, "{}", vm.wake_latency_count);
    vm.wake_latency_mean_ns
}

const SHORT: &[&str] = &[
    "vm.0.workload.group.0.ops.0.loop.n=3000",
    "vm.0.workload.group.1.ops.0.loop.n=3000",
];

fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    SHORT.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn a_co_runner_costs_a_nested_walk_in_the_vm_and_a_native_one_natively() {
    let d_vm = scenario("wakeup-d.toml");
    let d_pm = scenario("wakeup-d-native.toml");
    let off = "host.cache.tlb_resume_pages=0";
    // Whatever runs in between evicts the whole TLB, so both pay every walk.
    let full = "host.cache.tlb_touch_pages_per_us=100000";
    let vm_extra = wake_mean(&d_vm, &with(&[full])) - wake_mean(&d_vm, &with(&[off]));
    let pm_extra = wake_mean(&d_pm, &with(&[full])) - wake_mean(&d_pm, &with(&[off]));
    assert!(pm_extra > 1_000.0, "native TLB refill {pm_extra} ns");
    // 24 references per walk against 4: about six times, less what partial eviction
    // and rounding take away.
    let ratio = vm_extra / pm_extra;
    assert!(
        (4.0..=7.0).contains(&ratio),
        "VM {vm_extra} ns, native {pm_extra} ns"
    );
}

/// Median wake-up latency (ns) of VM `bench`: what every wake-up pays, without the
/// rare one that waits for a co-runner's slice to end at a tick.
fn wake_median(text: &str, overrides: &[&str]) -> f64 {
    let r = run_with(text, overrides);
    let vm = r.vms.iter().find(|v| v.vm == "bench").unwrap();
    assert!(vm.wake_latency_count > 1000, "{}", vm.wake_latency_count);
    vm.wake_latency_p50_ns.unwrap() as f64
}

#[test]
fn threads_of_one_process_do_not_evict_each_others_translations() {
    let d_pm = scenario("wakeup-d-native.toml");
    let apart = wake_median(&d_pm, &with(&[]));
    let together = wake_median(&d_pm, &with(&["vm.0.workload.group.2.process=\"\""]));
    assert!(
        apart > together + 1_000.0,
        "apart {apart} together {together}"
    );
}

#[test]
fn an_idle_cpu_leaves_the_tlb_warm() {
    // Setting C: the wakee's pCPU idles in between; turning the TLB model off changes
    // almost nothing (only the first, cold runs).
    let c = scenario("wakeup.toml");
    let on = wake_mean(&c, &with(&[]));
    let off = wake_mean(&c, &with(&["host.cache.tlb_resume_pages=0"]));
    assert!((on - off).abs() < 1e-3 * off, "on {on} off {off}");
}

#[test]
fn warm_up_samples_are_discarded() {
    let c = scenario("wakeup-d-native.toml");
    let count = |w: &str| {
        let o = with(&[w]);
        let r = run_with(&c, &o);
        r.vms
            .iter()
            .find(|v| v.vm == "bench")
            .unwrap()
            .wake_latency_count
    };
    let (none, some) = (count("run.warmup=0s"), count("run.warmup=20ms"));
    assert!(some < none && some > 0, "no warm-up {none}, 20 ms {some}");
}
