//! vCPU placement policies that keep a VM's vCPUs apart (the space domain of
//! coordinated scheduling):
//!
//! - **Balance scheduling** (Sukwong and Kim, "Is co-scheduling too expensive for SMP
//!   VMs?", EuroSys 2011): a waking vCPU goes to a pCPU whose runqueue holds no sibling
//!   vCPU of its VM, the least loaded of those.
//! - **Load-conscious balance** (LC-Balance; Kim et al., "Demand-based coordinated
//!   scheduling for SMP VMs", ASPLOS 2013, §4): as balance, but pCPUs whose load is
//!   above the average are left out of the candidates, so that spreading siblings does
//!   not pile work on a busy pCPU.
//!
//! Both fall back to the scheduler's own choice when no pCPU qualifies. The decision is
//! O(pCPUs in the vCPU's mask), made at wake-up.

use crate::host::cpumask::CpuMask;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// The host scheduler's own wake-up placement.
    #[default]
    Default,
    Balance,
    LcBalance,
}

/// The pCPU a waking vCPU goes to, or None for the scheduler's own choice.
/// `sibling(p)`: a vCPU of the same VM runs or waits on `p`; `load(p)`: the pCPU's
/// load (runnable vCPUs weighted as the scheduler weighs them); `prev`: where the vCPU
/// last ran (preferred among equals).
pub fn choose(
    policy: Placement,
    mask: CpuMask,
    prev: u32,
    sibling: impl Fn(u32) -> bool,
    load: impl Fn(u32) -> u64,
) -> Option<u32> {
    if policy == Placement::Default {
        return None;
    }
    let limit = if policy == Placement::LcBalance {
        // The average load over the pCPUs the vCPU may use, rounded up: a pCPU at the
        // average stays a candidate.
        let (sum, n) = mask
            .iter()
            .fold((0u128, 0u128), |(s, n), p| (s + load(p) as u128, n + 1));
        Some(sum.div_ceil(n.max(1)) as u64)
    } else {
        None
    };
    mask.iter()
        .filter(|&p| !sibling(p))
        .filter(|&p| limit.is_none_or(|avg| load(p) <= avg))
        .min_by_key(|&p| (load(p), p != prev, p))
}

/// The wake-up placement rule the kernels share (select_idle_sibling's first steps,
/// csched_cpu_pick, the guest's select_task_rq): `prev` if it is allowed and idle, else
/// the next allowed idle one in round-robin order from it, else None. Positions are
/// 0..n.
pub fn prev_else_next_idle(
    prev: usize,
    n: usize,
    allowed: impl Fn(usize) -> bool,
    idle: impl Fn(usize) -> bool,
) -> Option<usize> {
    (0..n)
        .map(|k| (prev + k) % n)
        .find(|&q| allowed(q) && idle(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prev_first_then_round_robin_then_none() {
        let idle = [false, true, false, true];
        let all = |_: usize| true;
        assert_eq!(prev_else_next_idle(1, 4, all, |q| idle[q]), Some(1));
        assert_eq!(prev_else_next_idle(2, 4, all, |q| idle[q]), Some(3));
        assert_eq!(prev_else_next_idle(0, 4, |q| q != 1, |q| idle[q]), Some(3));
        assert_eq!(prev_else_next_idle(0, 4, |q| q == 2, |q| idle[q]), None);
    }
    use proptest::prelude::*;

    #[test]
    fn balance_avoids_siblings_and_takes_the_least_loaded() {
        let loads = [3u64, 0, 1, 5];
        let sib = [false, true, false, false];
        let p = choose(
            Placement::Balance,
            CpuMask::all(4),
            0,
            |p| sib[p as usize],
            |p| loads[p as usize],
        );
        assert_eq!(p, Some(2));
        assert_eq!(
            choose(Placement::Default, CpuMask::all(4), 0, |_| false, |_| 0),
            None
        );
        // Every pCPU holds a sibling: the scheduler decides.
        assert_eq!(
            choose(Placement::Balance, CpuMask::all(4), 0, |_| true, |_| 0),
            None
        );
    }

    #[test]
    fn lc_balance_leaves_out_overloaded_pcpus() {
        // Average load 2.25 -> 3: pCPU 3 (load 5) is out; balance would take it when it
        // is the only sibling-free one.
        let loads = [0u64, 1, 3, 5];
        let sib = [true, true, true, false];
        let f = |p: u32| sib[p as usize];
        let l = |p: u32| loads[p as usize];
        assert_eq!(
            choose(Placement::Balance, CpuMask::all(4), 0, f, l),
            Some(3)
        );
        assert_eq!(choose(Placement::LcBalance, CpuMask::all(4), 0, f, l), None);
    }

    #[test]
    fn the_previous_pcpu_wins_ties() {
        let p = choose(Placement::LcBalance, CpuMask::all(4), 2, |_| false, |_| 1);
        assert_eq!(p, Some(2));
    }

    proptest! {
        /// LC-Balance never picks a pCPU above the average load, nor one with a
        /// sibling, and picks something whenever such a pCPU exists.
        #[test]
        fn lc_balance_never_picks_above_average(
            loads in proptest::collection::vec(0u64..20, 1..16),
            sib in proptest::collection::vec(any::<bool>(), 16),
        ) {
            let n = loads.len() as u32;
            let avg = loads.iter().sum::<u64>().div_ceil(n as u64);
            let got = choose(Placement::LcBalance, CpuMask::all(n), 0, |p| sib[p as usize], |p| loads[p as usize]);
            let exists = (0..n).any(|p| !sib[p as usize] && loads[p as usize] <= avg);
            prop_assert_eq!(got.is_some(), exists);
            if let Some(p) = got {
                prop_assert!(!sib[p as usize]);
                prop_assert!(loads[p as usize] <= avg);
            }
        }
    }
}
