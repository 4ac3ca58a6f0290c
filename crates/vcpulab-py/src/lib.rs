//! PyO3 bindings: scenario text in, report JSON out. No simulation logic here.

mod arrow;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use vcpulab_core::metrics::trace::{ChromeTrace, TraceSink};
use vcpulab_core::sim::Nanos;

/// mimalloc rather than the system allocator: it backs its arenas with transparent huge
/// pages (madvise) where the kernel grants them only on request, as most distributions
/// configure it. A 1,024-pCPU host's records span tens of MiB and each event touches
/// dozens of lines on scattered pages; with 4 KiB pages most of those are TLB misses
/// too (docs/performance.md, "Huge pages").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// Runs `sc` on a worker thread while this one, every 100 ms, takes the GIL to check
/// for signals (Ctrl-C stops the run within a second) and the wall-clock `timeout`
/// (seconds). `make_sink` builds the trace sink on the worker thread.
fn run_supervised(
    py: Python<'_>,
    sc: &vcpulab_core::Scenario,
    make_sink: Option<&(dyn Fn() -> Box<dyn TraceSink> + Sync)>,
    timeout: Option<f64>,
) -> PyResult<vcpulab_core::Report> {
    if let Some(t) = timeout {
        if !(t.is_finite() && t > 0.0) {
            return Err(ScenarioError::new_err(format!(
                "timeout: {t} is not allowed; expected a positive number of seconds"
            )));
        }
    }
    let abort = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel();
        // Behind a mutex so that the wait can run without the GIL (`detach` needs Sync).
        let rx = Mutex::new(rx);
        let flag = abort.clone();
        scope.spawn(move || {
            let sink = make_sink.map(|f| f());
            let _ = tx.send(vcpulab_core::api::run_abortable(sc, sink, Some(flag)));
        });
        loop {
            let got = py.detach(|| match rx.lock() {
                Ok(r) => r.recv_timeout(Duration::from_millis(100)),
                Err(_) => Err(mpsc::RecvTimeoutError::Disconnected),
            });
            match got {
                Ok(result) => return result.map_err(scenario_err),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(SimulationError::new_err("the simulation thread panicked"));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Err(e) = py.check_signals() {
                abort.store(true, Ordering::Relaxed);
                py.detach(|| {
                    if let Ok(r) = rx.lock() {
                        let _ = r.recv();
                    }
                });
                return Err(e);
            }
            if let Some(t) = timeout {
                if start.elapsed().as_secs_f64() > t {
                    abort.store(true, Ordering::Relaxed);
                    py.detach(|| {
                        if let Ok(r) = rx.lock() {
                            let _ = r.recv();
                        }
                    });
                    return Err(ScenarioError::new_err(format!(
                        "timeout: the run took longer than {t} s of wall-clock time and was stopped; raise --timeout or shorten run.duration"
                    )));
                }
            }
        }
    })
}

/// Runs a scenario and returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (scenario_toml, overrides=None, seed=None, timeout=None))]
fn run(
    py: Python<'_>,
    scenario_toml: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
    timeout: Option<f64>,
) -> PyResult<String> {
    let sc = resolve_inner(scenario_toml, overrides, seed)?;
    let report = run_supervised(py, &sc, None, timeout)?;
    Ok(report.to_json())
}

/// The report as its JSON and split (`ArrowParts`) — the tables cross as Arrow, never as
/// Python objects built row by row.
fn arrow_parts<'py>(py: Python<'py>, report: &vcpulab_core::Report) -> PyResult<ArrowParts<'py>> {
    let json = report.to_json();
    let split = arrow::split_report(&json).map_err(SimulationError::new_err)?;
    let (scalars, histograms, tables) = split_dict(py, split)?;
    Ok((json, scalars, histograms, tables))
}

/// (report JSON, its JSON without tables and histograms, its histograms' JSON, tables).
type ArrowParts<'py> = (String, String, Option<String>, Bound<'py, PyDict>);

