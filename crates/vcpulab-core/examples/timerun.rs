//! Times `run` alone on one scenario (best of N): events, ns per event, simulated s per
//! wall s. Usage: timerun <scenario.toml> <repeats> [key=value ...]
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: timerun <scenario.toml> <repeats> [key=value ...]");
        std::process::exit(2);
    }
    let text = std::fs::read_to_string(&args[0]).unwrap_or_else(|e| {
        eprintln!("{}: {e}", args[0]);
        std::process::exit(2)
    });
    let repeats: usize = args[1].parse().unwrap_or(1);
    let sc = vcpulab_core::resolve(&text, &args[2..], None).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut best = f64::MAX;
    let mut events = 0;
    let mut end = 0;
    for _ in 0..repeats {
        let t = Instant::now();
        let r = vcpulab_core::run(&sc).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
        best = best.min(t.elapsed().as_secs_f64());
        events = r.events;
        end = r.end_ns;
    }
    println!(
        "events {events} wall {best:.3} s ns/event {:.1} sim/wall {:.3}",
        best * 1e9 / events.max(1) as f64,
        end as f64 / 1e9 / best
    );
}
