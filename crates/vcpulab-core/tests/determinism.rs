mod common;
use common::*;
use vcpulab_core::{resolve, run};

const NOISY: &str = r#"
[run]
duration = "500ms"
[host]
pcpus = 2
[[vm]]
vcpus = 3
workload = { model = "compute-sleep", params = { compute = "exp(300us)", sleep = "exp(500us)" } }
[[vm]]
vcpus = 2
workload = { model = "freqsleep" }
"#;

#[test]
fn same_scenario_and_seed_give_identical_reports() {
    for sched in ["cfs", "eevdf", "credit", "credit2"] {
        let o = vec![format!("host.scheduler.kind={sched}")];
        let a = run(&resolve(NOISY, &o, Some(7)).unwrap())
            .unwrap()
            .to_json();
        let b = run(&resolve(NOISY, &o, Some(7)).unwrap())
            .unwrap()
            .to_json();
        assert_eq!(a, b);
        let c = run(&resolve(NOISY, &o, Some(8)).unwrap())
            .unwrap()
            .to_json();
        assert_ne!(a, c, "a different seed should change a stochastic run");
    }
}

#[test]
fn adding_a_vm_does_not_change_the_draws_of_the_others() {
    // A VM's thread streams depend on (seed, VM index, thread index) only: the first
    // VM alone on its own pinned pCPU behaves the same with or without a second VM
    // pinned elsewhere.
    let one = "[run]\nduration = \"300ms\"\n[host]\npcpus = 2\n[[vm]]\nvcpus = 1\npin = \"0\"\n\
        workload = { model = \"compute-sleep\", params = { compute = \"exp(100us)\", sleep = \"exp(100us)\" } }\n";
    let two =
        format!("{one}[[vm]]\nvcpus = 1\npin = \"1\"\nworkload = {{ model = \"cpu-bomb\" }}\n");
    let a = run_toml(one);
    let b = run_toml(&two);
    assert_eq!(a.vms[0].work_units, b.vms[0].work_units);
    assert_eq!(a.vms[0].time.user_ns, b.vms[0].time.user_ns);
}
