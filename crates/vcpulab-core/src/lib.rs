//! vcpulab-core: a deterministic discrete-event simulator of consolidated virtualized
//! multicore hosts — pCPUs, VMs and vCPUs, host schedulers, guest kernels, workloads.

pub mod api;
pub mod guest;
pub mod host;
pub mod hv;
pub mod metrics;
pub mod scenario;
pub mod sim;
pub mod workload;

pub use api::{explain, kernels, platforms, presets, resolve, run, run_traced, workloads};
pub use metrics::report::Report;
pub use scenario::{Scenario, ScenarioError};
