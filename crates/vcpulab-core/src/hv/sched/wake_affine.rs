//! Affine wake-ups on a Linux host (kernel/sched/fair.c, select_task_rq_fair): a vCPU
//! thread woken by another task — a sibling vCPU's IPI or pv kick, which KVM turns
//! into the host wake-up of the target's thread inside the sender's exit
//! (kvm_vcpu_kick → kvm_vcpu_wake_up) — may be placed beside its **waker**, on the
//! waker's CPU, instead of where it ran last; select_idle_sibling() then searches for
//! an idle CPU around that target. On an over-committed host with no idle CPU near it,
//! the target is where the vCPU queues: an affine wake stacks it on its waker's
//! runqueue, behind a sibling of its own VM (what balance scheduling was built
//! against; Sukwong and Kim, EuroSys 2011, §2).
//!
//! The rule changed with the kernel; `host.scheduler.wake_affine` names it (the platform
//! profiles set it):
//!
//! - `linux-3.2` (3.2 to 3.11): wake_affine()'s load test. With the waker's CPU `this`
//!   carrying `this_load` and the wakee's previous CPU `prev` carrying `load` (the
//!   wakee is not in it), the wake is affine when `this_load` is 0, or
//!   `100 × (this_load + w) ≤ (100 + (imbalance_pct − 100) / 2) × load` (`balanced`),
//!   or when `this_load ≤ load` and `this_load + load ≤` this CPU's average load per
//!   task. `w` is the wakee's weight; with task groups effective_load() gives the
//!   change of the root load, approximated here by the wakee's hierarchical load
//!   (task_h_load) on `this` and no change on `prev`.
//! - `linux-3.12`: as 3.2, but wake_affine() first refuses when wake_wide() finds the
//!   pair switches partners often (the 3.12 form: the wakee's `wakee_flips` above
//!   the LLC's size and the waker's above that size times the wakee's); the flips
//!   counted by record_wakee() at every wake-up and wiped once a second.
//! - `linux-3.16`: as 3.12; the LLC domain's imbalance_pct is 117 (sd_init(); 125
//!   before), so an affine wake needs `this` less loaded.
//! - `linux-4.14` (4.14 and later, to the EEVDF kernels): wake_affine_idle() then
//!   wake_affine_weight(). An idle `prev` keeps the wakee; an idle `this` (sharing the
//!   cache) takes it; else it is affine when
//!   `100 × (this_load + task_load) < (100 + (imbalance_pct − 100) / 2) × load`. wake_wide()
//!   in its 4.6 form (the smaller of the two flip counts at least the LLC's size and
//!   the larger at least that many times it) skips the test; flips halve once a
//!   second.
//! - `off`: every wake-up targets the previous CPU (the model before it had this).
//!
//! `imbalance_pct` is that of the lowest domain spanning both CPUs: 110 for SMT
//! siblings, 125 (117 from Linux 3.16) within an LLC, 125 above it. Loads are the
//! runnable weights the model's balancing uses (rq->load.weight, which 3.2 and 3.9 read;
//! later kernels read the PELT averages, including the wakee's blocked load, which
//! wake_affine_weight() subtracts). The sync hint (WF_SYNC) is never set: KVM's
//! wake-up of a vCPU thread is a plain wake_up. With IPI virtualization there is no
//! waker: the hardware posts the IPI and KVM's wake-up vector handler wakes a blocked
//! target on the CPU it blocked on (pi_wakeup_handler), which is its previous CPU.

use crate::host::topology::{Level, Topology};
use crate::sim::{Nanos, PcpuId, VcpuId};
use serde::{Deserialize, Serialize};

/// Which kernel's affine wake-up rule the host scheduler follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum WakeAffine {
    #[serde(rename = "off")]
    Off,
    #[serde(rename = "linux-3.2")]
    Linux3_2,
    #[serde(rename = "linux-3.12")]
    Linux3_12,
    #[serde(rename = "linux-3.16")]
    Linux3_16,
    #[default]
    #[serde(rename = "linux-4.14")]
    Linux4_14,
}

