//! TLB shootdowns reach the CPUs in the initiating process's mm CPU mask
//! (flush_tlb_others / flush_tlb_multi over mm_cpumask, arch/x86/mm/tlb.c): vCPUs
//! running its threads, and vCPUs idling in lazy TLB mode with its mm still loaded —
//! which take the IPI and leave the mm before Linux 4.19 and are skipped from 4.19.

mod common;
use common::run_toml;

/// A 2-vCPU VM on 2 pCPUs: a thread of process "a" that computes and shoots down,
/// beside `other`, the ops of a second thread in process `other_process`.
fn scenario(other_process: &str, other: &str, kernel: &str) -> String {
    format!(
        r#"
[run]
duration = "2s"
[host]
pcpus = 2
[[vm]]
name = "bench"
vcpus = 2
guest = {{ kernel = "{kernel}" }}
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "shooter"
process = "a"
ops = [{{loop = {{n = 500, body = [{{compute = "200us"}}, {{tlb_shootdown = 1}}]}}}}]
[[vm.workload.group]]
name = "other"
process = "{other_process}"
ops = [{other}]
"#
    )
}

const BUSY: &str = r#"{loop = {n = 500, body = [{compute = "200us"}]}}"#;

#[test]
fn a_shootdown_reaches_the_vcpus_running_the_process_and_no_other() {
    for kernel in ["linux-3.2", "linux-6.6"] {
        let same = run_toml(&scenario("a", BUSY, kernel));
        let other = run_toml(&scenario("b", BUSY, kernel));
        let (s, o) = (&same.vms[0], &other.vms[0]);
        assert!(s.finished && o.finished, "{kernel}");
        assert_eq!(s.tlb_shootdowns, 500, "{kernel}");
        // Two threads of one process on two vCPUs: every shootdown has a target while
        // the sibling runs (it finishes a little before the shooter).
        assert!(
            s.ipis_tlb > 400,
            "{kernel}: same process, {} IPIs",
            s.ipis_tlb
        );
        // Another process's thread on the other vCPU is not in the mask.
        assert_eq!(o.ipis_tlb, 0, "{kernel}: other process");
    }
}

#[test]
fn a_lazy_vcpu_takes_one_shootdown_and_leaves_the_mm_before_4_19_and_none_after() {
    // The sibling of the same process runs briefly, then sleeps for the rest of the
    // run: its vCPU idles with mm "a" loaded (lazy TLB mode).
    let sleeper = r#"{compute = "100us"}, {sleep = "10s"}"#;
    let old = run_toml(&scenario("a", sleeper, "linux-3.2"));
    let new = run_toml(&scenario("a", sleeper, "linux-6.6"));
    assert_eq!(old.vms[0].tlb_shootdowns, 500);
    // Linux 3.2: the first shootdown wakes the idle vCPU, which leaves the mm
    // (leave_mm); no later one is sent to it.
    assert_eq!(old.vms[0].ipis_tlb, 1);
    // Linux 4.19+: lazy CPUs are skipped.
    assert_eq!(new.vms[0].ipis_tlb, 0);
}

#[test]
fn a_model_with_a_process_per_group_has_a_bounded_number_of_them() {
    let text = r#"
[run]
duration = "10ms"
[[vm]]
vcpus = 4
workload = { model = "kernbench", threads = 2000, params = { jobs = 2000 } }
"#;
    let err = vcpulab_core::resolve(text, &[], None)
        .and_then(|sc| vcpulab_core::run(&sc).map(|_| ()))
        .expect_err("6,000 processes are refused");
    let msg = err.to_string();
    assert!(
        msg.starts_with("vm.0.workload.threads") && msg.contains("4096"),
        "{msg}"
    );
}
