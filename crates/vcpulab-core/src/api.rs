//! The core's public entry points: scenario text in, report out.

use crate::metrics::report::{ModeRow, Report};
use crate::metrics::trace::TraceSink;
use crate::scenario::Mode;
use crate::scenario::{self, Scenario, ScenarioError};
use crate::sim::world::{StopCause, World};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Resolves scenario text with `key=value` overrides and an optional seed.
pub fn resolve(
    text: &str,
    overrides: &[String],
    seed: Option<u64>,
) -> Result<Scenario, ScenarioError> {
    scenario::resolve(text, overrides, seed)
}

/// Runs a resolved scenario; the result depends only on the scenario (and its seed).
pub fn run(sc: &Scenario) -> Result<Report, ScenarioError> {
    run_traced(sc, None)
}

pub fn run_traced(
    sc: &Scenario,
    trace: Option<Box<dyn TraceSink>>,
) -> Result<Report, ScenarioError> {
    run_abortable(sc, trace, None)
}

/// The error of a run that did not reach its end (budget, no progress, abort).
fn unfinished(w: &World, cause: StopCause) -> Result<(), ScenarioError> {
    match cause {
        StopCause::AllFinished | StopCause::Duration => Ok(()),
        StopCause::EventBudget => Err(ScenarioError::new(
            "run.max_events",
            format!(
                "the run dispatched {} events (its budget) and reached only {} of simulated time; raise run.max_events or shorten run.duration",
                w.max_events, w.now
            ),
        )),
        StopCause::NoProgress(t) => Err(ScenarioError::new(
            "vm.workload",
            format!(
                "thread {} of VM {:?} ran {} instructions at simulated time {} without time passing (a loop whose body takes no time); give the loop a compute, sleep or io op",
                t.0,
                w.vms[w.threads[t.idx()].vm.idx()].name,
                crate::sim::world::MAX_ZERO_TIME_STEPS,
                w.now
            ),
        )),
        StopCause::Aborted => Err(ScenarioError::new(
            "run",
            format!("stopped at simulated time {} (interrupted or out of time)", w.now),
        )),
    }
}

/// `run_traced` that stops with an error when `abort` is raised from another thread
/// (checked every 4096 events).
pub fn run_abortable(
    sc: &Scenario,
    trace: Option<Box<dyn TraceSink>>,
    abort: Option<Arc<AtomicBool>>,
) -> Result<Report, ScenarioError> {
    let main = scenario::modes::derive(sc, sc.run.mode)?;
    let mut w = World::new(&main)?;
    if let Some(t) = trace {
        w.set_trace(t);
    }
    w.abort = abort.clone();
    let cause = w.run();
    unfinished(&w, cause)?;
    let mut report = Report::build(&main, &w, cause);
    if !sc.run.compare.is_empty() {
        let focus = if sc.run.mode == Mode::Consolidated {
            scenario::modes::focus_index(sc)?
        } else {
            0
        };
        let base = report.vms[focus].clone();
        report.modes.push(ModeRow::of(sc.run.mode, &base, &base));
        for &m in &sc.run.compare {
            let s = scenario::modes::derive(sc, m)?;
            let mut w = World::new(&s)?;
            w.abort = abort.clone();
            let cause = w.run();
            unfinished(&w, cause)?;
            let r = Report::build(&s, &w, cause);
            report.modes.push(ModeRow::of(m, &r.vms[0], &base));
        }
    }
    Ok(report)
}

/// (name, description) of every preset.
pub fn presets() -> Vec<(String, String)> {
    scenario::PRESETS
        .iter()
        .map(|p| (p.name.to_string(), p.description.to_string()))
        .collect()
}

/// (name, description) of every catalog workload model.
pub fn workloads() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = crate::workload::catalog::MODELS
        .iter()
        .map(|m| (m.name.to_string(), m.description.to_string()))
        .collect();
    v.push((
        "program".into(),
        "explicit thread groups running ops written in the scenario".into(),
    ));
    v
}
