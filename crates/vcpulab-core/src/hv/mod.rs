//! The hypervisor: vCPUs and their states, VMs, host schedulers and the dispatch
//! mechanics (switch costs, slice timers, halts and wake-ups).

pub mod apple;
pub mod cosched;
pub mod dispatch;
pub mod haltpoll;
pub mod irq;
pub mod placement;
pub mod ple;
pub mod ple_epochs;
pub mod preemption;
pub mod sched;
pub mod uvf;
pub mod vcpu;
pub mod vm;
pub mod wake_path;