/// A split report for Python: the tables as a dict of name -> ArrowTable.
fn split_dict(
    py: Python<'_>,
    split: arrow::SplitReport,
) -> PyResult<(String, Option<String>, Bound<'_, PyDict>)> {
    let dict = PyDict::new(py);
    for (name, batch) in split.tables {
        dict.set_item(name, Py::new(py, arrow::ArrowTable::new(batch))?)?;
    }
    Ok((split.scalars, split.histograms, dict))
}

/// Runs a scenario; returns (report JSON, report JSON without its tables and histograms,
/// the histograms' JSON or None, tables), the tables as a dict of name -> ArrowTable
/// (Arrow PyCapsule stream: `pyarrow.table(t)`).
#[pyfunction]
#[pyo3(signature = (scenario_toml, overrides=None, seed=None, timeout=None))]
fn run_arrow<'py>(
    py: Python<'py>,
    scenario_toml: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
    timeout: Option<f64>,
) -> PyResult<ArrowParts<'py>> {
    let sc = resolve_inner(scenario_toml, overrides, seed)?;
    let report = run_supervised(py, &sc, None, timeout)?;
    arrow_parts(py, &report)
}

/// A report JSON (e.g. from the results store) split as `run_arrow` does: (JSON without
/// tables and histograms, the histograms' JSON or None, tables).
#[pyfunction]
fn report_arrow<'py>(
    py: Python<'py>,
    report_json: &str,
) -> PyResult<(String, Option<String>, Bound<'py, PyDict>)> {
    let split = arrow::split_report(report_json).map_err(PyValueError::new_err)?;
    split_dict(py, split)
}

/// A report JSON as (the report without its histograms, the histograms' JSON or None),
/// both as written.
#[pyfunction]
fn split_histograms(report_json: &str) -> PyResult<(String, Option<String>)> {
    arrow::split_histograms(report_json).map_err(PyValueError::new_err)
}

/// Runs a scenario, writing a Chrome/Perfetto trace to `out_path`; returns the report JSON.
/// The trace is written to a temporary file beside `out_path` and renamed when complete;
/// a write error fails the call and leaves no partial file.
/// A trace window bound: a duration like "200ms" (`key` names the option for errors).
fn window_bound(key: &str, value: Option<&str>, default: u64) -> PyResult<u64> {
    match value {
        None => Ok(default),
        Some(v) => vcpulab_core::sim::time::parse_duration(v)
            .map(|n| n.0)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{key} {v:?}: not a duration; allowed: a number with a unit, e.g. \"200ms\", \"1.5s\", \"300us\""
                ))
            }),
    }
}

#[pyfunction]
#[pyo3(signature = (scenario_toml, out_path, overrides=None, seed=None, timeout=None, window_from=None, window_to=None))]
#[allow(clippy::too_many_arguments)]
fn trace(
    py: Python<'_>,
    scenario_toml: &str,
    out_path: &str,
    overrides: Option<Vec<String>>,
    seed: Option<u64>,
    timeout: Option<f64>,
    window_from: Option<&str>,
    window_to: Option<&str>,
) -> PyResult<String> {
    let from = window_bound("--from", window_from, 0)?;
    let to = window_bound("--to", window_to, u64::MAX)?;
    if to <= from {
        return Err(PyValueError::new_err(format!(
            "--to {} must be after --from {}",
            window_to.unwrap_or("(end)"),
            window_from.unwrap_or("0")
        )));
    }
    let sc = resolve_inner(scenario_toml, overrides, seed)?;
    let end = sc.run.duration.0;
    if from >= end.0 {
        // A window after the run's end would write a trace of metadata only.
        return Err(PyValueError::new_err(format!(
            "--from {} is not before the run's end ({end}); the trace would hold nothing",
            window_from.unwrap_or("0")
        )));
    }
    let out = std::path::Path::new(out_path);
    if out.is_dir() {
        return Err(PyValueError::new_err(format!(
            "cannot write trace file {out_path:?}: it is a directory"
        )));
    }
    let tmp = out.with_file_name(format!(
        ".{}.tmp{}",
        out.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let file = File::create(&tmp)
        .map_err(|e| PyValueError::new_err(format!("cannot write trace file {out_path:?}: {e}")))?;
    let vms: Vec<(String, u32)> = sc
        .vm
        .iter()
        .map(|v| (v.name.clone().unwrap_or_default(), v.vcpus))
        .collect();
    let writer = SharedWriter::new(file);
    let pcpus = sc.host.pcpus;
    let w2 = writer.clone();
    let gzip = out_path.ends_with(".gz");
    let (from, to) = (Nanos(from), Nanos(to));
    let make = move || -> Box<dyn TraceSink> {
        let file = BufWriter::new(w2.clone());
        if gzip {
            // The gzip trailer is written when the sink is dropped at the run's end.
            let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
            Box::new(ChromeTrace::windowed(gz, pcpus, &vms, from, to))
        } else {
            Box::new(ChromeTrace::windowed(file, pcpus, &vms, from, to))
        }
    };
    let result = run_supervised(py, &sc, Some(&make), timeout);
    let written = writer.finish();
    let report = match (result, written) {
        (Ok(r), Ok(())) => r,
        (Err(e), _) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        (Ok(_), Err(e)) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(PyValueError::new_err(format!(
                "cannot write trace file {out_path:?}: {e}"
            )));
        }
    };
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        PyValueError::new_err(format!("cannot write trace file {out_path:?}: {e}"))
    })?;
    Ok(report.to_json())
}

