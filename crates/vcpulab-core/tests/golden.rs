//! Closed-form checks of the host schedulers.
mod common;
use common::*;

fn shares(r: &vcpulab_core::Report) -> Vec<f64> {
    r.vms.iter().map(|v| v.cpu_share).collect()
}

#[test]
fn equal_weights_get_equal_shares() {
    for sched in ["cfs", "eevdf", "credit", "credit2"] {
        let r = run_toml(&bombs(sched, 1, &[256, 256], ""));
        let s = shares(&r);
        assert!(
            (s[0] - 0.5).abs() < 0.005 && (s[1] - 0.5).abs() < 0.005,
            "{sched}: {s:?}"
        );
    }
}

#[test]
fn weights_one_to_two_give_shares_one_to_two() {
    for sched in ["cfs", "eevdf", "credit", "credit2"] {
        let r = run_toml(&bombs(sched, 1, &[256, 512], ""));
        let s = shares(&r);
        let ratio = s[1] / s[0];
        // Credit hands out credit per 30 ms period and schedules in whole slices, so
        // its proportion is coarser than CFS's.
        let tol = if sched == "credit" { 0.1 } else { 0.04 };
        assert!(
            (ratio - 2.0).abs() < tol,
            "{sched}: shares {s:?} ratio {ratio}"
        );
    }
}

/// Xen credit weighs each active vCPU with its domain's weight (csched_acct: a
/// domain's share is weight × active vCPUs over the total): a 1-vCPU and a 3-vCPU VM
/// of CPU hogs and equal weight on two pCPUs get a quarter and three quarters.
#[test]
fn credit_gives_each_busy_vcpu_its_domains_weight() {
    let text = "seed = 1\n[run]\nduration = \"3s\"\n[host]\npcpus = 2\n\
        [host.scheduler]\nkind = \"credit\"\n\
        [[vm]]\nname = \"one\"\nvcpus = 1\nworkload = { model = \"cpu-bomb\" }\n\
        [[vm]]\nname = \"three\"\nvcpus = 3\nworkload = { model = \"cpu-bomb\" }\n";
    let r = run_toml(text);
    let s = shares(&r);
    assert!(
        (s[0] - 0.25).abs() < 0.02 && (s[1] - 0.75).abs() < 0.02,
        "shares {s:?}"
    );
    // The report's entitlement follows the scheduler's rule: per vCPU.
    for vm in &r.vms {
        assert!(
            (vm.share_ratio - 1.0).abs() < 0.02,
            "{}: entitlement {} share {}",
            vm.vm,
            vm.entitlement,
            vm.cpu_share
        );
    }
}

#[test]
fn weights_example_matches_within_one_percent() {
    let r = run_toml(&example("weights-1-1-2-4.toml"));
    for vm in &r.vms {
        assert!(
            (vm.cpu_share - vm.entitlement).abs() < 0.01 * vm.entitlement,
            "{}: share {} entitlement {}",
            vm.vm,
            vm.cpu_share,
            vm.entitlement
        );
        assert!(
            (vm.share_ratio - 1.0).abs() < 0.01,
            "{}: ratio {}",
            vm.vm,
            vm.share_ratio
        );
    }
    assert!(r.fairness.jain_index > 0.999);
}

#[test]
fn fixed_slice_wait_is_slice_times_n_minus_one() {
    for (n, slice) in [(2u32, 30.0f64), (3, 30.0), (4, 10.0), (3, 1.0)] {
        let weights = vec![256; n as usize];
        let r = run_toml(&bombs(
            "credit",
            1,
            &weights,
            &format!("slice_ms = {slice}"),
        ));
        let expect = slice * 1e6 * (n - 1) as f64;
        for vm in &r.vms {
            let got = vm.dispatch_wait_mean_ns;
            assert!(
                (got - expect).abs() / expect < 0.05,
                "n={n} slice={slice}ms {}: waited {got} ns, expected {expect}",
                vm.vm
            );
        }
    }
}

