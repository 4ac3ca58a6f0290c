//! The catalog of app models. Each model documents its parameters; the structure modelled
//! and the source of every number are in docs/workloads.md. These are models ("-like"),
//! not the benchmarks.
//!
//! One file per family: `parsec`, `splash`, `server`, `npb`, `spec`, `trace`; the basic
//! loads (matmul, cpu-bomb, freqsleep, compute-sleep) stay here.

mod npb;
mod parsec;
mod server;
mod spec;
mod splash;
mod trace;

use super::dist::Dist;
use super::program::{DentryRef, LoopCount, LoopSpec, OpSpec, Program};
use super::{BuiltWorkload, ThreadGroup, WorkloadError};
use crate::sim::time::parse_duration;
use crate::sim::Nanos;
use std::rc::Rc;
use toml::{Table, Value};

pub struct ParamInfo {
    pub name: &'static str,
    /// Default, as a TOML literal.
    pub default: &'static str,
    pub help: &'static str,
}

/// Thread groups a model builds: (name, threads, ops).
pub type Groups = Vec<(String, u32, Vec<OpSpec>)>;

pub struct ModelInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [ParamInfo],
    pub footprint_kib: u64,
    /// Items a queue of the model holds (`Push` blocks when full); a workload's
    /// `queue_capacity` overrides it.
    pub queue_capacity: u32,
    /// Which of the model's thread groups share an address space (a process): its TLB
    /// shootdowns reach the vCPUs that have that process's mm loaded, and a thread
    /// resuming after another process ran re-walks its page tables.
    pub processes: Processes,
    build: fn(&Params, u32) -> Result<Groups, WorkloadError>,
}

/// The most processes a catalog model may make (a TLB mark per process per vCPU).
pub const MAX_PROCESSES: usize = 4096;

/// How a catalog model's thread groups map to processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processes {
    /// One multi-threaded process (pthreads, OpenMP, a server's worker threads).
    One,
    /// Each thread group is a process of its own (make's jobs and their compilers,
    /// dbench's forked clients).
    EachGroup,
    /// Each thread is a process of its own (SPECrate's copies of one program).
    EachThread,
}

/// The queue depth of the models whose source uses small bounded queues (20).
pub(crate) const QUEUE_DEPTH: u32 = 20;

/// Model parameters with defaults filled in.
pub struct Params {
    values: Table,
}

impl Params {
    fn get(&self, k: &str) -> &Value {
        // Every key is present: defaults are filled before building.
        &self.values[k]
    }
    pub fn dur(&self, k: &str) -> Result<Nanos, WorkloadError> {
        let v = self.get(k);
        v.as_str().and_then(parse_duration).ok_or_else(|| {
            WorkloadError::new(
                format!("params.{k}"),
                format!("{v} is not a duration like \"10ms\""),
            )
        })
    }
    pub fn dist(&self, k: &str) -> Result<Dist, WorkloadError> {
        let v = self.get(k);
        let s = v.as_str().ok_or_else(|| {
            WorkloadError::new(
                format!("params.{k}"),
                format!("{v} is not a duration string"),
            )
        })?;
        Dist::parse(s).map_err(|m| WorkloadError::new(format!("params.{k}"), m))
    }
    pub fn boolean(&self, k: &str) -> Result<bool, WorkloadError> {
        let v = self.get(k);
        v.as_bool().ok_or_else(|| {
            WorkloadError::new(format!("params.{k}"), format!("{v} is not true or false"))
        })
    }
    pub fn int(&self, k: &str, min: i64, max: i64) -> Result<i64, WorkloadError> {
        let v = self.get(k);
        match v.as_integer() {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(WorkloadError::new(
                format!("params.{k}"),
                format!("{v} is not allowed; expected a whole number from {min} to {max}"),
            )),
        }
    }
    /// A number (integer or float) in [min, max].
    pub fn float(&self, k: &str, min: f64, max: f64) -> Result<f64, WorkloadError> {
        let v = self.get(k);
        let x = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
        match x {
            Some(x) if x.is_finite() && x >= min && x <= max => Ok(x),
            _ => Err(WorkloadError::new(
                format!("params.{k}"),
                format!("{v} is not allowed; expected a number from {min} to {max}"),
            )),
        }
    }
    pub fn string(&self, k: &str) -> Result<&str, WorkloadError> {
        let v = self.get(k);
        v.as_str().ok_or_else(|| {
            WorkloadError::new(format!("params.{k}"), format!("{v} is not a string"))
        })
    }
    /// `n` scaled by the `scale` parameter, at least 1.
    pub fn scaled(&self, n: f64) -> Result<u64, WorkloadError> {
        let s = self.float("scale", 1e-6, 1e6)?;
        Ok((n * s).round().max(1.0) as u64)
    }
}

