//! NUMA memory: a VM whose memory is bound to a node (`vm.numa_node`, libvirt's
//! `<numatune>` in strict mode) fetches from remote memory while one of its vCPUs runs
//! on a pCPU of another node. Every KiB the cache model fetches from memory then costs
//! `host.topology.remote_memory_ratio` times its local cost:
//!
//! - the re-fetch of a working set after a migration or an eviction
//!   (`refill_ns_per_kib`, host/cache.rs) — paid as the usual re-fetch stall;
//! - the capacity misses a working set larger than its share of the cache streams
//!   while it runs, which the cache model counts as part of the native speed: remote,
//!   they cost `(ratio − 1) × refill_ns_per_kib` more per KiB, a constant slowdown of
//!   the vCPU's work for as long as it runs there (host/speed.rs).
//!
//! A VM whose memory is not bound is modelled as local wherever its vCPUs run.

use crate::host::cache::{CacheProfile, Footprint};
use crate::host::speed::ONE;
use crate::sim::round::round_u64;
use crate::sim::PcpuId;

#[derive(Clone, Copy, Debug)]
pub struct Numa {
    node_pcpus: u32,
    ratio: f64,
}

impl Numa {
    /// `None` when no VM's memory is bound (or the host is one node): nothing to model.
    pub fn new(pcpus: u32, nodes: u32, ratio: f64, any_bound: bool) -> Option<Numa> {
        (nodes > 1 && any_bound).then(|| Numa {
            node_pcpus: (pcpus / nodes).max(1),
            ratio,
        })
    }

    pub fn node_of(&self, p: PcpuId) -> u32 {
        p.0 / self.node_pcpus
    }

    /// A re-fetch of `local_ns` from remote memory.
    pub fn remote_refill(&self, local_ns: u64) -> u64 {
        round_u64(local_ns as f64 * self.ratio)
    }

    /// The speed of a remote vCPU's work: its streamed capacity misses cost
    /// `ratio − 1` fetches more.
    pub fn remote_speed(&self, cache: &Footprint, prof: &CacheProfile) -> u64 {
        let extra = cache.streamed_kib_per_ns(prof) * prof.refill_ns_per_kib * (self.ratio - 1.0);
        ((ONE as f64 / (1.0 + extra)).round() as u64).clamp(1, ONE)
    }
}
