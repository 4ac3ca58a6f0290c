//! The co-scheduling family end to end: relaxed co-scheduling bounds skew, strict
//! co-scheduling leaves pCPUs idle that cannot fit a gang, the PLE-exit actions run.
mod common;
use common::*;

/// VM `a` has two vCPUs: vCPU 0 alone on pCPU 0, vCPU 1 sharing pCPU 1 with a bomb.
fn skewed(sched: &str, extra: &str) -> String {
    format!(
        r#"
seed = 2
[run]
duration = "2s"
[host]
pcpus = 2
[host.scheduler]
kind = "{sched}"
{extra}
[[vm]]
name = "a"
vcpus = 2
pin = ["0", "1"]
workload = {{ model = "cpu-bomb" }}
[[vm]]
name = "b"
vcpus = 1
pin = "1"
workload = {{ model = "cpu-bomb" }}
"#
    )
}

fn vcpu_cpu(r: &vcpulab_core::Report, vm: &str, i: u32) -> f64 {
    r.vcpus
        .iter()
        .find(|v| v.vm == vm && v.vcpu == i)
        .map(|v| v.time.cpu_ns as f64)
        .unwrap_or(f64::NAN)
}

#[test]
fn relaxed_coscheduling_bounds_skew_and_credit_does_not() {
    let credit = run_toml(&skewed("credit", ""));
    let skew_credit = vcpu_cpu(&credit, "a", 0) - vcpu_cpu(&credit, "a", 1);
    assert!(
        skew_credit > 0.5e9,
        "credit lets the lone vCPU run ahead: skew {skew_credit} ns"
    );
    let relaxed = run_toml(&skewed("relaxed_co", "skew_threshold_ms = 3.0"));
    let skew = vcpu_cpu(&relaxed, "a", 0) - vcpu_cpu(&relaxed, "a", 1);
    // The lead is cut at the threshold; ticks (10 ms) and the 1 ms rate limit add slack.
    assert!(
        skew.abs() < 20e6,
        "relaxed co-scheduling keeps skew bounded: {skew} ns"
    );
    // The co-stopped vCPU's pCPU idles while the bomb VM has nothing else to run there.
    let idle0 = relaxed.pcpus[0].idle_ns;
    assert!(
        idle0 > 0.3e9 as u64,
        "pCPU 0 idles while vCPU 0 is co-stopped: {idle0}"
    );
}

/// Two 2-vCPU bomb VMs on 3 pCPUs: strict gangs never fit side by side.
fn gangs(sched: &str) -> String {
    format!(
        r#"
seed = 1
[run]
duration = "1s"
[host]
pcpus = 3
[host.scheduler]
kind = "{sched}"
[[vm]]
vcpus = 2
count = 2
workload = {{ model = "cpu-bomb" }}
"#
    )
}

#[test]
fn strict_coscheduling_shows_fragmentation() {
    let g = run_toml(&gangs("gang"));
    let idle_runnable: u64 = g.pcpus.iter().map(|p| p.idle_runnable_ns).sum();
    let end = g.end_ns as f64;
    // One pCPU of three idles the whole time while the other gang waits.
    assert!(
        (idle_runnable as f64 - end).abs() < 0.02 * end,
        "gang: idle while runnable {idle_runnable} of {end}"
    );
    for vm in &g.vms {
        assert!(
            (vm.cpu_share - 1.0 / 3.0).abs() < 0.02,
            "{}: {}",
            vm.vm,
            vm.cpu_share
        );
    }
    // Both vCPUs of a VM run exactly together: equal run time, and never alone.
    for v in &g.vcpus {
        assert!(v.time.cpu_ns > 0);
    }
    let c = run_toml(&gangs("credit"));
    let c_idle: u64 = c.pcpus.iter().map(|p| p.idle_runnable_ns).sum();
    assert!(
        (c_idle as f64) < 0.02 * end,
        "credit keeps every pCPU busy: {c_idle}"
    );
}

fn spin_heavy(action: &str, extra: &str) -> String {
    format!(
        r#"
preset = "xen-default"
seed = 4
[run]
duration = "400ms"
[host]
pcpus = 4
[host.ple]
action = "{action}"
# NPB's spin barriers spin in user mode: a pause filter that counts them (AMD's).
user_mode_exits = true
{extra}
[[vm]]
vcpus = 4
count = 3
workload = {{ model = "npb-suite", params = {{ forever = true }} }}
"#
    )
}

