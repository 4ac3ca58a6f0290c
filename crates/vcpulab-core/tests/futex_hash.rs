//! The guest kernel's futex hash table (kernel/futex.c `futex_hash`): futex objects whose
//! addresses hash to the same bucket share its lock. 256 buckets up to Linux 3.12; 256
//! per possible CPU, rounded up to a power of two, from 3.13 (`guest.futex_hash_buckets`).
mod common;
use common::*;

/// Eight threads on eight vCPUs, each pair on a mutex of its own, all contended.
const PAIRS: &str = r#"
seed = 4
[run]
duration = "200ms"
[host]
pcpus = 8
[[vm]]
name = "app"
vcpus = 8
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "a"
threads = 2
ops = [{loop = {n = "forever", body = [{lock = "ma"}, {compute = "2us"}, {unlock = "ma"}, {compute = "exp(3us)"}]}}]
[[vm.workload.group]]
name = "b"
threads = 2
ops = [{loop = {n = "forever", body = [{lock = "mb"}, {compute = "2us"}, {unlock = "mb"}, {compute = "exp(3us)"}]}}]
[[vm.workload.group]]
name = "c"
threads = 2
ops = [{loop = {n = "forever", body = [{lock = "mc"}, {compute = "2us"}, {unlock = "mc"}, {compute = "exp(3us)"}]}}]
[[vm.workload.group]]
name = "d"
threads = 2
ops = [{loop = {n = "forever", body = [{lock = "md"}, {compute = "2us"}, {unlock = "md"}, {compute = "exp(3us)"}]}}]
"#;

fn bucket_contention(r: &vcpulab_core::Report) -> (u64, u64) {
    let row = r
        .locks
        .iter()
        .find(|l| l.vm == "app" && l.lock == "futex-bucket")
        .expect("futex buckets are taken");
    (row.contended, row.acquisitions)
}

/// With one bucket every futex call of the four pairs takes the same lock and finds it
/// taken far more often than when each mutex has a bucket to itself (a table of 2^20).
#[test]
fn futexes_that_hash_alike_share_a_bucket_lock() {
    let one = run_with(PAIRS, &["guest.futex_hash_buckets=1"]);
    let many = run_with(PAIRS, &["guest.futex_hash_buckets=1048576"]);
    let ((c1, a1), (cm, am)) = (bucket_contention(&one), bucket_contention(&many));
    assert!(a1 > 1000 && am > 1000, "futex calls: {a1}, {am}");
    assert!(
        c1 as f64 / a1 as f64 > 3.0 * (cm as f64 / am as f64).max(0.001),
        "contended bucket acquisitions: one bucket {c1} of {a1}, 2^20 buckets {cm} of {am}"
    );
}

#[test]
fn the_table_size_is_a_power_of_two_or_per_cpu() {
    let err = match vcpulab_core::resolve(PAIRS, &["guest.futex_hash_buckets=300".into()], None) {
        Ok(_) => panic!("a table of 300 buckets was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("guest.futex_hash_buckets") && err.contains("300"),
        "{err}"
    );
    for (kernel, buckets) in [
        ("linux-3.2", 256),
        ("linux-3.9", 256),
        ("linux-3.19", 0),
        ("linux-6.6", 0),
    ] {
        let sc = vcpulab_core::resolve(PAIRS, &[format!("guest.kernel={kernel:?}")], None)
            .expect("a known kernel");
        assert_eq!(sc.vm[0].guest.futex_hash_buckets, buckets, "{kernel}");
    }
}
