//! The catalog of app models. Each model documents its parameters; their sources are in
//! docs/model.md. These are models ("-like"), not the benchmarks.

use super::dist::Dist;
use super::program::{LoopCount, LoopSpec, OpSpec, Program};
use super::{BuiltWorkload, ThreadGroup, WorkloadError};
use crate::sim::time::parse_duration;
use crate::sim::Nanos;
use std::sync::Arc;
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
    build: fn(&Params, u32) -> Result<Groups, WorkloadError>,
}

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
}

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
                help: "CPU time per thread",
            },
            ParamInfo {
                name: "forever",
                default: "false",
                help: "run until the run ends (a co-runner)",
            },
        ],
        footprint_kib: 1024,
        build: |p, threads| {
            let prog = chunked(p.dur("work")?, Nanos::from_ms(1), p.boolean("forever")?);
            Ok(vec![("matmul".into(), threads, vec![prog])])
        },
    },
    ModelInfo {
        name: "cpu-bomb",
        description:
            "a spinning loop on every thread, for ever: the background load of the CVS study",
        params: &[],
        footprint_kib: 16,
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
                help: "loop count; 0 = for ever",
            },
        ],
        footprint_kib: 16,
        build: |p, threads| {
            let n = p.int("iterations", 0, i64::MAX)?;
            let body = vec![
                compute(p.dist("burst")?),
                OpSpec::Sleep(p.dist("sleep")?),
                OpSpec::Count(1),
            ];
            Ok(vec![(
                "freqsleep".into(),
                threads,
                vec![lp((n > 0).then_some(n as u64), body)],
            )])
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
                help: "cycles; 0 = for ever",
            },
        ],
        footprint_kib: 256,
        build: |p, threads| {
            let n = p.int("iterations", 0, i64::MAX)?;
            let body = vec![
                compute(p.dist("compute")?),
                OpSpec::Sleep(p.dist("sleep")?),
                OpSpec::Count(1),
            ];
            Ok(vec![(
                "duty".into(),
                threads,
                vec![lp((n > 0).then_some(n as u64), body)],
            )])
        },
    },
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
    for (name, n, ops) in groups {
        let prog = Program::compile_with(&ops, &mut symbols)
            .map_err(|m| WorkloadError::new("params", m))?;
        forever |= prog.forever;
        out.push(ThreadGroup {
            name,
            threads: n,
            idle_priority: false,
            program: Arc::new(prog),
        });
    }
    Ok(BuiltWorkload {
        model: model.into(),
        groups: out,
        footprint_kib: info.footprint_kib,
        forever,
        symbols,
        barrier_parties: Vec::new(),
        queue_capacity: 20,
    })
}
