//! The guest kernel's schedulers — CFS (guest/runqueue.rs) and EEVDF (guest/eevdf.rs) —
//! and when their reschedules take effect (guest/preempt.rs): slice ends noticed at the
//! guest's tick, the preemption model deciding when kernel code gives way to a woken
//! thread; and a scenario naming no preset resolving to today's platform.
mod common;
use common::*;
use vcpulab_core::resolve;

/// One vCPU alone on one pCPU for 5 s, running the given thread groups.
macro_rules! one_vcpu {
    ($groups:literal) => {
        concat!(
            "seed = 1\n[run]\nduration = \"5s\"\n[host]\npcpus = 1\n[[vm]]\nvcpus = 1\n",
            "[vm.workload]\nmodel = \"program\"\n",
            $groups
        )
    };
}

/// Three CPU-bound threads.
const HOGS: &str = one_vcpu!(
    r#"
[[vm.workload.group]]
name = "hog"
threads = 3
ops = [{ loop = { n = "forever", body = [{ compute = "exp(1ms)" }, { count = 1 }] } }]
"#
);

fn switches(text: &str, overrides: &[&str]) -> u64 {
    run_with(text, overrides).vms[0].thread_switches
}

/// With three threads on a one-vCPU guest, EEVDF's base slice is 0.75 ms (1 + ilog2(1)
/// = 1); a thread runs past its deadline until the next tick, so it switches once per
/// tick period when that is longer than the slice: 5 s / 4 ms = 1250 at HZ=250, 5000
/// at HZ=1000, 500 at HZ=100. CFS notices its used-up slice at the tick too
/// (check_preempt_tick, delta_exec > 6 ms / 3 threads = 2 ms): every 4 ms tick at
/// HZ=250; at HZ=1000 the tick 2 ms after the pick finds exactly 2 ms used, not more, so
/// the switch waits for the third: 5 s / 3 ms.
#[test]
fn eevdf_notices_a_used_up_slice_at_the_tick() {
    // (± 1: where the VM's ticks fall in the 5 s depends on its grid's phase.)
    let about = |n: u64, want: u64| assert!(n.abs_diff(want) <= 1, "{n} switches, want {want}");
    about(switches(HOGS, &["guest.scheduler=cfs"]), 1250);
    let cfs_1000 = switches(HOGS, &["guest.scheduler=cfs", "guest.tick_hz=1000"]);
    assert!((1665..=1668).contains(&cfs_1000), "{cfs_1000} switches");
    about(switches(HOGS, &["guest.scheduler=eevdf"]), 1250);
    about(switches(HOGS, &["guest.tick_hz=1000"]), 5000);
    about(switches(HOGS, &["guest.tick_hz=100"]), 500);
    // A 3 ms slice still ends at a 4 ms tick; a 5 ms one at the 8 ms tick (the first
    // round is shorter: new threads start with half a slice, PLACE_DEADLINE_INITIAL).
    about(switches(HOGS, &["guest.base_slice_ms=3"]), 1250);
    let five = switches(HOGS, &["guest.base_slice_ms=5"]);
    assert!((625..=628).contains(&five), "{five} switches");
}

/// A thread in kernel code (exponential 2 ms system calls) and a thread waking every
/// 3 ms: with full preemption the wakee runs at once; with PREEMPT_NONE / VOLUNTARY it
/// waits for the system call to return (mean residual 2 ms); with PREEMPT_LAZY (EEVDF
/// kernels only) for the next tick or the return, whichever is first. The same on CFS
/// and EEVDF guests: the preemption model is the kernel's, not the scheduler's.
#[test]
fn the_preemption_model_decides_when_kernel_code_gives_way() {
    let text = one_vcpu!(
        r#"
[[vm.workload.group]]
name = "syscalls"
threads = 1
ops = [{ loop = { n = "forever", body = [{ kernel = "exp(2ms)" }, { count = 1 }] } }]
[[vm.workload.group]]
name = "sleeper"
threads = 1
ops = [{ loop = { n = "forever", body = [{ compute = "50us" }, { sleep = "3ms" }] } }]
"#
    );
    for scheduler in ["cfs", "eevdf"] {
        let mean = |model: &str| {
            let r = run_with(
                text,
                &[
                    &format!("guest.scheduler={scheduler}"),
                    &format!("guest.preemption={model}"),
                ],
            );
            r.vms[0].wake_latency_mean_ns
        };
        let (full, none, voluntary) = (mean("full"), mean("none"), mean("voluntary"));
        assert!(full < 20_000.0, "{scheduler}, full preemption: {full} ns");
        assert!(
            none > 1_000_000.0,
            "{scheduler}: PREEMPT_NONE waits for the system call: {none} ns"
        );
        assert_eq!(
            none, voluntary,
            "{scheduler}: no cond_resched points in the model's kernel paths"
        );
        if scheduler == "eevdf" {
            let lazy = mean("lazy");
            assert!(
                lazy > full && lazy < none,
                "lazy {lazy} between {full} and {none}"
            );
        }
    }
}

