use vcpulab_core::{resolve, run};

fn load(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn examples_run() {
    for f in [
        "scenarios/examples/two-vms-one-pcpu.toml",
        "scenarios/examples/weights-1-1-2-4.toml",
        "scenarios/examples/xen-slice-sweep.toml",
    ] {
        let sc = resolve(&load(f), &[], None).unwrap();
        let r = run(&sc).unwrap();
        for vm in &r.vms {
            println!(
                "{f} {} share {:.4} ent {:.4} lat p50 {} p99 {} switches {} total {}",
                vm.vm,
                vm.cpu_share,
                vm.entitlement,
                vm.wake_latency_p50_ns,
                vm.wake_latency_p99_ns,
                vm.vcpu_switches,
                vm.time.total()
            );
        }
        println!("events {}", r.events);
    }
}
