//! Host topology: SMT siblings, last-level caches and NUMA nodes, and the scheduling
//! domains Linux builds over them.
//!
//! The model numbers logical CPUs so that each level's groups are consecutive: pCPUs
//! `k·t … k·t + t − 1` are one core's `t` hardware threads, an LLC is a run of whole
//! cores and a NUMA node a run of whole LLCs. (Linux often numbers a core's threads
//! `k` and `k + cores`; a cpuset written for such a machine must be translated.)
//!
//! Two things follow from the topology:
//!
//! - **SMT throughput** (`World::smt_*`, sim/smt.rs): a hardware thread whose sibling
//!   is busy runs guest work at `host.topology.sibling_busy_speed` of its lone speed.
//! - **Scheduling domains** for the Linux host schedulers (hv/sched/cfs.rs, eevdf.rs):
//!   `build_sched_domains()` (kernel/sched/topology.c) stacks SMT, MC (the LLC), the
//!   NUMA node and the whole machine, dropping a level that spans no more than the one
//!   below (`sd_degenerate()`). An idle pCPU's newidle balance walks them bottom up
//!   and stops at the first pull; the periodic balance visits each level whose
//!   interval has passed (hv/sched/balance.rs).

use std::ops::Range;

/// The most levels a host has: SMT, LLC, NUMA node, host.
pub const MAX_LEVELS: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Smt,
    Llc,
    Node,
    Host,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domain {
    pub level: Level,
    /// pCPUs per domain at this level.
    pub span: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pcpus: u32,
    threads_per_core: u32,
    llc: u32,
    /// More than one NUMA node.
    numa: bool,
    /// Bottom up; the last one is the whole host.
    levels: Vec<Domain>,
}

impl Topology {
    /// `llc_pcpus` at or above the host's size: one LLC. The scenario's validation
    /// guarantees whole cores per LLC and whole LLCs per node.
    pub fn new(pcpus: u32, threads_per_core: u32, llc_pcpus: u32, numa_nodes: u32) -> Topology {
        let pcpus = pcpus.max(1);
        let threads_per_core = threads_per_core.clamp(1, pcpus);
        let llc = llc_pcpus.clamp(1, pcpus);
        let node = pcpus / numa_nodes.clamp(1, pcpus);
        let mut levels: Vec<Domain> = Vec::with_capacity(MAX_LEVELS);
        for (level, span) in [
            (Level::Smt, threads_per_core),
            (Level::Llc, llc),
            (Level::Node, node),
            (Level::Host, pcpus),
        ] {
            // sd_degenerate(): a level no wider than the one below it adds nothing (nor
            // does a single node).
            let below = levels.last().map_or(1, |d| d.span);
            let single_node = level == Level::Node && numa_nodes <= 1;
            if (span > below && !single_node) || (level == Level::Host && levels.is_empty()) {
                levels.push(Domain { level, span });
            }
        }
        Topology {
            pcpus,
            threads_per_core,
            llc,
            numa: numa_nodes > 1 && pcpus > 1,
            levels,
        }
    }

    /// Whether the host has more than one NUMA node (its widest level is a NUMA level).
    pub fn numa(&self) -> bool {
        self.numa
    }

    pub fn pcpus(&self) -> u32 {
        self.pcpus
    }

    /// pCPUs per last-level cache.
    #[inline]
    pub fn llc_pcpus(&self) -> u32 {
        self.llc
    }

    pub fn threads_per_core(&self) -> u32 {
        self.threads_per_core
    }

    /// The scheduling domains, bottom up; the last spans the host.
    pub fn levels(&self) -> &[Domain] {
        &self.levels
    }

    /// The pCPUs of `p`'s domain of `span` pCPUs.
    pub fn domain_of(&self, p: u32, span: u32) -> Range<u32> {
        let lo = p / span * span;
        lo..(lo + span).min(self.pcpus)
    }

    /// `p`'s core: its hardware threads.
    pub fn core_of(&self, p: u32) -> Range<u32> {
        self.domain_of(p, self.threads_per_core)
    }

    /// `p`'s last-level cache.
    pub fn llc_of(&self, p: u32) -> Range<u32> {
        self.domain_of(p, self.llc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(t: &Topology) -> Vec<(Level, u32)> {
        t.levels().iter().map(|d| (d.level, d.span)).collect()
    }

    #[test]
    fn levels_follow_linux_and_drop_degenerate_ones() {
        // One LLC, no SMT: one level.
        assert_eq!(spans(&Topology::new(16, 1, 16, 1)), [(Level::Llc, 16)]);
        assert_eq!(spans(&Topology::new(1, 1, 16, 1)), [(Level::Host, 1)]);
        // Two LLCs: the LLC and the host.
        assert_eq!(
            spans(&Topology::new(32, 1, 16, 1)),
            [(Level::Llc, 16), (Level::Host, 32)]
        );
        // A host not a multiple of the LLC: the last LLC is partial.
        assert_eq!(
            spans(&Topology::new(24, 1, 16, 1)),
            [(Level::Llc, 16), (Level::Host, 24)]
        );
        // SMT 2, LLCs of 16, 4 nodes of 64, 256 pCPUs.
        assert_eq!(
            spans(&Topology::new(256, 2, 16, 4)),
            [
                (Level::Smt, 2),
                (Level::Llc, 16),
                (Level::Node, 64),
                (Level::Host, 256)
            ]
        );
        assert!(Topology::new(256, 2, 16, 4).numa() && !Topology::new(32, 1, 16, 1).numa());
        // A node that is one LLC adds no level; an LLC that is one core neither.
        assert_eq!(
            spans(&Topology::new(32, 2, 2, 16)),
            [(Level::Smt, 2), (Level::Host, 32)]
        );
    }

    #[test]
    fn domains_are_consecutive_pcpus() {
        let t = Topology::new(24, 2, 8, 3);
        assert_eq!(t.core_of(5), 4..6);
        assert_eq!(t.llc_of(5), 0..8);
        assert_eq!(t.domain_of(17, 8), 16..24);
        let t = Topology::new(24, 1, 16, 1);
        assert_eq!(t.llc_of(20), 16..24);
    }
}
