"""vcpulab: a deterministic simulator of consolidated virtualized multicore hosts.

The simulation runs in the compiled core (`vcpulab._core`); this package orchestrates
runs, sweeps, the results store, plots and reproductions.

    >>> import vcpulab
    >>> report = vcpulab.run("scenarios/examples/weights-1-1-2-4.toml", seed=1)
    >>> report.vms[["vm", "cpu_share", "entitlement"]]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vcpulab import _native
from vcpulab.errors import (
    CoreUnavailableError,
    ScenarioError,
    SimulationError,
    UsageError,
    WorkerLostError,
)
from vcpulab.report import Report
from vcpulab.scenario import ScenarioInput, dumps_toml, load_scenario, normalize_overrides
from vcpulab.store import ResultsStore
from vcpulab.sweeps import Backend, GridInput, run_sweep, summarize

if TYPE_CHECKING:
    import pandas as pd

    from vcpulab.executors import Executor

__all__ = [
    "CoreUnavailableError",
    "Report",
    "ResultsStore",
    "ScenarioError",
    "SimulationError",
    "UsageError",
    "WorkerLostError",
    "characterize",
    "columns",
    "core_build_id",
    "core_version",
    "dumps_toml",
    "kernels",
    "platforms",
    "presets",
    "resolve",
    "run",
    "summarize",
    "sweep",
    "trace",
    "workloads",
]

__version__ = "0.1.0"

Overrides = Sequence[str] | Mapping[str, Any] | None


def characterize(
    model: str, threads: Sequence[int] = (1, 2, 4, 8, 16), **kw: Any
) -> list[dict[str, Any]]:
    """Run a catalog model natively at several thread counts (see vcpulab.characterize)."""
    from vcpulab.characterization import characterize as _characterize

    return _characterize(model, threads, **kw)


def _check_seed(seed: int | None) -> int | None:
    """A seed the core takes: None or a whole number from 0 to 2^63-1 (as `--seed`)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**63 - 1:
        raise ScenarioError(f"seed: {seed!r} is not allowed; expected 0 to {2**63 - 1}")
    return seed


def run(scenario: ScenarioInput, *, seed: int | None = None, overrides: Overrides = None) -> Report:
    """Run one simulation and return its report.

    `scenario` is a path, TOML text or a dict; `overrides` are `dotted.key=value`
    strings (as the CLI's `--set`) or a dict of them. Raises `ScenarioError` on bad input.
    """
    text = load_scenario(scenario)
    raw, scalars, hists, tables = _native.core_run_arrow(
        text, normalize_overrides(overrides), _check_seed(seed)
    )
    return Report.from_arrow(scalars, tables, raw_json=raw, histograms_json=hists)


def trace(
    scenario: ScenarioInput,
    out_path: str | os.PathLike[str],
    *,
    seed: int | None = None,
    overrides: Overrides = None,
    window: tuple[str | None, str | None] = (None, None),
) -> Report:
    """Run and write a Chrome/Perfetto trace JSON to `out_path` (gzip-compressed when it
    ends in .gz), keeping only what overlaps `window` (durations, e.g. ("1s", "1.2s"));
    returns the report."""
    text = load_scenario(scenario)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = _native.core_trace(
        text, str(out), normalize_overrides(overrides), _check_seed(seed), window
    )
    scalars, hists, tables = _native.core_report_arrow(raw)
    return Report.from_arrow(scalars, tables, raw_json=raw, histograms_json=hists)


def resolve(
    scenario: ScenarioInput, *, seed: int | None = None, overrides: Overrides = None
) -> str:
    """The fully resolved scenario (preset applied, defaults filled) as TOML text."""
    text = load_scenario(scenario)
    return _native.core_resolve(text, normalize_overrides(overrides), _check_seed(seed))


def sweep(
    scenario: ScenarioInput,
    grid: GridInput = None,
    seeds: int | Sequence[int] = 1,
    *,
    overrides: Overrides = None,
    executor: str | Executor = "local",
    jobs: int | None = None,
    store: str | os.PathLike[str] | ResultsStore | None = None,
    table: str = "vms",
    force: bool = False,
    progress: bool = False,
    backend: Backend | None = None,
) -> pd.DataFrame:
    """Run the cartesian product of `grid` x `seeds`; one DataFrame row per point x VM.

    `grid` maps dotted keys to value lists (`{"host.scheduler.slice_ms": [30, 1]}`) or
    is a list of `"key=v1,v2"` strings. `seeds` is a count (starting at the scenario's
    seed) or an explicit list. With `store` (a path), finished points are kept there
    and skipped when the sweep runs again. Failed points are listed in
    `df.attrs["failed"]`; `vcpulab.summarize(df)` gives means with 95% CIs.
    """
    store_arg: str | Path | ResultsStore | None
    store_arg = Path(store) if isinstance(store, os.PathLike) else store
    outcome = run_sweep(
        scenario,
        grid,
        seeds,
        overrides=overrides,
        executor=executor,
        jobs=jobs,
        store=store_arg,
        table=table,
        force=force,
        progress=progress,
        backend=backend,
    )
    assert outcome.frame is not None
    outcome.frame.attrs["computed"] = outcome.computed
    outcome.frame.attrs["skipped"] = outcome.skipped
    return outcome.frame


def presets() -> list[tuple[str, str]]:
    """Named presets: (name, one-line description)."""
    return [(str(n), str(d)) for n, d in _native.core().presets()]


def columns() -> list[tuple[str, str, str, str]]:
    """The report's glossary: (table, column(s), unit, meaning) for every column of every
    report table, and the report's own scalars under table "report"."""
    return [(str(t), str(n), str(u), str(m)) for t, n, u, m in _native.core().columns()]


def workloads() -> list[tuple[str, str]]:
    """Workload models of the catalog: (name, one-line description)."""
    return [(str(n), str(d)) for n, d in _native.core().workloads()]


def platforms() -> list[tuple[str, str]]:
    """Host platform profiles (`host.platform`): (name, description) — the study, the
    hypervisor version, the CPU (marked assumed where its paper does not give it), the
    host scheduler and guest kernel it pins."""
    return [(str(n), str(d)) for n, d in _native.core().platforms()]


def kernels() -> list[tuple[str, str]]:
    """Guest kernel profiles (`guest.kernel`): (name, description)."""
    return [(str(n), str(d)) for n, d in _native.core().kernels()]


def core_version() -> str:
    return str(_native.core().version())


def core_build_id() -> str:
    """A hash of the core's sources at build time; with the version it keys stored results."""
    return str(_native.core().build_id())
