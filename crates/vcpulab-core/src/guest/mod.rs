//! The guest kernel: per-vCPU thread runqueues (CFS-like), idle, wake-ups, and the
//! execution of workload programs.

pub mod consolidation;
pub mod gleaner;
pub mod ipi;
pub mod kernel;
pub mod spinlock;
pub mod sync;
pub mod thread;
