//! Prints each vCPU's CPU and runnable time of a scenario (a look at starvation).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, ov)) = args.split_first() else {
        eprintln!("usage: vcpus <scenario.toml> [key=value ...]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).expect("scenario file");
    let sc = vcpulab_core::resolve(&text, ov, None).expect("valid scenario");
    let r = vcpulab_core::run(&sc).expect("run");
    for v in &r.vcpus {
        println!(
            "{}/{} cpu {} runnable {}",
            v.vm, v.vcpu, v.time.cpu_ns, v.time.runnable_ns
        );
    }
}
