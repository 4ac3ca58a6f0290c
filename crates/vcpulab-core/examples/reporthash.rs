//! Prints a hash of each scenario's report (JSON): a check that an optimisation changes
//! no result. Usage: reporthash <scenario.toml> [key=value ...] ...; scenarios separated
//! by `--`. `REPORTHASH_IGNORE=events,stale_events` leaves those top-level report keys
//! out of the hash (for a change that removes events but no result). The scenario's
//! hash (`scenario.hash`) is always left out: a new scenario key with a default that
//! changes nothing changes it, and what is checked here is the results.
use std::hash::{Hash, Hasher};

fn main() {
    let ignore: Vec<String> = std::env::var("REPORTHASH_IGNORE")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    for group in args.split(|a| a == "--") {
        let Some((path, ov)) = group.split_first() else {
            continue;
        };
        let text = std::fs::read_to_string(path).expect("scenario file");
        let sc = vcpulab_core::resolve(&text, ov, None).expect("valid scenario");
        let r = vcpulab_core::run(&sc).expect("run");
        let mut v = serde_json::to_value(&r).expect("json");
        if let Some(o) = v.as_object_mut() {
            for k in &ignore {
                o.remove(k);
            }
            if let Some(s) = o.get_mut("scenario").and_then(|s| s.as_object_mut()) {
                s.remove("hash");
            }
        }
        let json = v.to_string();
        if let Ok(dir) = std::env::var("REPORTHASH_DUMP") {
            let name = format!("{dir}/{}.json", path.replace('/', "_"));
            std::fs::write(&name, serde_json::to_string_pretty(&v).expect("json"))
                .expect("dump written");
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        json.hash(&mut h);
        println!("{:016x} {} {}", h.finish(), r.events, path);
    }
}
