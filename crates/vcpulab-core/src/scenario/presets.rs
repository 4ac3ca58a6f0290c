//! Presets: named combinations of policy-axis choices. A preset is a TOML fragment that
//! the scenario is merged over (the scenario's own keys win), so a published system is
//! a combination of axis choices, never a fork of the code.

pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    pub toml: &'static str,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "kvm-default",
        description: "KVM on Linux CFS (pre-6.6 tunables for 8+ CPUs), PLE with KVM's grow/shrink window and directed yield, no halt polling (the Linux 3.x hosts of the studies)",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
window_cycles = 4096
grow = 2
shrink = 0
action = "directed-yield"
"#,
    },
    Preset {
        name: "kvm-halt-poll",
        description: "kvm-default plus KVM's adaptive host halt polling (halt_poll_ns 200 us)",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
action = "directed-yield"
[host.halt_poll]
enabled = true
"#,
    },
    Preset {
        name: "xen-default",
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
        name: "gleaner",
        description: "kvm-default with Gleaner in every guest: a yielding thread per vCPU (retention with the halt/wake round-trip timeout) and consolidation of the workload's cpuset",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
action = "directed-yield"
[guest.gleaner]
mode = "gleaner"
"#,
    },
    Preset {
        name: "gleaner-retention",
        description: "kvm-default with Gleaner's resource retention only (yielding threads with the halt/wake round-trip timeout, no consolidation)",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
action = "directed-yield"
[guest.gleaner]
mode = "retention-timeout"
"#,
    },
    Preset {
        name: "idle-daemon",
        description: "kvm-default with a never-sleeping yielding thread per vCPU (pure retention, the idle-daemon workaround Gleaner compares with)",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
action = "directed-yield"
[guest.gleaner]
mode = "retention"
"#,
    },
    Preset {
        name: "guest-haltpoll",
        description: "kvm-default with the guest cpuidle-haltpoll driver (poll up to 200 us before HLT; host polling off)",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
action = "directed-yield"
[guest]
idle = "haltpoll"
"#,
    },
    Preset {
        name: "native",
        description: "the focus VM's threads on bare metal: one CPU per thread slot, no virtualization costs",
        toml: r#"
[run]
mode = "native"
"#,
    },
    Preset {
        name: "dedicated",
        description: "the focus VM alone, each vCPU pinned to its own pCPU",
        toml: r#"
[run]
mode = "dedicated"
"#,
    },
];

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_preset_parses() {
        for p in super::PRESETS {
            assert!(p.toml.parse::<toml::Table>().is_ok(), "{}", p.name);
        }
    }
}
