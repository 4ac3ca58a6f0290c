//! The footprint cache model, with work conserved.
//!
//! Each context (vCPU) has a cache-resident working set: its footprint, capped at what
//! a pCPU's cache holds for one context. The model keeps, per context, the KiB of that
//! resident set that are *missing* (not in the cache), and per pCPU the KiB every
//! context actually brought into its cache:
//!
//! - When a context comes back to the pCPU it left, the KiB loaded there by others
//!   since it left evict that fraction of what it still had resident. Only that is
//!   added to what it was missing; a partial refill interrupted by a preemption is
//!   kept. Moved to another pCPU of the same last-level cache it loses the same, and
//!   re-fetches its part of the new core's private caches from the LLC
//!   (`private_refill_ns`); on another LLC, or on its first run, all of it is missing.
//! - Missing data is not a stall in front of the run. The context runs at once, and
//!   re-fetches its missing KiB as it touches them (`touch_kib_per_us` of progress,
//!   all misses until the set is back): while anything is missing, every nanosecond of
//!   progress costs `touch_kib_per_us / 1000 × refill_ns_per_kib` ns more (an elevated
//!   miss rate), until the missing KiB have cost `refill_ns_per_kib` each. Progress is
//!   integrated exactly from timestamps (piecewise linear), no per-miss events. A lock
//!   holder resumed for a short critical section therefore pays only for what that
//!   section touches.
//! - A pCPU's cache is loaded only by what contexts actually fetch: their re-fetched
//!   KiB and, for a footprint larger than the cache, the part streamed through it (its
//!   native capacity misses, which evict others but are part of its native speed).
//!
//! Refill time is part of the context's running time, so it can never exceed it.

//!
//! A context's numbers are a `CacheProfile`: with `host.cache.model = "footprint"`, its
//! workload's footprint and the host-wide rates; with `"llc"`, derived from its LLC
//! access profile (host/access.rs `AccessProfile::coupling`) where it has one.

use crate::host::topology::Topology;
use crate::scenario::{CacheConfig, CacheModel};
use crate::sim::round::round_u64;

/// One context's parameters of the eviction-and-refetch model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheProfile {
    /// Data that is worth refetching after it was evicted.
    pub resident_kib: u64,
    /// Upper bound on what the context loads while running (evicting others).
    pub load_cap_kib: u64,
    pub refill_ns_per_kib: f64,
    pub touch_kib_per_us: f64,
    /// Stall per ns of progress while data is missing, in 1/RATE_ONE ns: derived from
    /// the two rates once, here, because the step path needs it at every vCPU step.
    stall_rate: u64,
}

impl CacheProfile {
    pub fn new(
        resident_kib: u64,
        load_cap_kib: u64,
        refill_ns_per_kib: f64,
        touch_kib_per_us: f64,
    ) -> CacheProfile {
        let rate = touch_kib_per_us / 1e3 * refill_ns_per_kib * RATE_ONE as f64;
        CacheProfile {
            resident_kib,
            load_cap_kib,
            refill_ns_per_kib,
            touch_kib_per_us,
            stall_rate: rate.round().max(0.0) as u64,
        }
    }

    /// The footprint model's profile of a context of `footprint_kib`.
    pub fn footprint(c: &CacheConfig, footprint_kib: u64) -> CacheProfile {
        CacheProfile::new(
            footprint_kib,
            footprint_kib,
            c.refill_ns_per_kib,
            c.touch_kib_per_us,
        )
    }

    /// Stall per ns of progress while data is missing, in 1/RATE_ONE ns.
    #[inline]
    fn stall_rate(&self) -> u64 {
        self.stall_rate
    }
}

/// Where a context runs again, against where it last ran (`Footprint::moved`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moved {
    Same,
    SameCore,
    SameLlc,
    Cold,
}

/// Fixed-point denominator of the stall rate (stall ns per ns of progress).
const RATE_ONE: u64 = 1 << 32;

#[derive(Clone, Debug)]
pub struct Footprint {
    pub enabled: bool,
    pub capacity_kib: u64,
    /// The host's cores and last-level caches: a context moved within its LLC finds
    /// its working set there.
    pub topo: Topology,
    /// A core's private caches, and what re-fetching a KiB into them from the LLC costs.
    pub private_kib: u64,
    pub private_refill_ns_per_kib: f64,
}

impl Footprint {
    /// The model of `c` on a host of topology `topo`.
    pub fn new(c: &CacheConfig, topo: Topology) -> Footprint {
        Footprint {
            enabled: c.model != CacheModel::None,
            capacity_kib: c.kib_per_pcpu,
            topo,
            private_kib: c.private_kib,
            private_refill_ns_per_kib: c.private_refill_ns_per_kib,
        }
    }

