"""Reproductions as data: `Repro` describes a figure, `Repro.experiment()` runs it.

A reproduction of the common kind is a `Repro`: its runs (a scenario swept over a grid,
or `Point`s, each a scenario file and overrides), what one row of the result is (a
point, a swept value, or the `x` of points labelled "<series> <x>"), the columns of a
row as `Cell`s — the mean of a per-run `Col` over the seeds, or a `Ratio` of two such
means — the published values (`Pub`, optionally a bound) and a `Plot` kind. The
verdict, the CSV, the PNG and the store/sweep machinery are those of every experiment
(`run_experiment`). See docs/reproductions.md for a worked example.

Code remains only where a figure is genuinely special: `explain` (a sentence for the
verdict line) and `plotter` accept functions, and `Fn` reads a per-run quantity that is
not a plain column.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vcpulab.experiments import (
    PLANNED_POINTS,
    POINT_COLUMN,
    SEED_VALUES,
    Experiment,
    ExplainFn,
    PlotFn,
    Point,
    figure_title,
)
from vcpulab.experiments import plot as default_plot
from vcpulab.stats import mean_ci

if TYPE_CHECKING:
    import pandas as pd

POINT = "point"
"""`Repro.rows`: one row per point, x = its label."""
SERIES_X = "series x"
"""`Repro.rows`: points are labelled "<series> <x>"; one row per x, cells pick a series."""
INDEX = "index"
"""`Repro.x_of`: the row's position (0, 1, ...) as its x."""


# --- per-run quantities ----------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    """A per-run quantity: `how` ("sum", "mean", "max" or "min") of a report column over
    the run's rows (of VM `vm` only, if given), each divided by `per` (1e3: ns to us)."""

    column: str
    vm: str | None = None
    how: str = "sum"
    per: float = 1.0
    finished_only: bool = False
    """NaN for a run in which a selected row did not finish (the run is left out)."""

    def of(self, run: pd.DataFrame) -> float:
        # The column first, then the VM's rows: taking whole rows out of a report's wide
        # frame costs far more than the one column needed (same values, same order).
        mine = None if self.vm is None else run["vm"] == self.vm
        column = run[self.column] if mine is None else run[self.column][mine]
        if column.empty:
            return math.nan
        if self.finished_only:
            finished = run["finished"] if mine is None else run["finished"][mine]
            if not bool(finished.astype(bool).all()):
                return math.nan
        values = column.astype(float) / self.per
        if self.how == "sum":
            return float(values.sum())
        if self.how == "max":
            return float(values.max())
        if self.how == "min":
            return float(values.min())
        return float(values.mean())


@dataclass(frozen=True)
class Fn:
    """A per-run quantity computed by a function of the run's rows (the escape hatch)."""

    fn: Callable[[pd.DataFrame], float]

    def of(self, run: pd.DataFrame) -> float:
        return float(self.fn(run))


Quantity = Col | Fn


# --- cells: the columns of a row ----------------------------------------------------------


@dataclass(frozen=True)
class Mean:
    """The mean over seeds (95% CI) of `q`, at series `at` (a point label, or the series
    of a "<series> <x>" label) within the row; `as_int` truncates (counts)."""

    q: Quantity
    at: str | None = None
    as_int: bool = False


@dataclass(frozen=True)
class Ratio:
    """mean(q at `of`) / mean(q at `to`) within the row; `paired`: the mean (95% CI) of the
    per-seed ratios (same seed, same workload randomness)."""

    q: Quantity
    of: str
    to: str
    paired: bool = False
    pct_change: bool = False
    """Report 100 x (ratio - 1): the change in percent."""


@dataclass(frozen=True)
class CI:
    """The 95% CI half-width of `Mean(q, at)` (for a column beside it)."""

    q: Quantity
    at: str | None = None


@dataclass(frozen=True)
class Derived:
    """A value computed from the row's cells before it (e.g. the mean of two ratios)."""

    fn: Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Seeds:
    """The number of runs behind the row (at series `at`)."""

    at: str | None = None


