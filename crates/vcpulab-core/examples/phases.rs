//! Times the phases of one run (world build, event loop, scenario hash, report), best
//! of N each. Usage: phases <scenario.toml> <repeats> [key=value ...]
use std::time::Instant;
use vcpulab_core::metrics::report::{scenario_hash, Report};
use vcpulab_core::sim::world::World;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: phases <scenario.toml> <repeats> [key=value ...]");
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
    let mut best = [f64::MAX; 4];
    let mut events = 0;
    for _ in 0..repeats {
        let t = Instant::now();
        let mut w = World::new(&sc).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
        let t1 = t.elapsed().as_secs_f64();
        let cause = w.run();
        let t2 = t.elapsed().as_secs_f64();
        let hash = scenario_hash(&sc);
        let t3 = t.elapsed().as_secs_f64();
        let r = Report::build(&sc, &w, cause, hash);
        let t4 = t.elapsed().as_secs_f64();
        events = r.events;
        if repeats == 1 || std::env::var_os("PHASES_STALE").is_some() {
            eprintln!("stale events {}", w.stale_events);
        }
        for (b, d) in best.iter_mut().zip([t1, t2 - t1, t3 - t2, t4 - t3]) {
            *b = b.min(d);
        }
    }
    println!(
        "events {events} build {:.4} s loop {:.4} s ({:.1} ns/event) hash {:.4} s report {:.4} s",
        best[0],
        best[1],
        best[1] * 1e9 / events.max(1) as f64,
        best[2],
        best[3]
    );
}
