//! The host machine: pCPUs, the cost table and the cache model.

pub mod access;
pub mod cache;
pub mod cpumask;
pub mod frag;
pub mod llc;
pub mod llc_study;
pub mod numa;
pub mod pcpu;
pub mod runq;
pub mod smt;
pub mod speed;
pub mod tlb;
pub mod topology;
