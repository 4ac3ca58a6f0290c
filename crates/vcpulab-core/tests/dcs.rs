//! Demand-based coordinated scheduling on hand-made situations: TLB-Co makes the
//! preempted target of a shootdown urgent, Resched-DP protects a waker, and DCS is
//! refused where urgent-vCPU-first does not exist.

mod common;
use common::*;

/// Two vCPUs of "bench" pinned to pCPUs 0 and 1, shooting down each other's TLBs; a
/// CPU hog shares pCPU 1, so shootdowns aimed at vCPU 1 wait for it to run.
fn shootdowns(sched: &str, extra: &str) -> String {
    format!(
        r#"
preset = "kvm-default"
[run]
duration = "20s"
[host]
pcpus = 2
[host.scheduler]
kind = "{sched}"
{extra}
[[vm]]
name = "bench"
vcpus = 2
pin = ["0", "1"]
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 2
ops = [{{loop = {{n = 2000, body = [{{compute = "200us"}}, {{tlb_shootdown = 1}}]}}}}]
[[vm]]
name = "hog"
vcpus = 1
pin = "1"
workload = {{ model = "cpu-bomb" }}
"#
    )
}

fn tlb_wait(r: &vcpulab_core::Report) -> f64 {
    r.latencies
        .iter()
        .find(|l| l.vm == "bench" && l.kind == "tlb_wait")
        .map(|l| l.mean_ns)
        .unwrap_or(f64::NAN)
}

#[test]
fn tlb_co_makes_the_preempted_target_urgent() {
    for sched in ["cfs", "eevdf"] {
        let base = run_toml(&shootdowns(sched, ""));
        // An allowance large enough never to refuse (it bounds what the target may
        // borrow; a_zero_allowance_refuses_a_vcpu_that_ran_ahead tests that side).
        let co = run_toml(&shootdowns(
            sched,
            "[host.dcs]\ntlb_co = true\nurgent_allowance_ms = 1000\n",
        ));
        assert!(base.vms[0].finished && co.vms[0].finished, "{sched}");
        assert!(base.dcs.is_none());
        let s = co.dcs.as_ref().expect("DCS counters");
        assert!(
            s.urgent_tlb > 0 && s.urgent_preemptions > 0,
            "{sched}: {s:?}"
        );
        assert_eq!(s.allowance_refusals, 0, "{sched}: {s:?}");
        assert!(
            tlb_wait(&co) < 0.5 * tlb_wait(&base),
            "{sched}: TLB wait with TLB-Co {} vs without {}",
            tlb_wait(&co),
            tlb_wait(&base)
        );
    }
}

#[test]
fn a_zero_allowance_refuses_a_vcpu_that_ran_ahead() {
    // With no allowance, a target ahead of its fair share (positive lead) is refused;
    // the hog keeps its turn more often than with the default allowance.
    let tight = run_toml(&shootdowns(
        "cfs",
        "[host.dcs]\ntlb_co = true\nurgent_allowance_ms = 0\n",
    ));
    let loose = run_toml(&shootdowns(
        "cfs",
        "[host.dcs]\ntlb_co = true\nurgent_allowance_ms = 24\n",
    ));
    let (t, l) = (tight.dcs.unwrap(), loose.dcs.unwrap());
    assert!(
        t.allowance_refusals > l.allowance_refusals,
        "{t:?} vs {l:?}"
    );
    assert!(
        t.urgent_preemptions < l.urgent_preemptions,
        "{t:?} vs {l:?}"
    );
}

#[test]
fn resched_dp_defers_the_preemption_of_a_waker() {
    // A CPU-bound producer waking a consumer on another vCPU every millisecond, each
    // vCPU sharing its pCPU with a hog: the producer's reschedule IPIs keep it
    // protected, so the scheduler's preemptions of it are deferred.
    let text = |dcs: &str| {
        format!(
            r#"
[run]
duration = "2s"
[host]
pcpus = 2
{dcs}
[[vm]]
name = "pc"
vcpus = 2
pin = ["0", "1"]
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "producer"
threads = 1
ops = [{{loop = {{n = 1000, body = [{{compute = "1ms"}}, {{push = "q"}}]}}}}]
[[vm.workload.group]]
name = "consumer"
threads = 1
ops = [{{loop = {{n = 1000, body = [{{pop = "q"}}, {{compute = "10us"}}]}}}}]
[[vm]]
name = "hog"
vcpus = 2
pin = ["0", "1"]
workload = {{ model = "cpu-bomb" }}
"#
        )
    };
    let dp = run_toml(&text("[host.dcs]\nresched_dp = true\nutslice_us = 5000\n"));
    let s = dp.dcs.expect("DCS counters");
    assert!(s.protections > 0, "{s:?}");
    assert!(s.protected_deferrals > 0, "{s:?}");
    assert_eq!(s.urgent_tlb + s.urgent_resched, 0, "{s:?}");
}

#[test]
fn dcs_is_refused_on_schedulers_without_urgent_vcpu_first() {
    for sched in ["credit", "credit2", "gang"] {
        let text = shootdowns(sched, "[host.dcs]\ntlb_co = true\n");
        let e = vcpulab_core::resolve(&text, &[], None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("host.dcs") && e.contains(sched), "{e}");
    }
    let text = shootdowns("cfs", "[host.dcs]\nresched_co = [\"nosuch\"]\n");
    let e = vcpulab_core::resolve(&text, &[], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nosuch") && e.contains("bench"), "{e}");
}

#[test]
fn balance_placement_runs_and_keeps_weights() {
    for p in ["balance", "lc-balance"] {
        let r = run_with(
            &example("weights-1-1-2-4.toml"),
            &[&format!("host.scheduler.placement={p}")],
        );
        for vm in &r.vms {
            assert!(
                (vm.cpu_share - vm.entitlement).abs() < 0.02 * vm.entitlement,
                "{p} {}: {} vs {}",
                vm.vm,
                vm.cpu_share,
                vm.entitlement
            );
        }
    }
}

/// One lock-holder preemption is one episode however often the holder's vCPU is put
/// back and taken off again before it runs guest code: on a fixed PLE window the
/// spinners' directed yields flip the holder's pCPU every few microseconds while it is
/// still in its VM entry (futex-lhp, bodytrack-like, seed 3, 750 us urgent slices),
/// and each flip was once counted as a new preemption (1,285 for 165 contended
/// acquisitions).
#[test]
fn a_holder_preempted_again_inside_its_entry_is_one_episode() {
    let text = std::fs::read_to_string(format!(
        "{}/../../scenarios/dcs/futex-lhp.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("scenario");
    let r = run_with(
        &text,
        &[
            "seed=3",
            "vm.0.workload.model=\"bodytrack\"",
            "host.dcs.utslice_us=750",
        ],
    );
    let futex = r
        .locks
        .iter()
        .find(|l| l.vm == "bench-0" && l.lock == "futex-bucket")
        .expect("bench-0's futex buckets");
    assert!(
        futex.lhp <= futex.contended,
        "{} preemptions for {} contended acquisitions",
        futex.lhp,
        futex.contended
    );
}