impl WakeAffine {
    /// wake_affine()'s verdict for a wake-up whose waker's CPU (allowed, not the
    /// previous one, the pair not wide) and previous CPU meet first at `level`: true
    /// when the waker's CPU is the target.
    pub fn affine(self, level: Level, share_cache: bool, l: &AffineLoads) -> bool {
        let imbalance = 100 + (self.imbalance_pct(level) - 100) / 2;
        match self {
            WakeAffine::Off => false,
            WakeAffine::Linux4_14 => affine_idle_weight(l, share_cache, imbalance),
            _ => affine_load(l, imbalance),
        }
    }

    /// The rule counts wakee flips (wake_wide(), Linux 3.12 and later).
    pub fn counts_flips(self) -> bool {
        !matches!(self, WakeAffine::Off | WakeAffine::Linux3_2)
    }

    /// The lowest common domain's imbalance_pct at `level` (sd_init(); the SD_*_INIT
    /// initializers before Linux 3.16).
    pub(crate) fn imbalance_pct(self, level: Level) -> u64 {
        match level {
            Level::Smt => 110,
            Level::Llc if matches!(self, WakeAffine::Linux3_16 | WakeAffine::Linux4_14) => 117,
            _ => 125,
        }
    }
}

/// Who woke a vCPU: the vCPU whose exit did the host wake-up, and the pCPU it ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waker {
    pub vcpu: VcpuId,
    pub pcpu: PcpuId,
}

/// A wake-up to place: the vCPU, the pCPU it ran on last, who woke it, when.
#[derive(Clone, Copy, Debug)]
pub struct Wakeup {
    pub wakee: VcpuId,
    pub prev: u32,
    pub waker: Option<Waker>,
    pub now: Nanos,
}

/// A vCPU thread's record_wakee() state.
#[derive(Clone, Copy, Debug)]
struct Flips {
    last_wakee: u32,
    flips: u32,
    decay_at: Nanos,
}

const NO_WAKEE: u32 = u32::MAX;
/// record_wakee() decays once per HZ jiffies: a second.
const FLIP_DECAY: Nanos = Nanos(1_000_000_000);

/// record_wakee()'s counts per task (vCPU threads on the host, threads in a guest),
/// and wake_wide() over them.
#[derive(Clone, Debug, Default)]
pub struct WakeeFlips {
    flips: Vec<Flips>,
}

impl WakeeFlips {
    /// Counts for `tasks` tasks if `rule` uses them (none otherwise).
    pub fn new(rule: WakeAffine, tasks: usize) -> WakeeFlips {
        let n = if rule.counts_flips() { tasks } else { 0 };
        WakeeFlips {
            flips: vec![
                Flips {
                    last_wakee: NO_WAKEE,
                    flips: 0,
                    decay_at: Nanos::ZERO,
                };
                n
            ],
        }
    }

    /// record_wakee() for `waker` waking `wakee` at `now`, then wake_wide() of `rule`
    /// (false for a rule without it). `factor`: the waker's CPU's LLC size
    /// (sd_llc_size).
    pub fn record_and_check_wide(
        &mut self,
        rule: WakeAffine,
        factor: u32,
        waker: usize,
        wakee: usize,
        now: Nanos,
    ) -> bool {
        if !rule.counts_flips() || self.flips.is_empty() {
            return false;
        }
        let halve = rule == WakeAffine::Linux4_14;
        let f = &mut self.flips[waker];
        if now > f.decay_at + FLIP_DECAY {
            f.flips = if halve { f.flips >> 1 } else { 0 };
            f.decay_at = now;
        }
        if f.last_wakee != wakee as u32 {
            f.last_wakee = wakee as u32;
            f.flips += 1;
        }
        let (master, slave) = (self.flips[waker].flips, self.flips[wakee].flips);
        if halve {
            let (hi, lo) = (master.max(slave), master.min(slave));
            lo >= factor && hi >= lo.saturating_mul(factor)
        } else {
            slave > factor && master > factor.saturating_mul(slave)
        }
    }
}

