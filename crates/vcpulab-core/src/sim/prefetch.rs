//! Software prefetch of the records the next events will touch.
//!
//! On a host of thousands of vCPUs the thread, vCPU, VM and pCPU tables are far larger
//! than a core's caches, and an event finds its records one after another — the vCPU
//! names its thread, the thread its VM — each a miss that waits for the one before
//! (docs/performance.md, "Large hosts"). While one event is handled, the records of the
//! one likely to follow (the event queue's next, `EventQueue::peek_following`) are
//! requested; when an event starts, the records its own record names are requested
//! together, so their misses overlap instead of following each other. A prefetch is a
//! hint: it changes no state and decides nothing, so results do not depend on it.
//!
//! Only on hosts whose records outgrow a core's caches (`World::prefetch_records`, from
//! `PREFETCH_MIN_VCPUS` vCPUs): on a small host every record is cached already and the
//! lookups would be ~80 instructions per event of pure cost (8% more on the reference).

/// vCPUs from which records are prefetched: 512 vCPUs with their threads and VMs hold
/// about a megabyte of records, a core's second-level cache on the machines measured.
pub(crate) const PREFETCH_MIN_VCPUS: usize = 512;

use super::world::{Ev, World};
use crate::hv::vcpu::HvState;

/// Asks for the first `LINES` cache lines of `r` (no-op off x86-64).
#[inline(always)]
fn prefetch<const LINES: usize, T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let base = (r as *const T).cast::<i8>();
        for i in 0..LINES.min(std::mem::size_of::<T>().div_ceil(64)) {
            // SAFETY: a prefetch never faults and has no architectural effect; the
            // address is within `r`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(i * 64)) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = r;
    }
}

impl World {
    /// The record `ev` is about (a vCPU, thread or pCPU): requested while the event
    /// before it is handled.
    #[inline(always)]
    pub(crate) fn prefetch_event(&self, ev: Ev) {
        match ev {
            Ev::Step(v, _) | Ev::IpiArrive(v, _) => {
                if let Some(vc) = self.vcpus.get(v.idx()) {
                    prefetch::<2, _>(vc);
                }
            }
            Ev::ThreadTimer(t, _) | Ev::IoDone(t) | Ev::TlbAck(t, _) => {
                if let Some(th) = self.threads.get(t.idx()) {
                    prefetch::<1, _>(th);
                }
            }
            Ev::Resched(p) | Ev::SliceEnd(p, _) => {
                if let Some(pc) = self.pcpus.get(p.idx()) {
                    prefetch::<1, _>(pc);
                }
            }
            _ => {}
        }
    }

    /// The records that `ev`'s own record names (its thread, vCPU, VM, pCPU),
    /// requested together as the event starts.
    #[inline(always)]
    pub(crate) fn prefetch_reached(&self, ev: Ev) {
        match ev {
            Ev::Step(v, _) => {
                let Some(vc) = self.vcpus.get(v.idx()) else {
                    return;
                };
                if let Some(th) = vc.cur.and_then(|t| self.threads.get(t.idx())) {
                    prefetch::<2, _>(th);
                }
                if let Some(vm) = self.vms.get(vc.vm.idx()) {
                    prefetch::<3, _>(vm);
                }
                if let HvState::Running(p) = vc.hv {
                    if let Some(pc) = self.pcpus.get(p.idx()) {
                        prefetch::<1, _>(pc);
                    }
                }
            }
            Ev::ThreadTimer(t, _) => {
                let Some(th) = self.threads.get(t.idx()) else {
                    return;
                };
                if let Some(vc) = self.vcpus.get(th.vcpu.idx()) {
                    prefetch::<2, _>(vc);
                }
                if let Some(vm) = self.vms.get(th.vm.idx()) {
                    prefetch::<3, _>(vm);
                }
            }
            Ev::Resched(p) | Ev::SliceEnd(p, _) => {
                let Some(pc) = self.pcpus.get(p.idx()) else {
                    return;
                };
                if let Some(vc) = pc.cur.and_then(|v| self.vcpus.get(v.idx())) {
                    prefetch::<2, _>(vc);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::report::{scenario_hash, Report};

    /// A host past the threshold: the same report with prefetching on and off.
    #[test]
    fn prefetching_changes_no_result() {
        let text = r#"
preset = "kvm-default"
[run]
duration = "10ms"
[host]
pcpus = 128
[[vm]]
vcpus = 4
count = 128
workload = { model = "compute-sleep", params = { compute = "exp(200us)", sleep = "exp(300us)" } }
"#;
        let sc = crate::resolve(text, &[], None).expect("scenario resolves");
        let report = |prefetch: bool| {
            let mut w = World::new(&sc).expect("world builds");
            assert!(w.prefetch_records, "512 vCPUs are past the threshold");
            w.prefetch_records = prefetch;
            let cause = w.run();
            let r = Report::build(&sc, &w, cause, scenario_hash(&sc));
            assert!(
                r.events > 10_000,
                "the run did something: {} events",
                r.events
            );
            serde_json::to_string(&r).expect("report serializes")
        };
        assert_eq!(report(true), report(false));
    }
}
