"""The report of one run: a thin, generic view over the core's JSON (schema 1).

Every top-level key whose value is a list of flat dicts is a *table*; new tables added
by the core appear here without changes.

A report from the compiled core (`vcpulab.run`) carries its tables as Arrow tables that
crossed from Rust through the Arrow PyCapsule interface; DataFrames are built from
those (`pyarrow.Table.to_pandas`), and the rows are parsed from JSON only when asked
for as Python objects (`to_dict`, `rows`, `report["vms"]`).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

SCHEMA = 1


def is_table(value: Any) -> bool:
    """A list of flat dicts (an empty list counts: a table with no rows)."""
    return isinstance(value, list) and all(
        isinstance(row, dict) and not any(isinstance(v, dict | list) for v in row.values())
        for row in value
    )


def flatten_scalars(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalar leaves of nested dicts as dotted names, skipping tables and lists."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_scalars(value, name + "."))
        elif isinstance(value, list):
            continue
        else:
            out[name] = value
    return out


@functools.cache
def declared_nullable() -> frozenset[tuple[str, str]]:
    """(table, column) pairs the core declares nullable numbers: a column null in every
    row is still numeric (float64 in pandas, as Arrow gives it)."""
    from vcpulab import _native

    if not _native.core_available():
        return frozenset()
    fn = getattr(_native.core(), "nullable_columns", None)
    return frozenset((t, c) for t, c, _ in fn()) if fn is not None else frozenset()


HISTOGRAM_STATS = ("count", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns")


def histogram_rows(histograms: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's histogram summaries in long format: one row per histogram, its name
    split into `histogram` (what was measured), `vm` and `path` (e.g.
    `wake_latency/db/halted_busy_pcpu`), so that VMs are rows, not columns."""
    rows: list[dict[str, Any]] = []
    for name, summary in histograms.items():
        kind, _, rest = name.partition("/")
        vm, _, path = rest.partition("/")
        row: dict[str, Any] = {"histogram": kind, "vm": vm or None, "path": path or None}
        row.update({k: summary.get(k) for k in HISTOGRAM_STATS})
        rows.append(row)
    return rows


