//! `trace`: per-thread operation sequences given as text, one operation a line:
//!
//! ```text
//! # comment
//! <threads> <op> [args]
//! 0 compute 10us
//! 0 lock m
//! 0-3 barrier b
//! 1 loop 100
//! 1   sleep exp(1ms)
//! 1 end
//! 0-3 dispense tiles 64
//! 0-3   compute 1ms
//! 0-3 end
//! ```
//!
//! `<threads>` is a thread number or an inclusive range `a-b`; each distinct number is
//! one thread. The format is documented in docs/workloads.md.

use super::*;
use crate::workload::program::{
    CondWaitSpec, DispenseSpec, GroupFlushSpec, KspinSpec, LoopCount, LoopSpec, SemSpinSpec,
    SpinBarrierSpec,
};
use std::collections::BTreeMap;

pub(super) const TRACE: ModelInfo = ModelInfo {
    name: "trace",
    description: "trace-driven: replays per-thread operation sequences given as text lines `<thread> <op> <args>`",
    params: &[
        ParamInfo {
            name: "text",
            default: "\"0 compute 1ms\\n0 count 1\\n\"",
            help: "the trace: lines `<thread|a-b> <op> [args]` (docs/workloads.md)",
        },
        ParamInfo {
            name: "repeat",
            default: "1",
            help: "replays of each thread's sequence; 0 = for ever",
        },
    ],
    footprint_kib: 256,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, _threads| {
        let text = p.string("text")?;
        let repeat = p.int("repeat", 0, i64::MAX)? as u64;
        let per = parse(text).map_err(|m| WorkloadError::new("params.text", m))?;
        Ok(per
            .into_iter()
            .map(|(id, ops)| {
                let ops = if repeat == 1 {
                    ops
                } else {
                    vec![OpSpec::Loop(LoopSpec {
                        n: if repeat == 0 {
                            LoopCount::Forever("forever".into())
                        } else {
                            LoopCount::Times(repeat)
                        },
                        body: ops,
                    })]
                };
                (format!("t{id}"), 1, ops)
            })
            .collect())
    },
};

fn threads_of(s: &str) -> Option<std::ops::RangeInclusive<u32>> {
    match s.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (a.parse().ok()?, b.parse().ok()?);
            (a <= b && b - a < 100_000).then_some(a..=b)
        }
        None => s.parse().ok().map(|a| a..=a),
    }
}

/// What an open body belongs to.
#[derive(Clone)]
enum Block {
    Program,
    Loop(LoopCount),
    /// A `dispense NAME N [MUTEX]` block.
    Dispense(String, u64, Option<String>),
}

/// An open body and its operations.
type Open = (Block, Vec<OpSpec>);

