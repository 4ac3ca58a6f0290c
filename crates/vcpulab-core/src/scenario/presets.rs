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
        description: "KVM on Linux CFS (pre-6.6 tunables for 8+ CPUs)",
        toml: r#"
[host.scheduler]
kind = "cfs"
"#,
    },
    Preset {
        name: "xen-default",
        description: "Xen credit scheduler, 30 ms slices, BOOST on wake, 1 ms rate limit",
        toml: r#"
[host.scheduler]
kind = "credit"
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
