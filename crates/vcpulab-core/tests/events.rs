//! What the event queue holds: a step that a slice end would cancel is never queued.

use vcpulab_core::resolve;
use vcpulab_core::sim::world::World;

/// 16 VMs x 4 CPU-bound vCPUs round-robin on 16 pCPUs with 0.1 ms slices: every slice
/// end takes a vCPU off in the middle of its (endless) computation. Queuing each
/// dispatch's step made half the popped events cancelled ones; kept back past the slice
/// end (`World::push_step`), almost none are.
#[test]
fn steps_past_the_slice_end_are_not_queued() {
    let text = r#"
preset = "xen-default"
[run]
duration = "200ms"
[host]
pcpus = 16
[host.scheduler]
slice_ms = 0.1
[[vm]]
vcpus = 4
count = 16
workload = { model = "cpu-bomb" }
"#;
    let sc = resolve(text, &[], None).unwrap_or_else(|e| panic!("{e}"));
    let mut w = World::new(&sc).unwrap_or_else(|e| panic!("{e}"));
    w.run();
    assert!(w.events > 20_000, "{} events", w.events);
    assert!(
        w.stale_events * 20 < w.events,
        "{} cancelled events popped for {} live ones",
        w.stale_events,
        w.events
    );
}
