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
        name: "kvm-modern",
        description: "a modern KVM host: platform kvm-6.6-spr (Sapphire Rapids-class exit costs, APICv with posted interrupts and IPI virtualization, host halt polling, EEVDF) and a Linux 6.6 guest (PV spinlocks, wake_q, PV TLB flush, vcpu_is_preempted); PLE with KVM's window and directed yield",
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
        name: "apple",
        description: "APPLE (adaptive PLE window): kvm-default with one PLE window per VM, searched every epoch of 1000 PLE exits among T_d and T_d +/- 1024 cycles within 4096-32768 (T_0 8192) for the least inefficiency",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "apple"
action = "directed-yield"
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
        description: "kvm-default with the guest cpuidle-haltpoll driver (poll up to 200 us before HLT; host polling off), backported to guest kernels older than Linux 5.4",
        toml: r#"
[host.scheduler]
kind = "cfs"
[host.ple]
policy = "kvm"
action = "directed-yield"
[guest]
idle = "haltpoll"
haltpoll_available = true
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
    Preset {
        name: "cvs",
        description: "CVS on Xen credit: at a PLE exit, co-schedule the VM when VOR < 3, yield-to-head when VOR < 5, else yield-to-tail",
        toml: r#"
[host.scheduler]
kind = "credit"
[host.ple]
policy = "fixed"
window_cycles = 4096
action = "cvs"
cvs_coschedule_below = 3.0
cvs_yield_head_below = 5.0
"#,
    },
    Preset {
        name: "cvs-no-yth",
        description: "CVS without yield-to-head: co-schedule when VOR < 4, else yield-to-tail",
        toml: r#"
[host.scheduler]
kind = "credit"
[host.ple]
policy = "fixed"
window_cycles = 4096
action = "cvs"
cvs_coschedule_below = 4.0
cvs_yield_head_below = 4.0
"#,
    },
    Preset {
        name: "gang",
        description: "strict co-scheduling: a VM's runnable vCPUs start and stop together (30 ms gang slices); a PLE exit yields",
        toml: r#"
[host.scheduler]
kind = "gang"
[host.ple]
policy = "fixed"
window_cycles = 4096
action = "yield"
"#,
    },
    Preset {
        name: "relaxed-co",
        description: "Xen credit with VMware-ESX-style relaxed co-scheduling (co-stop a vCPU leading its slowest sibling by 3 ms)",
        toml: r#"
[host.scheduler]
kind = "relaxed_co"
skew_threshold_ms = 3.0
[host.ple]
policy = "fixed"
window_cycles = 4096
action = "yield"
"#,
    },
    Preset {
        name: "dcs",
        description: "demand-based coordinated scheduling (Kim et al., ASPLOS 2013) on kvm-default: urgent-vCPU-first with TLB-Co and Resched-DP (utslice 500 us, urgent allowance 6 ms) and load-conscious balance placement",
        toml: r#"
[host.scheduler]
kind = "cfs"
placement = "lc-balance"
[host.ple]
policy = "kvm"
window_cycles = 4096
grow = 2
shrink = 0
action = "directed-yield"
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
