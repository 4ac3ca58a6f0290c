//! The wake path's exits and who pays them (hv/wake_path.rs): the waker pays its ICR
//! write (inside the futex bucket lock where the kernel sends the IPI under it), and a
//! pre-APICv host charges exits an APICv one does not.
mod common;
use common::*;

const ROUNDS: u64 = 400;

/// One waker posting a semaphore `ROUNDS` times to a thread on the other vCPU. With
/// `poll`, a SCHED_IDLE spinner keeps the wakee's vCPU running (IPIs reach a running
/// vCPU); without, the wakee's vCPU halts between posts.
fn one_way(poll: bool) -> String {
    let spinner = if poll {
        r#"
[[vm.workload.group]]
name = "poll"
threads = 2
priority = "idle"
ops = [{loop = {n = "forever", body = [{compute = "1ms"}]}}]
"#
    } else {
        ""
    };
    format!(
        r#"
[run]
duration = "1s"
[host]
pcpus = 2
[[vm]]
name = "bench"
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "ping"
ops = [{{loop = {{n = {ROUNDS}, body = [{{compute = "50us"}}, {{sem_post = "a"}}]}}}}]
[[vm.workload.group]]
name = "pong"
ops = [{{loop = {{n = {ROUNDS}, body = [{{sem_wait = "a"}}]}}}}]
{spinner}
"#
    )
}

#[test]
fn the_waker_pays_its_icr_write_and_the_kick() {
    let r = run_with(&one_way(false), &["host.platform=kvm-3.9-snb"]);
    let vm = &r.vms[0];
    assert_eq!(vm.icr_exits, ROUNDS, "one ICR write per post");
    // Exit + entry (1736 cycles at 2.4 GHz) + KVM's ICR emulation + the host's
    // try_to_wake_up of the halted wakee's thread, on the waker's vCPU.
    let per_post = 723 + 2_500 + 400;
    let waker = &r.vcpus[0];
    assert_eq!(waker.halts, 1, "the waker never idles before the end");
    let overhead = waker.time.overhead_ns;
    assert!(
        overhead >= ROUNDS * per_post && overhead <= ROUNDS * per_post + 20_000,
        "waker overhead {overhead} ns for {ROUNDS} posts of {per_post} ns"
    );
    // The wakee's vCPU pays its idle exits instead: a timer write entering and leaving
    // idle each time.
    assert!(vm.timer_exits >= 2 * ROUNDS, "{}", vm.timer_exits);
}

#[test]
fn under_the_bucket_lock_the_exit_lengthens_the_hold() {
    let hold = |under: &str| {
        let r = run_with(
            &one_way(false),
            &[
                "host.platform=kvm-3.9-snb",
                &format!("guest.ipi_under_lock={under}"),
            ],
        );
        let l = r
            .locks
            .iter()
            .find(|l| l.lock == "futex-bucket")
            .expect("futex bucket class");
        l.hold_mean_ns
    };
    let (before_wake_q, wake_q) = (hold("true"), hold("false"));
    // Half the bucket acquisitions are posts, each holding the lock across its exit.
    let exit = (723 + 2_500 + 400) as f64;
    assert!(
        before_wake_q - wake_q > 0.4 * exit,
        "hold with the IPI under the lock {before_wake_q} ns, after it {wake_q} ns"
    );
}

#[test]
fn a_pre_apicv_host_charges_exits_an_apicv_host_does_not() {
    // The same guest (Linux 3.2: no PV EOI) on Sandy Bridge (no APICv) and on Haswell-EP
    // (APICv with posted interrupts); the wakee's vCPU keeps running (a polling idle
    // thread), so every IPI reaches a running vCPU.
    let on = |platform: &str| {
        run_with(
            &one_way(true),
            &[
                &format!("host.platform={platform}"),
                "guest.kernel=linux-3.2",
            ],
        )
    };
    let pre = on("kvm-3.9-snb");
    let apicv = on("kvm-3.19-hsw");
    let (p, a) = (&pre.vms[0], &apicv.vms[0]);
    assert!(p.irq_exits >= ROUNDS && p.eoi_exits >= ROUNDS, "{p:?}");
    assert_eq!(
        (a.irq_exits, a.eoi_exits),
        (0, 0),
        "APICv: posted, EOI virtualized"
    );
    assert_eq!(p.icr_exits, a.icr_exits, "the ICR write exits on both");
    // The receiving vCPU's overhead shows it.
    let recv = |r: &vcpulab_core::Report| r.vcpus[1].time.overhead_ns;
    assert!(
        recv(&pre) > recv(&apicv) + ROUNDS * 723,
        "pre-APICv {} ns, APICv {} ns",
        recv(&pre),
        recv(&apicv)
    );
    // The guest's PV EOI (Linux 3.6+) avoids the EOI exits without APICv.
    let pv = run_with(&one_way(true), &["host.platform=kvm-3.9-snb"]);
    assert_eq!(pv.vms[0].eoi_exits, 0);
    assert!(pv.vms[0].irq_exits >= ROUNDS);
    // IPI virtualization (Sapphire Rapids, Linux 6.6): no ICR exit either.
    let ipiv = run_with(&one_way(true), &["host.platform=kvm-6.6-spr"]);
    assert_eq!(ipiv.vms[0].icr_exits, 0);
    let waker = |r: &vcpulab_core::Report| r.vcpus[0].time.overhead_ns;
    assert!(
        waker(&ipiv) + ROUNDS * 3_000 < waker(&pre),
        "IPIv waker {} ns, pre-APICv waker {} ns",
        waker(&ipiv),
        waker(&pre)
    );
}

