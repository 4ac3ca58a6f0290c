//! Prints each VM's CPU share of a scenario (a quick look while developing schedulers).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, ov)) = args.split_first() else {
        eprintln!("usage: shares <scenario.toml> [key=value ...]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).expect("scenario file");
    let sc = vcpulab_core::resolve(&text, ov, None).expect("valid scenario");
    let r = vcpulab_core::run(&sc).expect("run");
    for vm in &r.vms {
        println!(
            "{} share {:.4} entitlement {:.4}",
            vm.vm, vm.cpu_share, vm.entitlement
        );
    }
}