// ---- op constructors shared by the families (durations in ns) ----

fn ns_u(ns: f64) -> u64 {
    if ns.is_finite() {
        ns.round().max(1.0) as u64
    } else {
        1
    }
}
/// A constant duration.
pub(crate) fn dc(ns: f64) -> Dist {
    Dist::constant(Nanos(ns_u(ns)))
}
/// Exponential with mean `ns`.
pub(crate) fn dexp(ns: f64) -> Dist {
    Dist::exp_ns(ns_u(ns))
}
/// Lognormal with median `ns` and shape `sigma` (0 = constant).
pub(crate) fn dlog(ns: f64, sigma: f64) -> Dist {
    if sigma <= 0.0 {
        return dc(ns);
    }
    Dist::lognormal_ns(ns_u(ns), sigma)
}
/// Uniform in [lo, hi].
pub(crate) fn dunif(lo: f64, hi: f64) -> Dist {
    Dist::uniform_ns(ns_u(lo), ns_u(hi.max(lo)))
}
/// A kernel spinlock hold: uniform(200ns, 1.4us). Most kernel spinlocks are held for
/// less than 2^12 cycles (≈1.4 us at 3 GHz), per the KVM PLE-window comment.
pub(crate) fn khold() -> Dist {
    dunif(200.0, 1_400.0)
}
pub(crate) fn cpu(d: Dist) -> OpSpec {
    OpSpec::Compute(d)
}
pub(crate) fn kern(d: Dist) -> OpSpec {
    OpSpec::Kernel(d)
}
pub(crate) fn io(d: Dist) -> OpSpec {
    OpSpec::Io(d)
}
pub(crate) fn count(n: u64) -> OpSpec {
    OpSpec::Count(n)
}
pub(crate) fn lock(m: &str) -> OpSpec {
    OpSpec::Lock(m.into())
}
pub(crate) fn unlock(m: &str) -> OpSpec {
    OpSpec::Unlock(m.into())
}
/// A file mapping's i_mmap lock taken for writing: see `OpSpec::IMmapLockWrite`.
pub(crate) fn i_mmap_lock_write(m: &str) -> OpSpec {
    OpSpec::IMmapLockWrite(m.into())
}
pub(crate) fn i_mmap_unlock_write(m: &str) -> OpSpec {
    OpSpec::IMmapUnlockWrite(m.into())
}
/// An inode's lock: see `OpSpec::InodeLock`.
pub(crate) fn inode_lock(m: &str) -> OpSpec {
    OpSpec::InodeLock(m.into())
}
pub(crate) fn inode_unlock(m: &str) -> OpSpec {
    OpSpec::InodeUnlock(m.into())
}
/// lock(m); compute(hold); unlock(m).
pub(crate) fn critical(m: &str, hold: Dist) -> Vec<OpSpec> {
    vec![lock(m), cpu(hold), unlock(m)]
}
/// `pthread_spin_lock(m)`, `hold`, `pthread_spin_unlock(m)`: a user spinlock, spun on
/// without limit (it never sleeps).
pub(crate) fn spin_critical(m: &str, hold: Dist) -> Vec<OpSpec> {
    vec![
        OpSpec::LockSpin(super::program::LockSpinSpec {
            mutex: m.into(),
            spin: Dist::constant(crate::sim::Nanos(u64::MAX)),
            wake_all: false,
        }),
        cpu(hold),
        unlock(m),
    ]
}
fn kspin_op(l: &str, hold: Dist, rwlock: bool, dentry: DentryRef) -> OpSpec {
    OpSpec::Kspin(super::program::KspinSpec {
        lock: l.into(),
        hold,
        rwlock,
        dentry,
    })
}
pub(crate) fn kspin(l: &str, hold: Dist) -> OpSpec {
    kspin_op(l, hold, false, DentryRef::None)
}
/// A dentry's `d_lock` around a reference count change (`dentry`: a path walk's get or
/// dput's last put): a lock only on the kernels that take it (`KspinSpec::dentry`).
pub(crate) fn dentry_lock(l: &str, hold: Dist, dentry: DentryRef) -> OpSpec {
    kspin_op(l, hold, false, dentry)
}
/// A kernel rwlock_t taken for writing (write_lock; kernel spin, preemption off).
pub(crate) fn kwrite_lock(l: &str, hold: Dist) -> OpSpec {
    kspin_op(l, hold, true, DentryRef::None)
}
pub(crate) fn barrier(b: &str) -> OpSpec {
    OpSpec::Barrier(b.into())
}
pub(crate) fn spin_barrier(b: &str, spin: Dist) -> OpSpec {
    OpSpec::SpinBarrier(super::program::SpinBarrierSpec {
        name: b.into(),
        spin,
    })
}
pub(crate) fn parsec_barrier(b: &str, spin: Dist) -> OpSpec {
    OpSpec::ParsecBarrier(super::program::SpinBarrierSpec {
        name: b.into(),
        spin,
    })
}
pub(crate) fn push(q: &str) -> OpSpec {
    OpSpec::Push(q.into())
}
pub(crate) fn pop(q: &str) -> OpSpec {
    OpSpec::Pop(q.into())
}
pub(crate) fn sem_post(s: &str) -> OpSpec {
    OpSpec::SemPost(s.into())
}
pub(crate) fn sem_wait(s: &str) -> OpSpec {
    OpSpec::SemWait(s.into())
}
pub(crate) fn cond_wait(c: &str, m: &str) -> OpSpec {
    OpSpec::CondWait(super::program::CondWaitSpec {
        cond: c.into(),
        mutex: m.into(),
    })
}
pub(crate) fn cond_broadcast(c: &str) -> OpSpec {
    OpSpec::CondBroadcast(c.into())
}
pub(crate) fn tlb() -> OpSpec {
    OpSpec::TlbShootdown(0)
}
/// A loop of `n` iterations (n = 0 is raised to 1).
/// Work from dispenser `tickets`: `n` tickets an episode, each running `body`; with
/// `mutex`, each take locks it for `hold` (program.rs `OpSpec::Dispense`).
pub(crate) fn dispense(
    tickets: &str,
    n: u64,
    mutex: Option<(&str, Dist)>,
    body: Vec<OpSpec>,
) -> OpSpec {
    OpSpec::Dispense(crate::workload::program::DispenseSpec {
        tickets: tickets.into(),
        n,
        mutex: mutex.as_ref().map(|(m, _)| m.to_string()),
        hold: mutex.map(|(_, h)| h),
        body,
    })
}

