//! The core's public entry points: scenario text in, report out.

use crate::metrics::report::Report;
use crate::metrics::trace::TraceSink;
use crate::scenario::{self, Scenario, ScenarioError};
use crate::sim::world::World;

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
    let mut w = World::new(sc)?;
    if let Some(t) = trace {
        w.set_trace(t);
    }
    let cause = w.run();
    Ok(Report::build(sc, &w, cause))
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
