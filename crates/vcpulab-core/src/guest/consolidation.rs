//! Gleaner's consolidation controller (Gleaner, USENIX ATC 2014, "imbalanced scheduling"): a
//! plain state machine fed one measurement of the active vCPUs per interval, deciding
//! whether to deactivate one vCPU, restore the last one, or reactivate all. It knows
//! nothing of the simulator; guest/gleaner.rs measures and applies its decisions.

/// The controller's thresholds (published defaults in `scenario::GleanerConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    pub rho: f64,
    pub eta: f64,
    pub lower_factor: f64,
    pub major_util_change: f64,
    pub major_vcpu_util: f64,
    pub major_gcomp_factor: f64,
    pub full_util: f64,
    pub util_drop: f64,
    /// The guest scheduler's minimum time slice (condition 2's upper bound), ns.
    pub min_time_slice_ns: f64,
    pub min_active: u32,
}

impl Thresholds {
    pub fn from_config(g: &crate::scenario::GleanerConfig, min_time_slice_ns: f64) -> Thresholds {
        Thresholds {
            rho: g.rho,
            eta: g.eta,
            lower_factor: g.lower_factor,
            major_util_change: g.major_util_change,
            major_vcpu_util: g.major_vcpu_util,
            major_gcomp_factor: g.major_gcomp_factor,
            full_util: g.full_util,
            util_drop: g.util_drop,
            min_time_slice_ns,
            min_active: g.min_active.max(1),
        }
    }
}

/// What one active vCPU did during an interval, as the guest sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VcpuSample {
    /// Time running workload threads (user, kernel, spinning).
    pub work_ns: u64,
    /// Time with no workload thread to run (yielding thread, idle loop, halted).
    pub idle_ns: u64,
    /// Idle periods begun (context switches to the yielding thread, or halts).
    pub idle_periods: u64,
    /// Context switches to workload threads.
    pub work_switches: u64,
}

/// One interval's measurement over the active vCPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub active: u32,
    /// Computation length between idle periods: T_work / S_yield.
    pub l_comp: f64,
    /// Computation granularity between synchronizations: T_work / S_work.
    pub g_comp: f64,
    /// Idle period length: T_idle / S_yield.
    pub l_idle: f64,
    /// Utilization of each active vCPU: work / (work + idle).
    pub util: Vec<f64>,
    /// Sum of the active vCPUs' utilizations (vCPUs' worth of work).
    pub total_util: f64,
}

