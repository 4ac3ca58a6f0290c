//! Virtual machines: their vCPUs, guest settings and per-VM measurements.

use crate::metrics::Hist;
use crate::sim::Nanos;

/// Guest kernel settings of one VM, in nanoseconds.
#[derive(Clone, Debug)]
pub struct GuestParams {
    pub idle_poll: bool,
    pub latency: u64,
    pub min_gran: u64,
    pub wakeup_gran: u64,
    pub timer_slack: u64,
}

#[derive(Clone, Debug)]
pub struct Vm {
    pub name: String,
    pub weight: u32,
    pub cap: Option<f64>,
    pub first_vcpu: u32,
    pub nvcpus: u32,
    pub guest: GuestParams,
    pub model: String,
    pub footprint_kib: u64,
    /// Threads with finite programs, and how many of them have finished.
    pub finite_threads: u32,
    pub finished_threads: u32,
    pub completion: Option<Nanos>,
    pub units: u64,
    pub wake_latency: Hist,
    /// Scheduling latency: from runnable to dispatched, per dispatch.
    pub dispatch_wait: Hist,
}
