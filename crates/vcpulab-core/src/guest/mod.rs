//! The guest kernel: per-vCPU thread runqueues (CFS-like), idle, wake-ups, and the
//! execution of workload programs.

pub mod kernel;
pub mod thread;