#[test]
fn caps_are_honoured() {
    for sched in ["cfs", "eevdf", "credit", "credit2"] {
        // One VM capped at 50% of a pCPU, alone on its pCPU.
        let text = format!(
            "[run]\nduration = \"4s\"\n[host]\npcpus = 1\n[host.scheduler]\nkind = \"{sched}\"\n\
             [[vm]]\nvcpus = 1\ncap = 50\nworkload = {{ model = \"cpu-bomb\" }}\n"
        );
        let r = run_toml(&text);
        let s = r.vms[0].cpu_share;
        assert!((s - 0.5).abs() < 0.02, "{sched}: capped share {s}");
        // Two vCPUs capped at 60% in total on two pCPUs: 30% of the host.
        let text = format!(
            "[run]\nduration = \"4s\"\n[host]\npcpus = 2\n[host.scheduler]\nkind = \"{sched}\"\n\
             [[vm]]\nvcpus = 2\ncap = 60\nworkload = {{ model = \"cpu-bomb\" }}\n"
        );
        let s = run_toml(&text).vms[0].cpu_share;
        // Bandwidth control notices a used-up quota at the next tick of each pCPU
        // (4 ms at HZ=250, no HRTICK): up to a tick per pCPU per 100 ms period over.
        assert!((s - 0.3).abs() < 0.025, "{sched}: capped 2-vCPU share {s}");
    }
}

#[test]
fn an_uncapped_competitor_takes_what_a_capped_vm_leaves() {
    let text = "[run]\nduration = \"4s\"\n[host]\npcpus = 1\n\
        [[vm]]\nname = \"capped\"\nvcpus = 1\ncap = 20\nworkload = { model = \"cpu-bomb\" }\n\
        [[vm]]\nname = \"free\"\nvcpus = 1\nworkload = { model = \"cpu-bomb\" }\n";
    let r = run_toml(text);
    assert!(
        (r.vms[0].cpu_share - 0.2).abs() < 0.02,
        "{}",
        r.vms[0].cpu_share
    );
    assert!(r.vms[1].cpu_share > 0.77, "{}", r.vms[1].cpu_share);
}

#[test]
fn fixed_work_finishes_at_closed_form_time() {
    // Two VMs with 1 s of work each on one pCPU: both finish near 2 s (+ switch costs).
    let text = "[run]\nduration = \"10s\"\n[host]\npcpus = 1\n\
        [[vm]]\nvcpus = 1\nworkload = { model = \"matmul\", params = { work = \"1s\" } }\n\
        [[vm]]\nvcpus = 1\nworkload = { model = \"matmul\", params = { work = \"1s\" } }\n";
    let r = run_toml(text);
    assert_eq!(r.stop_reason, "all-finished");
    for vm in &r.vms {
        let c = vm.completion_ns.unwrap() as f64 / 1e9;
        assert!(vm.finished && c > 1.9 && c < 2.1, "{}: {c}", vm.vm);
    }
}

#[test]
fn weights_example_matches_within_one_percent_under_eevdf() {
    let r = run_with(
        &example("weights-1-1-2-4.toml"),
        &["host.scheduler.kind=eevdf"],
    );
    for vm in &r.vms {
        assert!(
            (vm.cpu_share - vm.entitlement).abs() < 0.01 * vm.entitlement,
            "{}: share {} entitlement {}",
            vm.vm,
            vm.cpu_share,
            vm.entitlement
        );
    }
}

#[test]
fn groups_give_a_wide_and_a_narrow_vm_equal_cpu() {
    // A 16-vCPU VM and a 1-vCPU VM of equal weight, both saturated, on 2 pCPUs: with a
    // task group per VM each gets one pCPU's worth; without, CPU goes per vCPU thread.
    // Under both of KVM's host schedulers.
    for kind in ["cfs", "eevdf"] {
        let share = |groups: bool| {
            let text = format!(
                "preset = \"kvm-default\"\n\
                 [run]\nduration = \"4s\"\n[host]\npcpus = 2\n[host.scheduler]\n\
                 kind = \"{kind}\"\nper_vm_groups = {groups}\n\
                 [[vm]]\nvcpus = 16\nworkload = {{ model = \"cpu-bomb\" }}\n\
                 [[vm]]\nvcpus = 1\nworkload = {{ model = \"cpu-bomb\" }}\n"
            );
            run_toml(&text).vms[1].cpu_share
        };
        let grouped = share(true);
        let flat = share(false);
        assert!(grouped > 0.45, "{kind}: 1-vCPU VM with groups: {grouped}");
        assert!(flat < 0.2, "{kind}: 1-vCPU VM without groups: {flat}");
    }
}

