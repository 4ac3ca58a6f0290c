//! The footprint cache model. Each context (vCPU) has a cache-resident working set.
//! A pCPU counts the KiB every context brings into its cache; when a context comes
//! back, the KiB loaded by others since it left evict that fraction of its working set
//! (all of it after a migration or on first run), and refetching it stalls the guest
//! for `refill_ns_per_kib` per KiB.

use crate::scenario::{CacheConfig, CacheModel};

#[derive(Clone, Debug)]
pub struct Footprint {
    pub enabled: bool,
    pub capacity_kib: u64,
    pub refill_ns_per_kib: f64,
    pub touch_kib_per_us: f64,
}

impl Footprint {
    pub fn new(c: &CacheConfig) -> Footprint {
        Footprint {
            enabled: c.model == CacheModel::Footprint,
            capacity_kib: c.kib_per_pcpu,
            refill_ns_per_kib: c.refill_ns_per_kib,
            touch_kib_per_us: c.touch_kib_per_us,
        }
    }

    /// KiB to refetch for a context of `footprint_kib` that returns to a pCPU after
    /// `evicting_kib` were loaded there by others (None: cold — first run or migration).
    pub fn refetch_kib(&self, footprint_kib: u64, evicting_kib: Option<u64>) -> u64 {
        if !self.enabled {
            return 0;
        }
        let resident = footprint_kib.min(self.capacity_kib);
        match evicting_kib {
            None => resident,
            Some(e) => {
                let frac = (e as f64 / self.capacity_kib as f64).min(1.0);
                (resident as f64 * frac).round() as u64
            }
        }
    }

    /// KiB a context of `footprint_kib` touches while running `ran_ns` (beyond what it
    /// refetched at switch-in), which evicts other contexts' data.
    pub fn touched_kib(&self, footprint_kib: u64, ran_ns: u64) -> u64 {
        if !self.enabled {
            return 0;
        }
        let t = (ran_ns as f64 / 1e3 * self.touch_kib_per_us) as u64;
        t.min(footprint_kib.min(self.capacity_kib))
    }

    pub fn refill_ns(&self, kib: u64) -> u64 {
        (kib as f64 * self.refill_ns_per_kib).round() as u64
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
            refill_ns_per_kib: 10.0,
            touch_kib_per_us: 1.0,
        };
        assert_eq!(f.touched_kib(500, 100_000), 100);
        assert_eq!(f.touched_kib(500, 10_000_000), 500);
        assert_eq!(f.refetch_kib(500, Some(0)), 0);
        assert_eq!(f.refetch_kib(500, Some(500)), 250);
        assert_eq!(f.refetch_kib(500, Some(5000)), 500);
        assert_eq!(f.refetch_kib(5000, None), 1000);
        assert_eq!(f.refill_ns(100), 1000);
    }
}
