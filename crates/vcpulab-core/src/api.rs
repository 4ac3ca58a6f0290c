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

/// The resolved scenario as TOML, preceded by comment lines that name the platform
/// profiles in use and every key they set (with the value in effect where the preset or
/// the scenario overrode it): what `vcpulab explain` prints.
pub fn explain(
    text: &str,
    overrides: &[String],
    seed: Option<u64>,
) -> Result<String, ScenarioError> {
    let sc = scenario::resolve(text, overrides, seed)?;
    let toml_text = sc.to_toml();
    let table: toml::Table = toml_text.parse().map_err(|e| {
        ScenarioError::new("", format!("cannot re-read the resolved scenario: {e}"))
    })?;
    Ok(format!(
        "{}{toml_text}",
        scenario::platforms::explain(&table)
    ))
}

/// Runs a resolved scenario; the result depends only on the scenario (and its seed).
pub fn run(sc: &Scenario) -> Result<Report, ScenarioError> {
    run_traced(sc, None)
}

pub fn run_traced(
    sc: &Scenario,
    trace: Option<Box<dyn TraceSink>>,
) -> Result<Report, ScenarioError> {
    if sc.run.mode == Mode::CacheStudy {
        if trace.is_some() {
            return Err(ScenarioError::new(
                "run.mode",
                "\"cache_study\" runs the LLC simulator, not the host engine: it has no trace; use run.mode = \"consolidated\"",
            ));
        }
        let (cfg, contexts) = crate::host::llc_study::from_scenario(sc)?;
        let rows = crate::host::llc_study::run_study(&cfg, &contexts)
            .map_err(|e| ScenarioError::new("host.cache.llc", e))?;
        return Ok(Report::of_cache_study(sc, rows));
    }
    if sc.host.cache.model == crate::scenario::CacheModel::Llc
        && sc.host.cache.llc.insertion != crate::host::llc_study::StudyPolicy::Mru
    {
        return Err(ScenarioError::new(
            "host.cache.llc.insertion",
            format!(
                "{:?}: whole-host runs use the LLC access profiles through the eviction-and-refetch model, which has no insertion position; allowed: \"mru\" (or run.mode = \"cache_study\")",
                sc.host.cache.llc.insertion.name()
            ),
        ));
    }
    // Equal-capped solo needs the focus VM's consolidated share first.
    let mut consolidated_share: Option<f64> = None;
    let main = if sc.run.mode == Mode::SoloCapped {
        let share = focus_share(sc)?;
        consolidated_share = Some(share);
        scenario::modes::derive_solo_capped(sc, share)?
    } else {
        scenario::modes::derive(sc, sc.run.mode)?
    };
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
        if sc.run.mode == Mode::Consolidated {
            consolidated_share = Some(base.cpu_share);
        }
        report.modes.push(ModeRow::of(sc.run.mode, &base, &base));
        for &m in &sc.run.compare {
            let s = if m == Mode::SoloCapped {
                let share = match consolidated_share {
                    Some(x) => x,
                    None => focus_share(sc)?,
                };
                scenario::modes::derive_solo_capped(sc, share)?
            } else {
                scenario::modes::derive(sc, m)?
            };
            let mut w = World::new(&s)?;
            let cause = w.run();
            let r = Report::build(&s, &w, cause);
            report.modes.push(ModeRow::of(m, &r.vms[0], &base));
        }
    }
    Ok(report)
}

/// The focus VM's share of all pCPU time when the scenario runs consolidated.
fn focus_share(sc: &Scenario) -> Result<f64, ScenarioError> {
    let s = scenario::modes::derive(sc, Mode::Consolidated)?;
    let f = scenario::modes::focus_index(sc)?;
    let mut w = World::new(&s)?;
    let cause = w.run();
    Ok(Report::build(&s, &w, cause).vms[f].cpu_share)
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
