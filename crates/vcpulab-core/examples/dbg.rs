fn main() {
    let path = std::env::args().nth(1).unwrap();
    let ov: Vec<String> = std::env::args().skip(2).collect();
    let text = std::fs::read_to_string(path).unwrap();
    let sc = vcpulab_core::resolve(&text, &ov, None).unwrap();
    let r = vcpulab_core::run(&sc).unwrap();
    for v in &r.vms {
        println!("{:8} share {:.4} ent {:.4} disp n {} mean {:.0} p99 {} wake n {} mean {:.0} p99 {} sw {} halts {} units {}", v.vm, v.cpu_share, v.entitlement, v.dispatch_wait_count, v.dispatch_wait_mean_ns, v.dispatch_wait_p99_ns, v.wake_latency_count, v.wake_latency_mean_ns, v.wake_latency_p99_ns, v.vcpu_switches, v.halts, v.work_units);
    }
    println!("events {} end {}", r.events, r.end_ns);
}
