//! Workloads: the operation language, duration distributions and the catalog of app
//! models. A workload turns into thread groups, each a count of threads running one
//! compiled program.

pub mod catalog;
pub mod dist;
pub mod program;

use crate::scenario::WorkloadSpec;
use program::{Program, Symbols};
use std::rc::Rc;

#[derive(Clone, Debug)]
pub struct ThreadGroup {
    pub name: String,
    pub threads: u32,
    pub idle_priority: bool,
    /// Index of the group's process (address space) within the workload; 0 is the main
    /// process.
    pub process: u16,
    /// Each thread is a process of its own, `process`, `process + 1`, … (SPECrate's
    /// copies).
    pub process_per_thread: bool,
    pub program: Rc<Program>,
}

impl ThreadGroup {
    /// The process of the group's `k`-th thread.
    pub fn process_of(&self, k: u32) -> u16 {
        if self.process_per_thread {
            self.process + k as u16
        } else {
            self.process
        }
    }

    /// One past the highest process index the group uses.
    pub fn processes_end(&self) -> usize {
        self.process as usize
            + if self.process_per_thread {
                self.threads as usize
            } else {
                1
            }
    }
}

#[derive(Clone, Debug)]
pub struct BuiltWorkload {
    pub model: String,
    pub groups: Vec<ThreadGroup>,
    pub footprint_kib: u64,
    /// True when no thread ever finishes: the VM is measured by throughput.
    pub forever: bool,
    /// The workload's synchronization objects.
    pub symbols: Symbols,
    /// Parties of each barrier: the threads whose program uses it.
    pub barrier_parties: Vec<u32>,
    pub queue_capacity: u32,
}

impl BuiltWorkload {
    fn finish(mut self) -> BuiltWorkload {
        self.barrier_parties = vec![0; self.symbols.barriers.len()];
        for g in &self.groups {
            for b in g.program.barriers_used() {
                self.barrier_parties[b as usize] += g.threads;
            }
        }
        self
    }
}

/// An error inside a workload spec: `key` is relative to the `workload` table.
#[derive(Clone, Debug)]
pub struct WorkloadError {
    pub key: String,
    pub message: String,
}

impl WorkloadError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        WorkloadError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Builds a VM's workload from its spec.
pub fn build(spec: &WorkloadSpec, vcpus: u32) -> Result<BuiltWorkload, WorkloadError> {
    let threads = spec.threads.unwrap_or(vcpus);
    if threads == 0 || threads > 100_000 {
        return Err(WorkloadError::new(
            "threads",
            format!("{threads} is not allowed; expected 1 to 100000"),
        ));
    }
    let mut w = if spec.model == "program" {
        if spec.group.is_empty() {
            return Err(WorkloadError::new(
                "group",
                "model \"program\" needs at least one [[vm.workload.group]] with ops",
            ));
        }
        if !spec.params.is_empty() {
            return Err(WorkloadError::new(
                "params",
                "model \"program\" takes no params",
            ));
        }
        let mut groups = Vec::new();
        let mut forever = false;
        let mut symbols = Symbols::default();
        let mut processes: Vec<&str> = vec![""];
        for (i, g) in spec.group.iter().enumerate() {
            let name = g.process.as_deref().unwrap_or("");
            let process = match processes.iter().position(|p| *p == name) {
                Some(k) => k,
                None => {
                    processes.push(name);
                    processes.len() - 1
                }
            };
            if process > 64 {
                return Err(WorkloadError::new(
                    format!("group.{i}.process"),
                    "a workload may name at most 64 processes",
                ));
            }
            let p = Program::compile_with(&g.ops, &mut symbols)
                .map_err(|m| WorkloadError::new(format!("group.{i}.ops"), m))?;
            if g.threads == 0 {
                return Err(WorkloadError::new(
                    format!("group.{i}.threads"),
                    "must be at least 1",
                ));
            }
            forever |= p.forever;
            groups.push(ThreadGroup {
                name: g.name.clone().unwrap_or_else(|| format!("g{i}")),
                threads: g.threads,
                idle_priority: g.priority == crate::scenario::Priority::Idle,
                process: process as u16,
                process_per_thread: false,
                program: Rc::new(p),
            });
        }
        BuiltWorkload {
            model: "program".into(),
            groups,
            footprint_kib: 256,
            forever,
            symbols,
            barrier_parties: Vec::new(),
            queue_capacity: 20,
        }
    } else {
        if !spec.group.is_empty() {
            return Err(WorkloadError::new(
                "group",
                format!(
                    "thread groups are only for model = \"program\", not {:?}",
                    spec.model
                ),
            ));
        }
        catalog::build(&spec.model, &spec.params, threads)?
    };
    if let Some(f) = spec.footprint_kib {
        w.footprint_kib = f;
    }
    if let Some(c) = spec.queue_capacity {
        if c == 0 {
            return Err(WorkloadError::new(
                "queue_capacity",
                "0 is not allowed; expected at least 1",
            ));
        }
        w.queue_capacity = c;
    }
    Ok(w.finish())
}
