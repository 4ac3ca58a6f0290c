//! Prints a hash of each scenario's report (JSON): a check that an optimisation changes
//! no result. Usage: reporthash <scenario.toml> [key=value ...] ...; scenarios separated
//! by `--`.
use std::hash::{Hash, Hasher};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    for group in args.split(|a| a == "--") {
        let Some((path, ov)) = group.split_first() else {
            continue;
        };
        let text = std::fs::read_to_string(path).expect("scenario file");
        let sc = vcpulab_core::resolve(&text, ov, None).expect("valid scenario");
        let r = vcpulab_core::run(&sc).expect("run");
        let json = serde_json::to_string(&r).expect("json");
        let mut h = std::collections::hash_map::DefaultHasher::new();
        json.hash(&mut h);
        println!("{:016x} {} {}", h.finish(), r.events, path);
    }
}
