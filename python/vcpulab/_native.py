"""Access to the compiled core, with a clear message when it is not built."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

from vcpulab.errors import CoreUnavailableError

_CORE: ModuleType | None = None


def core() -> ModuleType:
    """Return the `vcpulab._core` extension module or raise `CoreUnavailableError`."""
    global _CORE
    if _CORE is None:
        try:
            from vcpulab import _core
        except ImportError as exc:
            raise CoreUnavailableError(
                "the simulation core vcpulab._core is not built; run `make install` "
                f"(or `pip install -e .`) first ({exc})"
            ) from exc
        _CORE = _core
    return _CORE


def core_available() -> bool:
    try:
        core()
    except CoreUnavailableError:
        return False
    return True


def run_timeout() -> float | None:
    """The wall-clock budget of one run in seconds (`--timeout`, passed to sweep
    workers as the VCPULAB_TIMEOUT environment variable), or None."""
    text = os.environ.get("VCPULAB_TIMEOUT")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 and math.isfinite(value) else None


def _timeout_kw() -> dict[str, float]:
    t = run_timeout()
    return {} if t is None else {"timeout": t}


def core_run(scenario_toml: str, overrides: list[str], seed: int | None) -> str:
    """The default runner: a pure function of its arguments, importable in worker processes."""
    return str(core().run(scenario_toml, overrides, seed, **_timeout_kw()))


def core_identity() -> str:
    """The core's version and build id (a hash of its sources at build time), e.g.
    `0.1.0+52205ed0f3a37264`: results of two different cores never share a store key."""
    mod = core()
    version = str(mod.version())
    build = getattr(mod, "build_id", None)
    return f"{version}+{build()}" if callable(build) else version


class ArrowTables(Mapping[str, Any]):
    """The core's tables by name, each imported as a `pyarrow.Table` on first access.

    Zero-copy through the Arrow PyCapsule stream interface, and lazily: importing
    pyarrow (and numpy with it) takes 0.25 s on a 2-core machine, once per process, which
    a caller that reads only the report's scalars never needs to pay. Read as a stream
    rather than through `pa.table`, which first asks whether its argument is a pandas
    DataFrame and so imports pandas (0.4-0.6 s) for a run that may never build one."""

    def __init__(self, streams: Mapping[Any, Any]) -> None:
        self._streams: dict[str, Any] = {str(name): s for name, s in streams.items()}
        self._tables: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        table = self._tables.get(name)
        if table is None:
            stream = self._streams[name]  # KeyError for an unknown table
            import pyarrow as pa

            table = pa.RecordBatchReader.from_stream(stream).read_all()
            self._tables[name] = table
        return table

    def __iter__(self) -> Iterator[str]:
        return iter(self._streams)

    def __len__(self) -> int:
        return len(self._streams)


def core_run_arrow(
    scenario_toml: str, overrides: list[str], seed: int | None
) -> tuple[str, str, str | None, ArrowTables]:
    """Run in process: (report JSON, JSON without the tables and histograms, the
    histograms' JSON or None, {table: pyarrow.Table})."""
    raw, scalars, hists, tables = core().run_arrow(scenario_toml, overrides, seed, **_timeout_kw())
    return str(raw), str(scalars), _opt_str(hists), ArrowTables(tables)


def core_report_arrow(report_json: str) -> tuple[str, str | None, ArrowTables]:
    """A report JSON split by the core: (JSON without the tables and histograms, the
    histograms' JSON or None, {table: pyarrow.Table})."""
    scalars, hists, tables = core().report_arrow(report_json)
    return str(scalars), _opt_str(hists), ArrowTables(tables)


def core_split_histograms(report_json: str) -> tuple[str, str | None]:
    """(the report JSON without its histograms, the histograms' JSON or None)."""
    rest, hists = core().split_histograms(report_json)
    return str(rest), _opt_str(hists)


def _opt_str(x: Any) -> str | None:
    return None if x is None else str(x)


def core_resolve(scenario_toml: str, overrides: list[str], seed: int | None) -> str:
    return str(core().resolve(scenario_toml, overrides, seed))


def core_explain(scenario_toml: str, overrides: list[str], seed: int | None) -> str:
    """The resolved scenario with comments on the platform profiles and what they set."""
    return str(core().explain(scenario_toml, overrides, seed))


def core_trace(
    scenario_toml: str,
    out_path: str,
    overrides: list[str],
    seed: int | None,
    window: tuple[str | None, str | None] = (None, None),
) -> str:
    """Run and write the trace (gzip-compressed when `out_path` ends in .gz), keeping what
    overlaps the window (durations like "200ms"; None: from the start / to the end)."""
    return str(
        core().trace(
            scenario_toml,
            out_path,
            overrides,
            seed,
            window_from=window[0],
            window_to=window[1],
            **_timeout_kw(),
        )
    )


def core_call(name: str, *args: Any) -> Any:
    return getattr(core(), name)(*args)
