//! PLE epochs: per-VM accounting of pause-loop exits in epochs of a fixed number of
//! exits (`host.ple.epoch_exits`), for every window policy. It feeds APPLE's decisions
//! (hv/apple.rs) and the report's `ple_epochs` time series; for the other policies it
//! only observes.
//!
//! Per epoch: the PLE exits, the sum of the windows the exits happened at (cycles), the
//! time handling them (exit to re-entry into the guest: the exit cost after a failed
//! directed yield; after a successful yield, the wait for a pCPU plus the entry) and the
//! pCPU time of the VM's vCPUs. A handling time is booked into the epoch that is open
//! when the vCPU re-enters (with epochs of hundreds of exits the few that straddle a
//! boundary hardly matter).
//!
//! Memory stays bounded: each VM's rows are a `metrics::series::Thinned` series (at most
//! 2048, thinned by halves so they still span the run); the `epoch` column says which
//! epochs the kept rows are.

use crate::hv::vcpu::{VCat, Vcpu};
use crate::metrics::series::Thinned;
use crate::scenario::{PleConfig, PlePolicy};
use crate::sim::round::round_u64;
use crate::sim::world::World;
use crate::sim::{Nanos, VcpuId, VmId};
use serde::Serialize;

/// One epoch of one VM (a row of the report's `ple_epochs` table).
#[derive(Clone, Debug, Serialize)]
pub struct PleEpochRow {
    pub vm: String,
    /// Index of the epoch within the VM (0-based).
    pub epoch: u64,
    pub policy: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub ple_exits: u64,
    /// The window of the epoch: the VM's window under APPLE and a fixed window; under
    /// KVM's per-vCPU windows, the mean window of the VM's vCPUs at the epoch's end.
    pub window_cycles: f64,
    /// The smallest and largest vCPU window of the VM at the epoch's end (equal to
    /// `window_cycles` under per-VM windows; KVM's per-vCPU windows spread).
    pub window_min_cycles: u64,
    pub window_max_cycles: u64,
    /// The mean window the epoch's exits happened at.
    pub exit_window_mean_cycles: f64,
    /// Time spun before the exits: the windows of the exits, in ns.
    pub spin_before_exit_ns: u64,
    pub handling_ns: u64,
    pub cpu_ns: u64,
    /// (spin before exit + handling) / pCPU time of the VM's vCPUs.
    pub inefficiency: f64,
    /// The epoch reached `host.ple.epoch_exits` exits. The report ends each VM's series
    /// with the epoch still open at the end of the run (fewer exits, `false`), so that a
    /// run whose VM takes fewer exits than an epoch still shows them.
    pub complete: bool,
}

#[derive(Clone, Debug, Default)]
struct Open {
    index: u64,
    start: Nanos,
    start_cpu_ns: u64,
    exits: u64,
    window_sum: u128,
    handling_ns: u64,
}

#[derive(Clone, Debug)]
pub struct PleEpochs {
    epoch_exits: u64,
    policy: &'static str,
    open: Vec<Open>,
    /// Per vCPU: when its last PLE exit happened, until it re-enters the guest.
    exit_at: Vec<Option<Nanos>>,
    /// How many of `exit_at` are set: every dispatch asks, and on a host of thousands
    /// of vCPUs reading a vCPU's entry is a cache miss even when none is pending.
    exits_pending: usize,
    rows: Vec<Thinned<PleEpochRow>>,
}

fn policy_name(p: PlePolicy) -> &'static str {
    match p {
        PlePolicy::Off => "off",
        PlePolicy::Fixed => "fixed",
        PlePolicy::Kvm => "kvm",
        PlePolicy::Apple => "apple",
    }
}

