use vcpulab_core::sim::world::World;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let sc = vcpulab_core::resolve(&text, &[], None).unwrap();
    let mut w = World::new(&sc).unwrap();
    let t = std::time::Instant::now();
    w.run();
    let wall = t.elapsed().as_secs_f64();
    println!(
        "events {} stale {} heap-left {} wall {:.3} ev/s {:.0} pops/s {:.0}",
        w.events,
        w.stale_events,
        w.q.len(),
        wall,
        w.events as f64 / wall,
        (w.events + w.stale_events) as f64 / wall
    );
}
