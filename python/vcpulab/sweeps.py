"""Sweeps: the cartesian product of grid overrides x seeds, each point a pure run.

A point is (resolved scenario text, seed). Points are planned here, skipped when the
store already holds them, run by an `Executor`, and written to the store one
transaction each as they finish. The DataFrame is always read back from the store, so
a resumed sweep and an uninterrupted one give the same frame.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vcpulab._native import core_resolve, core_run
from vcpulab._worker import PointResult, PointTask, Runner, execute_point
from vcpulab.errors import ScenarioError, UsageError
from vcpulab.executors import Executor, make_executor
from vcpulab.progress import Progress
from vcpulab.report import flatten_scalars, histogram_rows, is_table
from vcpulab.scenario import (
    ScenarioInput,
    check_override,
    format_value,
    load_scenario,
    normalize_overrides,
    parse_value,
)
from vcpulab.stats import mean_ci
from vcpulab.store import ResultsStore, point_key

if TYPE_CHECKING:
    import pandas as pd

Resolver = Callable[[str, list[str], "int | None"], str]
GridInput = Mapping[str, Sequence[Any]] | Sequence[str] | None

# Columns that identify an entity within a report table (kept as group keys).
ID_COLUMNS = ("vm", "vcpu", "pcpu", "lock", "thread", "name", "kind", "type", "histogram", "path")
DEFAULT_METRICS = {
    "vms": (
        "cpu_share",
        "share_ratio",
        "completion_ns",
        "throughput_per_s",
        "wake_latency_mean_ns",
        "wake_latency_p99_ns",
    ),
}


@dataclass(frozen=True)
class Backend:
    """The pure functions a sweep needs; swap them in tests (dependency injection)."""

    run: Runner = core_run
    resolve: Resolver = core_resolve
    version: Callable[[], str] | None = None

    def core_version(self) -> str | None:
        """The core's identity (version + build id); part of every point's store key."""
        if self.version is not None:
            return self.version()
        if self.run is core_run:
            from vcpulab._native import core_identity

            return core_identity()
        return None


@dataclass(frozen=True)
class PlannedPoint:
    idx: int
    params: dict[str, str]
    seed: int
    overrides: tuple[str, ...]
    key: str
    resolved: str | None
    error: str | None = None


@dataclass
class SweepOutcome:
    sweep_id: str
    store_path: str
    table: str
    grid_columns: list[str]
    planned: int
    computed: int
    skipped: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    frame: pd.DataFrame | None = None

    def summary(self, metrics: Sequence[str] | None = None) -> pd.DataFrame:
        assert self.frame is not None
        return summarize(self.frame, self.grid_columns, metrics=metrics, table=self.table)


# --- grid and seeds ------------------------------------------------------------------------


#: A sweep of more points than this asks first (`--yes` skips the question).
CONFIRM_ABOVE = 10_000
#: The most points one sweep may have (its plan is held in memory).
MAX_POINTS = 1_000_000
# Points planned, stored and run at a time.
CHUNK_POINTS = 2_000


def split_top_level(values: str) -> list[str]:
    """Splits `v1,v2,...` at the commas outside brackets and quotes, so that a value may
    itself hold commas: `uniform(1ms, 2ms),exp(1ms)` is two values, `["0", "2"],"1-3"`
    two, `"0,2"` one."""
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    for i, ch in enumerate(values):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append(values[start:i])
            start = i + 1
    items.append(values[start:])
    return [v.strip() for v in items]


def parse_grid_arg(text: str) -> tuple[str, list[str]]:
    """`key=v1,v2,...` -> (key, [v1, v2, ...]); commas inside brackets or quotes belong
    to their value."""
    if "=" not in text:
        raise UsageError(f"bad --grid {text!r}: expected dotted.key=v1,v2,...")
    check_override(text)
    key, values = text.split("=", 1)
    items = split_top_level(values)
    if any(v == "" for v in items):
        raise UsageError(f"bad --grid {text!r}: empty value in the list")
    return key.strip(), items


def normalize_grid(grid: GridInput) -> list[tuple[str, list[str]]]:
    if grid is None:
        return []
    if isinstance(grid, Mapping):
        out = []
        for key, values in grid.items():
            tolist = getattr(values, "tolist", None)
            if callable(tolist) and not isinstance(values, str | bytes):
                values = tolist()  # a numpy array (or scalar)
            if isinstance(values, str | bytes) or not isinstance(values, Sequence):
                values = [values]
            items = [format_value(v) for v in values]
            if not items:
                raise UsageError(f"grid key {key!r} has no values")
            check_override(f"{key}={items[0]}")
            out.append((str(key), items))
    else:
        if isinstance(grid, str):
            grid = [grid]
        out = [parse_grid_arg(g) for g in grid]
    keys = [k for k, _ in out]
    if "seed" in keys:
        # Every point already runs its seeds (`seeds`, `--seeds`), which would set the
        # same key: the grid's seeds were silently collapsed into one point.
        raise UsageError(
            "grid key 'seed' is not allowed: a sweep runs each point for its seeds; "
            "use --seeds N (or seeds=[...] in the API) instead"
        )
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise UsageError(f"grid key given twice: {', '.join(dupes)}")
    for key, values in out:
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            # The same point twice would be one point with a CI of 0 over "n=1".
            raise UsageError(f"grid key {key!r} lists {', '.join(twice)} more than once")
    return out


@functools.lru_cache(maxsize=8)
def _parsed(resolved: str) -> dict[str, Any] | None:
    """A resolved scenario's tables (None if it is not TOML). A sweep reads its base
    scenario's seed and name from the same text: parsed once (a resolved scenario is a
    few hundred keys, ~8 ms). Callers only read the result."""
    try:
        return tomllib.loads(resolved)
    except tomllib.TOMLDecodeError:
        return None


def scenario_seed(resolved: str) -> int | None:
    """The seed written in a resolved scenario, if it names one."""
    data = _parsed(resolved)
    if data is None:
        return None
    for table in (data, data.get("run", {}), data.get("scenario", {})):
        if isinstance(table, dict) and isinstance(table.get("seed"), int):
            return int(table["seed"])
    return None


def sweep_identity(
    text: str,
    overrides: Sequence[str],
    grid: Sequence[tuple[str, Sequence[str]]],
    seeds: Sequence[int],
    table: str,
) -> str:
    blob = json.dumps(
        {
            "scenario": text,
            "overrides": list(overrides),
            "grid": [[k, list(v)] for k, v in grid],
            "seeds": list(seeds),
            "table": table,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def iter_plan(
    text: str,
    base_overrides: Sequence[str],
    grid: Sequence[tuple[str, Sequence[str]]],
    seeds: Sequence[int],
    resolve: Resolver,
    core: str | None = None,
) -> Iterator[PlannedPoint]:
    """The sweep's points in order, each resolved as it is reached (lazily: a grid of a
    million points is never resolved in memory at once)."""
    combos = itertools.product(*(values for _, values in grid)) if grid else iter([()])
    idx = 0
    for combo in combos:
        params = {key: value for (key, _), value in zip(grid, combo, strict=True)}
        overrides = (*base_overrides, *(f"{k}={v}" for k, v in params.items()))
        for seed in seeds:
            try:
                text_resolved = resolve(text, list(overrides), seed)
                resolved: str | None = text_resolved
                error = None
                key = point_key(text_resolved, seed, core)
            except ScenarioError as exc:
                resolved, error = None, f"ScenarioError: {exc}"
                unresolved = "\x00unresolved\x00" + text + "\x00" + "\x00".join(overrides)
                key = point_key(unresolved, seed, core)
            yield PlannedPoint(idx, params, seed, overrides, key, resolved, error)
            idx += 1


def plan_sweep(
    text: str,
    base_overrides: Sequence[str],
    grid: Sequence[tuple[str, Sequence[str]]],
    seeds: Sequence[int],
    resolve: Resolver,
    core: str | None = None,
) -> list[PlannedPoint]:
    """Every point of the sweep, resolved (`iter_plan` as a list)."""
    return list(iter_plan(text, base_overrides, grid, seeds, resolve, core))


def _chunks(points: Iterable[PlannedPoint], size: int) -> Iterator[list[PlannedPoint]]:
    chunk: list[PlannedPoint] = []
    for p in points:
        chunk.append(p)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _seeds_list(
    seeds: int | Sequence[int], text: str, overrides: list[str], resolve: Resolver
) -> list[int]:
    if isinstance(seeds, int):
        if seeds < 1:
            raise UsageError(f"--seeds must be at least 1, got {seeds}")
        base = scenario_seed(resolve(text, overrides, None))
        start = base if base is not None else 1
        return list(range(start, start + seeds))
    out = [int(s) for s in seeds]
    if not out:
        raise UsageError("no seeds given")
    if len(set(out)) != len(out):
        raise UsageError("seeds must be distinct")
    return out


# --- running -------------------------------------------------------------------------------


def run_sweep(
    scenario: ScenarioInput,
    grid: GridInput = None,
    seeds: int | Sequence[int] = 1,
    *,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    executor: str | Executor = "local",
    jobs: int | None = None,
    store: str | Path | ResultsStore | None = None,
    table: str = "vms",
    force: bool = False,
    progress: bool | None = None,
    backend: Backend | None = None,
    source: str | None = None,
    confirm: Callable[[int], bool] | None = None,
    allow_paths: bool = False,
) -> SweepOutcome:
    """Plan, run (skipping what the store holds) and collect a sweep.

    `confirm(points)` is asked before a sweep of more than `CONFIRM_ABOVE` points (the
    CLI asks the user; `--yes` passes None); a sweep above `MAX_POINTS` is refused.
    """
    backend = backend or Backend()
    text = load_scenario(scenario, allow_paths=allow_paths)
    if source is None and isinstance(scenario, str | Path) and not isinstance(scenario, Mapping):
        s = str(scenario)
        source = s if "\n" not in s and "=" not in s else "<text>"
    base = normalize_overrides(overrides)
    grid_items = normalize_grid(grid)
    n_seeds = seeds if isinstance(seeds, int) else len(list(seeds))
    points = math.prod(len(v) for _, v in grid_items) * max(n_seeds, 1)
    if points > MAX_POINTS:
        raise UsageError(
            f"the sweep has {points} points; at most {MAX_POINTS} are allowed in one sweep"
        )
    if points > CONFIRM_ABOVE and confirm is not None and not confirm(points):
        raise UsageError(f"sweep of {points} points not started")
    # Resolving the base scenario first reports a bad scenario as one clear error.
    base_resolved = backend.resolve(text, base, None)
    seeds_list = _seeds_list(seeds, text, base, backend.resolve)
    version = backend.core_version()
    # Planned, stored and run CHUNK_POINTS points at a time: memory does not grow with the
    # grid, and a killed sweep keeps every chunk it finished.
    chunks = _chunks(
        iter_plan(text, base, grid_items, seeds_list, backend.resolve, version), CHUNK_POINTS
    )
    first = next(chunks, [])
    if first and all(p.resolved is None for p in first):
        # Nothing resolves (e.g. a typo in a grid key): that is bad input, not data.
        raise ScenarioError(str(first[0].error).removeprefix("ScenarioError: "))

    sweep_id = sweep_identity(text, base, grid_items, seeds_list, table)
    own_store = not isinstance(store, ResultsStore)
    db = store if isinstance(store, ResultsStore) else ResultsStore(store or ":memory:")
    try:
        name = _scenario_name(base_resolved)
        bar = Progress(points, label="points", enabled=progress)
        computed = skipped = planned = 0
        ex = make_executor(executor, jobs) if isinstance(executor, str) else executor
        try:
            for chunk in itertools.chain([first], chunks):
                planned += len(chunk)
                db.register_sweep(
                    sweep_id,
                    name=name,
                    source=source,
                    scenario=text,
                    overrides=base,
                    grid=grid_items,
                    seeds=seeds_list,
                    table=table,
                    points=[(p.idx, p.key, p.params, p.seed) for p in chunk],
                )
                done = set() if force else db.finished_keys(p.key for p in chunk)
                unresolved = [p for p in chunk if p.resolved is None]
                for p in unresolved:
                    db.record(
                        p.key,
                        seed=p.seed,
                        resolved=text,
                        status="failed",
                        scenario=name,
                        error=p.error,
                        core_version=version,
                    )
                tasks: dict[str, PointTask] = {}
                for p in chunk:
                    if p.resolved is not None and p.key not in done and p.key not in tasks:
                        tasks[p.key] = PointTask(p.key, p.resolved, p.seed, backend.run)
                by_key = {p.key: p for p in chunk}
                hits = len({p.key for p in chunk if p.key in done})
                skipped += hits
                # Store hits, failures to resolve and repeated points: done, not computed.
                bar.skip(len(chunk) - len(tasks), stored=hits)
                for result in ex.map_unordered(execute_point, list(tasks.values())):
                    _record(db, result, by_key[result.key], name, version)
                    computed += 1
                    bar.update(failed=not result.ok)
        except BaseException:
            abort = getattr(ex, "abort", None)
            if callable(abort):
                abort()
            raise
        finally:
            bar.close()
            if isinstance(executor, str):
                ex.close()
        outcome = SweepOutcome(
            sweep_id=sweep_id,
            store_path=db.path,
            table=table,
            grid_columns=[k for k, _ in grid_items],
            planned=planned,
            computed=computed,
            skipped=skipped,
        )
        outcome.frame, outcome.failed = collect(db, sweep_id, table)
        return outcome
    finally:
        if own_store:
            db.close()


def _record(
    db: ResultsStore,
    result: PointResult,
    point: PlannedPoint,
    name: str | None,
    version: str | None,
) -> None:
    assert point.resolved is not None
    db.record(
        result.key,
        seed=point.seed,
        resolved=point.resolved,
        status="ok" if result.ok else "failed",
        scenario=name,
        report=result.report,
        error=result.error,
        core_version=version,
        wall_s=result.wall_s,
    )


def _scenario_name(resolved: str) -> str | None:
    data = _parsed(resolved)
    if data is None:
        return None
    for table in (data, data.get("scenario", {}), data.get("run", {})):
        if isinstance(table, dict) and isinstance(table.get("name"), str):
            return str(table["name"])
    return None


# --- collecting ----------------------------------------------------------------------------


def collect(
    db: ResultsStore, sweep_id: str, table: str = "vms"
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The sweep's DataFrame (one row per point x table row) and its failed points."""
    import pandas as pd

    sweep = db.find_sweep(sweep_id)
    grid_keys = [k for k, _ in sweep["grid"]]
    records: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    # Runs whose report warns (a mechanism with no time to act, a PLE-exit storm), and
    # their warnings.
    warned_runs = 0
    warnings: list[str] = []
    seen: set[int] = set()
    for p in db.sweep_points(sweep["id"]):
        if p["idx"] in seen:
            continue
        seen.add(p["idx"])
        if p["status"] != "ok":
            failed.append(
                {
                    "params": p["params"],
                    "seed": p["seed"],
                    "point": p["key"][:12],
                    "error": p["error"] or "not run",
                }
            )
            continue
        report = json.loads(p["report"])
        run_warnings = [str(w) for w in report.get("warnings") or []]
        if run_warnings:
            warned_runs += 1
            warnings += [w for w in run_warnings if w not in warnings]
        head: dict[str, Any] = {k: parse_value(p["params"][k]) for k in grid_keys}
        head["seed"] = p["seed"]
        head["point"] = p["key"][:12]
        rows = (
            histogram_rows(report.get("histograms") or {})
            if table == "histograms"
            else report.get(table)
        )
        if not is_table(rows):
            tables = sorted(k for k, v in report.items() if is_table(v))
            raise UsageError(
                f"reports have no table {table!r}; allowed: {', '.join([*tables, 'histograms'])}"
            )
        # Histogram summaries are rows of their own table (long format), not one
        # column per VM and statistic beside every row.
        extra = {
            k: v
            for k, v in flatten_scalars(report).items()
            if k not in ("schema", "scenario.seed") and not k.startswith("histograms.")
        }
        for row in rows:
            rec = dict(head)
            rec.update({k: v for k, v in extra.items() if k not in row})
            rec.update(row)
            records.append(rec)
    frame = pd.DataFrame.from_records(records)
    frame.attrs["sweep_id"] = sweep["id"]
    frame.attrs["grid_columns"] = grid_keys
    frame.attrs["table"] = table
    frame.attrs["failed"] = failed
    frame.attrs["warned_runs"] = warned_runs
    frame.attrs["warnings"] = warnings
    return frame, failed


