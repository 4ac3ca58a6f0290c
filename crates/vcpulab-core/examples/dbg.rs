fn main() {
    let path = std::env::args().nth(1).unwrap();
    let ov: Vec<String> = std::env::args().skip(2).collect();
    let text = std::fs::read_to_string(path).unwrap();
    let sc = match vcpulab_core::resolve(&text, &ov, None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    let t = std::time::Instant::now();
    let r = vcpulab_core::run(&sc).unwrap();
    let wall = t.elapsed().as_secs_f64();
    for v in &r.vms {
        println!("{:8} share {:.3} done {} compl {:?} units {} user {:.3} kern {:.3} spin {:.3} ovh {:.3} halts {} wakes {} lhp {} lwp {} ple {} ok {} fail {} tlb {} wake mean {:.0} p99 {:?}", v.vm, v.cpu_share, v.finished, v.completion_ns.map(|c| c as f64/1e9), v.work_units, v.time.user_ns as f64/1e9, v.time.kernel_ns as f64/1e9, v.time.spin_ns as f64/1e9, v.time.overhead_ns as f64/1e9, v.halts, v.wakes, v.lhp, v.lwp, v.ple_exits, v.ple_yields_ok, v.ple_yields_failed, v.tlb_shootdowns, v.wake_latency_mean_ns, v.wake_latency_p99_ns);
    }
    for l in &r.locks {
        println!(
            "  lock {}/{} acq {} cont {} wait mean {:.0} p99 {:?} hold mean {:.0} lhp {} (slice/wake/dyield/own/coord {}/{}/{}/{}/{}) lwp {} halts {} kicks {} steals {}",
            l.vm,
            l.lock,
            l.acquisitions,
            l.contended,
            l.wait_mean_ns,
            l.wait_p99_ns,
            l.hold_mean_ns,
            l.lhp,
            l.lhp_slice,
            l.lhp_wakeup,
            l.lhp_directed_yield,
            l.lhp_own_yield,
            l.lhp_coordination,
            l.lwp,
            l.halts,
            l.kicks,
            l.steals
        );
    }
    for l in &r.latencies {
        println!(
            "  lat {}/{} n {} mean {:.0} p50 {:?} p99 {:?}",
            l.vm, l.kind, l.count, l.mean_ns, l.p50_ns, l.p99_ns
        );
    }
    println!(
        "events {} end {:.4}s stop {} wall {:.3}s ev/s {:.0}",
        r.events,
        r.end_ns as f64 / 1e9,
        r.stop_reason,
        wall,
        r.events as f64 / wall
    );
}
