//! Platform profiles: `host.platform` and `guest.kernel` fill keys under the preset and
//! the scenario (explicit keys win over the preset, the preset over the profile).
use vcpulab_core::scenario::{IdleMode, PleCandidates, SchedulerConfig, SpinlockKind};
use vcpulab_core::{explain, resolve, Scenario};

fn scenario(extra_top: &str, vm_guest: &str) -> String {
    format!(
        r#"
{extra_top}
[run]
duration = "10ms"
[[vm]]
name = "a"
vcpus = 2
{vm_guest}
[vm.workload]
model = "matmul"
[[vm]]
name = "b"
vcpus = 2
[vm.workload]
model = "matmul"
"#
    )
}

fn ok(text: &str, sets: &[&str]) -> Scenario {
    let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    resolve(text, &o, None).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str, sets: &[&str]) -> vcpulab_core::ScenarioError {
    let o: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    match resolve(text, &o, None) {
        Ok(_) => panic!("accepted: {sets:?}"),
        Err(e) => e,
    }
}

#[test]
fn a_host_platform_sets_its_keys_and_its_guest_kernel() {
    let sc = ok(&scenario("", ""), &["host.platform=kvm-3.9-snb"]);
    assert_eq!(sc.host.platform.as_deref(), Some("kvm-3.9-snb"));
    assert_eq!(sc.host.clock_ghz, 2.4);
    assert_eq!(sc.host.costs.vmexit_ns, 723);
    assert!(!sc.host.posted_interrupts);
    assert!(!sc.host.halt_poll.enabled);
    assert!(
        !sc.host.ple.pending_irq_counts_as_kernel,
        "a Linux 3.9 host"
    );
    assert!(matches!(sc.host.scheduler, SchedulerConfig::Cfs(_)));
    // Linux 3.9's kvm_vcpu_on_spin: no preempted flag, no yield-to-kernel-mode filter.
    assert_eq!(sc.host.ple.candidates, PleCandidates::NotHalted);
    assert!(!sc.host.ple.yield_to_kernel_mode);
    assert!(sc.host.ple.dy_eligible, "Linux 3.7+");
    assert!(
        sc.host.ple.esrch_ends_scan,
        "Linux 3.9: -ESRCH through a bool"
    );
    let dcs = ok(&scenario("", ""), &["host.platform=kvm-3.2-wsm"]);
    assert!(!dcs.host.ple.dy_eligible, "Linux 3.2 has no dy_eligible");
    assert_eq!(dcs.host.ple.candidates, PleCandidates::NotHalted);
    assert!(
        dcs.host.ple.esrch_ends_scan,
        "Linux 3.2: no -ESRCH, the boost succeeds"
    );
    let apple = ok(&scenario("", ""), &["host.platform=kvm-3.19-hsw"]);
    assert_eq!(apple.host.ple.candidates, PleCandidates::Preempted);
    assert!(!apple.host.ple.yield_to_kernel_mode);
    assert!(
        !apple.host.ple.esrch_ends_scan,
        "Linux 3.16+: -ESRCH uses a try"
    );
    for vm in &sc.vm {
        assert_eq!(vm.guest.kernel.as_deref(), Some("linux-3.9"));
        assert_eq!(vm.guest.spinlock, SpinlockKind::Ticket);
        assert!(vm.guest.ipi_under_lock);
        assert!(!vm.guest.haltpoll_available);
    }
    // The modern one: APICv, halt polling, a modern guest.
    let m = ok(&scenario("", ""), &["host.platform=kvm-6.6-spr"]);
    assert!(m.host.posted_interrupts && m.host.halt_poll.enabled);
    assert!(
        m.host.ple.pending_irq_counts_as_kernel,
        "Linux 5.3+ directed yield"
    );
    assert_eq!(m.host.ple.candidates, PleCandidates::Ready);
    assert!(m.host.ple.yield_to_kernel_mode);
    assert_eq!(m.host.costs.vmexit_ns, 742); // 1484 cycles at 2.0 GHz
    let g = &m.vm[0].guest;
    assert!(!g.ipi_under_lock && g.pv_tlb_flush && g.vcpu_is_preempted && g.haltpoll_available);
    assert!(
        g.wake_list_idle,
        "Linux 6.0+: an idle CPU's wake-ups use its wake list"
    );
    assert!(
        !sc.vm[0].guest.wake_list_idle,
        "Linux 3.9 enqueues them itself"
    );
    // The host's load balancing: busy_factor and the domains' intervals by kernel,
    // the newidle avg_idle gate before 5.16, a balanced newidle balance doubling the
    // interval before 5.0, the rd->overload gate from 3.16, and 3.2/3.9's idle
    // next_balance rule.
    use vcpulab_core::scenario::BalanceInterval::{DomainWeight, Fixed};
    let cfs = |s: &Scenario| match &s.host.scheduler {
        SchedulerConfig::Cfs(c) => (
            c.balance_busy_factor,
            c.newidle_avg_idle_gate,
            c.balance_interval,
            c.newidle_doubles_interval,
            c.newidle_overload_gate,
            c.idle_keeps_busy_deadline,
        ),
        other => panic!("{other:?}"),
    };
    let linux_3_2 = (64, true, Fixed, true, false, true);
    assert_eq!(cfs(&sc), linux_3_2, "Linux 3.9: SD_MC_INIT");
    assert_eq!(cfs(&dcs), linux_3_2, "Linux 3.2: SD_MC_INIT");
    let linux_3_19 = (32, true, DomainWeight, true, true, false);
    assert_eq!(cfs(&apple), linux_3_19, "Linux 3.19: sd_init");
    match &m.host.scheduler {
        SchedulerConfig::Eevdf(e) => assert_eq!(
            (
                e.balance_busy_factor,
                e.balance_interval,
                e.newidle_doubles_interval
            ),
            (16, DomainWeight, false),
            "Linux 6.6"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn explicit_keys_win_over_the_preset_which_wins_over_the_profile() {
    // Explicit host key over the profile.
    let sc = ok(
        &scenario("", ""),
        &["host.platform=kvm-3.9-snb", "host.costs.vmexit_ns=999"],
    );
    assert_eq!(sc.host.costs.vmexit_ns, 999);
    // The preset's scheduler over the platform's (kvm-default is CFS, the 6.6 host EEVDF).
    let sc = ok(
        &scenario("preset = \"kvm-default\"", ""),
        &["host.platform=kvm-6.6-spr"],
    );
    assert!(matches!(sc.host.scheduler, SchedulerConfig::Cfs(_)));
    let sc = ok(&scenario("", ""), &["host.platform=kvm-6.6-spr"]);
    assert_eq!(sc.host.scheduler.name(), "eevdf");
    // A scenario-wide explicit guest key wins over a VM's own kernel profile.
    let sc = ok(
        &scenario("", "[vm.guest]\nkernel = \"linux-6.6\""),
        &["host.platform=kvm-3.9-snb", "guest.ipi_under_lock=true"],
    );
    let (a, b) = (&sc.vm[0].guest, &sc.vm[1].guest);
    assert_eq!(a.kernel.as_deref(), Some("linux-6.6"));
    assert_eq!(b.kernel.as_deref(), Some("linux-3.9"));
    assert!(a.ipi_under_lock, "explicit scenario-wide key");
    assert!(a.pv_tlb_flush && !b.pv_tlb_flush, "each VM its own kernel");
    assert_ne!(a.spinlock, b.spinlock);
    // The VM's own explicit key wins over everything.
    let sc = ok(
        &scenario("", "[vm.guest]\nkernel = \"linux-6.6\"\nspinlock = \"tas\""),
        &["guest.kernel=linux-3.9"],
    );
    assert_eq!(sc.vm[0].guest.spinlock, SpinlockKind::Tas);
    assert_eq!(sc.vm[1].guest.spinlock, SpinlockKind::Ticket);
    // No preset, no platform: today's platform (kvm-modern).
    let sc = ok(&scenario("", ""), &[]);
    assert_eq!(sc.host.costs.vmexit_ns, 742);
    assert_eq!(sc.host.platform.as_deref(), Some("kvm-6.6-spr"));
    // kvm-default and no platform: the built-in defaults, unchanged.
    let sc = ok(&scenario("preset = \"kvm-default\"", ""), &[]);
    assert_eq!(sc.host.costs.vmexit_ns, 500);
    assert!(sc.host.platform.is_none() && sc.vm[0].guest.kernel.is_none());
}

#[test]
fn the_kvm_modern_preset_is_the_modern_platform() {
    let sc = ok(&scenario("preset = \"kvm-modern\"", ""), &[]);
    assert_eq!(sc.host.platform.as_deref(), Some("kvm-6.6-spr"));
    assert_eq!(sc.host.scheduler.name(), "eevdf");
    assert!(sc.host.ipi_virtualization && sc.host.posted_interrupts);
    assert_eq!(sc.vm[0].guest.kernel.as_deref(), Some("linux-6.6"));
    // A scenario that pins another platform contradicts the preset: refused, naming
    // both (it once ran the scenario's platform and dropped the preset's silently).
    let e = err(
        &scenario("preset = \"kvm-modern\"", ""),
        &["host.platform=kvm-3.19-hsw"],
    );
    assert_eq!(e.key, "preset");
    assert!(
        e.message.contains("kvm-6.6-spr") && e.message.contains("kvm-3.19-hsw"),
        "{}",
        e.message
    );
    // The same platform named twice is no contradiction.
    let sc = ok(
        &scenario("preset = \"kvm-modern\"", ""),
        &["host.platform=kvm-6.6-spr"],
    );
    assert_eq!(sc.host.platform.as_deref(), Some("kvm-6.6-spr"));
}

/// KVM's PLE window grows and shrinks from Linux 3.18 ("KVM: VMX: dynamise PLE
/// window"); the 3.2 and 3.9 hosts have the fixed 4096-cycle window, also under the
/// presets built on kvm-default.
#[test]
fn the_ple_window_grows_from_linux_3_18() {
    use vcpulab_core::scenario::PlePolicy;
    for (platform, policy) in [
        ("kvm-3.2-wsm", PlePolicy::Fixed),
        ("kvm-3.9-snb", PlePolicy::Fixed),
        ("kvm-3.19-hsw", PlePolicy::Kvm),
        ("kvm-6.6-spr", PlePolicy::Kvm),
    ] {
        for preset in ["kvm-default", "dcs", "gleaner"] {
            let sc = ok(
                &scenario(&format!("preset = \"{preset}\""), ""),
                &[&format!("host.platform={platform}")],
            );
            assert_eq!(sc.host.ple.policy, policy, "{platform} {preset}");
            assert_eq!(sc.host.ple.window_cycles, 4096, "{platform} {preset}");
        }
    }
    // Without a platform kvm-default keeps KVM's grow/shrink window; a scenario's own
    // policy wins over the platform's.
    let sc = ok(&scenario("preset = \"kvm-default\"", ""), &[]);
    assert_eq!(sc.host.ple.policy, PlePolicy::Kvm);
    let sc = ok(
        &scenario("preset = \"kvm-default\"", ""),
        &["host.platform=kvm-3.9-snb", "host.ple.policy=\"kvm\""],
    );
    assert_eq!(sc.host.ple.policy, PlePolicy::Kvm);
}

#[test]
fn xen_platforms_set_the_rate_limit_of_their_version() {
    let rate = |p: &str, preset: &str| {
        let sc = ok(
            &scenario(&format!("preset = \"{preset}\""), ""),
            &[&format!("host.platform={p}")],
        );
        match sc.host.scheduler {
            SchedulerConfig::Credit(c) => c.ratelimit_us,
            other => panic!("{}", other.name()),
        }
    };
    assert_eq!(rate("xen-4.1.2", "cvs"), 0.0);
    assert_eq!(rate("xen-4.2.3", "xen-default"), 1000.0);
    // With no preset the platform chooses credit, and Xen's PLE defaults follow.
    let sc = ok(&scenario("", ""), &["host.platform=xen-4.1.2"]);
    assert_eq!(sc.host.scheduler.name(), "credit");
    assert_eq!(sc.vm[0].guest.kernel.as_deref(), Some("linux-3.2"));
}

#[test]
fn unknown_or_contradictory_platforms_are_refused() {
    let e = err(&scenario("", ""), &["host.platform=kvm-2.6"]);
    assert_eq!(e.key, "host.platform");
    assert!(
        e.message.contains("kvm-3.9-snb") && e.message.contains("kvm-6.6-spr"),
        "{e}"
    );
    let e = err(&scenario("", ""), &["guest.kernel=linux-2.6"]);
    assert_eq!(e.key, "guest.kernel");
    assert!(e.message.contains("linux-3.2"), "{e}");
    let e = err(&scenario("", "[vm.guest]\nkernel = \"bsd\""), &[]);
    assert_eq!(e.key, "vm.0.guest.kernel");
    let e = err(
        &scenario("preset = \"kvm-default\"", ""),
        &["host.platform=xen-4.1.2"],
    );
    assert_eq!(e.key, "host.scheduler.kind");
}

#[test]
fn haltpoll_needs_a_kernel_that_has_it_unless_backported() {
    let e = err(
        &scenario("", ""),
        &["host.platform=kvm-3.9-snb", "guest.idle=haltpoll"],
    );
    assert_eq!(e.key, "vm.0.guest.idle");
    assert!(e.message.contains("linux-3.9"), "{e}");
    // The preset brings the driver along (a backport), as the Gleaner studies compare it.
    let sc = ok(
        &scenario("preset = \"guest-haltpoll\"", ""),
        &["host.platform=kvm-3.9-snb"],
    );
    assert_eq!(sc.vm[0].guest.idle, IdleMode::Haltpoll);
    ok(
        &scenario("", ""),
        &["host.platform=kvm-6.6-spr", "guest.idle=haltpoll"],
    );
}

#[test]
fn explain_names_the_profiles_and_what_they_set() {
    let text = scenario("", "");
    let out = explain(
        &text,
        &[
            "host.platform=kvm-3.9-snb".into(),
            "guest.spinlock=tas".into(),
        ],
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("# host.platform \"kvm-3.9-snb\""), "{out}");
    assert!(out.contains("#   host.costs.vmexit_ns = 723"), "{out}");
    assert!(out.contains("# vm.0.guest.kernel \"linux-3.9\""), "{out}");
    assert!(
        out.contains(
            "vm.0.guest.spinlock = \"tas\"  (preset or scenario; the profile's: \"ticket\")"
        ),
        "{out}"
    );
    // The TOML after the comments is the resolved scenario, accepted back.
    resolve(&out, &[], None).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn kvm_platforms_say_whether_vms_are_task_groups() {
    let groups = |platform: &str, sets: &[&str]| {
        let sc = ok(
            &scenario(
                &format!("preset = \"kvm-default\"\n[host]\nplatform = \"{platform}\""),
                "",
            ),
            sets,
        );
        match &sc.host.scheduler {
            SchedulerConfig::Cfs(p) => p.per_vm_groups,
            SchedulerConfig::Eevdf(p) => p.per_vm_groups,
            other => panic!("{other:?}"),
        }
    };
    // Gleaner's 3.9 host: its wake-up figure D matches VMs without per-VM groups.
    assert!(!groups("kvm-3.9-snb", &[]));
    assert!(!groups("kvm-3.19-hsw", &[]));
    assert!(groups("kvm-6.6-spr", &[]));
    // A scenario key wins over the profile.
    assert!(groups(
        "kvm-3.9-snb",
        &["host.scheduler.per_vm_groups=true"]
    ));
    // Without a platform, kvm-default's CFS groups VMs (libvirt's cgroups).
    let sc = ok(&scenario("preset = \"kvm-default\"", ""), &[]);
    assert!(matches!(&sc.host.scheduler, SchedulerConfig::Cfs(p) if p.per_vm_groups));
}

/// The 3.x handler has no yield-to-kernel-mode filter: a vCPU spinning in kernel mode (a
/// TLB-shootdown initiator) also yields to siblings preempted in user mode — here the
/// shootdown's targets — so far fewer of its directed yields fail than under Linux
/// 4.14's filter on the same run.
#[test]
fn a_3x_kernel_spinner_yields_to_user_mode_candidates() {
    let text = r#"
preset = "kvm-default"
seed = 1
[run]
duration = "300ms"
[host]
platform = "kvm-3.2-wsm"
pcpus = 8
[[vm]]
vcpus = 8
count = 2
workload = { model = "dedup" }
"#;
    let failed_share = |filter: &str| {
        let r = vcpulab_core::run(&ok(text, &[filter])).expect("run");
        let exits: u64 = r.vms.iter().map(|v| v.ple_exits).sum();
        let failed: u64 = r.vms.iter().map(|v| v.ple_yields_failed).sum();
        assert!(exits > 100, "{filter}: only {exits} PLE exits");
        failed as f64 / exits as f64
    };
    let without = failed_share("host.ple.yield_to_kernel_mode=false");
    let with = failed_share("host.ple.yield_to_kernel_mode=true");
    assert!(
        without * 5.0 < with,
        "failed yields per exit: {without:.3} without the filter, {with:.3} with it"
    );
}
