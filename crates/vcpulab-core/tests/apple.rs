//! APPLE end to end: the recorded epoch series, and the policy's windows following its
//! search on the inefficiencies the simulator measured.
mod common;
use common::*;
use vcpulab_core::hv::apple::AppleSearch;
use vcpulab_core::scenario::AppleConfig;

/// Two 8-vCPU VMs on 4 pCPUs whose threads take one kernel spinlock between short
/// computations: lock holders get preempted under overcommit, so waiters spin long
/// enough for PLE exits whatever the seed. (The fixture was dbench-like until
/// 2026-11-27; whether its exits get going depends on the seed since its journal
/// commits are shared and its locks are taken per buffer, so the test now builds its
/// contention itself.)
fn contended(ple: &str) -> String {
    format!(
        r#"seed = 5
preset = "kvm-default"
[run]
duration = "300ms"
[host]
pcpus = 4
[host.ple]
{ple}
[[vm]]
vcpus = 8
count = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 8
ops = [{{ loop = {{ n = "forever", body = [{{ compute = "exp(20us)" }}, {{ kspin = {{ lock = "k", hold = "exp(2us)" }} }}, {{ count = 1 }}] }} }}]
"#
    )
}

#[test]
fn apple_windows_follow_the_search_on_the_measured_inefficiencies() {
    // 100 ms keeps the series below the table's 2048 rows per VM (beyond them it is
    // thinned and not every epoch is a row).
    let r = run_with(
        &contended("policy = \"apple\"\nepoch_exits = 20"),
        &["run.duration=100ms"],
    );
    for vm in &r.vms {
        let all: Vec<_> = r.ple_epochs.iter().filter(|e| e.vm == vm.vm).collect();
        assert_eq!(
            all.iter().map(|e| e.ple_exits).sum::<u64>(),
            vm.ple_exits,
            "every exit is in a row: the closed epochs and the one open at the end"
        );
        let rows: Vec<_> = all.iter().copied().filter(|e| e.complete).collect();
        assert!(rows.len() >= 9, "{}: only {} epochs", vm.vm, rows.len());
        assert_eq!(
            rows.iter().map(|e| e.ple_exits).sum::<u64>(),
            vm.ple_exits - vm.ple_exits % 20,
            "every closed epoch is recorded"
        );
        let open = all.len() - rows.len();
        assert_eq!(open, usize::from(vm.ple_exits % 20 > 0));
        if open == 1 {
            let (last, before) = (all[all.len() - 1], all[all.len() - 2]);
            assert!(!last.complete, "the open epoch ends the VM's series");
            assert_eq!(last.epoch, rows.len() as u64);
            assert_eq!((last.start_ns, last.end_ns), (before.end_ns, r.end_ns));
        }
        let mut search = AppleSearch::new(&AppleConfig::default());
        for (i, e) in rows.iter().enumerate() {
            assert_eq!(e.epoch, i as u64);
            assert_eq!(e.policy, "apple");
            assert_eq!(e.ple_exits, 20);
            assert_eq!(
                e.window_cycles,
                search.window() as f64,
                "{} epoch {i}: window",
                vm.vm
            );
            assert!((4096.0..=32768.0).contains(&e.window_cycles));
            assert_eq!(
                e.window_min_cycles as f64, e.window_cycles,
                "one window per VM"
            );
            assert_eq!(e.window_max_cycles as f64, e.window_cycles);
            assert!(e.cpu_ns > 0 && e.inefficiency > 0.0);
            let expect = (e.spin_before_exit_ns + e.handling_ns) as f64 / e.cpu_ns as f64;
            assert!((e.inefficiency - expect).abs() < 1e-12);
            search.end_epoch(e.inefficiency);
        }
    }
}