    /// Where a context that last ran on `from` finds its working set on `to`:
    /// `Moved::Same` on the same pCPU, `SameCore` on a hardware thread of the same core
    /// (L1 and L2 are the core's), `SameLlc` on another core of the same last-level
    /// cache (what stayed in the LLC is there; the private caches are cold), `Cold`
    /// elsewhere.
    pub fn moved(&self, from: u32, to: u32) -> Moved {
        if from == to {
            Moved::Same
        } else if self.topo.core_of(from).contains(&to) {
            Moved::SameCore
        } else if self.topo.llc_of(from).contains(&to) {
            Moved::SameLlc
        } else {
            Moved::Cold
        }
    }

    /// Stall to re-fetch, from the last-level cache into a new core's private caches,
    /// the part of a context's working set they held: at most `private_kib` of what it
    /// still has in the LLC (it misses `missing_kib`, which comes from memory).
    pub fn private_refill_ns(&self, prof: &CacheProfile, missing_kib: u64) -> u64 {
        if !self.enabled {
            return 0;
        }
        let in_llc = self.resident_kib(prof).saturating_sub(missing_kib);
        round_u64(in_llc.min(self.private_kib) as f64 * self.private_refill_ns_per_kib)
    }

    /// The part of a footprint the cache holds for its context.
    pub fn resident_kib(&self, prof: &CacheProfile) -> u64 {
        prof.resident_kib.min(self.capacity_kib)
    }

    /// KiB a context of `footprint_kib` misses when it runs again, having left with
    /// `missing_kib` missing, after others loaded `evicting_kib` into this pCPU's cache
    /// since it left (None: cold — first run or migration): what it still had resident
    /// is evicted in proportion to what others loaded, against the capacity.
    pub fn missing_on_return(
        &self,
        prof: &CacheProfile,
        missing_kib: u64,
        evicting_kib: Option<u64>,
    ) -> u64 {
        if !self.enabled {
            return 0;
        }
        let resident = self.resident_kib(prof);
        let missing = missing_kib.min(resident);
        match evicting_kib {
            None => resident,
            Some(e) => {
                let frac = (e as f64 / self.capacity_kib as f64).min(1.0);
                missing + round_u64((resident - missing) as f64 * frac)
            }
        }
    }

    /// Stall to re-fetch `kib`.
    pub fn refill_ns(&self, prof: &CacheProfile, kib: u64) -> u64 {
        round_u64(kib as f64 * prof.refill_ns_per_kib)
    }

    /// Wall time a running context needs for `progress` ns of work with `refill_left`
    /// ns of re-fetch stall to go (the exact inverse bound of `split_elapsed`: the work
    /// is done by then).
    #[inline]
    pub fn wall_for_progress(&self, prof: &CacheProfile, progress: u64, refill_left: u64) -> u64 {
        let rate = prof.stall_rate();
        if refill_left == 0 || rate == 0 {
            return progress;
        }
        let stall = (progress as u128 * rate as u128).div_ceil(RATE_ONE as u128);
        progress + (stall.min(refill_left as u128) as u64)
    }

    /// Splits `wall` ns of a running context's work time into (progress, re-fetch
    /// stall), the stall at most `refill_left`.
    #[inline(always)]
    pub fn split_elapsed(&self, prof: &CacheProfile, wall: u64, refill_left: u64) -> (u64, u64) {
        if refill_left == 0 {
            return (wall, 0);
        }
        let rate = prof.stall_rate();
        if rate == 0 {
            // It touches nothing (or a miss costs nothing): no stall.
            return (wall, 0);
        }
        // wall x RATE_ONE / (RATE_ONE + rate), in u64 when the product fits (any wall
        // below 4.29 s: always, in practice) — the same quotient, without a 128-bit
        // division.
        let at_rate = if wall < (1 << 32) {
            (wall << 32) / (RATE_ONE + rate)
        } else {
            (wall as u128 * RATE_ONE as u128 / (RATE_ONE + rate) as u128) as u64
        };
        let stall = (wall - at_rate).min(refill_left);
        (wall - stall, stall)
    }

    /// KiB a context of `footprint_kib` streams through the cache beyond its resident
    /// part while running `ran_ns` (a footprint larger than the cache keeps missing on
    /// its overflow — native capacity misses — and so keeps loading the cache).
    /// KiB per ns a running context streams through the cache beyond what it keeps
    /// resident (its capacity misses), uncapped.
    pub fn streamed_kib_per_ns(&self, prof: &CacheProfile) -> f64 {
        let resident = self.resident_kib(prof);
        if !self.enabled || prof.load_cap_kib <= resident {
            return 0.0;
        }
        let overflow = (prof.load_cap_kib - resident) as f64 / prof.load_cap_kib as f64;
        prof.touch_kib_per_us / 1e3 * overflow
    }

