//! Computes `VCPULAB_CORE_BUILD_ID`: a hash of the simulation core's sources (every file
//! under `crates/vcpulab-core/src`, and its Cargo.toml), so that the results store can
//! tell results of different cores apart even when the version number did not change.
//! Deterministic: only relative paths and contents go in — no timestamps, no absolute
//! paths — and the hash (FNV-1a, 64 bit) is written out here so it cannot change with
//! the Rust toolchain.

use std::fs;
use std::path::{Path, PathBuf};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let core = manifest.join("..").join("vcpulab-core");
    let src = core.join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    println!(
        "cargo:rerun-if-changed={}",
        core.join("Cargo.toml").display()
    );

    let mut files = Vec::new();
    walk(&src, &mut files);
    if files.is_empty() {
        // E.g. a source distribution without the core beside the binding: the id then
        // says nothing about the sources, and the store cannot tell such builds apart.
        println!(
            "cargo:warning=no core sources under {}: the build id does not identify the core",
            src.display()
        );
    }
    files.push(core.join("Cargo.toml"));
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(&core)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            Some((rel, p))
        })
        .collect();
    named.sort();

    let mut h = FNV_OFFSET;
    for (rel, path) in &named {
        let Ok(bytes) = fs::read(path) else { continue };
        h = fnv(h, rel.as_bytes());
        h = fnv(h, &[0]);
        h = fnv(h, &(bytes.len() as u64).to_le_bytes());
        h = fnv(h, &bytes);
    }
    println!("cargo:rustc-env=VCPULAB_CORE_BUILD_ID={h:016x}");
    println!("cargo:rustc-env=VCPULAB_CORE_FILES={}", named.len());
}
