//! The guest kernel: per-vCPU thread runqueues (CFS or EEVDF), idle, wake-ups, and the
//! execution of workload programs.

pub mod balance;
pub mod consolidation;
pub mod eevdf;
pub mod gleaner;
pub mod idle;
pub mod interpreter;
pub mod ipi;
pub mod kernel;
pub mod nic;
pub mod preempt;
pub mod runqueue;
pub mod spinlock;
pub mod sync;
pub mod thread;
pub mod timer;