#[test]
fn native_mode_counts_no_exits() {
    let r = run_with(
        &one_way(false),
        &["host.platform=kvm-3.9-snb", "run.mode=native"],
    );
    let vm = &r.vms[0];
    assert_eq!(
        (vm.icr_exits, vm.irq_exits, vm.eoi_exits, vm.timer_exits),
        (0, 0, 0, 0)
    );
}

/// `PRODUCERS_CONSUMERS` (tests/common): most wake-ups land on a vCPU busy with a thread
/// about as far along as the wakee. A wake-up that preempts nothing needs no IPI from
/// Linux 3.3 on (the waker enqueues the wakee; the target's tick runs it in turn); Linux
/// 3.2 queues every remote wake-up behind an IPI. (With the guest's wake_affine on, 3.2's
/// rule sends many wakees to the waker's own vCPU, with no IPI under either setting.)
#[test]
fn a_wake_up_that_preempts_nothing_sends_no_ipi_from_linux_3_3() {
    let text = PRODUCERS_CONSUMERS;
    // Without the guest's wake_affine, which would queue many of these wakees behind
    // their waker on its own vCPU (no IPI either way): the test is about the rest.
    let always = run_with(
        text,
        &["guest.wake_ipi=\"always\"", "guest.wake_affine=off"],
    );
    let on_preempt = run_with(
        text,
        &["guest.wake_ipi=\"on-preempt\"", "guest.wake_affine=off"],
    );
    let (a, p) = (&always.vms[0], &on_preempt.vms[0]);
    assert!(a.ipis_resched > 50, "always: {}", a.ipis_resched);
    assert!(
        p.ipis_resched * 3 < a.ipis_resched * 2,
        "IPIs: always {} on-preempt {}",
        a.ipis_resched,
        p.ipis_resched
    );
    assert!(p.work_units > 0 && a.work_units > 0);
}

/// One poster waking three of six waiters at a time on two vCPUs that share one pCPU
/// (Linux 3.2's guest: every remote wake-up is queued behind an IPI): the waiters'
/// vCPU waits for the pCPU while the poster runs, so the first wake-up's reschedule IPI
/// waits for its entry, and Linux sends no other until it is handled (the target's
/// wake list is not empty: ttwu_queue_remote). Fewer ICR writes than wake-ups onto the
/// other vCPU, and every wakee still runs.
#[test]
fn wake_ups_onto_a_vcpu_that_has_not_taken_the_first_ipi_send_no_more() {
    const ROUNDS: u64 = 200;
    let text = format!(
        r#"
preset = "kvm-default"
seed = 1
[run]
duration = "2s"
[host]
pcpus = 1
platform = "kvm-3.2-wsm"
[guest]
wake_affine = "off"
[[vm]]
name = "a"
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "poster"
ops = [{{loop = {{n = {ROUNDS}, body = [{{compute = "100us"}}, {{sem_post = "s"}}, {{sem_post = "s"}}, {{sem_post = "s"}}]}}}}]
[[vm.workload.group]]
name = "waiter"
threads = 6
ops = [{{loop = {{n = "forever", body = [{{sem_wait = "s"}}, {{compute = "5us"}}, {{count = 1}}]}}}}]
"#
    );
    let r = run_with(&text, &[]);
    let vm = &r.vms[0];
    // The run ends with the poster: its last wakees may not have run yet.
    assert!(vm.work_units + 6 >= 3 * ROUNDS, "{} units", vm.work_units);
    let remote: u64 = r
        .latencies
        .iter()
        .filter(|l| l.kind.starts_with("wake/") && l.kind != "wake/same_vcpu")
        .map(|l| l.count)
        .sum();
    assert!(remote > ROUNDS / 2, "{remote} wake-ups onto the other vCPU");
    assert!(
        vm.icr_exits * 4 < remote * 3,
        "{} ICR writes for {remote} wake-ups onto the other vCPU",
        vm.icr_exits
    );
}

