//! The core's public entry points: scenario text in, report out.

use crate::metrics::report::{ModeRow, Report};
use crate::metrics::trace::TraceSink;
use crate::scenario::Mode;
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
    let main = scenario::modes::derive(sc, sc.run.mode)?;
    let mut w = World::new(&main)?;
    if let Some(t) = trace {
        w.set_trace(t);
    }
    let cause = w.run();
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
            let cause = w.run();
            let r = Report::build(&s, &w, cause);
            report.modes.push(ModeRow::of(m, &r.vms[0], &base));
        }
    }
    Ok(report)
}

/// (name, description) of every preset; a preset built on a base starts its description
/// with the chain it inherits, root first ("kvm-default > apple: ...").
pub fn presets() -> Vec<(String, String)> {
    scenario::PRESETS
        .iter()
        .map(|p| {
            let chain = scenario::preset_chain(p.name)
                .map(|c| c.iter().map(|q| q.name).collect::<Vec<_>>())
                .unwrap_or_default();
            let description = if chain.len() > 1 {
                format!("{}: {}", chain.join(" > "), p.description)
            } else {
                p.description.to_string()
            };
            (p.name.to_string(), description)
        })
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
