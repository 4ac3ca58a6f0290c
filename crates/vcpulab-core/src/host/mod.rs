//! The host machine: pCPUs, the cost table and the cache model.

pub mod cache;
pub mod cpumask;
pub mod frag;
pub mod pcpu;
pub mod runq;
pub mod tlb;