pub(crate) fn rep(n: u64, body: Vec<OpSpec>) -> OpSpec {
    lp(Some(n.max(1)), body)
}
/// The outermost loop of a model: `n` times, or for ever.
pub(crate) fn outer(forever: bool, n: u64, body: Vec<OpSpec>) -> OpSpec {
    lp(if forever { None } else { Some(n.max(1)) }, body)
}

/// A deterministic pseudo-random permutation offset for thread `i` (to de-correlate the
/// object names threads of different groups visit; the language has no random choice of
/// object).
pub(crate) fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) const SCALE_HELP: &str =
    "multiplies the amount of work (iterations); 1 = the size named in docs/workloads.md";
pub(crate) const FOREVER: ParamInfo = ParamInfo {
    name: "forever",
    default: "false",
    help: "loop the outer structure until the run ends (throughput; count = units done)",
};

fn compute(d: Dist) -> OpSpec {
    OpSpec::Compute(d)
}
fn lp(n: Option<u64>, body: Vec<OpSpec>) -> OpSpec {
    OpSpec::Loop(LoopSpec {
        n: match n {
            Some(n) => LoopCount::Times(n),
            None => LoopCount::Forever("forever".into()),
        },
        body,
    })
}

/// `work` split into chunks of `chunk`, counting one unit per chunk; for ever when
/// `forever` is set.
fn chunked(work: Nanos, chunk: Nanos, forever: bool) -> OpSpec {
    let n = if forever {
        None
    } else {
        Some(work.0.div_ceil(chunk.0.max(1)).max(1))
    };
    lp(n, vec![compute(Dist::constant(chunk)), OpSpec::Count(1)])
}

