//! The TLB refill model. A context that comes back to a CPU after other address spaces
//! ran there finds its translations evicted and re-walks the page tables for the pages
//! it touches first (its wake path: kernel entry, scheduler, its stack and data). A
//! page walk takes 4 memory references natively and 24 under nested paging (a 2-D walk
//! of a 4-level guest table through a 4-level EPT: (4+1)·(4+1) − 1). Eviction is
//! proportional to the pages other contexts brought into the TLB since the context
//! left (a run of t µs loads t × rate pages), against the TLB's capacity.

use crate::scenario::{CacheConfig, CacheModel};
use crate::sim::round::round_u64;

/// Memory references of one page walk natively (4-level table).
pub const WALK_REFS_NATIVE: u64 = 4;
/// Memory references of one 2-D page walk under nested paging (4-level guest table,
/// 4-level EPT).
pub const WALK_REFS_NESTED: u64 = 24;

#[derive(Clone, Debug)]
pub struct Tlb {
    pub enabled: bool,
    pub entries: u64,
    pub touch_pages_per_us: f64,
    pub resume_pages: u64,
    pub walk_ref_ns: f64,
    /// References per walk: native or nested.
    pub walk_refs: u64,
}

impl Tlb {
    pub fn new(c: &CacheConfig, nested: bool) -> Tlb {
        Tlb {
            enabled: c.model != CacheModel::None && c.tlb_resume_pages > 0,
            entries: c.tlb_entries,
            touch_pages_per_us: c.tlb_touch_pages_per_us,
            resume_pages: c.tlb_resume_pages,
            walk_ref_ns: c.page_walk_ref_ns,
            walk_refs: if nested {
                WALK_REFS_NESTED
            } else {
                WALK_REFS_NATIVE
            },
        }
    }

    /// Pages a context running `ran_ns` brings into the TLB (capped at its capacity:
    /// more cannot evict more).
    pub fn loaded_pages(&self, ran_ns: u64) -> u64 {
        if !self.enabled {
            return 0;
        }
        ((ran_ns as f64 / 1e3 * self.touch_pages_per_us) as u64).min(self.entries)
    }

    /// Stall of a context resuming after others loaded `evicting` pages since it left
    /// (None: it never ran here — all its translations are missing).
    pub fn refill_ns(&self, evicting: Option<u64>) -> u64 {
        if !self.enabled {
            return 0;
        }
        let frac = match evicting {
            None => 1.0,
            Some(e) => (e as f64 / self.entries as f64).min(1.0),
        };
        let misses = self.resume_pages.min(self.entries) as f64 * frac;
        round_u64(misses * self.walk_refs as f64 * self.walk_ref_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlb(nested: bool) -> Tlb {
        let c = CacheConfig {
            tlb_entries: 512,
            tlb_touch_pages_per_us: 16.0,
            tlb_resume_pages: 64,
            page_walk_ref_ns: 10.0,
            ..CacheConfig::default()
        };
        Tlb::new(&c, nested)
    }

    #[test]
    fn nested_walks_cost_six_times_native_ones() {
        assert_eq!(tlb(false).refill_ns(None), 64 * 4 * 10);
        assert_eq!(tlb(true).refill_ns(None), 64 * 24 * 10);
    }

    #[test]
    fn eviction_is_proportional_and_capped() {
        let t = tlb(false);
        assert_eq!(t.refill_ns(Some(0)), 0);
        assert_eq!(t.refill_ns(Some(256)), 32 * 4 * 10);
        assert_eq!(t.refill_ns(Some(10_000)), 64 * 4 * 10);
        assert_eq!(t.loaded_pages(1_000), 16);
        assert_eq!(t.loaded_pages(1_000_000_000), 512);
    }

    #[test]
    fn no_cache_model_means_no_tlb_stalls() {
        let c = CacheConfig {
            model: CacheModel::None,
            ..CacheConfig::default()
        };
        let t = Tlb::new(&c, true);
        assert_eq!(t.refill_ns(None), 0);
        assert_eq!(t.loaded_pages(1_000_000), 0);
    }
}
