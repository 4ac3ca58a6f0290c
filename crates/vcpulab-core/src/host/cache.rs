//! The footprint cache model. Each context (vCPU) has a cache-resident working set.
//! A pCPU counts the KiB every context brings into its cache; when a context comes
//! back, the KiB loaded by others since it left evict that fraction of its working set
//! (all of it after a migration or on first run), and refetching it stalls the guest
//! for `refill_ns_per_kib` per KiB.
//!
//! A context's numbers are a `CacheProfile`: with `host.cache.model = "footprint"`, its
//! workload's footprint and the host-wide rates; with `"llc"`, derived from its LLC
//! access profile (host/access.rs `AccessProfile::coupling`) where it has one.

use crate::scenario::{CacheConfig, CacheModel};

/// One context's parameters of the eviction-and-refetch model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheProfile {
    /// Data that is worth refetching after it was evicted.
    pub resident_kib: u64,
    /// Upper bound on what the context loads while running (evicting others).
    pub load_cap_kib: u64,
    pub refill_ns_per_kib: f64,
    pub touch_kib_per_us: f64,
}

impl CacheProfile {
    /// The footprint model's profile of a context of `footprint_kib`.
    pub fn footprint(c: &CacheConfig, footprint_kib: u64) -> CacheProfile {
        CacheProfile {
            resident_kib: footprint_kib,
            load_cap_kib: footprint_kib,
            refill_ns_per_kib: c.refill_ns_per_kib,
            touch_kib_per_us: c.touch_kib_per_us,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Footprint {
    pub enabled: bool,
    pub capacity_kib: u64,
}

impl Footprint {
    pub fn new(c: &CacheConfig) -> Footprint {
        Footprint {
            enabled: c.model != CacheModel::None,
            capacity_kib: c.kib_per_pcpu,
        }
    }

    /// KiB to refetch for a context that returns to a pCPU after `evicting_kib` were
    /// loaded there by others (None: cold — first run or migration).
    pub fn refetch_kib(&self, prof: &CacheProfile, evicting_kib: Option<u64>) -> u64 {
        if !self.enabled {
            return 0;
        }
        let resident = prof.resident_kib.min(self.capacity_kib);
        match evicting_kib {
            None => resident,
            Some(e) => {
                let frac = (e as f64 / self.capacity_kib as f64).min(1.0);
                (resident as f64 * frac).round() as u64
            }
        }
    }

    /// KiB a context touches while running `ran_ns` (beyond what it refetched at
    /// switch-in), which evicts other contexts' data.
    pub fn touched_kib(&self, prof: &CacheProfile, ran_ns: u64) -> u64 {
        if !self.enabled {
            return 0;
        }
        let t = (ran_ns as f64 / 1e3 * prof.touch_kib_per_us) as u64;
        t.min(prof.load_cap_kib.min(self.capacity_kib))
    }

    pub fn refill_ns(&self, prof: &CacheProfile, kib: u64) -> u64 {
        (kib as f64 * prof.refill_ns_per_kib).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn eviction_is_proportional_and_capped() {
        let f = Footprint {
            enabled: true,
            capacity_kib: 1000,
        };
        let prof = |fp: u64| CacheProfile {
            resident_kib: fp,
            load_cap_kib: fp,
            refill_ns_per_kib: 10.0,
            touch_kib_per_us: 1.0,
        };
        assert_eq!(f.touched_kib(&prof(500), 100_000), 100);
        assert_eq!(f.touched_kib(&prof(500), 10_000_000), 500);
        assert_eq!(f.refetch_kib(&prof(500), Some(0)), 0);
        assert_eq!(f.refetch_kib(&prof(500), Some(500)), 250);
        assert_eq!(f.refetch_kib(&prof(500), Some(5000)), 500);
        assert_eq!(f.refetch_kib(&prof(5000), None), 1000);
        assert_eq!(f.refill_ns(&prof(5000), 100), 1000);
    }
}