/// A producer and two consumers in a VM of two vCPUs sharing one pCPU, each vCPU a
/// socket of its own (wake-ups between them cross a cache boundary).
const PRODUCER_AND_CONSUMERS_ON_ONE_PCPU: &str = r#"
preset = "kvm-default"
seed = 2
[run]
duration = "200ms"
[host]
pcpus = 1
[[vm]]
name = "a"
vcpus = 2
[vm.guest]
topology = "socket-per-vcpu"
wake_affine = "off"
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "producer"
ops = [{ loop = { n = "forever", body = [{ compute = "exp(50us)" }, { push = "q" }] } }]
[[vm.workload.group]]
name = "consumer"
threads = 2
ops = [{ loop = { n = "forever", body = [{ pop = "q" }, { compute = "exp(20us)" }, { count = 1 }] } }]
"#;

/// With TTWU_QUEUE a consumer woken onto the other vCPU waits on that vCPU's wake list
/// until it handles the IPI — on no runqueue, so the producer's vCPU, idling meanwhile,
/// cannot pull it (sched_ttwu_pending enqueues it on the target, nowhere else). Queued
/// at once instead (`guest.ttwu_queue = false`), the idle vCPU's balancing pulls it
/// over, and the consumers end up waking on the producer's vCPU. (Which vCPU the
/// consumers settle on depends on the seed — on where the host's ticks fall against the
/// guest's — so the counts are summed over five 1 s runs.)
#[test]
fn a_wakee_on_a_preempted_vcpus_wake_list_cannot_be_pulled() {
    // (same_vcpu, preempted_target) wake-ups over seeds 1-5.
    let summed = |extra: &[&str]| {
        let (mut same, mut preempted) = (0, 0);
        for seed in ["seed=1", "seed=2", "seed=3", "seed=4", "seed=5"] {
            let mut o = vec![seed, "run.duration=1s"];
            o.extend_from_slice(extra);
            let r = run_with(PRODUCER_AND_CONSUMERS_ON_ONE_PCPU, &o);
            // Every wakee still runs: the consumers keep up with the producer.
            assert!(r.vms[0].work_units > 7_500, "{} units", r.vms[0].work_units);
            same += wakes_on(&r, "same_vcpu");
            preempted += wakes_on(&r, "preempted_target");
        }
        (same, preempted)
    };
    let (l, listed_preempted) = summed(&[]);
    let (q, queued_preempted) = summed(&["guest.ttwu_queue=false"]);
    assert!(
        q * 2 > l * 3,
        "wake-ups on the waker's own vCPU: {l} with the wake list, {q} without"
    );
    // Waiting on a preempted vCPU's list is the wake list's own path (queued at once,
    // a wakee meets a preempted vCPU only when no other vCPU will do).
    assert!(
        listed_preempted > 10 * queued_preempted.max(25),
        "wake-ups onto preempted vCPUs: {listed_preempted} with the wake list, {queued_preempted} without"
    );
}

/// Linux 6.0+ (`guest.wake_list_idle`, the 6.6 kernel's profile) sends a wake-up onto
/// an idle vCPU of the same cache through its wake list too (`ttwu_queue_cond`'s
/// `!nr_running`). The same producer and consumers with one socket: the consumers'
/// vCPU halts between items, and a consumer woken onto it waits on its list while the
/// host runs the producer's vCPU, where before the producer's vCPU, idling, could pull
/// it from the halted vCPU's runqueue and run it itself.
#[test]
fn a_wakee_sent_to_an_idle_vcpu_of_the_same_cache_waits_on_its_wake_list_from_linux_6_0() {
    let one_socket = |extra: &[&str]| {
        let mut o = vec![
            "vm.0.guest.topology=one-socket",
            "guest.wake_ipi=on-preempt",
        ];
        o.extend_from_slice(extra);
        run_with(PRODUCER_AND_CONSUMERS_ON_ONE_PCPU, &o)
    };
    let listed = one_socket(&["guest.wake_list_idle=true"]);
    let queued = one_socket(&["guest.wake_list_idle=false"]);
    assert_fewer_wakes_on_the_wakers_vcpu(&listed, &queued);
    // Without TTWU_QUEUE the key changes nothing.
    let off = |idle_list: &str| {
        wakes_on(
            &one_socket(&["guest.ttwu_queue=false", idle_list]),
            "same_vcpu",
        )
    };
    assert_eq!(
        off("guest.wake_list_idle=true"),
        off("guest.wake_list_idle=false")
    );
    for r in [&listed, &queued] {
        assert!(r.vms[0].work_units > 1_500, "{} units", r.vms[0].work_units);
    }
}

/// With the wake list, at least a third fewer wake-ups end on the waker's own vCPU
/// than when the wakee is queued at once (where the waker's idle vCPU pulls it).
fn assert_fewer_wakes_on_the_wakers_vcpu(
    listed: &vcpulab_core::Report,
    queued: &vcpulab_core::Report,
) {
    let (l, q) = (wakes_on(listed, "same_vcpu"), wakes_on(queued, "same_vcpu"));
    assert!(
        q * 2 > l * 3,
        "wake-ups on the waker's own vCPU: {l} with the wake list, {q} without"
    );
}
