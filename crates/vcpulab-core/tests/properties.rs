//! Invariants over random small scenarios: time adds up, a vCPU never runs on two
//! pCPUs at once, pCPU slices never overlap, every runnable vCPU eventually runs.
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use vcpulab_core::metrics::trace::TraceSink;
use vcpulab_core::sim::{Nanos, PcpuId, VmId};
use vcpulab_core::{resolve, run_traced};

#[derive(Default)]
struct Slices {
    pcpu: Vec<(u32, String, u64, u64)>,
}

struct Rec(Arc<Mutex<Slices>>);

impl TraceSink for Rec {
    fn pcpu_slice(&mut self, p: PcpuId, name: &str, start: Nanos, end: Nanos) {
        self.0
            .lock()
            .unwrap()
            .pcpu
            .push((p.0, name.to_string(), start.0, end.0));
    }
    fn vcpu_slice(&mut self, _: VmId, _: u32, _: &str, _: Nanos, _: Nanos) {}
    fn vcpu_instant(&mut self, _: VmId, _: u32, _: &str, _: Nanos) {}
    fn finish(&mut self) {}
}

fn scenario() -> impl Strategy<Value = String> {
    let vm = (
        1u32..4,
        prop_oneof![Just(128u32), Just(256), Just(1024)],
        0usize..4,
        proptest::option::of(0.2f64..1.0),
    );
    (1u32..5, prop_oneof![Just("cfs"), Just("eevdf"), Just("credit"), Just("credit2")], proptest::collection::vec(vm, 1..4), any::<u16>(), prop_oneof![Just(1.0f64), Just(5.0), Just(30.0)], any::<bool>())
        .prop_map(|(pcpus, sched, vms, seed, slice, smt)| {
            // SMT (two threads per core) where the scheduler models it.
            let smt = smt && pcpus % 2 == 0 && matches!(sched, "cfs" | "eevdf");
            let topology = if smt { "[host.topology]\nthreads_per_core = 2\n" } else { "" };
            let mut s = format!("seed = {seed}\n[run]\nduration = \"1200ms\"\n[host]\npcpus = {pcpus}\n{topology}[host.scheduler]\nkind = \"{sched}\"\n");
            if sched == "credit" {
                s += &format!("slice_ms = {slice}\n");
            }
            for (i, (vcpus, w, kind, cap)) in vms.into_iter().enumerate() {
                let wl = match kind {
                    0 => "{ model = \"cpu-bomb\" }".to_string(),
                    1 => "{ model = \"compute-sleep\", params = { compute = \"exp(200us)\", sleep = \"exp(300us)\" } }".into(),
                    2 => "{ model = \"freqsleep\" }".into(),
                    _ => format!("{{ model = \"matmul\", threads = {}, params = {{ work = \"{}ms\" }} }}", vcpus * 2, 30 * vcpus * 2),
                };
                s += &format!("[[vm]]\nname = \"vm{i}\"\nvcpus = {vcpus}\nweight = {w}\nworkload = {wl}\n");
                if let Some(c) = cap {
                    s += &format!("cap = {:.1}\n", c * 100.0 * vcpus as f64);
                }
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]
    #[test]
    fn invariants_hold(text in scenario()) {
        let sc = resolve(&text, &[], None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let rec = Arc::new(Mutex::new(Slices::default()));
        let r = run_traced(&sc, Some(Box::new(Rec(rec.clone())))).unwrap();
        let end = r.end_ns;
        // Every vCPU's time adds up to the run length.
        for v in &r.vcpus {
            prop_assert_eq!(v.time.total(), end, "vcpu {}/{}", v.vm, v.vcpu);
        }
        // Time on pCPUs seen by vCPUs equals pCPU busy time, and never exceeds it.
        let vcpu_cpu: u64 = r.vcpus.iter().map(|v| v.time.cpu_ns).sum();
        let pcpu_busy: u64 = r.pcpus.iter().map(|p| p.guest_ns + p.overhead_ns).sum();
        prop_assert_eq!(vcpu_cpu, pcpu_busy);
        for p in &r.pcpus {
            prop_assert_eq!(p.guest_ns + p.overhead_ns + p.idle_ns + p.poll_ns, end);
        }
        // Every running or runnable vCPU counts in exactly one pCPU's run queue: the
        // time-weighted queue lengths add up to the vCPUs' running + runnable time.
        // A vCPU the host halt-polls for stays on its runqueue (kvm_vcpu_halt polls in
        // the vCPU thread): its pCPU's poll time counts too.
        let polled: u64 = r.pcpus.iter().map(|p| p.poll_ns).sum();
        let wanting: u64 = r.vcpus.iter().map(|v| v.time.cpu_ns + v.time.runnable_ns).sum::<u64>() + polled;
        let queued: f64 = r.pcpus.iter().map(|p| p.runq_mean * end as f64).sum();
        prop_assert!((queued - wanting as f64).abs() <= 1e-6 * wanting.max(1) as f64 + 1.0,
            "run-queue time {} vs running+runnable {}", queued, wanting);
        let total: f64 = r.runq_length.iter().map(|l| l.fraction).sum();
        prop_assert!((total - 1.0).abs() < 1e-9, "fractions sum to {}", total);
        // pCPU slices never overlap; a vCPU never runs on two pCPUs at once.
        let s = rec.lock().unwrap();
        let mut by_pcpu: std::collections::BTreeMap<u32, Vec<(u64, u64)>> = Default::default();
        let mut by_vcpu: std::collections::BTreeMap<String, Vec<(u64, u64)>> = Default::default();
        for (p, name, a, b) in &s.pcpu {
            prop_assert!(a < b);
            by_pcpu.entry(*p).or_default().push((*a, *b));
            if name != "vm-entry/switch" {
                by_vcpu.entry(name.clone()).or_default().push((*a, *b));
            }
        }
        for (_, mut v) in by_pcpu.into_iter().chain(by_vcpu.into_values().map(|v| (0, v))) {
            v.sort();
            for w in v.windows(2) {
                prop_assert!(w[0].1 <= w[1].0, "overlap {:?} {:?}", w[0], w[1]);
            }
        }
        // Cache refill is part of a vCPU's running time, never more.
        for v in &r.vcpus {
            prop_assert!(v.cache_refill_ns <= v.time.cpu_ns, "{}/{}: refill {} > cpu {}", v.vm, v.vcpu, v.cache_refill_ns, v.time.cpu_ns);
        }
        // Every vCPU with work to do ran — over the whole 1.2 s. (A run that stops when
        // the finite workloads finish can end after a few ticks, before a light VM's
        // group share has reached each of its vCPUs.)
        for v in r.vcpus.iter().filter(|_| end >= 1_200_000_000) {
            let vm = r.vms.iter().find(|m| m.vm == v.vm).unwrap();
            if vm.model == "cpu-bomb" {
                prop_assert!(v.time.cpu_ns > 0, "{}/{} never ran", v.vm, v.vcpu);
            }
        }
    }
}

/// Consolidated servers and lock-heavy work on few pCPUs, with large working sets and
/// slow refills: the cases where re-fetching could outgrow the run.
fn consolidated() -> impl Strategy<Value = String> {
    (
        1u32..5,
        prop_oneof![Just("mysql"), Just("dedup"), Just("cpu-bomb")],
        2u32..9,
        prop_oneof![Just(64u64), Just(2_048), Just(65_536)],
        prop_oneof![Just(30.0f64), Just(150.0), Just(2_000.0)],
        prop_oneof![Just("cfs"), Just("credit")],
        any::<u16>(),
    )
        .prop_map(|(pcpus, model, vcpus, fp, refill, sched, seed)| {
            let mut s = format!(
                "seed = {seed}\n[run]\nduration = \"150ms\"\n[host]\npcpus = {pcpus}\n\
                 [host.scheduler]\nkind = \"{sched}\"\n[host.cache]\nrefill_ns_per_kib = {refill}\n"
            );
            for i in 0..2 {
                s += &format!(
                    "[[vm]]\nname = \"vm{i}\"\nvcpus = {vcpus}\n\
                     workload = {{ model = \"{model}\", threads = {}, footprint_kib = {fp} }}\n",
                    vcpus * 2
                );
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    #[test]
    fn refill_never_exceeds_cpu_time(text in consolidated()) {
        let sc = resolve(&text, &[], None).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let r = run_traced(&sc, None).unwrap();
        let mut refill = 0;
        for v in &r.vcpus {
            prop_assert!(
                v.cache_refill_ns <= v.time.cpu_ns,
                "{}/{}: refill {} > cpu {}\n{text}", v.vm, v.vcpu, v.cache_refill_ns, v.time.cpu_ns
            );
            refill += v.cache_refill_ns;
        }
        prop_assert!(refill > 0, "nothing was ever re-fetched\n{text}");
    }
}