class Report:
    """Result of one simulation run."""

    def __init__(
        self,
        data: Mapping[str, Any],
        raw_json: str | None = None,
        *,
        arrow_tables: Mapping[str, pa.Table] | None = None,
        histograms_json: str | None = None,
    ) -> None:
        """`data` is the report's JSON object; with `arrow_tables`, it is the report
        without its tables, and `raw_json` (if given) the whole report. With
        `histograms_json`, `data` lacks the histograms and this is their JSON, parsed
        on first use (a host of a thousand VMs has ~10 MB of it, which most callers
        never read)."""
        if not isinstance(data, Mapping):
            raise TypeError("a report is a JSON object")
        schema = data.get("schema")
        if schema is not None and schema != SCHEMA:
            raise ValueError(f"report schema {schema!r} is not supported (expected {SCHEMA})")
        # Without Arrow tables: the whole report. With them: everything but the tables.
        self._data: dict[str, Any] = dict(data)
        # Kept as given: the core's tables are imported into pyarrow when first read.
        self._arrow: Mapping[str, pa.Table] = arrow_tables if arrow_tables is not None else {}
        self._full: dict[str, Any] | None = (
            None if self._arrow or histograms_json is not None else self._data
        )
        self._raw = raw_json
        self._hist_json = histograms_json

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls(json.loads(text), raw_json=text)

    @classmethod
    def from_json_lazy(cls, text: str) -> Report:
        """As `from_json`, parsing the histograms only when they are read."""
        from vcpulab import _native

        rest, hists = _native.core_split_histograms(text)
        return cls(json.loads(rest), raw_json=text, histograms_json=hists)

    @classmethod
    def from_arrow(
        cls,
        scalars_json: str,
        tables: Mapping[str, pa.Table],
        raw_json: str | None = None,
        histograms_json: str | None = None,
    ) -> Report:
        """From the core's split report: JSON without the tables (and without the
        histograms when `histograms_json` holds them), plus Arrow tables."""
        return cls(
            json.loads(scalars_json),
            raw_json=raw_json,
            arrow_tables=tables,
            histograms_json=histograms_json,
        )

    def _histograms(self) -> dict[str, Any]:
        """The histograms object (parsed now if it came as JSON text)."""
        if self._hist_json is not None:
            self._data["histograms"] = json.loads(self._hist_json)
            self._hist_json = None
        return self._data.get("histograms") or {}

    def _whole(self) -> dict[str, Any]:
        """The whole report as plain data (parsed only when needed)."""
        if self._full is None:
            if self._raw is not None:
                self._full = json.loads(self._raw)
            else:
                self._histograms()
                full = dict(self._data)
                full.update({k: t.to_pylist() for k, t in self._arrow.items()})
                self._full = full
        return self._full

    # --- plain data ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._whole())

    def to_json(self, indent: int | None = None) -> str:
        """The report as JSON; without `indent` it is exactly the core's output."""
        if indent is None and self._raw is not None:
            return self._raw
        return json.dumps(self._whole(), indent=indent)

    def arrow(self, name: str) -> pa.Table:
        """A table as a pyarrow Table (as it came from the core, when it did)."""
        if name in self._arrow:
            return self._arrow[name]
        import pyarrow as pa

        rows = self.rows(name)
        return pa.Table.from_pylist(rows) if rows else pa.table({})

    # --- top-level fields ------------------------------------------------------------

    @property
    def scenario(self) -> dict[str, Any]:
        return dict(self._data.get("scenario") or {})

    @property
    def name(self) -> str:
        return str(self.scenario.get("name", ""))

    @property
    def seed(self) -> int | None:
        seed = self.scenario.get("seed")
        return int(seed) if seed is not None else None

    @property
    def end_ns(self) -> int:
        return int(self._data.get("end_ns", 0))

    @property
    def stop_reason(self) -> str:
        return str(self._data.get("stop_reason", ""))

    @property
    def warnings(self) -> list[str]:
        """Mechanisms the run was too short to let act (Gleaner's controller, APPLE's
        window search); empty when there are none."""
        return [str(w) for w in self._data.get("warnings") or []]

    @property
    def events(self) -> int:
        return int(self._data.get("events", 0))

    @property
    def jain_index(self) -> float | None:
        fairness = self._data.get("fairness") or {}
        value = fairness.get("jain_index")
        return float(value) if value is not None else None

    @property
    def histograms(self) -> dict[str, dict[str, Any]]:
        return copy.deepcopy(self._histograms())

    def histogram(self, name: str) -> pd.DataFrame:
        """Buckets of one histogram as a DataFrame (lo_ns, hi_ns, count)."""
        import pandas as pd

        hist = self._histograms().get(name)
        if hist is None:
            known = ", ".join(sorted(self._histograms())) or "none"
            raise KeyError(f"no histogram {name!r} in this report (have: {known})")
        return pd.DataFrame(hist.get("buckets", []), columns=["lo_ns", "hi_ns", "count"])

    def histogram_table(self) -> pd.DataFrame:
        """Every histogram's summary, one row each (long format: see `histogram_rows`);
        also what `vcpulab sweep --table histograms` collects."""
        import pandas as pd

        return pd.DataFrame.from_records(
            histogram_rows(self._histograms()),
            columns=["histogram", "vm", "path", *HISTOGRAM_STATS],
        )

    def scalars(self) -> dict[str, Any]:
        """Every scalar outside the tables and histograms, with dotted names."""
        data = {k: v for k, v in self._data.items() if k != "histograms"}
        return flatten_scalars(data)

    # --- tables ----------------------------------------------------------------------

    @property
    def tables(self) -> list[str]:
        if self._arrow:
            return list(self._arrow)
        return [k for k, v in self._data.items() if is_table(v)]

    def rows(self, name: str) -> list[dict[str, Any]]:
        """Rows of a table as a list of dicts."""
        value = self._whole().get(name) if name in self.tables else None
        if value is None or not is_table(value):
            raise KeyError(f"no table {name!r} in this report (have: {', '.join(self.tables)})")
        return [dict(r) for r in value]

    def table(self, name: str) -> pd.DataFrame:
        """A table as a pandas DataFrame."""
        import pandas as pd

        if name in self._arrow:
            t = self._arrow[name]
            return t.to_pandas() if t.num_rows else pd.DataFrame()
        rows = self.rows(name)
        if not rows:
            return pd.DataFrame()
        frame = pd.DataFrame.from_records(rows)
        declared = declared_nullable()
        for column in frame.columns:
            if (name, column) in declared and frame[column].isna().all():
                frame[column] = frame[column].astype("float64")
        return frame

    def to_pandas(self, table: str = "vms") -> pd.DataFrame:
        return self.table(table)

    def __getattr__(self, name: str) -> pd.DataFrame:
        # Only called for attributes not found normally: expose tables as attributes.
        if name.startswith("_"):
            raise AttributeError(name)
        data = self.__dict__.get("_data", {})
        if name in self.__dict__.get("_arrow", {}) or is_table(data.get(name)):
            return self.table(name)
        raise AttributeError(f"{type(self).__name__!s} has no attribute or table {name!r}")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.tables))

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __getitem__(self, key: str) -> Any:
        if key == "histograms" and self._hist_json is not None:
            return self._histograms()
        if key in self._data:
            return self._data[key]
        return self._whole()[key]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Report) and self._whole() == other._whole()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<Report {self.name!r} seed={self.seed} end_ns={self.end_ns} "
            f"stop={self.stop_reason!r} tables={self.tables}>"
        )

    def summary(self) -> str:
        """Human-readable text: per-VM time breakdown, shares, completion, latency."""
        from vcpulab.format import format_report

        if self._full is not None:
            return format_report(self._full)
        # The summary reads neither the histograms nor the raw JSON: a view of the
        # scalars and the Arrow tables' rows spares parsing either (~10 MB each for a
        # host of a thousand VMs).
        view = {k: v for k, v in self._data.items() if k != "histograms"}
        view.update({k: t.to_pylist() for k, t in self._arrow.items()})
        return format_report(view)
