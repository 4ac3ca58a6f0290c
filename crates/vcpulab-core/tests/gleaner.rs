//! Gleaner in the guest: retention keeps vCPUs from halting, consolidation shrinks the
//! workload's cpuset for a fine-grained synchronizing workload and leaves a CPU-bound
//! one alone.
mod common;
use common::*;

/// `threads` threads on `vcpus` vCPUs/pCPUs passing through one mutex with short
/// computations between (fine-grained synchronization), for `duration`.
fn mutex_vm(vcpus: u32, mode: &str, extra: &str) -> String {
    format!(
        r#"
preset = "kvm-default"
seed = 2
[run]
duration = "1s"
[host]
pcpus = {vcpus}
[guest.gleaner]
mode = "{mode}"
{extra}
[[vm]]
name = "app"
vcpus = {vcpus}
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = {vcpus}
ops = [{{loop = {{n = "forever", body = [{{compute = "exp(10us)"}}, {{lock = "m"}}, {{compute = "20us"}}, {{unlock = "m"}}, {{count = 1}}]}}}}]
"#
    )
}

fn matmul_vm(vcpus: u32, mode: &str) -> String {
    format!(
        r#"
preset = "kvm-default"
[run]
duration = "1s"
[host]
pcpus = {vcpus}
[guest.gleaner]
mode = "{mode}"
[[vm]]
name = "app"
vcpus = {vcpus}
workload = {{ model = "matmul", params = {{ forever = true }} }}
"#
    )
}

#[test]
fn consolidation_shrinks_a_fine_grained_mutex_workload() {
    let r = run_toml(&mutex_vm(8, "gleaner", ""));
    let vm = &r.vms[0];
    assert!(vm.active_vcpus_min < 8, "min {}", vm.active_vcpus_min);
    assert!(vm.active_vcpus_mean < 8.0, "mean {}", vm.active_vcpus_mean);
    assert!(vm.gleaner_deactivations > 0);
    assert!(!r.gleaner.is_empty());
    assert!(r.gleaner.iter().any(|g| g.active_vcpus < 8));
}

#[test]
fn consolidation_keeps_every_vcpu_of_a_cpu_bound_workload() {
    let r = run_toml(&matmul_vm(8, "gleaner"));
    let vm = &r.vms[0];
    assert_eq!(vm.active_vcpus_min, 8);
    assert_eq!(vm.active_vcpus_final, 8);
    assert_eq!(vm.gleaner_deactivations, 0);
    assert!(r.gleaner.iter().all(|g| g.active_vcpus == 8));
}

#[test]
fn retention_replaces_halts_with_yielding() {
    let off = run_toml(&mutex_vm(4, "off", ""));
    let keep = run_toml(&mutex_vm(4, "retention", ""));
    let timed = run_toml(&mutex_vm(4, "retention-timeout", ""));
    let (o, k, t) = (&off.vms[0], &keep.vms[0], &timed.vms[0]);
    assert!(o.halts > 1000, "halts without retention {}", o.halts);
    // Pure retention: the yielding threads never sleep; only start-up halts remain.
    assert!(k.halts < o.halts / 100, "{} vs {}", k.halts, o.halts);
    assert_eq!(k.gleaner_sleeps, 0);
    assert!(k.gleaner_idle_periods > 1000);
    assert!(k.time.idle_poll_ns > 0);
    // With the timeout some idle periods end in a sleep, far fewer than the halts of HLT.
    assert!(t.halts < o.halts, "{} vs {}", t.halts, o.halts);
    // Retention keeps the pCPUs busy: more energy than halting.
    assert!(keep.energy.busy_pcpu_ns > off.energy.busy_pcpu_ns);
    assert!(keep.energy.joules > off.energy.joules);
    // Waking a running vCPU is cheaper than a halted one.
    assert!(
        k.wake_latency_mean_ns < o.wake_latency_mean_ns,
        "{} vs {}",
        k.wake_latency_mean_ns,
        o.wake_latency_mean_ns
    );
}

#[test]
fn an_idle_vcpu_with_retention_timeout_sleeps() {
    // One thread on two vCPUs: vCPU 1 has nothing to do; its yielder times out and
    // sleeps over and over.
    let text = r#"
preset = "kvm-default"
[run]
duration = "100ms"
[host]
pcpus = 2
[guest.gleaner]
mode = "retention-timeout"
[[vm]]
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
ops = [{loop = {n = "forever", body = [{compute = "1ms"}]}}]
"#;
    let r = run_toml(text);
    let v1 = &r.vcpus[1];
    // Nothing ever runs there: each sleep doubles (1, 2, 4 ... ms, capped at 50 ms), so
    // about seven in 100 ms instead of about 95 with a fixed 1 ms sleep.
    let sleeps = r.vms[0].gleaner_sleeps;
    assert!((4..=12).contains(&sleeps), "{sleeps}");
    assert!(v1.time.halted_ns > 80_000_000, "{}", v1.time.halted_ns);
}