/// pCPU time of `v` up to `now`, counting the part not yet booked (as `Vcpu::charge`
/// would book it), without changing the vCPU.
pub fn cpu_ns_at(v: &Vcpu, now: Nanos) -> u64 {
    let mut t = v.cpu_ns();
    let since = v.cat_since;
    if now > since {
        let mut from = since;
        if v.overhead_until > from {
            let o_end = v.overhead_until.min(now);
            t += (o_end - from).0;
            from = o_end;
        }
        if (v.cat as usize) <= VCat::Overhead as usize {
            t += (now - from).0;
        }
    }
    t
}

impl PleEpochs {
    pub fn new(c: &PleConfig, nvms: usize, nvcpus: usize) -> PleEpochs {
        PleEpochs {
            epoch_exits: c.epoch_exits.max(1),
            policy: policy_name(c.policy),
            open: vec![Open::default(); nvms],
            exit_at: vec![None; nvcpus],
            exits_pending: 0,
            rows: vec![Thinned::default(); nvms],
        }
    }

    /// The recorded rows of every VM, VM by VM.
    pub fn rows(&self) -> impl Iterator<Item = &PleEpochRow> {
        self.rows.iter().flat_map(Thinned::iter)
    }

    /// Epochs of VM `vm` closed so far.
    pub fn closed(&self, vm: usize) -> u64 {
        self.rows[vm].iter().map(|r| r.epoch + 1).max().unwrap_or(0)
    }

    fn keep(&mut self, vm: usize, row: PleEpochRow) {
        self.rows[vm].offer(row.epoch, row);
    }
}

impl World {
    /// A PLE exit of `v` at window `window` cycles: counts it; returns the VM whose
    /// epoch it completes, if it does.
    pub(crate) fn ple_epoch_exit(&mut self, v: VcpuId, window: u64) -> Option<VmId> {
        let vm = self.vcpus[v.idx()].vm;
        let e = &mut self.ple_epochs;
        if e.exit_at[v.idx()].replace(self.now).is_none() {
            e.exits_pending += 1;
        }
        let o = &mut e.open[vm.idx()];
        o.exits += 1;
        o.window_sum += window as u128;
        (o.exits >= e.epoch_exits).then_some(vm)
    }

    /// `v` enters the guest again at `entry`: if a PLE exit is pending, its handling
    /// time is booked.
    pub(crate) fn ple_reentry(&mut self, v: VcpuId, entry: Nanos) {
        if self.ple_epochs.exits_pending == 0 {
            return;
        }
        if let Some(t) = self.ple_epochs.exit_at[v.idx()].take() {
            self.ple_epochs.exits_pending -= 1;
            let vm = self.vcpus[v.idx()].vm.idx();
            self.ple_epochs.open[vm].handling_ns += entry.0.saturating_sub(t.0);
        }
    }

    /// The row of `vm`'s open epoch as it stands at `now`, and the VM's pCPU time at
    /// `now` (the next epoch's start).
    fn open_epoch_row(&self, vm: VmId, now: Nanos, complete: bool) -> (PleEpochRow, u64) {
        let m = &self.vms[vm.idx()];
        let vcpus = m.first_vcpu..m.first_vcpu + m.nvcpus;
        let cpu_now: u64 = vcpus
            .clone()
            .map(|i| cpu_ns_at(&self.vcpus[i as usize], now))
            .sum();
        let windows: Vec<u64> = vcpus.filter_map(|i| self.ple.window(VcpuId(i))).collect();
        let o = &self.ple_epochs.open[vm.idx()];
        let cpu = cpu_now.saturating_sub(o.start_cpu_ns);
        let spin = round_u64(o.window_sum as f64 / self.clock_ghz);
        let inefficiency = if cpu > 0 {
            (spin + o.handling_ns) as f64 / cpu as f64
        } else {
            f64::NAN
        };
        let window = if windows.is_empty() {
            0.0
        } else {
            windows.iter().map(|&w| w as f64).sum::<f64>() / windows.len() as f64
        };
        let row = PleEpochRow {
            vm: m.name.clone(),
            epoch: o.index,
            policy: self.ple_epochs.policy.to_string(),
            start_ns: o.start.0,
            end_ns: now.0,
            ple_exits: o.exits,
            window_cycles: window,
            window_min_cycles: windows.iter().copied().min().unwrap_or(0),
            window_max_cycles: windows.iter().copied().max().unwrap_or(0),
            exit_window_mean_cycles: if o.exits > 0 {
                o.window_sum as f64 / o.exits as f64
            } else {
                0.0
            },
            spin_before_exit_ns: spin,
            handling_ns: o.handling_ns,
            cpu_ns: cpu,
            inefficiency,
            complete,
        };
        (row, cpu_now)
    }