/// What the decision reads of the two CPUs.
#[derive(Clone, Copy, Debug)]
pub struct AffineLoads {
    /// The waker's CPU: its load (the waker included), runnable threads, idle.
    pub this_load: u64,
    pub this_nr: u32,
    pub this_idle: bool,
    /// The wakee's previous CPU: its load without the wakee, idle.
    pub prev_load: u64,
    pub prev_idle: bool,
    /// The wakee's load as seen at the root (its weight, or task_h_load with groups).
    pub task_load: u64,
}

/// The affine wake-up rule and the per-vCPU flip counts it keeps.
#[derive(Clone, Debug)]
pub struct WakeAffinity {
    rule: WakeAffine,
    flips: WakeeFlips,
    /// Whether the last decision was affine (schedstat ttwu_move_affine; taken by
    /// `take_affine`, which the core counts per vCPU).
    last_affine: bool,
}

impl WakeAffinity {
    /// The host kernel's imbalance_pct of a domain at `level` (its rule tells the
    /// kernel: 117 within an LLC from Linux 3.16, 125 before).
    pub(crate) fn imbalance_pct(&self, level: Level) -> u64 {
        self.rule.imbalance_pct(level)
    }
}

impl Default for WakeAffinity {
    fn default() -> Self {
        WakeAffinity::new(WakeAffine::Off, 0)
    }
}

impl WakeAffinity {
    pub fn new(rule: WakeAffine, vcpus: usize) -> WakeAffinity {
        let flips = WakeeFlips::new(rule, vcpus);
        WakeAffinity {
            rule,
            flips,
            last_affine: false,
        }
    }

    /// Whether the last wake-up was placed by an affine decision (once).
    pub fn take_affine(&mut self) -> bool {
        std::mem::take(&mut self.last_affine)
    }

    /// The CPU a wake-up targets (select_idle_sibling()'s target): the waker's, or the
    /// wakee's previous one. `allowed`: the waker's CPU is in the wakee's mask; `loads`
    /// is asked only when the rule needs it.
    pub fn target(
        &mut self,
        topo: &Topology,
        wake: Wakeup,
        allowed: bool,
        loads: impl FnOnce(u32) -> AffineLoads,
    ) -> u32 {
        let Wakeup {
            wakee,
            prev,
            waker,
            now,
        } = wake;
        let Some(w) = waker else {
            return prev;
        };
        if self.rule == WakeAffine::Off {
            return prev;
        }
        let this = w.pcpu.0;
        let llc_size = topo.llc_of(this).len() as u32;
        let wide =
            self.flips
                .record_and_check_wide(self.rule, llc_size, w.vcpu.idx(), wakee.idx(), now);
        if !allowed || this == prev || wide {
            return prev;
        }
        let level = topo
            .levels()
            .iter()
            .find(|d| this / d.span == prev / d.span)
            .map_or(Level::Host, |d| d.level);
        let affine = self
            .rule
            .affine(level, topo.llc_of(this) == topo.llc_of(prev), &loads(this));
        if affine {
            self.last_affine = true;
            this
        } else {
            prev
        }
    }
}

/// Linux 3.2–4.13 wake_affine() without the sync hint.
fn affine_load(l: &AffineLoads, imbalance: u64) -> bool {
    if l.this_load == 0 {
        return true;
    }
    let balanced = 100 * (l.this_load + l.task_load) <= imbalance * l.prev_load;
    let per_task = l.this_load.checked_div(u64::from(l.this_nr)).unwrap_or(0);
    balanced || (l.this_load <= l.prev_load && l.this_load + l.prev_load <= per_task)
}

