//! Presets: named combinations of policy-axis choices. A preset is a TOML fragment that
//! the scenario is merged over (the scenario's own keys win), so a published system is
//! a combination of axis choices, never a fork of the code.
//!
//! A preset may name a `base`: its fragment is the base's (resolved the same way) with
//! its own keys merged over it, so a variant lists only what it changes
//! (`apple` is `kvm-default` with APPLE's window policy).

use toml::Table;

#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    /// The preset this one changes, or `None` for a root.
    pub base: Option<&'static str>,
    pub description: &'static str,
    /// Only what this preset changes against its base.
    pub toml: &'static str,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "kvm-default",
        base: None,
        description: "KVM on Linux CFS (pre-6.6 tunables for 8+ CPUs), PLE with directed yield and KVM's grow/shrink window (the platform decides: fixed before Linux 3.18), no halt polling (the Linux 3.x hosts of the studies)",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
window_cycles = 4096
grow = 2
shrink = 0
action = "directed-yield"
"#,
    },
    Preset {
        name: "kvm-modern",
        base: None,
        description: "a modern KVM host: platform kvm-6.6-spr (Sapphire Rapids-class exit costs, APICv with posted interrupts and IPI virtualization, host halt polling, EEVDF) and a Linux 6.6 guest (PV spinlocks, wake_q, PV TLB flush, vcpu_is_preempted); PLE with KVM's window and directed yield",
        // Not based on kvm-default: its explicit CFS would override the platform's EEVDF.
        toml: r#"
[host]
platform = "kvm-6.6-spr"
[host.ple]
policy = "kvm"
action = "directed-yield"
"#,
    },
    Preset {
        name: "xen-modern",
        base: None,
        // Not based on xen-default: its explicit credit would override the platform's credit2.
        description: "a modern Xen host: platform xen-4.19-spr (Sapphire Rapids-class exit costs, posted interrupts, credit2 with its 1 ms rate limit) and a Linux 6.6 guest; a PAUSE exit yields (fixed 4096-cycle pause filter)",
        toml: r#"
[host]
platform = "xen-4.19-spr"
[host.ple]
policy = "fixed"
window_cycles = 4096
action = "yield"
"#,
    },
    Preset {
        name: "kvm-halt-poll",
        base: Some("kvm-default"),
        description: "kvm-default plus KVM's adaptive host halt polling (halt_poll_ns 200 us)",
        toml: r#"
[host.halt_poll]
enabled = true
"#,
    },
    Preset {
        name: "xen-default",
        base: None,
        description: "Xen credit scheduler, 30 ms slices, BOOST on wake, 1 ms rate limit; a PLE exit yields (fixed 4096-cycle window)",
        toml: r#"
[host.scheduler]
kind = "credit"
[host.ple]
policy = "fixed"
window_cycles = 4096
action = "yield"
"#,
    },
    Preset {
        name: "apple",
        base: Some("kvm-default"),
        description: "APPLE (adaptive PLE window): kvm-default with one PLE window per VM, searched every epoch of 1000 PLE exits among T_d and T_d +/- 1024 cycles within 4096-32768 (T_0 8192) for the least inefficiency",
        toml: r#"
[host.ple]
policy = "apple"
epoch_exits = 1000
[host.ple.apple]
initial_cycles = 8192
lower_cycles = 4096
upper_cycles = 32768
step_cycles = 1024
"#,
    },
    Preset {
        name: "gleaner",
        base: Some("kvm-default"),
        description: "kvm-default with Gleaner in every guest: a yielding thread per vCPU (retention with the halt/wake round-trip timeout) and consolidation of the workload's cpuset",
        toml: r#"
[guest.gleaner]
mode = "gleaner"
"#,
    },
    Preset {
        name: "gleaner-retention",
        base: Some("kvm-default"),
        description: "kvm-default with Gleaner's resource retention only (yielding threads with the halt/wake round-trip timeout, no consolidation)",
        toml: r#"
[guest.gleaner]
mode = "retention-timeout"
"#,
    },
    Preset {
        name: "idle-daemon",
        base: Some("kvm-default"),
        description: "kvm-default with a never-sleeping yielding thread per vCPU (pure retention, the idle-daemon workaround Gleaner compares with)",
        toml: r#"
[guest.gleaner]
mode = "retention"
"#,
    },
    Preset {
        name: "guest-haltpoll",
        base: Some("kvm-default"),
        description: "kvm-default with the guest cpuidle-haltpoll driver (poll up to 200 us before HLT; host polling off), backported to guest kernels older than Linux 5.4",
        toml: r#"
[guest]
idle = "haltpoll"
haltpoll_available = true
"#,
    },
    Preset {
        name: "native",
        base: None,
        description: "the focus VM's threads on bare metal: one CPU per thread slot, no virtualization costs",
        toml: r#"
[run]
mode = "native"
"#,
    },
    Preset {
        name: "dedicated",
        base: None,
        description: "the focus VM alone, each vCPU pinned to its own pCPU",
        toml: r#"
[run]
mode = "dedicated"
"#,
    },
    Preset {
        name: "cvs",
        base: Some("xen-default"),
        description: "CVS on Xen credit: at a PLE exit, co-schedule the VM when VOR < 3, yield-to-head when VOR < 5, else yield-to-tail",
        toml: r#"
[host.ple]
action = "cvs"
cvs_coschedule_below = 3.0
cvs_yield_head_below = 5.0
"#,
    },
    Preset {
        name: "cvs-no-yth",
        base: Some("cvs"),
        description: "CVS without yield-to-head: co-schedule when VOR < 4, else yield-to-tail",
        toml: r#"
[host.ple]
cvs_coschedule_below = 4.0
cvs_yield_head_below = 4.0
"#,
    },
    Preset {
        name: "gang",
        base: Some("xen-default"),
        description: "strict co-scheduling: a VM's runnable vCPUs start and stop together (30 ms gang slices); a PLE exit yields",
        toml: r#"
[host.scheduler]
kind = "gang"
"#,
    },
    Preset {
        name: "relaxed-co",
        base: Some("xen-default"),
        description: "Xen credit with VMware-ESX-style relaxed co-scheduling (co-stop a vCPU leading its slowest sibling by 3 ms)",
        toml: r#"
[host.scheduler]
kind = "relaxed_co"
skew_threshold_ms = 3.0
"#,
    },
    Preset {
        name: "dcs",
        base: Some("kvm-default"),
        description: "demand-based coordinated scheduling (Kim et al., ASPLOS 2013) on kvm-default: urgent-vCPU-first with TLB-Co and Resched-DP (utslice 500 us, urgent allowance 6 ms) and load-conscious balance placement",
        toml: r#"
[host.scheduler]
placement = "lc-balance"
[host.dcs]
tlb_co = true
resched_dp = true
utslice_us = 500
urgent_allowance_ms = 6
"#,
    },
];

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

