#![allow(dead_code)]
use vcpulab_core::metrics::report::LockRow;
use vcpulab_core::{resolve, run, Report};

pub fn run_toml(text: &str) -> Report {
    let sc = resolve(text, &[], None).unwrap_or_else(|e| panic!("scenario error: {e}"));
    run(&sc).unwrap()
}

/// Eight threads on two vCPUs (two pCPUs): four producers and four consumers of a
/// bounded queue, each computing 300 us per item, so most wake-ups land on a vCPU busy
/// with a thread about as far along as the wakee (they preempt nothing).
pub const PRODUCERS_CONSUMERS: &str = r#"
preset = "kvm-default"
seed = 2
[run]
duration = "200ms"
[host]
pcpus = 2
[[vm]]
name = "a"
vcpus = 2
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "producer"
threads = 4
ops = [{ loop = { n = "forever", body = [{ compute = "exp(300us)" }, { push = "q" }] } }]
[[vm.workload.group]]
name = "consumer"
threads = 4
ops = [{ loop = { n = "forever", body = [{ pop = "q" }, { compute = "exp(300us)" }, { count = 1 }] } }]
"#;

/// How many wake-ups took wake-up path `path` (the latency rows `wake/{path}`).
pub fn wakes_on(r: &Report, path: &str) -> u64 {
    r.latencies
        .iter()
        .find(|l| l.kind == format!("wake/{path}"))
        .map_or(0, |l| l.count)
}

/// VM `vm`'s row of lock class `name` in the locks table, if it was taken.
pub fn lock_row<'a>(r: &'a Report, vm: &str, name: &str) -> Option<&'a LockRow> {
    r.locks.iter().find(|l| l.vm == vm && l.lock == name)
}

pub fn run_with(text: &str, overrides: &[&str]) -> Report {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let sc = resolve(text, &o, None).unwrap_or_else(|e| panic!("scenario error: {e}"));
    run(&sc).unwrap()
}

pub fn example(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../scenarios/examples/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A scenario of CPU-bound one-vCPU VMs with the given weights on `pcpus`.
pub fn bombs(sched: &str, pcpus: u32, weights: &[u32], extra: &str) -> String {
    let mut s = format!("seed = 3\n[run]\nduration = \"4s\"\n[host]\npcpus = {pcpus}\n[host.scheduler]\nkind = \"{sched}\"\n{extra}\n");
    for (i, w) in weights.iter().enumerate() {
        s += &format!("[[vm]]\nname = \"v{i}\"\nvcpus = 1\nweight = {w}\nworkload = {{ model = \"cpu-bomb\" }}\n");
    }
    s
}
