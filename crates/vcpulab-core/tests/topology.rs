//! Host topology: SMT threads share a core's speed, the Linux schedulers place and
//! balance vCPUs onto idle cores, and topologies a scheduler cannot honour are refused.

mod common;
use common::*;

/// One VM of `vcpus` vCPUs, each a thread computing 10 × 50 ms, on `pcpus` pCPUs.
fn compute(sched: &str, pcpus: u32, vcpus: u32, topology: &str, pin: &str) -> String {
    format!(
        r#"
seed = 5
[run]
duration = "5s"
[host]
pcpus = {pcpus}
[host.topology]
{topology}
[host.scheduler]
kind = "{sched}"
[[vm]]
name = "work"
vcpus = {vcpus}
{pin}
[vm.workload]
model = "program"
[[vm.workload.group]]
threads = {vcpus}
ops = [{{loop = {{n = 10, body = [{{compute = "50ms"}}]}}}}]
"#
    )
}

fn completion_s(r: &vcpulab_core::Report) -> f64 {
    assert!(r.vms[0].finished, "the program did not finish");
    r.vms[0].completion_ns.expect("completion") as f64 / 1e9
}

#[test]
fn busy_siblings_share_their_core() {
    for sched in ["cfs", "eevdf"] {
        // Two threads pinned to the two hardware threads of one core.
        let pin = r#"pin = ["0", "1"]"#;
        let alone = completion_s(&run_toml(&compute(sched, 2, 2, "", pin)));
        let shared = completion_s(&run_toml(&compute(
            sched,
            2,
            2,
            "threads_per_core = 2",
            pin,
        )));
        let slower = shared / alone;
        assert!(
            (slower - 1.0 / 0.65).abs() < 0.02,
            "{sched}: {alone} s alone, {shared} s sharing a core ({slower:.3}x)"
        );
        // The speed is a parameter; 1.0 is a core that does not slow.
        let full = completion_s(&run_toml(&compute(
            sched,
            2,
            2,
            "threads_per_core = 2\nsibling_busy_speed = 1.0",
            pin,
        )));
        assert!(
            (full / alone - 1.0).abs() < 0.01,
            "{sched}: {full} vs {alone}"
        );
        // A thread whose sibling idles runs at full speed.
        let lone = completion_s(&run_toml(&compute(
            sched,
            2,
            1,
            "threads_per_core = 2",
            r#"pin = ["0"]"#,
        )));
        assert!(
            (lone / alone - 1.0).abs() < 0.01,
            "{sched}: {lone} vs {alone}"
        );
    }
}

#[test]
fn a_polling_sibling_leaves_the_core_to_its_neighbour() {
    // "work" computes on pCPU 0; "poller" on pCPU 1 (its sibling) mostly idles in
    // idle=poll, a PAUSE loop that leaves the core to pCPU 0. Computing instead, it
    // slows pCPU 0 to the shared speed.
    for sched in ["cfs", "eevdf"] {
        let text = |load: &str| {
            format!(
                "seed = 5\n[run]\nduration = \"5s\"\n[host]\npcpus = 2\n[host.topology]\nthreads_per_core = 2\n[host.scheduler]\nkind = \"{sched}\"\n\
                 [[vm]]\nname = \"work\"\nvcpus = 1\npin = \"0\"\n[vm.workload]\nmodel = \"program\"\n[[vm.workload.group]]\nthreads = 1\nops = [{{loop = {{n = 10, body = [{{compute = \"50ms\"}}]}}}}]\n\
                 [[vm]]\nname = \"poller\"\nvcpus = 1\npin = \"1\"\n[vm.guest]\nidle = \"poll\"\n[vm.workload]\n{load}\n"
            )
        };
        let polling = run_toml(&text(
            "model = \"compute-sleep\"\nparams = { compute = \"10us\", sleep = \"10ms\" }",
        ));
        let computing = run_toml(&text("model = \"cpu-bomb\""));
        let (p, c) = (completion_s(&polling), completion_s(&computing));
        assert!(
            (p / 0.5 - 1.0).abs() < 0.01,
            "{sched}: {p} s beside a poller"
        );
        assert!(
            (c / 0.5 - 1.0 / 0.65).abs() < 0.02,
            "{sched}: {c} s beside a computing sibling"
        );
    }
}