/// check_preempt_tick's second rule on a CFS guest: once the current thread has run
/// min_granularity, a queued thread whose vruntime trails it by more than a slice takes
/// the vCPU at the next tick, before the current slice is used up. Two CPU-bound threads
/// and a sleeper woken after exp(10 ms) with a sleeper's credit (half the latency
/// behind); wake-up preemption is kept out of the way (a 50 ms wake-up granularity),
/// HZ=1000. The sleeper then waits for the first tick after the current thread's
/// 0.75 ms minimum (mean 0.51 ms, p99 0.98 ms), not for its 2 ms slice (without the
/// rule: mean 1.29 ms, p99 2.9 ms).
#[test]
fn a_trailing_thread_takes_the_vcpu_after_the_minimum_granularity() {
    let text = one_vcpu!(
        r#"
[[vm.workload.group]]
name = "hog"
threads = 2
ops = [{ loop = { n = "forever", body = [{ compute = "exp(1ms)" }, { count = 1 }] } }]
[[vm.workload.group]]
name = "sleeper"
threads = 1
ops = [{ loop = { n = "forever", body = [{ compute = "50us" }, { sleep = "exp(10ms)" }] } }]
"#
    );
    let r = run_with(
        text,
        &[
            "guest.scheduler=cfs",
            "guest.tick_hz=1000",
            "guest.wakeup_granularity_ms=50",
        ],
    );
    let vm = &r.vms[0];
    assert!(
        vm.wake_latency_count > 300,
        "{} wake-ups",
        vm.wake_latency_count
    );
    let mean = vm.wake_latency_mean_ns;
    assert!(mean < 800_000.0, "mean wake-up latency {mean} ns");
    let p99 = vm.wake_latency_p99_ns.expect("wake-ups");
    assert!(p99 < 1_800_000, "p99 wake-up latency {p99} ns");
}

/// A thread spinning in user space (a library barrier's spin, before it would block) is
/// in user mode: the tick ends its slice and a wake-up preempts it, as for a computing
/// thread. Two threads meet at a spin barrier on one vCPU (spin up to 20 ms): the first
/// to arrive spins while the other waits on the runqueue, until the tick gives the other
/// the vCPU — every ~4 ms at HZ=250 rather than once the 20 ms spin runs out.
#[test]
fn a_user_space_spinner_gives_way_at_the_tick() {
    let text = one_vcpu!(
        r#"
[[vm.workload.group]]
name = "pair"
threads = 2
ops = [{ loop = { n = "forever", body = [{ compute = "exp(200us)" }, { spin_barrier = { name = "b", spin = "20ms" } }, { count = 1 }] } }]
"#
    );
    for scheduler in ["cfs", "eevdf"] {
        let r = run_with(text, &[&format!("guest.scheduler={scheduler}")]);
        let rounds = r.vms[0].work_units / 2;
        // 5 s: a round per 4 ms tick (1,248), 244 if each waited out the spin.
        assert!(rounds > 700, "{scheduler}: {rounds} barrier rounds in 5 s");
    }
}

/// A sleeper's timer expires while its vCPU is preempted by the host: the timer
/// interrupt stays pending and is injected at the vCPU's next entry, where the woken
/// thread — far behind the CPU-bound one in vruntime — preempts it as the interrupt
/// returns, instead of waiting for the CPU-bound thread's slice to end at a tick. VM a
/// (one vCPU: a CPU-bound thread and a sleeper) shares one pCPU with a CPU-bound VM b
/// under 1 ms credit slices.
#[test]
fn a_timer_that_fired_while_preempted_wakes_its_thread_at_entry() {
    let text = r#"
preset = "xen-default"
seed = 1
[run]
duration = "3s"
[host]
pcpus = 1
[host.scheduler]
slice_ms = 1
[[vm]]
name = "a"
vcpus = 1
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "hog"
ops = [{ loop = { n = "forever", body = [{ compute = "exp(1ms)" }, { count = 1 }] } }]
[[vm.workload.group]]
name = "sleeper"
ops = [{ loop = { n = "forever", body = [{ compute = "20us" }, { sleep = "exp(3ms)" }] } }]
[[vm]]
name = "b"
vcpus = 1
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "hog"
ops = [{ loop = { n = "forever", body = [{ compute = "exp(1ms)" }, { count = 1 }] } }]
"#;
    for scheduler in ["cfs", "eevdf"] {
        let r = run_with(text, &[&format!("guest.scheduler={scheduler}")]);
        let a = &r.vms[0];
        assert!(
            a.wake_latency_count > 300,
            "{scheduler}: {} wake-ups",
            a.wake_latency_count
        );
        // It runs once its vCPU is back (within a 1 ms slice of b's): mean 0.26 ms, p99
        // 1.0 ms; left to the tick, mean 1.6 ms, p99 5 ms.
        let mean = a.wake_latency_mean_ns;
        assert!(
            mean < 500_000.0,
            "{scheduler}: mean wake-up latency {mean} ns"
        );
        let p99 = a.wake_latency_p99_ns.expect("wake-ups");
        assert!(p99 < 1_500_000, "{scheduler}: p99 wake-up latency {p99} ns");
    }
}

