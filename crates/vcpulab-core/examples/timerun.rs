//! Times a run (best of N): events, ns per event, simulated s per wall s, and the
//! phases of the best run — world build, event loop, scenario hash, report — as
//! `vcpulab_core::run` does them for a scenario of one mode.
//! Usage: timerun <scenario.toml> <repeats> [key=value ...]
use std::time::Instant;
use vcpulab_core::metrics::report::{scenario_hash, Report};
use vcpulab_core::scenario::Mode;
use vcpulab_core::sim::world::World;

/// The allocator `make bench` and the Python module use (see src/bin/bench.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    if sc.run.mode != Mode::Consolidated || !sc.run.compare.is_empty() {
        eprintln!("timerun times consolidated runs of one mode (run.mode, run.compare)");
        std::process::exit(2);
    }
    // (total, build, loop, hash, report) of the fastest run.
    let mut best = [f64::MAX; 5];
    let (mut events, mut stale, mut end) = (0, 0, 0);
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
        if t4 < best[0] {
            best = [t4, t1, t2 - t1, t3 - t2, t4 - t3];
        }
        (events, stale, end) = (r.events, w.stale_events, r.end_ns);
    }
    let [wall, build, run, hash, report] = best;
    println!(
        "events {events} (stale {stale}) wall {wall:.3} s ns/event {:.1} sim/wall {:.3} | build {:.4} s loop {:.4} s ({:.1} ns/event) hash {:.4} s report {:.4} s",
        wall * 1e9 / events.max(1) as f64,
        end as f64 / 1e9 / wall,
        build,
        run,
        run * 1e9 / events.max(1) as f64,
        hash,
        report
    );
}