pub const MODELS: &[ModelInfo] = &[
    ModelInfo {
        name: "matmul",
        description: "CPU-bound matrix multiply: compute only, cache-resident blocks",
        params: &[
            ParamInfo {
                name: "work",
                default: "\"2s\"",
                help: "CPU time in all, split over the threads (1 ms blocks)",
            },
            ParamInfo {
                name: "forever",
                default: "false",
                help: "run until the run ends (a co-runner)",
            },
        ],
        footprint_kib: 1024,
        queue_capacity: QUEUE_DEPTH,
        processes: Processes::One,
        build: |p, threads| {
            let blocks = p.dur("work")?.0.div_ceil(1_000_000).max(1);
            let body = vec![compute(Dist::constant(Nanos::from_ms(1))), OpSpec::Count(1)];
            Ok(split_groups(
                "matmul",
                blocks,
                threads,
                p.boolean("forever")?,
                body,
            ))
        },
    },
    ModelInfo {
        name: "cpu-bomb",
        description:
            "a spinning loop on every thread, for ever: the background load of the CVS study",
        params: &[],
        footprint_kib: 16,
        queue_capacity: QUEUE_DEPTH,
        processes: Processes::One,
        build: |_, threads| {
            Ok(vec![(
                "bomb".into(),
                threads,
                vec![chunked(Nanos::ZERO, Nanos::from_ms(1), true)],
            )])
        },
    },
    ModelInfo {
        name: "freqsleep",
        description:
            "every thread loops on a short computation and nanosleep(1ns): idles very often",
        params: &[
            ParamInfo {
                name: "burst",
                default: "\"1us\"",
                help: "computation between sleeps",
            },
            ParamInfo {
                name: "sleep",
                default: "\"1ns\"",
                help: "requested sleep (timer slack is added)",
            },
            ParamInfo {
                name: "iterations",
                default: "0",
                help: "loop count in all, split over the threads; 0 = for ever",
            },
        ],
        footprint_kib: 16,
        queue_capacity: QUEUE_DEPTH,
        processes: Processes::One,
        build: |p, threads| {
            let n = p.int("iterations", 0, i64::MAX)?;
            let body = vec![
                compute(p.dist("burst")?),
                OpSpec::Sleep(p.dist("sleep")?),
                OpSpec::Count(1),
            ];
            Ok(split_groups("freqsleep", n as u64, threads, n == 0, body))
        },
    },
    ModelInfo {
        name: "compute-sleep",
        description: "threads alternate computing and sleeping: a duty-cycle load",
        params: &[
            ParamInfo {
                name: "compute",
                default: "\"exp(1ms)\"",
                help: "computation per cycle",
            },
            ParamInfo {
                name: "sleep",
                default: "\"exp(1ms)\"",
                help: "sleep per cycle",
            },
            ParamInfo {
                name: "iterations",
                default: "0",
                help: "cycles in all, split over the threads; 0 = for ever",
            },
        ],
        footprint_kib: 256,
        queue_capacity: QUEUE_DEPTH,
        processes: Processes::One,
        build: |p, threads| {
            let n = p.int("iterations", 0, i64::MAX)?;
            let body = vec![
                compute(p.dist("compute")?),
                OpSpec::Sleep(p.dist("sleep")?),
                OpSpec::Count(1),
            ];
            Ok(split_groups("duty", n as u64, threads, n == 0, body))
        },
    },
    parsec::BLACKSCHOLES,
    parsec::BODYTRACK,
    parsec::CANNEAL,
    parsec::DEDUP,
    parsec::FACESIM,
    parsec::FERRET,
    parsec::FLUIDANIMATE,
    parsec::FREQMINE,
    parsec::RAYTRACE,
    parsec::STREAMCLUSTER,
    parsec::SWAPTIONS,
    parsec::VIPS,
    parsec::X264,
    splash::CHOLESKY,
    splash::LU_NCB,
    splash::VOLREND,
    splash::WATER_NSQUARED,
    splash::WATER_SPATIAL,
    server::KERNBENCH,
    server::DBENCH,
    server::EBIZZY,
    server::SYSBENCH_OLTP,
    server::MYSQL,
    server::IPERF,
    server::IPERF_UDP,
    npb::BT,
    npb::CG,
    npb::EP,
    npb::IS,
    npb::LU,
    npb::MG,
    npb::SP,
    npb::SUITE,
    spec::NAMD,
    spec::SJENG,
    spec::H264,
    spec::ASTAR,
    spec::SOPLEX,
    spec::BZIP2,
    spec::MILC,
    spec::LIBQUANTUM,
    spec::MCF,
    spec::OMNETPP,
    spec::GCC,
    spec::XALANCBMK,
    trace::TRACE,
];