/// The inheritance chain of `name`, root first and `name` last (e.g. `kvm-default`,
/// `apple`). An unknown preset or base, or a base that leads back to itself, is an error.
pub fn chain(name: &str) -> Result<Vec<&'static Preset>, String> {
    chain_in(PRESETS, name)
}

/// The preset's full fragment: its bases' fragments, root first, each merged over by the
/// next.
pub fn resolve(name: &str) -> Result<Table, String> {
    resolve_in(PRESETS, name)
}

fn chain_in(presets: &'static [Preset], name: &str) -> Result<Vec<&'static Preset>, String> {
    let allowed = || {
        presets
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out: Vec<&'static Preset> = Vec::new();
    let mut next = Some(name);
    while let Some(n) = next {
        let p = presets
            .iter()
            .find(|p| p.name == n)
            .ok_or_else(|| match out.last() {
                None => format!("unknown preset {n:?}; allowed: {}", allowed()),
                Some(child) => format!(
                    "preset {} names an unknown base {n:?}; allowed: {}",
                    child.name,
                    allowed()
                ),
            })?;
        if out.iter().any(|q| q.name == p.name) {
            let mut names: Vec<&str> = out.iter().map(|q| q.name).collect();
            names.push(p.name);
            return Err(format!("preset bases form a cycle: {}", names.join(" -> ")));
        }
        out.push(p);
        next = p.base;
    }
    out.reverse();
    Ok(out)
}

fn resolve_in(presets: &'static [Preset], name: &str) -> Result<Table, String> {
    let mut merged = Table::new();
    for p in chain_in(presets, name)? {
        let own: Table = p
            .toml
            .parse()
            .map_err(|e: toml::de::Error| format!("preset {} is broken: {e}", p.name))?;
        super::load::deep_merge(&mut merged, own);
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_resolves_to_a_valid_scenario() {
        let vm = "\n[[vm]]\nname = \"a\"\nvcpus = 2\nworkload = { model = \"cpu-bomb\" }\n";
        for p in PRESETS {
            let text = format!("preset = {:?}\nhost = {{ pcpus = 2 }}{vm}", p.name);
            let sc = crate::scenario::load::resolve(&text, &[], None);
            assert!(sc.is_ok(), "{}: {:?}", p.name, sc.err());
        }
    }

    #[test]
    fn a_variant_lists_only_its_changes_and_keeps_its_bases_keys() {
        let apple = resolve("apple").unwrap();
        let ple = apple["host"]["ple"].as_table().unwrap();
        assert_eq!(ple["policy"].as_str(), Some("apple"));
        assert_eq!(ple["action"].as_str(), Some("directed-yield"));
        assert_eq!(ple["window_cycles"].as_integer(), Some(4096));
        assert_eq!(apple["host"]["scheduler"]["kind"].as_str(), Some("cfs"));
        let names: Vec<&str> = chain("cvs-no-yth")
            .unwrap()
            .iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["xen-default", "cvs", "cvs-no-yth"]);
        let no_yth = resolve("cvs-no-yth").unwrap();
        assert_eq!(no_yth["host"]["ple"]["action"].as_str(), Some("cvs"));
        assert_eq!(
            no_yth["host"]["ple"]["cvs_yield_head_below"].as_float(),
            Some(4.0)
        );
    }

    #[test]
    fn every_base_is_a_preset_and_no_chain_loops() {
        for p in PRESETS {
            let c = chain(p.name).unwrap();
            assert_eq!(c.last().map(|q| q.name), Some(p.name));
            assert!(
                c[0].base.is_none(),
                "{}: chain does not start at a root",
                p.name
            );
        }
    }

    static BROKEN: &[Preset] = &[
        Preset {
            name: "a",
            base: Some("b"),
            description: "",
            toml: "",
        },
        Preset {
            name: "b",
            base: Some("a"),
            description: "",
            toml: "",
        },
        Preset {
            name: "c",
            base: Some("nope"),
            description: "",
            toml: "",
        },
        Preset {
            name: "d",
            base: Some("d"),
            description: "",
            toml: "",
        },
    ];

    #[test]
    fn a_cycle_or_an_unknown_base_is_an_error() {
        let e = chain_in(BROKEN, "a").unwrap_err();
        assert!(e.contains("cycle: a -> b -> a"), "{e}");
        let e = chain_in(BROKEN, "d").unwrap_err();
        assert!(e.contains("cycle: d -> d"), "{e}");
        let e = resolve_in(BROKEN, "c").unwrap_err();
        assert!(e.contains("preset c names an unknown base \"nope\""), "{e}");
        let e = chain("no-such").unwrap_err();
        assert!(
            e.contains("unknown preset \"no-such\"; allowed: kvm-default"),
            "{e}"
        );
    }
}