def id_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in ID_COLUMNS if c in frame.columns]


def summarize(
    frame: pd.DataFrame,
    grid_columns: Sequence[str] | None = None,
    *,
    metrics: Sequence[str] | None = None,
    table: str | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per grid point x entity, over seeds: mean, confidence-interval half-width (its
    column named after the level: `{m}_ci95`, `{m}_ci99`, `{m}_ci99.9`), median, min
    and max; `seeds_disagree` flags points where a metric's spread (max - min) is larger
    than its mean's magnitude — a bimodal result the mean and CI would hide."""
    import pandas as pd

    ci = ci_suffix(confidence)

    if grid_columns is None:
        grid_columns = list(frame.attrs.get("grid_columns", []))
    table = table or frame.attrs.get("table", "vms")
    if frame.empty:
        return pd.DataFrame()
    keys = [*grid_columns, *id_columns(frame)]
    explicit = metrics
    if metrics is None:
        wanted: tuple[str, ...] | None = DEFAULT_METRICS.get(str(table))
        if wanted is None:
            skip = {*keys, "seed", "point"}
            wanted = tuple(
                c
                for c in frame.columns
                if c not in skip
                and pd.api.types.is_numeric_dtype(frame[c])
                and not pd.api.types.is_bool_dtype(frame[c])
            )
        metrics = [m for m in wanted if m in frame.columns]
    else:
        missing = [m for m in metrics if m not in frame.columns]
        if missing:
            numeric = [
                c
                for c in frame.columns
                if c not in {*keys, "seed", "point"}
                and pd.api.types.is_numeric_dtype(frame[c])
                and not pd.api.types.is_bool_dtype(frame[c])
            ]
            raise UsageError(
                f"unknown metric(s): {', '.join(missing)}; allowed: {', '.join(numeric)}"
            )
    out: list[dict[str, Any]] = []
    groups = frame.groupby(keys, sort=False, dropna=False) if keys else [((), frame)]
    for key, group in groups:
        key_t = key if isinstance(key, tuple) else (key,)
        rec: dict[str, Any] = dict(zip(keys, key_t, strict=True))
        rec["n"] = int(group["seed"].nunique()) if "seed" in group else len(group)
        disagree: list[str] = []
        for m in metrics:
            column = pd.to_numeric(group[m], errors="coerce").astype(float)
            if m.startswith("wake_latency") and "wakes" in group:
                # A latency over no wake-ups is undefined, not zero.
                column = column.where(group["wakes"] > 0)
            mean, half, _ = mean_ci(column.tolist(), confidence)
            rec[f"{m}_mean"] = mean
            rec[f"{m}_{ci}"] = half
            valid = column.dropna()
            rec[f"{m}_median"] = float(valid.median()) if len(valid) else math.nan
            rec[f"{m}_min"] = float(valid.min()) if len(valid) else math.nan
            rec[f"{m}_max"] = float(valid.max()) if len(valid) else math.nan
            if len(valid) > 1 and (valid.max() - valid.min()) > abs(mean):
                disagree.append(m)
        rec["seeds_disagree"] = bool(disagree)
        out.append(rec)
    result = pd.DataFrame.from_records(out)
    if explicit is None:
        # Leave out default metrics that no row has (e.g. completion of endless workloads).
        metrics = [m for m in metrics if result[f"{m}_mean"].notna().any()]
        stats = ("mean", ci, "median", "min", "max")
        result = result[
            [*keys, "n", *(f"{m}_{s}" for m in metrics for s in stats), "seeds_disagree"]
        ]
    result.attrs["metrics"] = list(metrics)
    result.attrs["ci"] = ci
    result.attrs["confidence"] = confidence
    result.attrs["keys"] = keys
    return result


def ci_suffix(confidence: float) -> str:
    """The column suffix of a confidence level: 0.95 -> `ci95`, 0.999 -> `ci99.9`."""
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"confidence {confidence} is not allowed; expected 0 < confidence < 1")
    return f"ci{round(confidence * 100, 6):g}"