/// Parses a trace into each thread's operations (ordered by thread number).
pub fn parse(text: &str) -> Result<BTreeMap<u32, Vec<OpSpec>>, String> {
    // Per thread: a stack of open bodies (the bottom one is the program) and their loop
    // counts.
    let mut st: BTreeMap<u32, Vec<Open>> = BTreeMap::new();
    for (ln, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        // Errors name the line but never quote it: the text may come from a file that is
        // not a trace at all (a trace pointed at /proc/self/environ must not print it).
        let _ = raw;
        let at = |m: String| format!("line {}: {m}", ln + 1);
        let (who, tail) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let tail = tail.trim_start();
        if tail.is_empty() {
            return Err(at("missing operation".into()));
        }
        let (op, rest) = tail.split_once(char::is_whitespace).unwrap_or((tail, ""));
        let rest = rest.trim();
        let ids = threads_of(who)
            .ok_or_else(|| at("the first field is not a thread number or range a-b".into()))?;
        let dist = |s: &str| {
            Dist::parse(s).map_err(|_| {
                at(format!(
                    "the argument of {op} is not a duration or distribution (e.g. 5us, exp(100us))"
                ))
            })
        };
        let name = |s: &str| {
            if s.is_empty() || s.contains(char::is_whitespace) {
                Err(at(format!("{op} takes one object name")))
            } else {
                Ok(s.to_string())
            }
        };
        let two = || -> Result<(&str, &str), String> {
            let (a, b) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let b = b.trim();
            if a.is_empty() || b.is_empty() {
                return Err(at(format!("{op} takes two arguments")));
            }
            Ok((a, b))
        };
        enum LineKind {
            Op(OpSpec),
            Open(Block),
            Close,
        }
        let act = match op {
            "compute" => LineKind::Op(OpSpec::Compute(dist(rest)?)),
            "kernel" => LineKind::Op(OpSpec::Kernel(dist(rest)?)),
            "sleep" => LineKind::Op(OpSpec::Sleep(dist(rest)?)),
            "io" => LineKind::Op(OpSpec::Io(dist(rest)?)),
            "count" => {
                LineKind::Op(OpSpec::Count(rest.parse().map_err(|_| {
                    at("the argument of count is not a whole number".into())
                })?))
            }
            "lock" => LineKind::Op(OpSpec::Lock(name(rest)?)),
            "unlock" => LineKind::Op(OpSpec::Unlock(name(rest)?)),
            "barrier" => LineKind::Op(OpSpec::Barrier(name(rest)?)),
            "cond_signal" => LineKind::Op(OpSpec::CondSignal(name(rest)?)),
            "cond_broadcast" => LineKind::Op(OpSpec::CondBroadcast(name(rest)?)),
            "sem_post" => LineKind::Op(OpSpec::SemPost(name(rest)?)),
            "sem_wait" => LineKind::Op(OpSpec::SemWait(name(rest)?)),
            "push" => LineKind::Op(OpSpec::Push(name(rest)?)),
            "pop" => LineKind::Op(OpSpec::Pop(name(rest)?)),
            "yield" => LineKind::Op(OpSpec::Yield(0)),
            "tlb_shootdown" => LineKind::Op(OpSpec::TlbShootdown(0)),
            "kspin" => {
                let (l, d) = two()?;
                LineKind::Op(OpSpec::Kspin(KspinSpec {
                    lock: l.into(),
                    hold: dist(d)?,
                    rwlock: false,
                    dentry: Default::default(),
                }))
            }
            "spin_barrier" => {
                let (b, d) = two()?;
                LineKind::Op(OpSpec::SpinBarrier(SpinBarrierSpec {
                    name: b.into(),
                    spin: dist(d)?,
                }))
            }
            "parsec_barrier" => {
                let (b, d) = two()?;
                LineKind::Op(OpSpec::ParsecBarrier(SpinBarrierSpec {
                    name: b.into(),
                    spin: dist(d)?,
                }))
            }
            "group_flush" => {
                let (n, d) = two()?;
                LineKind::Op(OpSpec::GroupFlush(GroupFlushSpec {
                    name: n.into(),
                    io: dist(d)?,
                    body: Vec::new(),
                }))
            }
            "sem_spin_wait" => {
                let (m, d) = two()?;
                LineKind::Op(OpSpec::SemSpinWait(SemSpinSpec {
                    sem: m.into(),
                    spin: dist(d)?,
                }))
            }
            "cond_wait" => {
                let (c, m) = two()?;
                LineKind::Op(OpSpec::CondWait(CondWaitSpec {
                    cond: c.into(),
                    mutex: name(m)?,
                }))
            }
            "loop" => LineKind::Open(Block::Loop(match rest {
                "forever" => LoopCount::Forever("forever".into()),
                n => LoopCount::Times(
                    n.parse()
                        .map_err(|_| at("loop takes a whole number or \"forever\"".into()))?,
                ),
            })),
            "dispense" => {
                let args: Vec<&str> = rest.split_whitespace().collect();
                let usage = || at("dispense takes a name, a number of tickets and optionally a mutex: dispense NAME N [MUTEX]".into());
                if !(2..=3).contains(&args.len()) {
                    return Err(usage());
                }
                let n = args[1].parse().map_err(|_| usage())?;
                LineKind::Open(Block::Dispense(
                    args[0].into(),
                    n,
                    args.get(2).map(|m| m.to_string()),
                ))
            }
            "end" => LineKind::Close,
            _ => {
                return Err(at(String::from(
                    "unknown operation; allowed: compute, kernel, sleep, io, count, \
                     lock, unlock, kspin, barrier, spin_barrier, parsec_barrier, cond_wait, \
                     cond_signal, cond_broadcast, sem_post, sem_wait, sem_spin_wait, yield, push, pop, tlb_shootdown, \
                     group_flush, loop, dispense, end",
                )))
            }
        };
        for id in ids {
            let stack = st
                .entry(id)
                .or_insert_with(|| vec![(Block::Program, Vec::new())]);
            match &act {
                LineKind::Op(o) => stack.last_mut().expect("stack").1.push(o.clone()),
                LineKind::Open(n) => stack.push((n.clone(), Vec::new())),
                LineKind::Close => {
                    if stack.len() < 2 {
                        return Err(at(format!(
                            "thread {id}: `end` without `loop` or `dispense`"
                        )));
                    }
                    let (block, body) = stack.pop().expect("loop");
                    if body.is_empty() {
                        return Err(at(format!("thread {id}: empty loop or dispense")));
                    }
                    let op = match block {
                        Block::Loop(n) => OpSpec::Loop(LoopSpec { n, body }),
                        Block::Dispense(tickets, n, mutex) => OpSpec::Dispense(DispenseSpec {
                            tickets,
                            n,
                            mutex,
                            hold: None,
                            body,
                        }),
                        Block::Program => unreachable!("the program is the bottom of the stack"),
                    };
                    stack.last_mut().expect("stack").1.push(op);
                }
            }
        }
    }
    if st.is_empty() {
        return Err("the trace has no operations".into());
    }
    let mut out = BTreeMap::new();
    for (id, mut stack) in st {
        if stack.len() != 1 {
            return Err(format!(
                "thread {id}: {} loop(s) or dispense(s) without `end`",
                stack.len() - 1
            ));
        }
        let ops = stack.pop().expect("program").1;
        if ops.is_empty() {
            return Err(format!("thread {id}: no operations"));
        }
        out.insert(id, ops);
    }
    Ok(out)
}