#[test]
fn series_under_fixed_and_kvm_windows_and_none_without_ple() {
    let r = run_toml(&contended(
        "policy = \"fixed\"\nwindow_cycles = 16384\nepoch_exits = 50",
    ));
    assert!(
        !r.ple_epochs.is_empty(),
        "PLE exits per VM: {:?}",
        r.vms.iter().map(|v| v.ple_exits).collect::<Vec<_>>()
    );
    for e in r.ple_epochs.iter().filter(|e| e.complete) {
        assert_eq!(e.window_cycles, 16384.0);
        assert_eq!(e.exit_window_mean_cycles, 16384.0);
        // 50 exits x 16384 cycles at 3 GHz.
        assert_eq!(e.spin_before_exit_ns, 273_067);
        // An exit's handling is booked when its vCPU enters again, in the epoch open
        // then: of an epoch's 50 exits, up to one per vCPU of the VM (8) may be booked
        // in the next, as many from the epoch before may be booked here.
        assert!(
            e.handling_ns >= (50 - 8) * 500,
            "at least the exit cost of each exit booked: {e:?}"
        );
    }
    let r = run_toml(&contended("policy = \"kvm\"\nepoch_exits = 20"));
    assert!(!r.ple_epochs.is_empty());
    assert!(r.ple_epochs.iter().all(|e| e.policy == "kvm"
        && e.window_cycles >= 4096.0
        && e.exit_window_mean_cycles >= 4096.0
        && e.window_min_cycles >= 4096
        && e.window_min_cycles as f64 <= e.window_cycles
        && e.window_cycles <= e.window_max_cycles as f64));
    assert!(
        r.ple_epochs
            .iter()
            .any(|e| e.exit_window_mean_cycles > 4096.0),
        "KVM grows windows on exits"
    );
    // A window so large that no epoch closes: the exits still show, in the open epoch.
    let r = run_toml(&contended(
        "policy = \"fixed\"\nwindow_cycles = 16384\nepoch_exits = 1000000",
    ));
    for vm in &r.vms {
        let rows: Vec<_> = r.ple_epochs.iter().filter(|e| e.vm == vm.vm).collect();
        assert!(vm.ple_exits > 0);
        assert_eq!(rows.len(), 1, "{}: one open epoch", vm.vm);
        let e = rows[0];
        assert!(!e.complete && e.epoch == 0 && e.start_ns == 0 && e.end_ns == r.end_ns);
        assert_eq!(e.ple_exits, vm.ple_exits);
        assert!(e.cpu_ns > 0 && e.inefficiency > 0.0);
    }
    let r = run_toml(&contended("policy = \"off\""));
    assert!(r.ple_epochs.is_empty());
    assert!(r.vms.iter().all(|v| v.ple_exits == 0));
}

#[test]
fn apple_runs_are_deterministic_and_the_preset_resolves() {
    let text =
        contended("epoch_exits = 20").replace("preset = \"kvm-default\"", "preset = \"apple\"");
    let a = run_toml(&text);
    let b = run_toml(&text);
    assert_eq!(a.to_json(), b.to_json());
    assert!(a.ple_epochs.iter().all(|e| e.policy == "apple"));
}

#[test]
fn bad_apple_parameters_name_the_key() {
    let sc = contended("policy = \"apple\"\n[host.ple.apple]\ninitial_cycles = 1024");
    let e = vcpulab_core::resolve(&sc, &[], None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("host.ple.apple.initial_cycles") && e.contains("1024"),
        "{e}"
    );
    let sc = contended("policy = \"apple\"\n[host.ple.apple]\nstep_cycle = 1");
    let e = vcpulab_core::resolve(&sc, &[], None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("step_cycle"), "{e}");
}

#[test]
fn apple_without_a_closed_epoch_says_so() {
    let short = run_with(
        &contended("policy = \"apple\"\nepoch_exits = 1000000"),
        &["run.duration=50ms"],
    );
    assert!(short.vms.iter().any(|v| v.ple_exits > 0));
    assert!(
        short
            .warnings
            .iter()
            .any(|w| w.contains("APPLE closed no epoch")),
        "{:?}",
        short.warnings
    );
    // (The fixture's contention is heavy enough for the PLE-storm warning; that one is
    // not APPLE's.)
    let enough = run_with(&contended("policy = \"apple\"\nepoch_exits = 20"), &[]);
    assert!(
        enough.warnings.iter().all(|w| !w.contains("APPLE")),
        "{:?}",
        enough.warnings
    );
}
