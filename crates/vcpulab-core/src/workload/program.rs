//! The operation language: what a workload's threads execute, as written in scenario
//! files, and its compiled form (a flat instruction list with loop jumps).

use super::dist::Dist;
use serde::{Deserialize, Serialize};

/// How many times a loop runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LoopCount {
    Times(u64),
    /// The string "forever": the thread never finishes (fixed-time workloads).
    Forever(String),
}

/// One operation as written in a scenario: a single-key table such as
/// `{compute = "exp(100us)"}` or `{loop = {n = 10, body = [...]}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum OpSpec {
    /// User-mode computation.
    Compute(Dist),
    /// Guest-kernel computation (a system call's work, no locks).
    Kernel(Dist),
    /// Block for a duration (nanosleep); the guest's timer slack is added.
    Sleep(Dist),
    /// Count `n` units of work (the throughput metric).
    Count(u64),
    Loop(LoopSpec),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopSpec {
    pub n: LoopCount,
    pub body: Vec<OpSpec>,
}

/// A compiled instruction.
#[derive(Clone, Debug)]
pub enum Instr {
    Compute(Dist),
    Kernel(Dist),
    Sleep(Dist),
    Count(u64),
    /// Start of loop `slot`; `end` is the index just past the matching LoopEnd.
    LoopStart {
        slot: u16,
        count: Option<u64>,
        end: u32,
    },
    /// Jump back to `start` (the LoopStart) while iterations remain.
    LoopEnd {
        slot: u16,
        start: u32,
    },
    Exit,
}

#[derive(Clone, Debug)]
pub struct Program {
    pub code: Vec<Instr>,
    pub loop_slots: u16,
    /// True when the program can run for ever (a `forever` loop is reachable).
    pub forever: bool,
}

impl Program {
    pub fn compile(ops: &[OpSpec]) -> Result<Program, String> {
        let mut p = Program {
            code: Vec::new(),
            loop_slots: 0,
            forever: false,
        };
        p.emit(ops)?;
        p.code.push(Instr::Exit);
        Ok(p)
    }

    fn emit(&mut self, ops: &[OpSpec]) -> Result<(), String> {
        for op in ops {
            match op {
                OpSpec::Compute(d) => self.code.push(Instr::Compute(d.clone())),
                OpSpec::Kernel(d) => self.code.push(Instr::Kernel(d.clone())),
                OpSpec::Sleep(d) => self.code.push(Instr::Sleep(d.clone())),
                OpSpec::Count(n) => self.code.push(Instr::Count(*n)),
                OpSpec::Loop(l) => {
                    let count = match &l.n {
                        LoopCount::Times(n) => Some(*n),
                        LoopCount::Forever(s) if s == "forever" => {
                            self.forever = true;
                            None
                        }
                        LoopCount::Forever(s) => {
                            return Err(format!(
                                "loop n = {s:?}: expected a whole number or \"forever\""
                            ));
                        }
                    };
                    if l.body.is_empty() {
                        return Err("loop body is empty".into());
                    }
                    let slot = self.loop_slots;
                    self.loop_slots = self.loop_slots.checked_add(1).ok_or("too many loops")?;
                    let start = self.code.len() as u32;
                    self.code.push(Instr::LoopStart {
                        slot,
                        count,
                        end: 0,
                    });
                    self.emit(&l.body)?;
                    self.code.push(Instr::LoopEnd { slot, start });
                    let end = self.code.len() as u32;
                    if let Instr::LoopStart { end: e, .. } = &mut self.code[start as usize] {
                        *e = end;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn compiles_nested_loops() {
        let ops: Vec<OpSpec> = toml::from_str::<toml::Table>(
            r#"ops = [{loop = {n = 3, body = [{compute = "1us"}, {loop = {n = "forever", body = [{sleep = "1ns"}]}}]}}]"#,
        )
        .unwrap()["ops"]
            .clone()
            .try_into()
            .unwrap();
        let p = Program::compile(&ops).unwrap();
        assert_eq!(p.loop_slots, 2);
        assert!(p.forever);
        assert!(matches!(p.code[0], Instr::LoopStart { end: 6, .. }));
        assert!(matches!(p.code.last(), Some(Instr::Exit)));
    }
}