#[test]
fn every_ple_action_runs_and_counts_its_decisions() {
    let cos = run_toml(&spin_heavy("coschedule", ""));
    let n: u64 = cos.vms.iter().map(|v| v.ple_coschedules).sum();
    let moved: u64 = cos.vms.iter().map(|v| v.ple_cosched_vcpus).sum();
    assert!(
        n > 0 && moved > 0,
        "co-schedule: {n} exits, {moved} vCPUs moved"
    );
    // A co-schedule that moved nobody yielded instead: none is a failed yield, and
    // the fallbacks are the co-schedules that moved nobody.
    let failed: u64 = cos.vms.iter().map(|v| v.ple_yields_failed).sum();
    let fell: u64 = cos.vms.iter().map(|v| v.ple_cosched_fallbacks).sum();
    assert_eq!(failed, 0, "co-schedule: {failed} failed yields");
    // Each co-schedule that did not fall back moved at least one vCPU.
    assert!(
        fell < n && moved + fell >= n,
        "fallbacks {fell} of {n}, {moved} moved"
    );
    let yth = run_toml(&spin_heavy("yield-to-head", ""));
    assert!(yth.vms.iter().map(|v| v.ple_yield_head).sum::<u64>() > 0);
    let ytt = run_toml(&spin_heavy("yield-to-tail", ""));
    assert!(ytt
        .vms
        .iter()
        .all(|v| v.ple_yield_head == 0 && v.ple_coschedules == 0));
    // CVS at VOR <= 3 (12 vCPUs on 4 pCPUs) co-schedules; with thresholds 0 it never does.
    let cvs = run_toml(&spin_heavy("cvs", ""));
    let d: u64 = cvs.vms.iter().map(|v| v.cvs_decisions).sum();
    let c: u64 = cvs.vms.iter().map(|v| v.ple_coschedules).sum();
    assert!(d > 0 && c > 0, "cvs: {d} decisions, {c} co-schedules");
    let per = cvs.vms.iter().map(|v| v.cvs_decision_ns).sum::<u64>() / d;
    assert_eq!(
        per,
        100 + 20 * 4,
        "decision cost = fixed + per-runqueue x 4 pCPUs (not x 12 vCPUs)"
    );
    let tail = run_toml(&spin_heavy(
        "cvs",
        "cvs_coschedule_below = 0.0\ncvs_yield_head_below = 0.0",
    ));
    assert!(tail
        .vms
        .iter()
        .all(|v| v.ple_coschedules == 0 && v.ple_yield_head == 0));
    assert!(tail.vms.iter().map(|v| v.ple_yield_tail).sum::<u64>() > 0);
}

#[test]
fn cosched_runs_are_deterministic() {
    for s in [
        gangs("gang"),
        skewed("relaxed_co", ""),
        spin_heavy("cvs", ""),
    ] {
        let a = run_toml(&s).to_json();
        let b = run_toml(&s).to_json();
        assert_eq!(a, b);
    }
}

fn rejected(text: &str, overrides: &[&str]) -> String {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    match vcpulab_core::resolve(text, &o, None) {
        Ok(_) => panic!("accepted bad input: {overrides:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_cosched_input_names_key_value_and_range() {
    let base = "[host]\npcpus = 2\n[[vm]]\nvcpus = 2\nworkload = { model = \"matmul\" }\n";
    let e = rejected(base, &["host.scheduler.kind=\"gang\"", "vm.0.vcpus=3"]);
    assert!(
        e.contains("vm.0.vcpus") && e.contains('3') && e.contains("at most"),
        "{e}"
    );
    let e = rejected(base, &["host.ple.action=\"yield-to-middle\""]);
    assert!(
        e.contains("yield-to-middle") && e.contains("yield-to-head"),
        "{e}"
    );
    let e = rejected(
        base,
        &[
            "host.ple.cvs_coschedule_below=4",
            "host.ple.cvs_yield_head_below=3",
        ],
    );
    assert!(
        e.contains("host.ple.cvs_yield_head_below") && e.contains('3'),
        "{e}"
    );
    let e = rejected(
        base,
        &[
            "host.scheduler.kind=\"relaxed_co\"",
            "host.scheduler.skew_threshold_ms=0",
        ],
    );
    assert!(e.contains("skew_threshold_ms") && e.contains("0.01"), "{e}");
    // The presets resolve, with Xen's PLE conventions for gang and relaxed_co.
    for preset in ["cvs", "cvs-no-yth", "gang", "relaxed-co"] {
        let sc = vcpulab_core::resolve(base, &[format!("preset=\"{preset}\"")], None)
            .unwrap_or_else(|e| panic!("{preset}: {e}"));
        assert_eq!(sc.host.ple.window_cycles, 4096, "{preset}");
    }
}

/// On a host past 128 pCPUs the co-schedule action tells pCPU 133 from pCPU 5: the
/// spinner's VM runs on pCPU 5, its preempted sibling may only run on pCPU 133, and
/// co-scheduling moves it there (a 128-bit set of taken pCPUs once read 133 as 5, and
/// every co-schedule fell back to a yield).
#[test]
fn coscheduling_reaches_pcpus_past_128() {
    let text = r#"
preset = "xen-default"
seed = 4
[run]
duration = "400ms"
[host]
pcpus = 256
[host.ple]
action = "coschedule"
user_mode_exits = true
[[vm]]
name = "a"
vcpus = 2
pin = ["5", "133"]
workload = { model = "npb-suite", params = { forever = true } }
[[vm]]
name = "b"
vcpus = 1
pin = "133"
workload = { model = "cpu-bomb" }
"#;
    let r = run_toml(text);
    let a = r.vms.iter().find(|v| v.vm == "a").expect("vm a");
    assert!(
        a.ple_coschedules > 0 && a.ple_cosched_vcpus > 0,
        "co-schedules {} moved {}",
        a.ple_coschedules,
        a.ple_cosched_vcpus
    );
}