#[test]
fn vcpus_spread_over_idle_cores_first() {
    // Two CPU-bound vCPUs on two SMT cores (four pCPUs): placement and balancing put
    // them on different cores, so they run at full speed.
    for sched in ["cfs", "eevdf"] {
        let flat = completion_s(&run_toml(&compute(sched, 4, 2, "", "")));
        let smt = completion_s(&run_toml(&compute(sched, 4, 2, "threads_per_core = 2", "")));
        assert!(
            smt / flat < 1.02,
            "{sched}: {smt} s on 2 SMT cores vs {flat} s on 4 cores"
        );
    }
}

#[test]
fn active_balance_separates_siblings_that_never_queue() {
    // Two blockers (pinned to core 1's threads, 100 ms of work each) make core 0 the
    // least loaded at the start: the two CPU-bound vCPUs of "work" are placed on its
    // two threads and, never queuing, no pull can separate them. Once the blockers
    // are done, core 1's idle threads fail to pull four times in a row and then push
    // one of the pair over (active balancing).
    for sched in ["cfs", "eevdf"] {
        let mut text = format!(
            "seed = 5\n[run]\nduration = \"5s\"\n[host]\npcpus = 4\n[host.topology]\nthreads_per_core = 2\n[host.scheduler]\nkind = \"{sched}\"\n"
        );
        for p in [2, 3] {
            text += &format!(
                "[[vm]]\nname = \"blocker{p}\"\nvcpus = 1\npin = \"{p}\"\n[vm.workload]\nmodel = \"program\"\n[[vm.workload.group]]\nthreads = 1\nops = [{{compute = \"100ms\"}}]\n"
            );
        }
        text += "[[vm]]\nname = \"work\"\nvcpus = 2\n[vm.workload]\nmodel = \"program\"\n[[vm.workload.group]]\nthreads = 2\nops = [{loop = {n = 20, body = [{compute = \"50ms\"}]}}]\n";
        let r = run_toml(&text);
        let w = &r.vms[2];
        assert!(w.finished, "{sched}");
        let t = w.completion_ns.expect("completion") as f64 / 1e9;
        // 1 s of work each: ~1.06 s when separated after the blockers (1.54 s if they
        // shared a core throughout).
        assert!(t < 1.15, "{sched}: {t} s");
        assert!(w.migrations > 0, "{sched}: no migration");
    }
}

/// One VM with its memory bound to node 1 of a two-node host (pCPUs 0-1 and 2-3), one
/// thread computing 10 x 50 ms on a vCPU pinned to `pin`, with `footprint_kib`.
fn bound(footprint_kib: u64, pin: &str) -> String {
    format!(
        "seed = 5\n[run]\nduration = \"5s\"\n[host]\npcpus = 4\n[host.topology]\nnuma_nodes = 2\n\
         [host.scheduler]\nkind = \"cfs\"\nllc_pcpus = 2\n\
         [[vm]]\nname = \"mem\"\nvcpus = 1\npin = \"{pin}\"\nnuma_node = 1\n[vm.workload]\nmodel = \"program\"\n\
         footprint_kib = {footprint_kib}\n[[vm.workload.group]]\nthreads = 1\nops = [{{loop = {{n = 10, body = [{{compute = \"50ms\"}}]}}}}]\n"
    )
}

#[test]
fn memory_on_another_node_slows_what_streams_from_it() {
    // A 64 MiB working set streams capacity misses from memory as it runs: on node 0,
    // away from its memory, each costs 1.6x: the run slows by
    // 1 + (4 KiB/us x 150 ns/KiB x 0.6) x (64 MiB - 2.5 MiB) / 64 MiB = 1.346.
    let local = completion_s(&run_toml(&bound(65_536, "2")));
    let remote = completion_s(&run_toml(&bound(65_536, "0")));
    let want = 1.0 + 0.004 * 150.0 * 0.6 * (65_536.0 - 2_560.0) / 65_536.0;
    assert!(
        (remote / local - want).abs() < 0.01,
        "{local} s local, {remote} s remote ({:.3}x, want {want:.3}x)",
        remote / local
    );
    // A working set that fits its share of the cache streams nothing: once fetched, it
    // runs at full speed on either node (its one re-fetch costs 1.6x, 1.3 ms).
    let local = completion_s(&run_toml(&bound(1_024, "2")));
    let remote = completion_s(&run_toml(&bound(1_024, "0")));
    assert!((remote / local - 1.0).abs() < 0.003, "{local} vs {remote}");
    // Unbound memory is local everywhere.
    let unbound = completion_s(&run_toml(
        &bound(65_536, "0").replace("numa_node = 1\n", ""),
    ));
    let local = completion_s(&run_toml(&bound(65_536, "2")));
    assert!(
        (unbound / local - 1.0).abs() < 0.001,
        "{unbound} vs {local}"
    );
}