/// Linux 4.14+ wake_affine_idle() then wake_affine_weight(), without the sync hint.
fn affine_idle_weight(l: &AffineLoads, share_cache: bool, imbalance: u64) -> bool {
    if l.this_idle && share_cache {
        return !l.prev_idle;
    }
    if l.prev_idle {
        return false;
    }
    100 * (l.this_load + l.task_load) < imbalance * l.prev_load
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(this: u64, nr: u32, prev: u64) -> AffineLoads {
        AffineLoads {
            this_load: this,
            this_nr: nr,
            this_idle: nr == 0,
            prev_load: prev,
            prev_idle: prev == 0,
            task_load: 1024,
        }
    }

    #[test]
    fn the_load_test_moves_a_wakee_only_towards_the_lighter_cpu() {
        // The waker alone on its CPU (1024) against one other vCPU on prev: 2048 × 100
        // > 1024 × 112, not affine; against two: 2048 × 100 ≤ 2048 × 112, affine.
        assert!(!affine_load(&loads(1024, 1, 1024), 112));
        assert!(affine_load(&loads(1024, 1, 2048), 112));
        // An idle prev never attracts the 3.x rule to the busy waker's CPU.
        assert!(!affine_load(&loads(1024, 1, 0), 112));
        // 4.14: an idle prev keeps it; two others there move it; the strict test.
        assert!(!affine_idle_weight(&loads(1024, 1, 0), true, 108));
        assert!(affine_idle_weight(&loads(1024, 1, 2048), true, 108));
        assert!(!affine_idle_weight(&loads(1024, 1, 1024), true, 108));
        // 117 within an LLC from 3.16: 2048 × 100 against 1792 × 108 or × 112.
        assert!(!affine_idle_weight(&loads(1024, 1, 1792), true, 108));
        assert!(affine_load(&loads(1024, 1, 1900), 112));
    }

    #[test]
    fn a_wake_without_a_waker_or_with_the_rule_off_stays_on_prev() {
        let topo = Topology::new(8, 1, 8, 1);
        let w = Some(Waker {
            vcpu: VcpuId(1),
            pcpu: PcpuId(3),
        });
        let heavy_prev = |_| loads(1024, 1, 4096);
        let wake = |waker| Wakeup {
            wakee: VcpuId(0),
            prev: 5,
            waker,
            now: Nanos::ZERO,
        };
        let mut off = WakeAffinity::new(WakeAffine::Off, 2);
        assert_eq!(off.target(&topo, wake(w), true, heavy_prev), 5);
        let mut on = WakeAffinity::new(WakeAffine::Linux4_14, 2);
        assert_eq!(on.target(&topo, wake(None), true, heavy_prev), 5);
        assert_eq!(on.target(&topo, wake(w), false, heavy_prev), 5);
        assert_eq!(on.target(&topo, wake(w), true, heavy_prev), 3);
        assert!(on.take_affine() && !on.take_affine());
    }

    #[test]
    fn a_waker_that_wakes_many_partners_is_wide() {
        // 4.6+ wake_wide on an LLC of 2: both counts at least 2, the waker's at least
        // twice the wakee's.
        let mut a = WakeAffinity::new(WakeAffine::Linux4_14, 4);
        let t = Nanos(1);
        // vCPU 0 alternates wakees 1, 2, 3: its flips grow; 1 wakes 0 and 2.
        for k in 0..6usize {
            a.flips
                .record_and_check_wide(WakeAffine::Linux4_14, 2, 0, 1 + k % 3, t);
        }
        a.flips
            .record_and_check_wide(WakeAffine::Linux4_14, 2, 1, 0, t);
        a.flips
            .record_and_check_wide(WakeAffine::Linux4_14, 2, 1, 2, t);
        assert!(a
            .flips
            .record_and_check_wide(WakeAffine::Linux4_14, 2, 0, 1, t));
        // A second later the waker's flips halve once per decay.
        let later = Nanos(3_000_000_000);
        let mut b = a.clone();
        b.flips
            .record_and_check_wide(WakeAffine::Linux4_14, 2, 0, 2, later);
        assert!(b.flips.flips[0].flips < a.flips.flips[0].flips);
    }
}