    /// Closes the open epoch of `vm`: records its row and tells the window policy its
    /// inefficiency.
    pub(crate) fn ple_epoch_close(&mut self, vm: VmId) {
        let now = self.now;
        // The epoch's own window is read before the policy moves to the next one.
        let (row, cpu_now) = self.open_epoch_row(vm, now, true);
        self.ple.on_epoch(vm, row.inefficiency);
        let next = row.epoch + 1;
        self.ple_epochs.keep(vm.idx(), row);
        self.ple_epochs.open[vm.idx()] = Open {
            index: next,
            start: now,
            start_cpu_ns: cpu_now,
            ..Open::default()
        };
    }

    /// The report's `ple_epochs` rows: per VM, the closed epochs kept, then the epoch
    /// open at `end` if it has any exit (`complete = false`).
    pub fn ple_epoch_rows(&self, end: Nanos) -> Vec<PleEpochRow> {
        let mut out = Vec::new();
        for vm in 0..self.vms.len() {
            out.extend(self.ple_epochs.rows[vm].iter().cloned());
            if self.ple_epochs.open[vm].exits > 0 {
                out.push(self.open_epoch_row(VmId(vm as u32), end, false).0);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cpumask::CpuMask;

    fn row(epoch: u64) -> PleEpochRow {
        PleEpochRow {
            vm: "a".into(),
            epoch,
            policy: "kvm".into(),
            start_ns: 0,
            end_ns: 0,
            ple_exits: 0,
            window_cycles: 0.0,
            window_min_cycles: 0,
            window_max_cycles: 0,
            exit_window_mean_cycles: 0.0,
            spin_before_exit_ns: 0,
            handling_ns: 0,
            cpu_ns: 0,
            inefficiency: 0.0,
            complete: true,
        }
    }

    #[test]
    fn series_is_thinned_not_cut() {
        let mut e = PleEpochs::new(&PleConfig::default(), 1, 1);
        let n = 5 * crate::metrics::series::CAP as u64;
        for i in 0..n {
            e.keep(0, row(i));
        }
        let kept: Vec<u64> = e.rows().map(|r| r.epoch).collect();
        assert!(
            kept.len() < crate::metrics::series::CAP,
            "bounded: {}",
            kept.len()
        );
        assert!(kept.len() >= crate::metrics::series::CAP / 4);
        assert_eq!(kept[0], 0);
        assert!(*kept.last().unwrap_or(&0) >= n - 8, "spans the run");
        let d = kept[1] - kept[0];
        assert!(kept.windows(2).all(|w| w[1] - w[0] == d), "evenly spaced");
    }

    #[test]
    fn unbooked_time_counts_only_on_a_pcpu() {
        let mut v = Vcpu::new(VmId(0), 0, CpuMask::all(1));
        v.set_cat(Nanos(100), VCat::User);
        v.overhead_until = Nanos(150);
        assert_eq!(cpu_ns_at(&v, Nanos(400)), 300);
        v.charge(Nanos(400));
        assert_eq!(v.cpu_ns(), 300, "same as booking it");
        v.set_cat(Nanos(400), VCat::Runnable);
        assert_eq!(cpu_ns_at(&v, Nanos(900)), 300);
    }
}