/// A file shared by the trace sink (which drops its writer when the run ends) and the
/// caller, which must learn whether every write succeeded: the first error is kept.
#[derive(Clone)]
struct SharedWriter(Arc<Mutex<(Option<File>, Option<std::io::Error>)>>);

impl SharedWriter {
    fn new(f: File) -> Self {
        SharedWriter(Arc::new(Mutex::new((Some(f), None))))
    }
    /// Flushes to disk and returns the first write error, if any.
    fn finish(&self) -> std::io::Result<()> {
        let mut g = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        if let Some(e) = g.1.take() {
            return Err(e);
        }
        if let Some(f) = g.0.take() {
            f.sync_all()?;
        }
        Ok(())
    }
}

impl Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut g = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let (file, err) = &mut *g;
        if err.is_some() {
            return Ok(buf.len()); // already failed: the caller reports the first error
        }
        match file.as_mut().map(|f| f.write_all(buf)) {
            Some(Err(e)) => {
                *err = Some(std::io::Error::new(e.kind(), e.to_string()));
                Err(e)
            }
            _ => Ok(buf.len()),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let mut g = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let (file, err) = &mut *g;
        if let Some(Err(e)) = file.as_mut().map(|f| f.flush()) {
            if err.is_none() {
                *err = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
            return Err(e);
        }
        Ok(())
    }
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

/// Host platform profiles (`host.platform`): (name, description).
#[pyfunction]
fn platforms() -> Vec<(String, String)> {
    vcpulab_core::platforms()
}

/// Guest kernel profiles (`guest.kernel`): (name, description).
#[pyfunction]
fn kernels() -> Vec<(String, String)> {
    vcpulab_core::kernels()
}

/// The report's glossary: (table, column names, unit, meaning) per entry.
#[pyfunction]
fn columns() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    vcpulab_core::metrics::columns::COLUMNS
        .iter()
        .map(|c| (c.table, c.names, c.unit, c.meaning))
        .collect()
}

/// The report columns that can be null, with their value type ("int" or "float"): a
/// column null in every row still has that type (in Arrow and in pandas).
#[pyfunction]
fn nullable_columns() -> Vec<(&'static str, &'static str, &'static str)> {
    use vcpulab_core::metrics::columns::{ValueKind, NULLABLE};
    NULLABLE
        .iter()
        .map(|(t, c, k)| {
            let kind = match k {
                ValueKind::Int => "int",
                ValueKind::Float => "float",
            };
            (*t, *c, kind)
        })
        .collect()
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
    m.add_function(wrap_pyfunction!(platforms, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(columns, m)?)?;
    m.add_function(wrap_pyfunction!(nullable_columns, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(build_id, m)?)?;
    m.add_function(wrap_pyfunction!(run_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(report_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(split_histograms, m)?)?;
    m.add_class::<arrow::ArrowTable>()?;
    Ok(())
}