impl Measurement {
    /// None when the active vCPUs did nothing at all (nothing to judge).
    pub fn from_samples(samples: &[VcpuSample]) -> Option<Measurement> {
        let work: u64 = samples.iter().map(|s| s.work_ns).sum();
        let idle: u64 = samples.iter().map(|s| s.idle_ns).sum();
        if work == 0 {
            return None;
        }
        let s_yield: u64 = samples.iter().map(|s| s.idle_periods).sum();
        let s_work: u64 = samples.iter().map(|s| s.work_switches).sum();
        let (work, idle) = (work as f64, idle as f64);
        // No idle period: computation never stops (l_comp infinite, l_idle zero).
        let (l_comp, l_idle) = if s_yield == 0 {
            (f64::INFINITY, 0.0)
        } else {
            (work / s_yield as f64, idle / s_yield as f64)
        };
        let g_comp = if s_work == 0 {
            f64::INFINITY
        } else {
            work / s_work as f64
        };
        let util: Vec<f64> = samples
            .iter()
            .map(|s| {
                let t = s.work_ns + s.idle_ns;
                if t == 0 {
                    0.0
                } else {
                    s.work_ns as f64 / t as f64
                }
            })
            .collect();
        Some(Measurement {
            active: samples.len() as u32,
            l_comp,
            g_comp,
            l_idle,
            total_util: util.iter().sum(),
            util,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Keep,
    /// Remove the highest-numbered active vCPU from the workload's cpuset.
    Deactivate,
    /// Give back the vCPU removed last.
    Restore,
    /// Every vCPU active again; consolidation restarts.
    ReactivateAll,
}

#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// Watching for a major change against `reference` (None: take the next one).
    Observe { reference: Option<Measurement> },
    /// One vCPU was just removed; `before` is the measurement that justified it.
    Shrinking { before: Measurement },
}

#[derive(Clone, Debug)]
pub struct Controller {
    pub thresholds: Thresholds,
    pub rho: f64,
    pub eta: f64,
    pub active: u32,
    pub total: u32,
    phase: Phase,
    pub deactivations: u64,
    pub restores: u64,
    pub reactivations: u64,
}

impl Controller {
    pub fn new(thresholds: Thresholds, vcpus: u32) -> Controller {
        Controller {
            rho: thresholds.rho,
            eta: thresholds.eta,
            thresholds,
            active: vcpus,
            total: vcpus,
            phase: Phase::Observe { reference: None },
            deactivations: 0,
            restores: 0,
            reactivations: 0,
        }
    }

    /// Both conditions for removing one of the `m.active` vCPUs.
    pub fn can_deactivate(&self, m: &Measurement) -> bool {
        if m.active <= self.thresholds.min_active || m.l_idle <= 0.0 {
            return false;
        }
        let n1 = (m.active - 1) as f64;
        let cond1 = m.l_comp <= self.rho * n1 * m.l_idle;
        let cond2 = m.g_comp <= (self.eta * m.l_idle).min(self.thresholds.min_time_slice_ns);
        cond1 && cond2
    }

    /// A change big enough to start over: total utilization moving by more than
    /// `major_util_change`, a vCPU rising above `major_vcpu_util` (none was above it in
    /// the reference), or g_comp doubling or halving.
    fn major_change(&self, reference: &Measurement, m: &Measurement) -> bool {
        let th = &self.thresholds;
        let base = reference.total_util.max(1e-9);
        if (m.total_util - reference.total_util).abs() / base > th.major_util_change {
            return true;
        }
        let hot = |x: &Measurement| x.util.iter().any(|u| *u > th.major_vcpu_util);
        if hot(m) && !hot(reference) {
            return true;
        }
        let (a, b) = (reference.g_comp, m.g_comp);
        if a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0 {
            let f = th.major_gcomp_factor;
            if b > a * f || b < a / f {
                return true;
            }
        } else if a.is_finite() != b.is_finite() {
            return true;
        }
        false
    }

    fn deactivate(&mut self, m: Measurement) -> Decision {
        self.active -= 1;
        self.deactivations += 1;
        self.phase = Phase::Shrinking { before: m };
        Decision::Deactivate
    }

    /// Feeds one interval's measurement (None: the active vCPUs did nothing).
    pub fn step(&mut self, m: Option<Measurement>) -> Decision {
        let Some(m) = m else {
            return Decision::Keep;
        };
        match std::mem::replace(&mut self.phase, Phase::Observe { reference: None }) {
            Phase::Shrinking { before } => {
                let dropped = m.total_util < before.total_util * (1.0 - self.thresholds.util_drop);
                if dropped {
                    // Undo, and make the condition that allowed it stricter.
                    self.active += 1;
                    self.restores += 1;
                    let full = m.util.iter().any(|u| *u >= self.thresholds.full_util);
                    let lf = self.thresholds.lower_factor;
                    if full {
                        let ratio = before.g_comp / before.l_idle.max(1e-9);
                        self.eta = lf * self.eta.min(ratio);
                    } else {
                        let n1 = before.active.saturating_sub(1).max(1) as f64;
                        let ratio = before.l_comp / (n1 * before.l_idle.max(1e-9));
                        self.rho = lf * self.rho.min(ratio);
                    }
                    self.phase = Phase::Observe { reference: None };
                    return Decision::Restore;
                }
                if self.can_deactivate(&m) {
                    return self.deactivate(m);
                }
                self.phase = Phase::Observe { reference: Some(m) };
                Decision::Keep
            }
            Phase::Observe { reference } => {
                if let Some(r) = &reference {
                    if self.major_change(r, &m) {
                        let was_partial = self.active < self.total;
                        self.active = self.total;
                        self.rho = self.thresholds.rho;
                        self.eta = self.thresholds.eta;
                        self.phase = Phase::Observe { reference: None };
                        if was_partial {
                            self.reactivations += 1;
                            return Decision::ReactivateAll;
                        }
                        return Decision::Keep;
                    }
                }
                if self.can_deactivate(&m) {
                    return self.deactivate(m);
                }
                self.phase = Phase::Observe {
                    reference: reference.or(Some(m)),
                };
                Decision::Keep
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn th() -> Thresholds {
        Thresholds::from_config(&crate::scenario::GleanerConfig::default(), 750_000.0)
    }

    /// `n` vCPUs, each working `work` and idle `idle` ns, with `periods` idle periods
    /// and `switches` workload switches each.
    fn uniform(n: usize, work: u64, idle: u64, periods: u64, switches: u64) -> Measurement {
        let s = VcpuSample {
            work_ns: work,
            idle_ns: idle,
            idle_periods: periods,
            work_switches: switches,
        };
        Measurement::from_samples(&vec![s; n]).expect("some work")
    }

    /// A fine-grained mutex workload doing 0.8 vCPUs' worth of work per 50 ms interval
    /// on `n` vCPUs, 10 us of computation between idle periods and synchronizations.
    fn fine(n: usize) -> Measurement {
        let work = 40_000_000 / n as u64;
        uniform(n, work, 50_000_000 - work, work / 10_000, work / 10_000)
    }

    #[test]
    fn measurement_ratios() {
        let m = uniform(2, 30, 70, 10, 5);
        assert_eq!(m.active, 2);
        // 60 ns of work and 140 of idle over 20 idle periods and 10 switches.
        assert!((m.l_comp - 3.0).abs() < 1e-12);
        assert!((m.l_idle - 7.0).abs() < 1e-12);
        assert!((m.g_comp - 6.0).abs() < 1e-12);
        assert!((m.total_util - 0.6).abs() < 1e-12);
        assert!(Measurement::from_samples(&[VcpuSample::default()]).is_none());
    }

    #[test]
    fn fine_grained_workload_is_consolidated_one_vcpu_at_a_time() {
        let mut c = Controller::new(th(), 8);
        assert_eq!(c.step(Some(fine(8))), Decision::Deactivate);
        assert_eq!(c.active, 7);
        // Utilization holds: keep going, one per interval.
        assert_eq!(c.step(Some(fine(7))), Decision::Deactivate);
        assert_eq!(c.active, 6);
    }

    #[test]
    fn cpu_bound_workload_keeps_every_vcpu() {
        let mut c = Controller::new(th(), 8);
        for _ in 0..10 {
            // Never idle: no idle periods at all.
            assert_eq!(
                c.step(Some(uniform(8, 50_000_000, 0, 0, 10))),
                Decision::Keep
            );
        }
        assert_eq!(c.active, 8);
    }

    #[test]
    fn condition_one_needs_idle_relative_to_computation() {
        let c = Controller::new(th(), 4);
        // l_comp = 100 us, l_idle = 10 us: 100 > 1 * 3 * 10, no deactivation.
        let m = uniform(4, 10_000_000, 1_000_000, 100, 100_000);
        assert!(!c.can_deactivate(&m));
        // l_idle 40 us: 100 <= 120, and g_comp 0.1 us <= 40 us.
        let m = uniform(4, 10_000_000, 4_000_000, 100, 100_000);
        assert!(c.can_deactivate(&m));
    }

    #[test]
    fn condition_two_is_capped_by_the_minimum_time_slice() {
        let c = Controller::new(th(), 4);
        // Long idle periods (10 ms) but coarse computation (g_comp 1 ms > 0.75 ms).
        let m = uniform(4, 10_000_000, 100_000_000, 10, 10);
        assert!(!c.can_deactivate(&m));
    }

    #[test]
    fn utilization_drop_restores_and_lowers_rho() {
        let mut c = Controller::new(th(), 4);
        let before = fine(4);
        assert_eq!(c.step(Some(before.clone())), Decision::Deactivate);
        // Total utilization falls by half, no vCPU full: rho drops.
        let after = uniform(3, 5_000_000, 45_000_000, 500, 500);
        assert_eq!(c.step(Some(after)), Decision::Restore);
        assert_eq!(c.active, 4);
        let expect = 0.9 * (before.l_comp / (3.0 * before.l_idle)).min(1.0);
        assert!((c.rho - expect).abs() < 1e-12, "rho {}", c.rho);
        assert_eq!(c.eta, 1.0);
        // The same measurement no longer allows a deactivation.
        assert!(!c.can_deactivate(&before));
        assert_eq!(c.step(Some(before)), Decision::Keep);
    }

    #[test]
    fn drop_with_a_full_vcpu_lowers_eta() {
        let mut c = Controller::new(th(), 4);
        // 1.6 vCPUs of work on 4: l_comp 10 us, l_idle 15 us.
        let before = uniform(4, 20_000_000, 30_000_000, 2_000, 2_000);
        assert_eq!(c.step(Some(before.clone())), Decision::Deactivate);
        let mut samples = vec![
            VcpuSample {
                work_ns: 1_000_000,
                idle_ns: 49_000_000,
                idle_periods: 100,
                work_switches: 100,
            };
            2
        ];
        samples.push(VcpuSample {
            work_ns: 50_000_000,
            idle_ns: 0,
            idle_periods: 0,
            work_switches: 10,
        });
        let after = Measurement::from_samples(&samples).expect("work");
        assert!(after.total_util < before.total_util);
        assert_eq!(c.step(Some(after)), Decision::Restore);
        let expect = 0.9 * (before.g_comp / before.l_idle).min(1.0);
        assert!((c.eta - expect).abs() < 1e-12, "eta {}", c.eta);
        assert_eq!(c.rho, 1.0);
    }

    #[test]
    fn major_change_reactivates_all_and_resets_factors() {
        let mut c = Controller::new(th(), 4);
        c.step(Some(fine(4)));
        c.step(Some(fine(3)));
        c.step(Some(fine(2)));
        assert_eq!(c.active, 1);
        // At one vCPU nothing more can go: it settles with this reference.
        assert_eq!(c.step(Some(fine(1))), Decision::Keep);
        assert_eq!(c.step(Some(fine(1))), Decision::Keep);
        // The workload turns CPU-bound: utilization jumps.
        let busy = uniform(1, 50_000_000, 0, 0, 10);
        assert_eq!(c.step(Some(busy)), Decision::ReactivateAll);
        assert_eq!(c.active, 4);
        assert_eq!((c.rho, c.eta), (1.0, 1.0));
        assert_eq!(c.reactivations, 1);
    }

    #[test]
    fn gcomp_halving_is_major() {
        let mut c = Controller::new(th(), 2);
        c.thresholds.min_active = 2; // nothing to deactivate: only watch
        assert_eq!(c.step(Some(fine(2))), Decision::Keep);
        // Same utilization, more than twice as many switches: g_comp more than halves.
        let m = uniform(2, 20_000_000, 30_000_000, 2_000, 4_100);
        assert!(c.major_change(&fine(2), &m));
        // All vCPUs are active already: a major change keeps them.
        assert_eq!(c.step(Some(m)), Decision::Keep);
    }

    #[test]
    fn never_below_min_active() {
        let mut t = th();
        t.min_active = 3;
        let mut c = Controller::new(t, 4);
        assert_eq!(c.step(Some(fine(4))), Decision::Deactivate);
        assert_eq!(c.step(Some(fine(3))), Decision::Keep);
        assert_eq!(c.active, 3);
    }

    #[test]
    fn idle_interval_changes_nothing() {
        let mut c = Controller::new(th(), 4);
        assert_eq!(c.step(None), Decision::Keep);
        assert_eq!(c.active, 4);
    }
}
