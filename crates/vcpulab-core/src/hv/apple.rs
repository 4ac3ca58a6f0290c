//! APPLE: an adaptive, per-VM pause-loop-exit window (the APPLE paper's per-VM threshold search).
//!
//! Each VM has one spinning threshold shared by its vCPUs. Time is cut into epochs of a
//! fixed number of PLE exits of the VM (hv/ple_epochs.rs measures them); at the end of
//! an epoch the VM's *inefficiency* is
//!
//!   (window × PLE exits + time handling those exits, exit to re-entry)
//!     / pCPU time of the VM's vCPUs during the epoch.
//!
//! The search runs three epochs per round: one at the current threshold T_d, one at
//! min(T_u, T_d + δ), one at max(T_l, T_d − δ); the threshold of the least inefficient
//! of the three becomes T_d. The decision logic is `AppleSearch`, a plain struct with no
//! simulator state, so its decisions can be pinned on hand-made epoch sequences.

use crate::hv::ple::PleWindow;
use crate::scenario::{AppleConfig, PleConfig, ScenarioError};
use crate::sim::{Nanos, VcpuId, VmId};

/// Which of the three epochs of a search round is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The current threshold T_d.
    Current,
    /// min(T_u, T_d + δ).
    Up,
    /// max(T_l, T_d − δ).
    Down,
}

/// The three-probe threshold search of one VM.
#[derive(Clone, Debug)]
pub struct AppleSearch {
    lower: u64,
    upper: u64,
    step: u64,
    /// T_d, in cycles.
    current: u64,
    probe: Probe,
    /// Inefficiency measured at Current and Up in this round.
    measured: [f64; 2],
}

impl AppleSearch {
    pub fn new(c: &AppleConfig) -> AppleSearch {
        AppleSearch {
            lower: c.lower_cycles,
            upper: c.upper_cycles,
            step: c.step_cycles,
            current: c.initial_cycles.clamp(c.lower_cycles, c.upper_cycles),
            probe: Probe::Current,
            measured: [f64::INFINITY; 2],
        }
    }

    /// T_d.
    pub fn current(&self) -> u64 {
        self.current
    }

    pub fn probe(&self) -> Probe {
        self.probe
    }

    /// The window of the epoch that is running.
    pub fn window(&self) -> u64 {
        match self.probe {
            Probe::Current => self.current,
            Probe::Up => self.current.saturating_add(self.step).min(self.upper),
            Probe::Down => self.current.saturating_sub(self.step).max(self.lower),
        }
    }

    /// The running epoch ended with `inefficiency`; returns the next epoch's window.
    /// An unmeasurable epoch (NaN) counts as the worst; on a tie the earlier probe of
    /// the round wins (T_d before T_d + δ before T_d − δ), so a flat curve keeps T_d.
    pub fn end_epoch(&mut self, inefficiency: f64) -> u64 {
        let ineff = if inefficiency.is_nan() {
            f64::INFINITY
        } else {
            inefficiency
        };
        match self.probe {
            Probe::Current => {
                self.measured[0] = ineff;
                self.probe = Probe::Up;
            }
            Probe::Up => {
                self.measured[1] = ineff;
                self.probe = Probe::Down;
            }
            Probe::Down => {
                let candidates = [
                    (self.measured[0], self.current),
                    (
                        self.measured[1],
                        self.current.saturating_add(self.step).min(self.upper),
                    ),
                    (ineff, self.window()),
                ];
                let mut best = candidates[0];
                for c in &candidates[1..] {
                    if c.0 < best.0 {
                        best = *c;
                    }
                }
                self.current = best.1;
                self.probe = Probe::Current;
                self.measured = [f64::INFINITY; 2];
            }
        }
        self.window()
    }
}

/// APPLE as a PLE window policy: every vCPU spins up to its VM's window.
pub struct Apple {
    vcpu_vm: Vec<VmId>,
    pub searches: Vec<AppleSearch>,
}

