//! PyO3 bindings: scenario text in, report JSON out. No simulation logic here.

mod arrow;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
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

/// The report as (JSON without the tables, {table name: ArrowTable}) — the tables cross
/// as Arrow, never as Python objects built row by row.
fn arrow_parts<'py>(
    py: Python<'py>,
    report: &vcpulab_core::Report,
) -> PyResult<(String, String, Bound<'py, PyDict>)> {
    let json = report.to_json();
    let (scalars, tables) = arrow::split_report(&json).map_err(SimulationError::new_err)?;
    let dict = PyDict::new(py);
    for (name, batch) in tables {
        dict.set_item(name, Py::new(py, arrow::ArrowTable::new(batch))?)?;
    }
    Ok((json, scalars, dict))
}

/// Runs a scenario; returns (report JSON, report JSON without its tables, tables), the
/// tables as a dict of name -> ArrowTable (Arrow PyCapsule stream: `pyarrow.table(t)`).
#[pyfunction]
#[pyo3(signature = (scenario_toml, overrides=None, seed=None))]
fn run_arrow<'py>(
    py: Python<'py>,
    scenario_toml: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
) -> PyResult<(String, String, Bound<'py, PyDict>)> {
    let sc = resolve_inner(scenario_toml, overrides, seed)?;
    let report = py.detach(|| vcpulab_core::run(&sc)).map_err(scenario_err)?;
    arrow_parts(py, &report)
}

/// A report JSON (e.g. from the results store) split as `run_arrow` does.
#[pyfunction]
fn report_arrow<'py>(py: Python<'py>, report_json: &str) -> PyResult<(String, Bound<'py, PyDict>)> {
    let (scalars, tables) = arrow::split_report(report_json).map_err(PyValueError::new_err)?;
    let dict = PyDict::new(py);
    for (name, batch) in tables {
        dict.set_item(name, Py::new(py, arrow::ArrowTable::new(batch))?)?;
    }
    Ok((scalars, dict))
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

/// The resolved scenario as TOML, preceded by comments naming the platform profiles in
/// use and the keys they set.
#[pyfunction]
#[pyo3(signature = (scenario_toml, overrides=None, seed=None))]
fn explain(
    scenario_toml: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
) -> PyResult<String> {
    vcpulab_core::explain(scenario_toml, &overrides.unwrap_or_default(), seed).map_err(scenario_err)
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

/// A hash of the core's sources at build time (see build.rs): results of two builds
/// with the same version but different sources are told apart by it.
#[pyfunction]
fn build_id() -> &'static str {
    env!("VCPULAB_CORE_BUILD_ID")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(build_id, m)?)?;
    m.add_function(wrap_pyfunction!(run_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(report_arrow, m)?)?;
    m.add_class::<arrow::ArrowTable>()?;
    Ok(())
}