/// A thread that sleeps most of the time keeps its lag and runs soon after waking,
/// while CPU-bound threads share the vCPU: EEVDF places it eligible with an early
/// deadline.
#[test]
fn a_short_sleeper_keeps_its_lag_and_runs_promptly() {
    let text = format!(
        "{HOGS}\n[[vm.workload.group]]\nname = \"sleeper\"\nthreads = 1\nops = [{{ loop = {{ n = \"forever\", body = [{{ compute = \"100us\" }}, {{ sleep = \"2ms\" }}] }} }}]\n"
    );
    let r = run_with(&text, &["guest.preemption=full"]);
    let vm = &r.vms[0];
    assert!(
        vm.wake_latency_count > 1500,
        "{} wake-ups",
        vm.wake_latency_count
    );
    let p50 = vm.wake_latency_p50_ns.expect("wake-ups");
    assert!(p50 < 50_000, "median wake-up latency {p50} ns");
}

/// Same scenario, same seed: the same report, with EEVDF in the guest.
#[test]
fn guest_eevdf_is_deterministic() {
    let a = serde_json::to_string(&run_with(HOGS, &["guest.tick_hz=300"])).unwrap();
    let b = serde_json::to_string(&run_with(HOGS, &["guest.tick_hz=300"])).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_bad_tick_or_preemption_model_is_refused_by_name() {
    let e = resolve(HOGS, &["guest.tick_hz=500".into()], None).unwrap_err();
    assert!(
        e.to_string().contains("tick_hz") && e.to_string().contains("250"),
        "{e}"
    );
    let e = resolve(HOGS, &["guest.preemption=rt".into()], None).unwrap_err();
    assert!(e.to_string().contains("preemption"), "{e}");
    // PREEMPT_LAZY (6.13) never ran beside CFS (replaced in 6.6).
    let lazy_cfs = ["guest.scheduler=cfs".into(), "guest.preemption=lazy".into()];
    let e = resolve(HOGS, &lazy_cfs, None).unwrap_err();
    assert!(
        e.to_string().contains("guest.preemption") && e.to_string().contains("eevdf"),
        "{e}"
    );
}

/// A scenario naming neither a preset nor a platform runs on today's platform: KVM on
/// Linux 6.6 (EEVDF host and guest), or Xen 4.19 when its scheduler is one of Xen's.
#[test]
fn a_scenario_naming_no_platform_gets_todays() {
    let sc = resolve(HOGS, &[], None).unwrap();
    assert_eq!(sc.preset.as_deref(), Some("kvm-modern"));
    assert_eq!(sc.host.platform.as_deref(), Some("kvm-6.6-spr"));
    let text = format!("{HOGS}\n[host.scheduler]\nkind = \"credit\"\n");
    let sc = resolve(&text, &[], None).unwrap();
    assert_eq!(sc.preset.as_deref(), Some("xen-modern"));
    // Naming a preset or a platform keeps it.
    let sc = resolve(HOGS, &["preset=kvm-default".into()], None).unwrap();
    assert_eq!(sc.preset.as_deref(), Some("kvm-default"));
    assert_eq!(sc.host.platform, None);
    let sc = resolve(HOGS, &["host.platform=kvm-3.9-snb".into()], None).unwrap();
    assert_eq!(sc.preset, None);
    // `vcpulab explain` says so.
    let e = vcpulab_core::explain(HOGS, &[], None).unwrap();
    assert!(
        e.starts_with("# no preset or platform named: today's platform, preset \"kvm-modern\""),
        "{e}"
    );
    let e = vcpulab_core::explain(HOGS, &["preset=kvm-default".into()], None).unwrap();
    assert!(!e.contains("no preset or platform named"), "{e}");
}

/// A sleeper's timer fires while its vCPU runs another thread: try_to_wake_up sends it
/// to an idle vCPU (select_idle_sibling), which from then on halts and wakes with it.
/// Balancing is off, so only the wake-up's placement can move it: before, it stayed
/// behind the busy thread on its own vCPU and the idle vCPU never woke.
#[test]
fn a_timer_wake_up_moves_to_an_idle_vcpu_when_its_own_is_busy() {
    let text = r#"
preset = "kvm-default"
seed = 1
[run]
duration = "200ms"
[host]
pcpus = 2
[[vm]]
name = "a"
vcpus = 2
guest = { kernel = "linux-3.9", load_balance = false }
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "nap"
threads = 1
ops = [{ cpuset = "0" }, { compute = "1ms" }, { cpuset = "0-1" }, { loop = { n = "forever", body = [{ compute = "50us" }, { sleep = "200us" }, { count = 1 }] } }]
[[vm.workload.group]]
name = "cpu"
threads = 1
ops = [{ loop = { n = "forever", body = [{ compute = "1ms" }] } }]
"#;
    let r = run_toml(text);
    let vm = &r.vms[0];
    assert!(vm.wakes > 100, "halted-vCPU wake-ups {}", vm.wakes);
}
