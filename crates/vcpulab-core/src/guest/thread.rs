//! Guest threads: a program counter over a compiled program, the remaining work of the
//! current operation, and scheduling state.

use crate::sim::{Nanos, Rng, VcpuId, VmId};
use crate::workload::program::Program;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    /// On its vCPU's runqueue.
    Runnable,
    /// Its vCPU's current thread.
    Running,
    Blocked,
    Done,
}

#[derive(Clone, Debug)]
pub struct Thread {
    pub vm: VmId,
    pub name: String,
    pub program: Arc<Program>,
    pub pc: u32,
    pub loops: Vec<u64>,
    pub state: ThreadState,
    /// The vCPU it is queued on, runs on, or last ran on.
    pub vcpu: VcpuId,
    /// Remaining work of the current operation.
    pub remaining: Nanos,
    pub in_kernel: bool,
    /// Kernel work to do before resuming the operation (switch-in, syscall return).
    pub debt: Nanos,
    pub vruntime: u64,
    pub slice_used: u64,
    pub timer_gen: u32,
    /// When it was last made runnable by a wake-up (None: not since it last ran).
    pub woken_at: Option<Nanos>,
    pub rng: Rng,
    pub finite: bool,
}