#[test]
fn gleaner_runs_are_deterministic() {
    let a = run_toml(&mutex_vm(4, "gleaner", "")).to_json();
    let b = run_toml(&mutex_vm(4, "gleaner", "")).to_json();
    assert_eq!(a, b);
}

#[test]
fn bad_gleaner_settings_name_the_key() {
    let text = mutex_vm(4, "gleaner", "rho = 1.5");
    let e = vcpulab_core::resolve(&text, &[], None).unwrap_err();
    assert_eq!(e.key, "vm.0.guest.gleaner.rho");
    assert!(e.message.contains("(0, 1]"), "{}", e.message);
    let text = mutex_vm(4, "sometimes", "");
    let e = vcpulab_core::resolve(&text, &[], None).unwrap_err();
    assert!(e.key.contains("gleaner.mode"), "{e}");
}

#[test]
fn the_consolidation_scenario_file_shows_the_active_vcpus_falling() {
    let text = std::fs::read_to_string(format!(
        "{}/../../scenarios/gleaner/consolidation.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("scenario file");
    let r = run_toml(&text);
    let counts: Vec<u32> = r.gleaner.iter().map(|g| g.active_vcpus).collect();
    assert_eq!(counts.first(), Some(&8));
    assert!(counts.windows(2).all(|w| w[1] + 1 >= w[0]), "{counts:?}");
    assert!(*counts.last().unwrap_or(&8) < 8, "{counts:?}");
    let cpu = run_with(
        &text,
        &[r#"vm.0.workload={ model = "matmul", params = { forever = true } }"#],
    );
    assert!(cpu.gleaner.iter().all(|g| g.active_vcpus == 8));
    assert_eq!(cpu.vms[0].active_vcpus_final, 8);
}

#[test]
fn the_controller_table_stays_bounded_and_spans_the_run() {
    let text = matmul_vm(2, "gleaner")
        .replace("duration = \"1s\"", "duration = \"6s\"")
        .replace("mode = \"gleaner\"", "mode = \"gleaner\"\ninterval_ms = 1");
    let r = run_toml(&text);
    let n = vcpulab_core::metrics::series::CAP;
    // 6,000 intervals of 1 ms: thinned twice.
    assert!(
        r.gleaner.len() <= n && r.gleaner.len() > n / 2,
        "{}",
        r.gleaner.len()
    );
    let last = r.gleaner.last().map_or(0, |g| g.t_ns);
    assert!(last > 5_000_000_000, "last row at {last} ns");
    assert!(r.gleaner.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
}

#[test]
fn a_run_too_short_for_the_controller_says_so() {
    // 30 ms: the 50 ms controller never measures.
    let short = run_with(&mutex_vm(4, "gleaner", ""), &["run.duration=30ms"]);
    assert_eq!(short.warnings.len(), 1, "{:?}", short.warnings);
    let w = &short.warnings[0];
    assert!(
        w.contains("vm app") && w.contains("measured 0 time") && w.contains("50 ms"),
        "{w}"
    );
    // Long enough: no warning; retention alone has no controller to warn about.
    let long = run_with(&mutex_vm(4, "gleaner", ""), &["run.duration=300ms"]);
    assert!(long.warnings.is_empty(), "{:?}", long.warnings);
    let retention = run_with(&mutex_vm(4, "retention", ""), &["run.duration=30ms"]);
    assert!(retention.warnings.is_empty(), "{:?}", retention.warnings);
}

/// A VM past 128 vCPUs: Gleaner's cpuset covers all of them, and consolidation takes the
/// highest-numbered vCPUs out first (the cpuset was 128 bits wide, and larger VMs were
/// refused).
#[test]
fn consolidation_works_on_a_vm_past_128_vcpus() {
    let text = mutex_vm(160, "gleaner", "").replace("duration = \"1s\"", "duration = \"300ms\"");
    let r = run_toml(&text);
    let vm = &r.vms[0];
    assert!(vm.gleaner_deactivations > 0, "no deactivation");
    assert!(vm.active_vcpus_min < 160, "min {}", vm.active_vcpus_min);
    assert!(r.gleaner.iter().all(|g| g.active_vcpus <= 160));
}
