"""The report of one run: a thin, generic view over the core's JSON (schema 1).

Every top-level key whose value is a list of flat dicts is a *table*; new tables added
by the core appear here without changes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

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


class Report:
    """Result of one simulation run."""

    def __init__(self, data: Mapping[str, Any], raw_json: str | None = None) -> None:
        if not isinstance(data, Mapping):
            raise TypeError("a report is a JSON object")
        schema = data.get("schema")
        if schema is not None and schema != SCHEMA:
            raise ValueError(f"report schema {schema!r} is not supported (expected {SCHEMA})")
        self._data: dict[str, Any] = dict(data)
        self._raw = raw_json

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls(json.loads(text), raw_json=text)

    # --- plain data ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)

    def to_json(self, indent: int | None = None) -> str:
        """The report as JSON; without `indent` it is exactly the core's output."""
        if indent is None and self._raw is not None:
            return self._raw
        return json.dumps(self._data, indent=indent)

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
    def events(self) -> int:
        return int(self._data.get("events", 0))

    @property
    def jain_index(self) -> float | None:
        fairness = self._data.get("fairness") or {}
        value = fairness.get("jain_index")
        return float(value) if value is not None else None

    @property
    def histograms(self) -> dict[str, dict[str, Any]]:
        return copy.deepcopy(self._data.get("histograms") or {})

    def histogram(self, name: str) -> pd.DataFrame:
        """Buckets of one histogram as a DataFrame (lo_ns, hi_ns, count)."""
        import pandas as pd

        hist = self._data.get("histograms", {}).get(name)
        if hist is None:
            known = ", ".join(sorted(self._data.get("histograms", {}))) or "none"
            raise KeyError(f"no histogram {name!r} in this report (have: {known})")
        return pd.DataFrame(hist.get("buckets", []), columns=["lo_ns", "hi_ns", "count"])

    def scalars(self) -> dict[str, Any]:
        """Every scalar outside the tables and histograms, with dotted names."""
        data = {k: v for k, v in self._data.items() if k != "histograms"}
        return flatten_scalars(data)

    # --- tables ----------------------------------------------------------------------

    @property
    def tables(self) -> list[str]:
        return [k for k, v in self._data.items() if is_table(v)]

    def rows(self, name: str) -> list[dict[str, Any]]:
        """Rows of a table as a list of dicts."""
        value = self._data.get(name)
        if value is None or not is_table(value):
            raise KeyError(f"no table {name!r} in this report (have: {', '.join(self.tables)})")
        return [dict(r) for r in value]

    def table(self, name: str) -> pd.DataFrame:
        """A table as a pandas DataFrame."""
        import pandas as pd

        rows = self.rows(name)
        return pd.DataFrame.from_records(rows) if rows else pd.DataFrame()

    def to_pandas(self, table: str = "vms") -> pd.DataFrame:
        return self.table(table)

    def __getattr__(self, name: str) -> pd.DataFrame:
        # Only called for attributes not found normally: expose tables as attributes.
        if name.startswith("_"):
            raise AttributeError(name)
        data = self.__dict__.get("_data", {})
        if is_table(data.get(name)):
            return self.table(name)
        raise AttributeError(f"{type(self).__name__!s} has no attribute or table {name!r}")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.tables))

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Report) and self._data == other._data

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<Report {self.name!r} seed={self.seed} end_ns={self.end_ns} "
            f"stop={self.stop_reason!r} tables={self.tables}>"
        )

    def summary(self) -> str:
        """Human-readable text: per-VM time breakdown, shares, completion, latency."""
        from vcpulab.format import format_report

        return format_report(self._data)