#[test]
fn weights_example_matches_within_one_percent_under_credit2() {
    let r = run_with(
        &example("weights-1-1-2-4.toml"),
        &["host.scheduler.kind=credit2"],
    );
    for vm in &r.vms {
        assert!(
            (vm.cpu_share - vm.entitlement).abs() < 0.01 * vm.entitlement,
            "{}: share {} entitlement {}",
            vm.vm,
            vm.cpu_share,
            vm.entitlement
        );
    }
}

#[test]
fn three_hogs_on_one_pcpu_make_a_run_queue_of_three() {
    for sched in ["cfs", "eevdf", "credit", "credit2"] {
        let r = run_toml(&bombs(sched, 1, &[256, 256, 256], ""));
        let three = r
            .runq_length
            .iter()
            .find(|l| l.length == 3)
            .map(|l| l.fraction);
        assert!(
            three.is_some_and(|f| f > 0.999),
            "{sched}: {:?}",
            r.runq_length
        );
        assert!((r.pcpus[0].runq_mean - 3.0).abs() < 1e-3, "{sched}");
    }
}

#[test]
fn equal_capped_solo_gets_the_consolidated_share() {
    for sched in ["cfs", "eevdf", "credit", "credit2"] {
        // VM "a" (weight 256) shares 2 pCPUs with "b" (weight 512): a third of the host.
        let text = format!(
            "[run]\nduration = \"4s\"\nfocus = \"a\"\n[host]\npcpus = 2\n[host.scheduler]\nkind = \"{sched}\"\n\
             [[vm]]\nname = \"b\"\nvcpus = 2\nweight = 512\nworkload = {{ model = \"cpu-bomb\" }}\n\
             [[vm]]\nname = \"a\"\nvcpus = 2\nweight = 256\nworkload = {{ model = \"cpu-bomb\" }}\n"
        );
        let consolidated = run_toml(&text).vms[1].cpu_share;
        let solo = run_with(&text, &["run.mode=solo_capped"]);
        assert_eq!(solo.vms.len(), 1, "{sched}: the focus VM alone");
        assert_eq!(solo.vms[0].vm, "a");
        let s = solo.vms[0].cpu_share;
        // credit1 parks a capped vCPU at its 10 ms ticks (csched_tick → csched_vcpu_acct),
        // so its caps overrun by up to a tick per accounting period, as on Xen.
        let tol = if sched == "credit" { 0.02 } else { 0.01 };
        assert!(
            (s - consolidated).abs() < tol * consolidated,
            "{sched}: solo {s} vs consolidated {consolidated}"
        );
    }
}

/// Entitlement follows demand: a VM that sleeps most of the time beside a CPU hog, each
/// with a pCPU to itself, got what it asked for (ratio 1), and so did the hog; with one
/// pCPU shared the sleeper waits for it and its ratio drops below 1.
#[test]
fn entitlement_is_limited_by_demand() {
    let text = |pcpus: u32| {
        format!(
            "preset = \"xen-default\"\nseed = 1\n[run]\nduration = \"2s\"\n[host]\npcpus = {pcpus}\n\
             [[vm]]\nname = \"hog\"\nvcpus = 1\nworkload = {{ model = \"cpu-bomb\" }}\n\
             [[vm]]\nname = \"web\"\nvcpus = 1\nworkload = {{ model = \"compute-sleep\", params = {{ compute = \"exp(2ms)\", sleep = \"exp(20ms)\" }} }}\n"
        )
    };
    let r = run_toml(&text(2));
    for vm in &r.vms {
        assert!(
            (vm.share_ratio - 1.0).abs() < 0.02,
            "{}: {}",
            vm.vm,
            vm.share_ratio
        );
    }
    assert!(
        r.vms[1].entitlement < 0.1,
        "web asked for little: {}",
        r.vms[1].entitlement
    );
    let r = run_toml(&text(1));
    let web = &r.vms[1];
    assert!(
        web.share_ratio < 0.99,
        "web waited for the pCPU: {}",
        web.share_ratio
    );
}