#[test]
fn topologies_a_scheduler_cannot_honour_are_refused() {
    let base = compute("cfs", 8, 2, "", "");
    let err = |o: &[&str]| {
        let o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
        vcpulab_core::resolve(&base, &o, None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = err(&["host.topology.threads_per_core=3"]);
    assert!(
        e.contains("host.topology.threads_per_core") && e.contains("divisor"),
        "{e}"
    );
    let e = err(&["host.topology.threads_per_core=16"]);
    assert!(e.contains("1 to 8"), "{e}");
    let e = err(&["host.topology.numa_nodes=2"]);
    assert!(
        e.contains("host.scheduler.llc_pcpus") && e.contains("whole LLCs"),
        "{e}"
    );
    let e = err(&[
        "host.topology.threads_per_core=2",
        "host.scheduler.kind=credit",
    ]);
    assert!(e.contains("credit") && e.contains("cfs"), "{e}");
    let e = err(&["host.topology.sibling_busy_speed=0"]);
    assert!(e.contains("sibling_busy_speed"), "{e}");
    assert!(err(&["host.topology.numa_nodes=2", "host.scheduler.llc_pcpus=4"]).is_empty());
    let e = err(&["vm.0.numa_node=1"]);
    assert!(
        e.contains("vm.0.numa_node") && e.contains("expected 0 to 0"),
        "{e}"
    );
    let e = err(&["host.topology.remote_memory_ratio=0.5"]);
    assert!(
        e.contains("remote_memory_ratio") && e.contains("1 to 10"),
        "{e}"
    );
}

#[test]
fn a_default_topology_is_not_written_into_the_report() {
    let r = run_toml(&compute("cfs", 2, 1, "", ""));
    let json = serde_json::to_string(&r).expect("json");
    assert!(!json.contains("threads_per_core"));
    let r = run_toml(&compute("cfs", 2, 1, "threads_per_core = 2", ""));
    let json = serde_json::to_string(&r).expect("json");
    assert!(
        json.contains("\"threads_per_core\":2"),
        "the report names its topology"
    );
}

/// Three CPU-bound vCPUs with 2 MiB working sets take turns on two pCPUs of a Linux
/// host, one of them moving at every turn. Sharing a last-level cache, a moved vCPU
/// re-fetches only its new core's private caches, from the LLC, and loads little that
/// evicts the others; with a cache per pCPU (`llc_pcpus = 1`) every move starts cold
/// and re-fetches the whole set from memory, evicting the pCPU's other vCPU in turn.
#[test]
fn a_vcpu_moved_within_its_llc_refills_far_less_than_across_llcs() {
    let toml = |llc: u32| {
        format!(
            r#"
seed = 3
[run]
duration = "2s"
[host]
pcpus = 2
[host.scheduler]
kind = "cfs"
llc_pcpus = {llc}
[[vm]]
vcpus = 3
workload = {{ model = "cpu-bomb", footprint_kib = 2048 }}
"#
        )
    };
    let refill_and_moves = |r: &vcpulab_core::Report| {
        let refill: u64 = r.vcpus.iter().map(|v| v.cache_refill_ns).sum();
        let moves: u64 = r.vcpus.iter().map(|v| v.migrations).sum();
        (refill as f64, moves)
    };
    let (shared, shared_moves) = refill_and_moves(&run_toml(&toml(2)));
    let (apart, apart_moves) = refill_and_moves(&run_toml(&toml(1)));
    assert!(
        shared_moves >= 10 && apart_moves >= 10,
        "moves {shared_moves} / {apart_moves}"
    );
    // Apart: ~2,048 KiB at 150 ns each per move (0.3 ms); shared: 288 KiB at 24 ns.
    assert!(
        shared < 0.2 * apart && apart > 10e6,
        "refill: shared LLC {shared:.0} ns, an LLC per pCPU {apart:.0} ns"
    );
}