    pub fn streamed_kib(&self, prof: &CacheProfile, ran_ns: u64) -> u64 {
        let resident = self.resident_kib(prof);
        if !self.enabled || prof.load_cap_kib <= resident {
            return 0;
        }
        let overflow = (prof.load_cap_kib - resident) as f64 / prof.load_cap_kib as f64;
        let t = ran_ns as f64 / 1e3 * prof.touch_kib_per_us * overflow;
        (t as u64).min(self.capacity_kib)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp() -> Footprint {
        Footprint {
            enabled: true,
            capacity_kib: 1000,
            topo: Topology::new(8, 2, 4, 1),
            private_kib: 300,
            private_refill_ns_per_kib: 20.0,
        }
    }

    #[test]
    fn a_move_within_the_llc_refills_only_the_private_caches_from_it() {
        let f = fp();
        assert_eq!(f.moved(1, 1), Moved::Same);
        assert_eq!(f.moved(2, 3), Moved::SameCore);
        assert_eq!(f.moved(0, 3), Moved::SameLlc);
        assert_eq!(f.moved(3, 4), Moved::Cold);
        // 500 KiB resident, 100 missing: 300 of the 400 still in the LLC, at 20 ns/KiB.
        assert_eq!(f.private_refill_ns(&pr(500), 100), 6_000);
        // Less than the private caches hold left in the LLC: that much.
        assert_eq!(f.private_refill_ns(&pr(500), 450), 1_000);
        // A working set larger than the pCPU's share: capped at the share first.
        assert_eq!(f.private_refill_ns(&pr(5000), 900), 2_000);
    }

    /// 4 KiB/us at 150 ns/KiB: 0.6 ns of stall per ns of progress.
    fn pr(kib: u64) -> CacheProfile {
        CacheProfile::new(kib, kib, 150.0, 4.0)
    }

    #[test]
    fn only_what_was_resident_is_evicted() {
        let f = fp();
        assert_eq!(f.missing_on_return(&pr(500), 0, Some(0)), 0);
        assert_eq!(f.missing_on_return(&pr(500), 0, Some(500)), 250);
        assert_eq!(f.missing_on_return(&pr(500), 0, Some(5000)), 500);
        assert_eq!(f.missing_on_return(&pr(5000), 0, None), 1000);
        // A partial refill survives: 200 still missing, half of the other 300 evicted.
        assert_eq!(f.missing_on_return(&pr(500), 200, Some(500)), 350);
        // Nothing loaded since it left: exactly what it left missing.
        assert_eq!(f.missing_on_return(&pr(500), 200, Some(0)), 200);
        assert_eq!(f.refill_ns(&pr(1), 100), 15_000);
        let off = Footprint {
            enabled: false,
            ..fp()
        };
        assert_eq!(off.missing_on_return(&pr(500), 0, None), 0);
    }

    #[test]
    fn refill_slows_progress_and_ends() {
        let (f, p1) = (fp(), pr(1));
        // 1000 ns of progress with plenty to re-fetch: 600 ns of stall (rounded up).
        assert_eq!(f.wall_for_progress(&p1, 1000, 1_000_000), 1601);
        assert_eq!(f.split_elapsed(&p1, 1601, 1_000_000), (1000, 601));
        // The stall ends when the missing data is back: then full speed.
        assert_eq!(f.wall_for_progress(&p1, 1000, 300), 1300);
        assert_eq!(f.split_elapsed(&p1, 1300, 300), (1000, 300));
        assert_eq!(f.split_elapsed(&p1, 5000, 300), (4700, 300));
        // Nothing missing: no slowdown.
        assert_eq!(f.wall_for_progress(&p1, 1000, 0), 1000);
        assert_eq!(f.split_elapsed(&p1, 1000, 0), (1000, 0));
    }

    #[test]
    fn the_wall_time_always_covers_the_work() {
        let f = fp();
        let p1 = CacheProfile::new(1, 1, 137.0, 3.3);
        for p in [1u64, 2, 3, 7, 999, 1_000_003, 77_777_777] {
            for left in [0u64, 1, 5, 1000, 123_456, u64::MAX / 4] {
                let w = f.wall_for_progress(&p1, p, left);
                let (prog, stall) = f.split_elapsed(&p1, w, left);
                assert!(prog >= p, "p {p} left {left}: wall {w} gives {prog}");
                assert!(stall <= left);
                assert_eq!(prog + stall, w);
            }
        }
    }

    #[test]
    fn a_short_section_pays_only_for_what_it_touches() {
        let (f, p1) = (fp(), pr(1));
        let missing = f.refill_ns(&p1, 1000); // the whole resident set: 150 us of stall
                                              // A 2 us critical section touches 8 KiB: 1.2 us of stall, not 150 us.
        let (prog, stall) = f.split_elapsed(&p1, f.wall_for_progress(&p1, 2_000, missing), missing);
        assert_eq!(prog, 2_000);
        assert!((1_200..=1_201).contains(&stall), "{stall}");
    }

    #[test]
    fn overflow_streams_through_the_cache() {
        let f = fp();
        assert_eq!(f.streamed_kib(&pr(800), 1_000_000), 0);
        // 3000 KiB on 1000: 2/3 of 4 KiB/us over 100 us = 266 KiB.
        assert_eq!(f.streamed_kib(&pr(3000), 100_000), 266);
        assert_eq!(f.streamed_kib(&pr(3000), 100_000_000), 1000);
    }
}