pub fn find(name: &str) -> Option<&'static ModelInfo> {
    MODELS.iter().find(|m| m.name == name)
}

pub fn model_names() -> Vec<&'static str> {
    let mut v: Vec<_> = MODELS.iter().map(|m| m.name).collect();
    v.push("program");
    v
}

pub fn build(model: &str, params: &Table, threads: u32) -> Result<BuiltWorkload, WorkloadError> {
    let info = find(model).ok_or_else(|| {
        WorkloadError::new(
            "model",
            format!(
                "unknown workload model {model:?}; allowed: {}",
                model_names().join(", ")
            ),
        )
    })?;
    let mut values = Table::new();
    for p in info.params {
        let v: Table = format!("v = {}", p.default).parse().map_err(|e| {
            WorkloadError::new("params", format!("bad default for {}: {e}", p.name))
        })?;
        values.insert(p.name.into(), v["v"].clone());
    }
    for (k, v) in params {
        if !values.contains_key(k) {
            let allowed: Vec<_> = info.params.iter().map(|p| p.name).collect();
            return Err(WorkloadError::new(
                format!("params.{k}"),
                format!(
                    "model {model:?} has no parameter {k:?}; allowed: {}",
                    if allowed.is_empty() {
                        "none".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ),
            ));
        }
        values.insert(k.clone(), v.clone());
    }
    let groups = (info.build)(&Params { values }, threads)?;
    let mut out = Vec::new();
    let mut forever = false;
    let mut symbols = super::program::Symbols::default();
    let mut next_process = 0usize;
    for (name, n, ops) in groups {
        let prog = Program::compile_with(&ops, &mut symbols)
            .map_err(|m| WorkloadError::new("params", m))?;
        forever |= prog.forever;
        // Each vCPU keeps a TLB mark per process (guest/kernel.rs), so their number is
        // bounded.
        let (process, per_thread, used) = match info.processes {
            Processes::One => (0, false, 0),
            Processes::EachGroup => (next_process, false, 1),
            Processes::EachThread => (next_process, true, n as usize),
        };
        next_process += used;
        if next_process > MAX_PROCESSES {
            return Err(WorkloadError::new(
                "threads",
                format!(
                    "model {model:?} makes a process per thread{} and {threads} threads \
                     make more than {MAX_PROCESSES}; use fewer threads",
                    if per_thread { "" } else { " group" }
                ),
            ));
        }
        out.push(ThreadGroup {
            name,
            threads: n,
            idle_priority: false,
            process: process as u16,
            process_per_thread: per_thread,
            program: Rc::new(prog),
        });
    }
    Ok(BuiltWorkload {
        model: model.into(),
        groups: out,
        footprint_kib: info.footprint_kib,
        forever,
        symbols,
        barrier_parties: Vec::new(),
        queue_capacity: info.queue_capacity,
    })
}

/// The work a built workload does in total, read statically from its programs: units
/// counted and mean CPU time (user + kernel computation), summed over every thread and
/// loop iteration. `None` when a thread loops for ever.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkTotals {
    pub units: u64,
    pub cpu_ns: f64,
}