@dataclass(frozen=True)
class Text:
    """A label: `fmt` formatted with the row's key (`{key}`) and the first value of any
    report column of its rows (`{weight}`)."""

    fmt: str


@dataclass(frozen=True)
class Pooled:
    """`q` of every run at `at` taken together (pooled over seeds, not a mean of per-run
    values), e.g. a ratio of sums over all epochs of all runs."""

    q: Quantity
    at: str | None = None


Cell = Mean | Ratio | CI | Seeds | Pooled | Derived | Text


# --- rows computed from other rows -----------------------------------------------------------


@dataclass(frozen=True)
class Sim:
    """The value of `column` in the result's row whose x is `x` (a row computed before
    this one: a point's row, or an explicit `Row` listed earlier)."""

    x: Any
    column: str = "simulated"


OVER_HOW = ("mean", "max", "min", "argmax", "argmin")


@dataclass(frozen=True)
class Over:
    """A summary of several values — cells (`Mean`, `Ratio`, ...) or rows (`Sim`) —
    NaNs left out: `how` "mean", "max", "min", "argmax" or "argmin" (the key of `of`
    given as a mapping key -> value, the first on ties), or a function of the list of
    values. NaN when none is a number."""

    of: Sequence[Any] | Mapping[Any, Any]
    how: str | Callable[[list[float]], Any] = "mean"

    def __post_init__(self) -> None:
        if isinstance(self.how, str) and self.how not in OVER_HOW:
            raise ValueError(f"Over.how: {self.how!r} (allowed: {', '.join(OVER_HOW)})")


