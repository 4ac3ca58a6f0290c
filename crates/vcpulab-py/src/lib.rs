//! PyO3 bindings: scenario text in, report JSON out. No simulation logic here.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::fs::File;
use std::io::BufWriter;
use vcpulab_core::metrics::trace::ChromeTrace;

create_exception!(
    _core,
    ScenarioError,
    PyValueError,
    "A bad scenario: names the key, the value and what is allowed."
);
create_exception!(
    _core,
    SimulationError,
    PyRuntimeError,
    "An internal failure of the simulator."
);

fn scenario_err(e: vcpulab_core::ScenarioError) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

fn resolve_inner(
    text: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
) -> PyResult<vcpulab_core::Scenario> {
    vcpulab_core::resolve(text, &overrides.unwrap_or_default(), seed).map_err(scenario_err)
}

/// Runs a scenario and returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (scenario_toml, overrides=None, seed=None))]
fn run(
    py: Python<'_>,
    scenario_toml: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
) -> PyResult<String> {
    let sc = resolve_inner(scenario_toml, overrides, seed)?;
    let report = py.detach(|| vcpulab_core::run(&sc)).map_err(scenario_err)?;
    Ok(report.to_json())
}

/// Runs a scenario, writing a Chrome/Perfetto trace to `out_path`; returns the report JSON.
#[pyfunction]
#[pyo3(signature = (scenario_toml, out_path, overrides=None, seed=None))]
fn trace(
    py: Python<'_>,
    scenario_toml: &str,
    out_path: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
) -> PyResult<String> {
    let sc = resolve_inner(scenario_toml, overrides, seed)?;
    let file = File::create(out_path)
        .map_err(|e| PyValueError::new_err(format!("cannot write trace file {out_path:?}: {e}")))?;
    let vms: Vec<(String, u32)> = sc
        .vm
        .iter()
        .map(|v| (v.name.clone().unwrap_or_default(), v.vcpus))
        .collect();
    let sink = ChromeTrace::new(BufWriter::new(file), sc.host.pcpus, &vms);
    let report = py
        .detach(|| vcpulab_core::run_traced(&sc, Some(Box::new(sink))))
        .map_err(scenario_err)?;
    Ok(report.to_json())
}

/// The fully resolved scenario (preset applied, defaults filled) as TOML.
#[pyfunction]
#[pyo3(signature = (scenario_toml, overrides=None, seed=None))]
fn resolve(
    scenario_toml: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
) -> PyResult<String> {
    Ok(resolve_inner(scenario_toml, overrides, seed)?.to_toml())
}

#[pyfunction]
fn presets() -> Vec<(String, String)> {
    vcpulab_core::presets()
}

#[pyfunction]
fn workloads() -> Vec<(String, String)> {
    vcpulab_core::workloads()
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