pub fn work_totals(w: &BuiltWorkload) -> Option<WorkTotals> {
    use super::program::Instr;
    use std::collections::BTreeMap;
    let mut units = 0u64;
    let mut cpu_ns = 0.0;
    // A dispenser's work is its tickets', whichever threads take them: per dispenser,
    // the most any group hands out (the groups that share one run the same episodes).
    let mut dispensed: BTreeMap<u32, (u64, f64)> = BTreeMap::new();
    for g in &w.groups {
        if g.program.forever {
            return None;
        }
        let mut mult: Vec<u64> = vec![g.threads as u64];
        let mut here: BTreeMap<u32, (u64, f64)> = BTreeMap::new();
        let mut open: Option<u32> = None;
        for ins in &g.program.code {
            let m = *mult.last().unwrap_or(&0);
            let (u, c) = match open {
                Some(d) => {
                    let e = here.entry(d).or_default();
                    (&mut e.0, &mut e.1)
                }
                None => (&mut units, &mut cpu_ns),
            };
            match ins {
                Instr::Count(n) => *u += n * m,
                Instr::Compute(d) | Instr::Kernel(d) => *c += d.mean() * m as f64,
                Instr::LoopStart { count, .. } => mult.push(m * count.unwrap_or(1)),
                Instr::LoopEnd { .. } => {
                    mult.pop();
                }
                Instr::DispenseEnter { dispenser, .. } => {
                    // Entries per thread times the tickets of each (a dispense holds
                    // no other, program.rs).
                    let tickets = w.symbols.dispenser_tickets[*dispenser as usize];
                    mult.push(m / (g.threads as u64).max(1) * tickets);
                    open = Some(*dispenser);
                }
                Instr::Jump(_) => {
                    mult.pop();
                    open = None;
                }
                _ => {}
            }
        }
        for (d, (u, c)) in here {
            let e = dispensed.entry(d).or_default();
            e.0 = e.0.max(u);
            e.1 = e.1.max(c);
        }
    }
    for (u, c) in dispensed.values() {
        units += u;
        cpu_ns += c;
    }
    Some(WorkTotals { units, cpu_ns })
}

/// `total` iterations split over `t` threads as evenly as whole iterations allow:
/// (threads, iterations each) pairs, the larger share first. Threads left without an
/// iteration are not created; with `forever` every thread loops for ever.
pub(crate) fn split(total: u64, t: u32, forever: bool) -> Vec<(u32, u64)> {
    if forever {
        return vec![(t, 1)];
    }
    let (lo, extra) = (total / t as u64, (total % t as u64) as u32);
    let mut v = Vec::new();
    if extra > 0 {
        v.push((extra, lo + 1));
    }
    if lo > 0 {
        v.push((t - extra, lo));
    }
    v
}

/// Thread groups running one loop body, `total` iterations split over `t` threads.
pub(crate) fn split_groups(
    name: &str,
    total: u64,
    t: u32,
    forever: bool,
    body: Vec<OpSpec>,
) -> Groups {
    split(total, t, forever)
        .into_iter()
        .enumerate()
        .map(|(i, (k, n))| {
            (
                if i == 0 {
                    name.to_string()
                } else {
                    format!("{name}.{i}")
                },
                k,
                vec![outer(forever, n, body.clone())],
            )
        })
        .collect()
}

/// SPMD threads running the same program, where only thread 0 counts the units (one
/// unit per step of the whole computation, not per thread): `prog(true)` for thread 0,
/// `prog(false)` for the other `t - 1`.
pub(crate) fn lead_counts(name: &str, t: u32, prog: impl Fn(bool) -> Vec<OpSpec>) -> Groups {
    let mut g = vec![(format!("{name}0"), 1, prog(true))];
    if t > 1 {
        g.push((name.to_string(), t - 1, prog(false)));
    }
    g
}

/// `count(1)` when `lead`, nothing otherwise.
pub(crate) fn count_if(lead: bool) -> Vec<OpSpec> {
    if lead {
        vec![count(1)]
    } else {
        Vec::new()
    }
}