def format_summary(summary: pd.DataFrame) -> str:
    """Human table: one row per grid point x entity, `mean ± ci [min..max] (median)` per
    metric; points whose seeds disagree are marked `!`."""
    from vcpulab.format import fmt_ns, fmt_num, render_table

    if summary.empty:
        return "(no results)"
    keys = list(summary.attrs.get("keys", []))
    metrics = list(summary.attrs.get("metrics", []))
    ci = str(summary.attrs.get("ci", "ci95"))

    def cell(metric: str, r: Any) -> str:
        mean, half = float(r[f"{metric}_mean"]), float(r[f"{metric}_{ci}"])
        if math.isnan(mean):
            return "-"
        lo = float(r.get(f"{metric}_min", math.nan))
        hi = float(r.get(f"{metric}_max", math.nan))
        med = float(r.get(f"{metric}_median", math.nan))
        if metric.endswith("_ns"):
            text = fmt_ns(mean)
            text = text if math.isnan(half) else f"{text} ± {fmt_ns(half)}"
            if not math.isnan(half) and not math.isnan(lo):
                text += f" [{fmt_ns(lo)}..{fmt_ns(hi)}, med {fmt_ns(med)}]"
            return text
        if math.isnan(half):
            return fmt_num(mean)
        # Enough decimals to show two significant digits of the half-width.
        digits = 3 if half <= 0 else min(8, max(3, 1 - math.floor(math.log10(half))))
        text = f"{mean:.{digits}f} ± {half:.{digits}f}"
        if not math.isnan(lo):
            text += f" [{fmt_num(lo)}..{fmt_num(hi)}, med {fmt_num(med)}]"
        return text

    headers = [*keys, "n", *metrics, ""]
    rows = []
    for _, r in summary.iterrows():
        rows.append(
            [
                *(fmt_num(r[k]) if isinstance(r[k], float) else r[k] for k in keys),
                r["n"],
                *(cell(m, r) for m in metrics),
                "! seeds disagree" if bool(r.get("seeds_disagree", False)) else "",
            ]
        )
    align = "l" * len(keys) + "r" * (1 + len(metrics)) + "l"
    table = render_table(headers, rows, align)
    if "seeds_disagree" in summary and summary["seeds_disagree"].any():
        table += (
            "\n! seeds disagree: the spread (max - min) over seeds is larger than the mean; "
            "the result is likely bimodal — look at the seeds, not the mean"
        )
    return table