@dataclass(frozen=True)
class Combine:
    """`fn` applied to the values of `args` (cells, `Sim` rows or constants), NaNs
    included."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True)
class RankCorr:
    """Spearman's rank correlation of columns `x` and `y` across the result's main rows
    (those of `rows`), over the rows where both are numbers; NaN with fewer than three."""

    x: str
    y: str


@dataclass(frozen=True)
class Row:
    """An explicit row of the result: its `x`, the judged value (None: the row has no
    `simulated` column) and more columns, each a cell, a `Sim`/`Over`/`Combine`/
    `RankCorr` or a constant (`Derived` sees the row's columns before it). Cells name
    points by label over the whole frame; a row naming a point the run did not plan
    (--quick may run fewer) is left out; a planned point without rows gives NaN."""

    x: Any
    simulated: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def row(x: Any, simulated: Any = None, **extra: Any) -> Row:
    """`Row(x, simulated, extra)` with the extra columns as keywords, in CSV order."""
    return Row(x, simulated, extra)


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    import pandas as pd

    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if not (math.isnan(x) or math.isnan(y))]
    if len(pairs) < 3:
        return math.nan
    a = pd.Series([p[0] for p in pairs]).rank()
    b = pd.Series([p[1] for p in pairs]).rank()
    return float(a.corr(b))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not math.isnan(float(value))


class _Split:
    """A frame's rows at each series label, and those rows per seed, each taken once:
    the cells of a table ask for the same few subsets again and again, and taking rows
    out of a wide frame is most of a reproduction's analysis time. The subsets are the
    rows a boolean mask and a sorted groupby give (same rows, same order), so every
    value computed from them is the same."""

    def __init__(self, rows: pd.DataFrame, series: pd.Series) -> None:
        self.rows = rows
        self.series = series
        self._at: dict[str | None, pd.DataFrame] = {}
        self._seeds: dict[str | None, list[tuple[int, pd.DataFrame]]] = {}

    def at(self, name: str | None) -> pd.DataFrame:
        if name not in self._at:
            rows = self.rows
            self._at[name] = rows if name is None else rows[self.series[rows.index] == name]
        return self._at[name]

    def seeds(self, name: str | None) -> list[tuple[int, pd.DataFrame]]:
        if name not in self._seeds:
            self._seeds[name] = [
                (int(cast(int, seed)), run)
                for seed, run in self.at(name).groupby("seed", sort=True)
            ]
        return self._seeds[name]


class _Context:
    """One evaluation of a reproduction's frame: its point labels, and the rows so far."""

    def __init__(self, frame: pd.DataFrame) -> None:
        import pandas as pd

        self.frame = frame
        has_points = POINT_COLUMN in frame.columns
        self.labels = (
            frame[POINT_COLUMN].astype(str)
            if has_points
            else pd.Series([""] * len(frame), index=frame.index)
        )
        planned = frame.attrs.get(PLANNED_POINTS)
        self.present: set[str] | None = (
            set(planned) if planned is not None else set(self.labels) if has_points else None
        )
        self.records: dict[Any, dict[str, Any]] = {}
        self.main: list[dict[str, Any]] = []
        self.cells: dict[Any, tuple[float, float]] = {}
        """Cells already computed: rows and summaries name the same cell many times."""
        self.split = _Split(frame, self.labels)

    def ran(self, ref: Any) -> bool:
        """Whether every point `ref` names (recursively) ran."""
        if self.present is None:
            return True
        if isinstance(ref, Row):
            return self.ran(ref.simulated) and all(self.ran(v) for v in ref.extra.values())
        if isinstance(ref, Mean | CI | Seeds | Pooled):
            return ref.at is None or ref.at in self.present or ref is SIMULATED_CELL
        if isinstance(ref, Ratio):
            return ref.of in self.present and ref.to in self.present
        if isinstance(ref, Over):
            refs = ref.of.values() if isinstance(ref.of, Mapping) else ref.of
            return all(self.ran(r) for r in refs)
        if isinstance(ref, Combine):
            return all(self.ran(r) for r in ref.args)
        return True


@dataclass(frozen=True)
class Pub:
    """A published value at `x`; `bound` "above" or "below" when the paper gives only a
    bound; `extra` columns go to the CSV beside it."""

    x: Any
    value: Any
    """A number, or a value computed from the simulated result (`Sim`, `Over`, `Combine`
    or a cell): a trend stated relative to another simulated value ("beats the other
    policy", "above every other mix")."""
    bound: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    when: Callable[[float], bool] | None = None
    """Keep the row only where this holds of the value (e.g. judged only where a gain
    was positive)."""

    extra_after: bool = False
    """Put the `extra` columns after `published` in the CSV (default: before)."""

    def row(self, value: Any, with_bound: bool) -> dict[str, Any]:
        out: dict[str, Any] = (
            {"x": self.x, "published": value, **self.extra}
            if self.extra_after
            else {"x": self.x, **self.extra, "published": value}
        )
        if with_bound:
            out["bound"] = self.bound
        return out


@dataclass(frozen=True)
class Each:
    """The same published value (usually a bound) at every simulated row, in their order."""

    value: float
    bound: str = ""


@dataclass(frozen=True)
class Plot:
    """The shared plotter's kinds: "bars" (published beside simulated, by row), "line"
    (the same over a numeric x), "columns" (bars of the named columns per row, with a
    reference line, e.g. ratios to a baseline at 1), "column-lines" (a line with its CI
    per named column over a numeric x)."""

    kind: str = "bars"
    columns: Sequence[tuple[str, str, str]] = ()
    """(column, legend, color) for "columns" and "column-lines"."""
    ref: float | None = 1.0
    log_x: bool = False
    log_y: bool = False
    y_label: str | None = None


# --- the reproduction ------------------------------------------------------------------------


@dataclass(frozen=True)
class Repro:
    id: str
    system: str
    title: str
    source: str
    """The paper and figure (or the closed form) the published values come from."""
    published: Sequence[Pub] | Each
    simulated: Mean | Ratio | Derived | None
    """The judged cell; a `Mean` or paired `Ratio` also gives `simulated_ci95`. None:
    the rows of `rows` are not judged (the `summary` rows are)."""
    points: Sequence[Point] = ()
    quick_points: Sequence[Point] | None = None
    scenario: str | None = None
    """Without points: the scenario file swept over `grid`."""
    rows: str | Callable[[str, str], tuple[str, str]] | Sequence[Row] = POINT
    """POINT, SERIES_X, a grid key or report column (one row per value, cells pick a point
    by its label), a function of (point label, grid value) -> (row key, series), or the
    rows themselves (`Row`s whose cells name points)."""
    summary: Sequence[Row] = ()
    """Rows computed from the rows above (`Sim`, `Over`, `RankCorr`), after them."""
    summary_first: bool = False
    """Put the summary rows before the others in the CSV."""
    simulated_ci: bool | None = None
    """Whether explicit rows carry `simulated_ci95` (None: when a judged cell gives one)."""
    x: str = "x"
    """The CSV's name for the row column."""
    x_of: Callable[[str], Any] | str | None = None
    """The row's x from its key: a format ("{} connections") or a function (float)."""
    columns: Mapping[str, Cell] = field(default_factory=dict)
    """Extra cells, in CSV order; `simulated` may be placed among them with `SIMULATED`."""
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    quick_grid: Mapping[str, Sequence[Any]] | None = None
    overrides: tuple[str, ...] = ()
    quick_overrides: tuple[str, ...] = ()
    seeds: int = 3
    quick_seeds: int = 2
    table: str = "vms"
    tolerance: tuple[float, float] = (0.05, 0.20)
    x_label: str = "x"
    y_label: str = "value"
    plot: Plot = field(default_factory=Plot)
    notes: str = ""
    explain: ExplainFn | None = None
    plotter: PlotFn | None = None

    def experiment(self) -> Experiment:
        return Experiment(
            id=self.id,
            system=self.system,
            title=self.title,
            scenarios=(self.scenario,) if self.scenario else (),
            points=self.points,
            quick_points=self.quick_points,
            published=self._published,
            simulate=self._simulate,
            source=self.source,
            x=self.x,
            x_label=self.x_label,
            y_label=self.y_label,
            grid=dict(self.grid),
            quick_grid=dict(self.quick_grid) if self.quick_grid is not None else None,
            seeds=self.seeds,
            quick_seeds=self.quick_seeds,
            overrides=self.overrides,
            quick_overrides=self.quick_overrides,
            table=self.table,
            tolerance=self.tolerance,
            kind="line" if self.plot.kind == "line" else "bar",
            log_x=self.plot.log_x,
            log_y=self.plot.log_y,
            notes=self.notes,
            explain=self.explain,
            plotter=self.plotter or self._plot,
        )

    # -- simulated ------------------------------------------------------------------

    def _keys(self, frame: pd.DataFrame) -> tuple[list[str], pd.Series, pd.Series]:
        """Row keys in order of appearance, and each frame row's row key and series."""
        import pandas as pd

        labels = (
            frame[POINT_COLUMN].astype(str)
            if POINT_COLUMN in frame.columns
            else pd.Series([""] * len(frame), index=frame.index)
        )
        if callable(self.rows):
            grid = [k for k in self.grid if k in frame.columns]
            values = frame[grid[0]].astype(str) if grid else labels.map(lambda _: "")
            pairs = [self.rows(lb, v) for lb, v in zip(labels, values, strict=True)]
            row = pd.Series([p[0] for p in pairs], index=frame.index)
            series = pd.Series([p[1] for p in pairs], index=frame.index)
        elif self.rows == POINT:
            row, series = labels, pd.Series([""] * len(frame), index=frame.index)
        elif self.rows == SERIES_X:
            split = labels.str.rsplit(" ", n=1, expand=True)
            series, row = split[0], split[1]
        else:
            row, series = frame[cast(str, self.rows)].astype(str), labels
        if self.rows == POINT and self.points:
            order = [p.label for p in self.points if p.label in set(row)]
        else:
            order = list(dict.fromkeys(row.tolist()))
        return order, row, series

    def _cell(
        self,
        cell: Mean | Ratio | CI | Seeds | Pooled,
        rows: pd.DataFrame,
        series: pd.Series,
        split: _Split | None = None,
    ) -> tuple[float, float]:
        split = split if split is not None else _Split(rows, series)
        at = split.at

        def per_seed(name: str | None, q: Quantity) -> dict[int, float]:
            return {seed: q.of(run) for seed, run in split.seeds(name)}

        if isinstance(cell, Seeds):
            return float(at(cell.at)["seed"].nunique()), math.nan
        if isinstance(cell, Pooled):
            return float(cell.q.of(at(cell.at))), math.nan
        if isinstance(cell, CI):
            return mean_ci(list(per_seed(cell.at, cell.q).values()))[1], math.nan
        if isinstance(cell, Mean):
            mean, half, _ = mean_ci(list(per_seed(cell.at, cell.q).values()))
            return (float(int(mean)) if cell.as_int and not math.isnan(mean) else mean), half
        if cell.paired:
            mean, half, _ = mean_ci(_seed_ratios(cell, split))
            return mean, half
        a, b = per_seed(cell.of, cell.q), per_seed(cell.to, cell.q)
        num, den = mean_ci(list(a.values()))[0], mean_ci(list(b.values()))[0]
        ok = den and not math.isnan(num) and not math.isnan(den)
        ratio = num / den if ok else math.nan
        return (100 * (ratio - 1) if cell.pct_change else ratio), math.nan

    def _seed_values(self, cell: Any, split: _Split) -> list[float]:
        """The judged cell's value in each seed on its own (a `Mean`'s per-run values, a
        `Ratio`'s per-seed ratios), for cells that are a mean over seeds; empty for the
        others. Seeds where the value is undefined are left out."""
        if isinstance(cell, Mean):
            values = [cell.q.of(run) for _, run in split.seeds(cell.at)]
        elif isinstance(cell, Ratio):
            values = _seed_ratios(cell, split)
            if cell.pct_change:
                values = [100 * (v - 1) for v in values]
        else:
            return []
        return [float(v) for v in values if not math.isnan(float(v))]

    def _x(self, key: str, index: int) -> Any:
        if self.x_of == INDEX:
            return index
        if self.x_of is None:
            return key
        if isinstance(self.x_of, str):
            return self.x_of.format(key)
        return self.x_of(key)

    def _gives_ci(self, cell: Any) -> bool:
        return isinstance(cell, Mean) or (isinstance(cell, Ratio) and cell.paired)

    def _value(self, ref: Any, ctx: _Context, record: Mapping[str, Any]) -> tuple[Any, float]:
        """A reference's value (and CI half-width, NaN if none) over the whole frame."""
        if isinstance(ref, Mean | Ratio | CI | Seeds | Pooled):
            if ref not in ctx.cells:
                ctx.cells[ref] = self._cell(ref, ctx.frame, ctx.labels, ctx.split)
            return ctx.cells[ref]
        if isinstance(ref, Derived):
            return ref.fn(record), math.nan
        if isinstance(ref, Sim):
            rec = ctx.records.get(ref.x)
            return (rec.get(ref.column, math.nan) if rec is not None else math.nan), math.nan
        if isinstance(ref, Combine):
            args = [self._value(a, ctx, record)[0] for a in ref.args]
            return ref.fn(*args), math.nan
        if isinstance(ref, Over):
            items = list(ref.of.items()) if isinstance(ref.of, Mapping) else list(enumerate(ref.of))
            valid = [
                (k, float(v))
                for k, a in items
                for v in (self._value(a, ctx, record)[0],)
                if _is_number(v)
            ]
            if not valid:
                return math.nan, math.nan
            values = [v for _, v in valid]
            if callable(ref.how):
                return ref.how(values), math.nan
            if ref.how == "mean":
                return math.fsum(values) / len(values), math.nan
            if ref.how == "max":
                return max(values), math.nan
            if ref.how == "min":
                return min(values), math.nan
            if ref.how == "argmax":
                return max(valid, key=lambda kv: kv[1])[0], math.nan
            if ref.how == "argmin":
                return min(valid, key=lambda kv: kv[1])[0], math.nan
            raise AssertionError(ref.how)  # refused in Over.__post_init__
        if isinstance(ref, RankCorr):
            xs = [float(r.get(ref.x, math.nan)) for r in ctx.main]
            ys = [float(r.get(ref.y, math.nan)) for r in ctx.main]
            return _spearman(xs, ys), math.nan
        return ref, math.nan

    def _row(self, row: Row, ctx: _Context, with_ci: bool) -> dict[str, Any]:
        record: dict[str, Any] = {"x": row.x}
        extra: dict[str, Any] = {}
        for name, ref in row.extra.items():
            extra[name] = self._value(ref, ctx, {**record, **extra})[0]
        if row.simulated is not None:
            value, half = self._value(row.simulated, ctx, {**record, **extra})
            record["simulated"] = value
            if with_ci:
                record["simulated_ci95"] = half
            _put_seeds(record, self._seed_values(row.simulated, ctx.split))
        record.update(extra)
        return record

    def _explicit(self) -> bool:
        return not isinstance(self.rows, str) and not callable(self.rows)

    def _table(self, frame: pd.DataFrame) -> tuple[list[dict[str, Any]], _Context]:
        """The result's rows (as records) and the context they were computed in."""
        ctx = _Context(frame)
        listed = [*(cast(Sequence[Row], self.rows) if self._explicit() else ()), *self.summary]
        with_ci = (
            self.simulated_ci
            if self.simulated_ci is not None
            else any(self._gives_ci(r.simulated) for r in listed)
        )
        if self._explicit():
            for r in cast(Sequence[Row], self.rows):
                if ctx.ran(r):
                    ctx.records[r.x] = self._row(r, ctx, with_ci)
                    ctx.main.append(ctx.records[r.x])
        else:
            for rec in self._by_key(frame):
                ctx.records[rec["x"]] = rec
                ctx.main.append(rec)
        summary = []
        for r in self.summary:
            if ctx.ran(r):
                ctx.records[r.x] = self._row(r, ctx, with_ci)
                summary.append(ctx.records[r.x])
        return ([*summary, *ctx.main] if self.summary_first else [*ctx.main, *summary]), ctx

    def _simulate(self, frame: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._table(frame)[0])

    def _by_key(self, frame: pd.DataFrame) -> list[dict[str, Any]]:
        """The rows of a POINT / SERIES_X / grid-key reproduction, one per row key."""
        order, row_key, series = self._keys(frame)
        cells = dict(self.columns)
        if SIMULATED not in cells and self.simulated is not None:
            cells = {SIMULATED: SIMULATED_CELL, **cells}
        out = []
        for index, key in enumerate(order):
            rows = frame[row_key == key]
            split = _Split(rows, series)
            record: dict[str, Any] = {"x": self._x(key, index)}
            for name, cell in cells.items():
                if cell is SIMULATED_CELL:
                    if isinstance(self.simulated, Derived):
                        record["simulated"] = self.simulated.fn(record)
                        continue
                    assert self.simulated is not None
                    value, half = self._cell(self.simulated, rows, series, split)
                    record["simulated"] = value
                    if self._gives_ci(self.simulated):
                        record["simulated_ci95"] = half
                    _put_seeds(record, self._seed_values(self.simulated, split))
                    continue
                if isinstance(cell, Derived):
                    record[name] = cell.fn(record)
                    continue
                if isinstance(cell, Text):
                    first = {c: rows[c].iloc[0] for c in rows.columns} if len(rows) else {}
                    record[name] = cell.fmt.format(key=key, **first)
                    continue
                value, half = self._cell(cell, rows, series, split)
                if isinstance(cell, Seeds) or (isinstance(cell, Mean) and cell.as_int):
                    record[name] = int(value)
                else:
                    record[name] = value
            out.append(record)
        return out

    def _published(self, frame: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        if isinstance(self.published, Each):
            xs = [r["x"] for r in self._table(frame)[0]]
            each = self.published
            return pd.DataFrame(
                [
                    {"x": x, "published": each.value, "bound": each.bound}
                    if each.bound
                    else {"x": x, "published": each.value}
                    for x in xs
                ]
            )
        with_bound = any(p.bound for p in self.published)
        ctx: _Context | None = None
        rows = []
        for p in self.published:
            value = p.value
            if not isinstance(value, int | float):
                if ctx is None:
                    ctx = self._table(frame)[1]
                value = self._value(value, ctx, {})[0]
            if p.when is None or p.when(value):
                rows.append(p.row(value, with_bound))
        return pd.DataFrame(rows)

    # -- plot -----------------------------------------------------------------------

    def _plot(self, exp: Experiment, merged: pd.DataFrame, verdict: str, path: Path) -> None:
        if self.plot.kind in ("bars", "line"):
            default_plot(exp, merged, verdict, path)
        elif self.plot.kind == "columns":
            column_bars(exp, merged, verdict, path, self.plot.columns, ref_line=self.plot.ref)
        else:
            column_lines(exp, merged, verdict, path, self.plot.columns, self.plot.y_label)


def _seed_ratios(cell: Ratio, split: _Split) -> list[float]:
    """Per seed run at both points, the value at `of` over the value at `to` (seeds whose
    value at `to` is not positive are left out)."""
    a = {seed: cell.q.of(run) for seed, run in split.seeds(cell.of)}
    b = {seed: cell.q.of(run) for seed, run in split.seeds(cell.to)}
    return [a[s] / b[s] for s in sorted(set(a) & set(b)) if b[s] > 0]


def _put_seeds(record: dict[str, Any], values: list[float]) -> None:
    """Adds the judged value of each seed (`SEED_VALUES`) where there are several."""
    if len(values) > 1:
        record[SEED_VALUES] = " ".join(f"{v:.4g}" for v in values)


SIMULATED = "simulated"
SIMULATED_CELL = Seeds(at="\0simulated")
"""Place `simulated` among `Repro.columns`: `{..., SIMULATED: SIMULATED_CELL, ...}`."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def column_bars(
    exp: Experiment,
    merged: pd.DataFrame,
    verdict: str,
    path: Path,
    series: Sequence[tuple[str, str, str]],
    *,
    ref_line: float | None = 1.0,
) -> None:
    """Bars per row for each (column, legend, color) of `series`."""
    plt = _pyplot()
    xs = [str(x) for x in merged[exp.x]]
    present = [s for s in series if s[0] in merged.columns]
    width = 0.8 / max(len(present), 1)
    width_in = min(14.0, max(6.4, 0.1 * len(xs) * max(len(present), 1) + 2.0))
    fig, ax = plt.subplots(figsize=(width_in, 4.6))
    for k, (col, legend, color) in enumerate(present):
        ys = [float(v) for v in merged[col]]
        pos = [i + (k - (len(present) - 1) / 2) * width for i in range(len(xs))]
        ax.bar(pos, ys, width, label=legend, color=color, edgecolor="#444444", linewidth=0.4)
    if ref_line is not None:
        ax.axhline(ref_line, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(xs)), xs, rotation=45, ha="right", fontsize=7)
    ax.set_xlabel(exp.x_label)
    ax.set_ylabel(exp.y_label)
    ax.set_title(figure_title(exp, verdict, fig.get_figwidth()), fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def column_lines(
    exp: Experiment,
    merged: pd.DataFrame,
    verdict: str,
    path: Path,
    series: Sequence[tuple[str, str, str]],
    y_label: str | None = None,
) -> None:
    """A line with its 95% CI (column `<name>_ci95` for `<name>_s`-style columns, if any)
    per (column, legend, color) of `series`, over a numeric x."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.6, 4.2), dpi=100)
    data = merged.sort_values(exp.x)
    for col, legend, color in series:
        if col not in data.columns:
            continue
        ci = col.rsplit("_", 1)[0] + "_ci95"
        yerr = data[ci].astype(float).fillna(0.0) if ci in data.columns else None
        ax.errorbar(
            data[exp.x].astype(float),
            data[col].astype(float),
            yerr=yerr,
            fmt="o-",
            color=color,
            capsize=3,
            label=legend,
        )
    ax.set_xlabel(exp.x_label)
    ax.set_ylabel(y_label or exp.y_label)
    ax.set_title(figure_title(exp, verdict, fig.get_figwidth()), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def above(xs: Sequence[Any], value: float = 1.0) -> list[Pub]:
    """A lower bound at every x."""
    return [Pub(x, value, "above") for x in xs]


def below(xs: Sequence[Any], value: float = 1.0) -> list[Pub]:
    """An upper bound at every x."""
    return [Pub(x, value, "below") for x in xs]