impl Apple {
    pub fn new(c: &PleConfig, vcpu_vm: &[VmId]) -> Apple {
        let nvms = vcpu_vm.iter().map(|v| v.idx() + 1).max().unwrap_or(0);
        Apple {
            vcpu_vm: vcpu_vm.to_vec(),
            searches: vec![AppleSearch::new(&c.apple); nvms],
        }
    }
}

impl PleWindow for Apple {
    fn window(&self, v: VcpuId) -> Option<u64> {
        Some(self.searches[self.vcpu_vm[v.idx()].idx()].window())
    }
    fn on_exit(&mut self, _: VcpuId, _: Nanos) {}
    fn on_sched_in(&mut self, _: VcpuId) {}
    fn on_epoch(&mut self, vm: VmId, inefficiency: f64) {
        if let Some(s) = self.searches.get_mut(vm.idx()) {
            s.end_epoch(inefficiency);
        }
    }
}

/// Checks the APPLE and epoch parameters of `host.ple` (whatever the policy: the epoch
/// length also cuts the report's epoch series).
pub fn validate(c: &PleConfig) -> Result<(), ScenarioError> {
    const MAX_CYCLES: u64 = 1 << 40;
    if c.epoch_exits == 0 || c.epoch_exits > 1_000_000_000 {
        return Err(ScenarioError::new(
            "host.ple.epoch_exits",
            format!(
                "{} is not allowed; expected 1 to 1000000000 PLE exits per epoch",
                c.epoch_exits
            ),
        ));
    }
    let a = &c.apple;
    for (key, v) in [
        ("host.ple.apple.lower_cycles", a.lower_cycles),
        ("host.ple.apple.upper_cycles", a.upper_cycles),
        ("host.ple.apple.initial_cycles", a.initial_cycles),
        ("host.ple.apple.step_cycles", a.step_cycles),
    ] {
        if v == 0 || v > MAX_CYCLES {
            return Err(ScenarioError::new(
                key,
                format!("{v} is not allowed; expected 1 to {MAX_CYCLES} cycles"),
            ));
        }
    }
    if a.lower_cycles > a.upper_cycles {
        return Err(ScenarioError::new(
            "host.ple.apple.lower_cycles",
            format!(
                "{} is above upper_cycles {}; expected lower_cycles <= upper_cycles",
                a.lower_cycles, a.upper_cycles
            ),
        ));
    }
    if a.initial_cycles < a.lower_cycles || a.initial_cycles > a.upper_cycles {
        return Err(ScenarioError::new(
            "host.ple.apple.initial_cycles",
            format!(
                "{} is not allowed; expected {} to {} (lower_cycles to upper_cycles)",
                a.initial_cycles, a.lower_cycles, a.upper_cycles
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search() -> AppleSearch {
        AppleSearch::new(&AppleConfig::default())
    }

    /// Runs one round (T_d, up, down) with the given inefficiencies; returns the three
    /// windows the epochs ran at and the new T_d.
    fn round(s: &mut AppleSearch, ineff: [f64; 3]) -> ([u64; 3], u64) {
        let mut wins = [0; 3];
        for (i, x) in ineff.into_iter().enumerate() {
            wins[i] = s.window();
            s.end_epoch(x);
        }
        assert_eq!(s.probe(), Probe::Current);
        (wins, s.current())
    }

    #[test]
    fn published_defaults() {
        let s = search();
        assert_eq!(s.current(), 8192);
        assert_eq!(s.window(), 8192);
        assert_eq!((s.lower, s.upper, s.step), (4096, 32768, 1024));
    }

    #[test]
    fn a_round_probes_current_then_up_then_down() {
        let mut s = search();
        let (wins, next) = round(&mut s, [0.30, 0.20, 0.25]);
        assert_eq!(wins, [8192, 9216, 7168]);
        assert_eq!(next, 9216, "the up probe was the least inefficient");
        let (wins, next) = round(&mut s, [0.20, 0.22, 0.10]);
        assert_eq!(wins, [9216, 10240, 8192]);
        assert_eq!(next, 8192, "the down probe was the least inefficient");
        let (_, next) = round(&mut s, [0.05, 0.22, 0.10]);
        assert_eq!(next, 8192, "the current threshold stays when it is best");
    }

    #[test]
    fn ties_keep_the_current_threshold_then_prefer_up() {
        let mut s = search();
        assert_eq!(round(&mut s, [0.1, 0.1, 0.1]).1, 8192);
        assert_eq!(round(&mut s, [0.2, 0.1, 0.1]).1, 9216);
    }

    #[test]
    fn unmeasurable_epochs_count_as_worst() {
        let mut s = search();
        assert_eq!(round(&mut s, [f64::NAN, 0.5, f64::NAN]).1, 9216);
        assert_eq!(round(&mut s, [f64::NAN, f64::NAN, f64::NAN]).1, 9216);
    }

    #[test]
    fn descends_one_step_per_round_and_stops_at_the_lower_bound() {
        let mut s = search();
        let mut seen = Vec::new();
        for _ in 0..6 {
            // Always cheaper below: T_d walks down to T_l and stays.
            let (wins, next) = round(&mut s, [0.5, 0.9, 0.1]);
            assert!(wins.iter().all(|&w| (4096..=32768).contains(&w)));
            seen.push(next);
        }
        assert_eq!(seen, [7168, 6144, 5120, 4096, 4096, 4096]);
        // At T_l the down probe runs at T_l itself.
        assert_eq!(round(&mut s, [0.5, 0.9, 0.1]).0, [4096, 5120, 4096]);
    }

    #[test]
    fn climbs_to_the_upper_bound_and_clamps_the_probe() {
        let mut s = AppleSearch::new(&AppleConfig {
            initial_cycles: 31744,
            ..AppleConfig::default()
        });
        let (wins, next) = round(&mut s, [0.5, 0.1, 0.9]);
        assert_eq!(wins, [31744, 32768, 30720]);
        assert_eq!(next, 32768);
        let (wins, next) = round(&mut s, [0.5, 0.1, 0.9]);
        assert_eq!(
            wins,
            [32768, 32768, 31744],
            "the up probe is clamped at T_u"
        );
        assert_eq!(next, 32768);
    }

    #[test]
    fn end_epoch_returns_the_next_window() {
        let mut s = search();
        assert_eq!(s.end_epoch(1.0), 9216);
        assert_eq!(s.end_epoch(2.0), 7168);
        assert_eq!(
            s.end_epoch(3.0),
            8192,
            "T_d was best: round restarts at T_d"
        );
    }

    #[test]
    fn windows_are_per_vm() {
        let c = PleConfig {
            policy: crate::scenario::PlePolicy::Apple,
            ..PleConfig::default()
        };
        let vms = [VmId(0), VmId(0), VmId(1)];
        let mut a = Apple::new(&c, &vms);
        assert_eq!(a.window(VcpuId(0)), Some(8192));
        a.on_epoch(VmId(1), 0.3);
        assert_eq!(a.window(VcpuId(2)), Some(9216), "VM 1 probes up");
        assert_eq!(a.window(VcpuId(0)), Some(8192), "VM 0 untouched");
        assert_eq!(a.window(VcpuId(1)), Some(8192), "one window per VM");
    }

    #[test]
    fn validation_names_the_key() {
        let mut c = PleConfig::default();
        assert!(validate(&c).is_ok());
        c.apple.initial_cycles = 2048;
        let e = validate(&c).unwrap_err();
        assert!(
            e.to_string().contains("host.ple.apple.initial_cycles"),
            "{e}"
        );
        c.apple.initial_cycles = 8192;
        c.apple.lower_cycles = 40_000;
        let e = validate(&c).unwrap_err();
        assert!(e.to_string().contains("lower_cycles"), "{e}");
        c.apple.lower_cycles = 4096;
        c.epoch_exits = 0;
        let e = validate(&c).unwrap_err();
        assert!(e.to_string().contains("host.ple.epoch_exits"), "{e}");
    }
}
