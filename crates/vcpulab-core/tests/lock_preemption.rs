//! Lock-holder preemptions by cause (hv/preemption.rs): the locks table's `lhp_*`
//! columns split `lhp` by what took the holder off, and each cause shows only where
//! its mechanism runs.

mod common;
use common::run_with;
use vcpulab_core::Report;

/// Four vCPUs of a VM on two pCPUs beside a CPU hog: four threads contend for kernel
/// ticket spinlock "k".
const CONTENDED: &str = r#"
seed = 3
[run]
duration = "1s"
[host]
platform = "kvm-3.9-snb"
pcpus = 2
[[vm]]
name = "bench"
vcpus = 4
guest = { kernel = "linux-3.9", spinlock = "ticket" }
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = 4
ops = [{loop = {n = "forever", body = [
  {compute = "exp(20us)"},
  {kspin = {lock = "k", hold = "exp(2us)"}},
  {count = 1},
]}}]
[[vm]]
name = "hog"
vcpus = 2
workload = { model = "cpu-bomb" }
"#;

/// (lhp, slice, wakeup, directed yield, own yield, coordination) summed over
/// the bench VM's locks; every row's parts add up to its `lhp`.
fn causes(r: &Report) -> [u64; 6] {
    let mut sum = [0u64; 6];
    for l in r.locks.iter().filter(|l| l.vm == "bench") {
        let parts = [
            l.lhp_slice,
            l.lhp_wakeup,
            l.lhp_directed_yield,
            l.lhp_own_yield,
            l.lhp_coordination,
        ];
        assert_eq!(parts.iter().sum::<u64>(), l.lhp, "{}: {parts:?}", l.lock);
        sum[0] += l.lhp;
        for (s, p) in sum[1..].iter_mut().zip(parts) {
            *s += p;
        }
    }
    sum
}

#[test]
fn directed_yields_take_holders_off_only_where_ple_yields() {
    let with_ple = causes(&run_with(CONTENDED, &[]));
    let without = causes(&run_with(CONTENDED, &["host.ple.policy=off"]));
    assert!(
        with_ple[0] > 0 && without[0] > 0,
        "{with_ple:?} {without:?}"
    );
    assert!(
        with_ple[3] + with_ple[4] > 0,
        "PLE's yields preempt some holders: {with_ple:?}"
    );
    assert_eq!(without[3] + without[4], 0, "no PLE, no yields: {without:?}");
    assert!(without[1] + without[2] > 0, "{without:?}");
    // No coordination policy runs.
    assert_eq!(with_ple[5] + without[5], 0);
}
