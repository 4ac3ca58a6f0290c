"""Reproductions: each published figure is one entry of a module's `EXPERIMENTS` list.

Most entries are data: a `Repro` (`experiments/declare.py`) names its points (scenario
files under `scenarios/<system>/` and overrides) or a swept scenario, what one row of
the result is, the quantity read from every run and how it is reduced over the seeds
(`Mean`, `Ratio` to a baseline point, ...), the published values (`Pub`, optionally a
bound) and a kind of the shared plot. docs/reproductions.md shows how to add one.
A figure that does not fit is an `Experiment` with its own `simulate` function (below);
`registry()` takes both. `run_experiment` runs the sweep, writes a CSV, a PNG
(published beside simulated) and a verdict line: agrees / partly / disagrees, with the
numbers.

An `Experiment` either sweeps one scenario over a grid (`scenarios[0]`, `grid`), or lists
`points`: each `Point` is its own scenario file and overrides (e.g. the same benchmark
natively and virtualized, in four settings). Every point is run as an independent sweep
over the seeds (and the grid, if any) through the same sweep/store/executor machinery, so
the store's cache, the progress bar and `--quick` apply; `simulate` then receives one
frame with a `point_label` column.

Published rows are {x, published} and may carry `bound`: "above" (or "below") when the
paper gives only a bound ("> 96 us"); such a point agrees when the simulated value lies
beyond it.

Add a system by writing `experiments/<system>.py` with a module-level `EXPERIMENTS`
list and naming the module in `_MODULES` below.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
import os
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vcpulab.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from vcpulab.executors import Executor
    from vcpulab.store import ResultsStore
    from vcpulab.sweeps import Backend

_MODULES = (
    "examples",
    "gleaner",
    "gleaner_apps",
    "cvs",
    "apple",
    "cache",
    "workloads",
    "dcs",
    "microslice",
    "modern",
)

VERDICTS = ("agrees", "partly", "disagrees")

# published(sim) -> DataFrame[x, published]; simulate(sweep frame) -> DataFrame[x, simulated,
# simulated_ci95, (label)]
PublishedFn = Callable[["pd.DataFrame"], "pd.DataFrame"]
SimulateFn = Callable[["pd.DataFrame"], "pd.DataFrame"]
# explain(merged frame with x, published, simulated, ...) -> a sentence for the verdict line
ExplainFn = Callable[["pd.DataFrame"], str]
# plotter(experiment, merged frame, verdict, png path)
PlotFn = Callable[["Experiment", "pd.DataFrame", str, Path], None]

POINT_COLUMN = "point_label"
"""The column naming the point of a points experiment in the frame given to `simulate`."""
PLANNED_POINTS = "planned_points"
"""`frame.attrs` key: the labels of the points a reproduction's run planned."""
SEED_VALUES = "simulated_seeds"
"""Result column: the judged value in each seed on its own (space-separated), where the
judged value is a mean over several seeds."""

WARNED_RUNS = "warned_runs"
WARNINGS = "warnings"
"""Frame attributes (set by `sweeps.collect` per sweep, summed here over points): how many
runs' reports carried warnings (a mechanism the run was too short to let act), and the
distinct warnings."""


@dataclass(frozen=True)
class Point:
    """One independently run configuration of a points experiment."""

    label: str
    """Unique within the experiment; the `point_label` column of the simulated frame."""
    scenario: str
    """Scenario file, relative to the `scenarios/` folder."""
    overrides: tuple[str, ...] = ()
    """`key=value` overrides, applied after the experiment's own (and before --quick's)."""


@dataclass(frozen=True)
class Experiment:
    id: str
    system: str
    title: str
    scenarios: tuple[str, ...]
    """Scenario files, relative to the `scenarios/` folder (the sweep runs the first; with
    `points`, may be left empty: the points' files, in order)."""
    published: Sequence[dict[str, Any]] | PublishedFn
    """The published trend: rows of {x, published}, or a function of the simulated frame
    for closed-form trends that depend on the scenario (e.g. the number of vCPUs)."""
    simulate: SimulateFn
    source: str
    """Where the published trend comes from (paper, figure, or the closed form)."""
    x: str = "x"
    x_label: str = "x"
    y_label: str = "value"
    grid: dict[str, Sequence[Any]] = field(default_factory=dict)
    seeds: int = 3
    quick_seeds: int = 2
    overrides: tuple[str, ...] = ()
    quick_overrides: tuple[str, ...] = ()
    table: str = "vms"
    tolerance: tuple[float, float] = (0.05, 0.20)
    """Relative error for 'agrees' (every point) and for 'partly' (most points)."""
    kind: str = "line"  # "line" or "bar"
    log_x: bool = False
    log_y: bool = False
    notes: str = ""
    beside: str | None = None
    """A second scenario run with the same grid, seeds and overrides, shown beside the
    comparison (extra CSV columns, dotted lines on the plot) but not judged."""
    beside_simulate: SimulateFn | None = None
    """Its sweep frame -> DataFrame[x, extra columns...]."""
    beside_plot: tuple[tuple[str, str], ...] = ()
    """(column, legend label) of the extra columns to draw."""
    points: Sequence[Point] = ()
    """Run these configurations instead of sweeping `scenarios[0]` (see the module doc)."""
    explain: ExplainFn | None = None
    """A sentence appended to the verdict's detail (e.g. what a mean hides)."""
    plotter: PlotFn | None = None
    """Draws the PNG instead of the default published-beside-simulated plot."""
    quick_grid: dict[str, Sequence[Any]] | None = None
    """With --quick, sweep this (smaller) grid instead of `grid`."""
    quick_points: Sequence[Point] | None = None
    """With --quick, run these (fewer) points instead of `points`."""

    def points_for(self, quick: bool) -> Sequence[Point]:
        return self.quick_points if quick and self.quick_points is not None else self.points

    def grid_for(self, quick: bool) -> dict[str, Sequence[Any]]:
        return dict(self.quick_grid) if quick and self.quick_grid is not None else dict(self.grid)

    def __post_init__(self) -> None:
        if self.points:
            labels = [p.label for p in self.points]
            dupes = sorted({x for x in labels if labels.count(x) > 1})
            if dupes:
                raise ValueError(f"{self.id}: point label given twice: {', '.join(dupes)}")
            if self.beside is not None:
                raise ValueError(f"{self.id}: `beside` is not supported with `points`")
            if not self.scenarios:
                files = tuple(dict.fromkeys(p.scenario for p in self.points))
                object.__setattr__(self, "scenarios", files)
        elif not self.scenarios:
            raise ValueError(f"{self.id}: no scenario and no points")


@dataclass
class ExperimentResult:
    id: str
    title: str
    verdict: str
    detail: str
    published: str
    simulated: str
    csv: Path | None
    png: Path | None
    text: Path | None
    wall_s: float
    frame: pd.DataFrame | None = None
    error: str | None = None
    quick: bool = False
    what_if: tuple[str, ...] = ()
    """The `--set KEY=VALUE` what-ifs every run of this result had."""

    def line(self) -> str:
        # A quick run has fewer seeds and shorter runs; its verdict can differ from the
        # full run's, so every line it prints says so. A what-if changed the reproduction
        # itself: its line says with what.
        line = f"{self.id}: {self.verdict} — {self.detail}"
        if self.quick:
            line += " [quick run: fewer seeds, shorter runs; not the verdict of record]"
        if self.what_if:
            line += f" [what if {', '.join(self.what_if)}: not the verdict of record]"
        return line


# --- registry --------------------------------------------------------------------------------


def registry() -> dict[str, Experiment]:
    out: dict[str, Experiment] = {}
    for mod_name in _MODULES:
        mod = importlib.import_module(f"vcpulab.experiments.{mod_name}")
        for entry in getattr(mod, "EXPERIMENTS", []):
            # A declarative `Repro` (experiments/declare.py) becomes an `Experiment` here.
            exp = entry if isinstance(entry, Experiment) else entry.experiment()
            if exp.id in out:
                raise RuntimeError(f"experiment id {exp.id!r} registered twice")
            out[exp.id] = exp
    return out


def get(exp_id: str) -> Experiment:
    reg = registry()
    if exp_id not in reg:
        raise UsageError(
            f"unknown experiment {exp_id!r}: allowed values are {', '.join(sorted(reg))} or 'all'"
        )
    return reg[exp_id]


def select(names: Sequence[str]) -> list[Experiment]:
    """The experiments `names` name, in order and each once: ids, `all`, or shell-style
    patterns over the ids (`dcs-*`). A name that matches nothing is an error, raised
    before anything runs."""
    import fnmatch

    reg = registry()
    out: dict[str, Experiment] = {}
    for name in names:
        if name == "all":
            out.update(reg)
        elif any(c in name for c in "*?["):
            ids = [i for i in reg if fnmatch.fnmatchcase(i, name)]
            if not ids:
                raise UsageError(
                    f"no experiment matches {name!r}: allowed values are "
                    f"{', '.join(sorted(reg))}, 'all' or a pattern such as 'dcs-*'"
                )
            out.update((i, reg[i]) for i in ids)
        else:
            exp = get(name)
            out[exp.id] = exp
    return list(out.values())


NO_PLOT_HINT = "matplotlib is not installed (pip install 'vcpulab[plot]')"


def plotting_available() -> bool:
    """Plots need matplotlib, an optional extra: without it a reproduction still writes
    its CSV, text and JSON, and says the plot was skipped."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def scenarios_dir() -> Path:
    """The `scenarios/` folder: $VCPULAB_SCENARIOS, else up from the working directory
    (a checkout's `scenarios/`), else the copy shipped inside the package (so that
    `vcpulab reproduce` works from an installed wheel)."""
    env = os.environ.get("VCPULAB_SCENARIOS")
    if env:
        return Path(env)
    here = Path.cwd().resolve()
    for base in (here, *here.parents):
        cand = base / "scenarios"
        if (cand / "examples").is_dir():
            return cand
    return Path(__file__).resolve().parents[1] / "scenarios"


def scenario_path(rel: str) -> Path:
    path = scenarios_dir() / rel
    if not path.is_file():
        raise FileNotFoundError(
            f"no such scenario file: {path} (run from the repository, or set VCPULAB_SCENARIOS)"
        )
    return path


def figure_title(exp: Experiment, verdict: str, width_in: float = 6.6) -> str:
    """A plot's title: the figure's id and title wrapped to a figure `width_in` inches
    wide (about 11 characters an inch at the titles' 9-10 pt), then the verdict."""
    chars = max(40, int(width_in * 11))
    return "\n".join([*textwrap.wrap(f"{exp.id}: {exp.title}", chars), f"verdict: {verdict}"])


# --- comparing ---------------------------------------------------------------------------------


def compare(merged: pd.DataFrame, tolerance: tuple[float, float]) -> tuple[str, str]:
    """Verdict and detail from rows with `published` and `simulated` columns."""
    agree_tol, partly_tol = tolerance
    rows = merged.dropna(subset=["published", "simulated"])
    if rows.empty:
        return "disagrees", "no simulated values to compare"
    errs = [_relative_error(r) for _, r in rows.iterrows()]
    # A bound the simulation does not pass is missed however close it comes — equal to
    # it too ("> 1" is not met by exactly 1: no effect is not an improvement).
    missed = [bool(_bound(r)) and not _beyond(r) for _, r in rows.iterrows()]
    worst = max(range(len(errs)), key=lambda i: (errs[i], missed[i]))
    w = rows.iloc[worst]
    if "label" in rows.columns and isinstance(w["label"], str):
        label = w["label"]
    else:
        label = _g(w["x"]) if isinstance(w["x"], int | float) else str(w["x"])
    within_partly = sum(e <= partly_tol and not m for e, m in zip(errs, missed, strict=True))
    same_trend = _same_trend(
        [float(v) for v in rows["published"]], [float(v) for v in rows["simulated"]]
    )
    if all(e <= agree_tol for e in errs) and not any(missed):
        verdict = "agrees"
    elif within_partly * 2 >= len(errs) or (same_trend and len(errs) > 1):
        verdict = "partly"
    else:
        verdict = "disagrees"
    mean_err = sum(errs) / len(errs)
    detail = (
        f"max relative error {100 * errs[worst]:.1f}% at {label} "
        f"(published {_published_text(w)}, simulated {_g(w['simulated'])}), "
        f"mean {100 * mean_err:.1f}% over {len(errs)} points; "
        f"tolerance {100 * agree_tol:.0f}%/{100 * partly_tol:.0f}%"
    )
    for (_, r), m in zip(rows.iterrows(), missed, strict=True):
        if m:
            name = r["label"] if isinstance(r.get("label"), str) else str(r["x"])
            detail += (
                f"; {name} not {_bound(r)} {_g(r['published'])} (simulated {_g(r['simulated'])}"
                f"{_seeds_beyond(r)})"
            )
    if verdict != "agrees":
        detail += "; trend order " + ("matches" if same_trend else "differs")
    return verdict, detail


def _seeds_beyond(row: Any) -> str:
    """For a missed bound judged on a mean over seeds: in how many seeds, each on its own,
    the value is past the bound (whether the miss is every seed's or a few seeds')."""
    text = row.get(SEED_VALUES) if hasattr(row, "get") else None
    if not isinstance(text, str) or not text:
        return ""
    values = [float(v) for v in text.split()]
    pub, bound = float(row["published"]), _bound(row)
    past = sum((v > pub) if bound == "above" else (v < pub) for v in values)
    return f"; {bound} it in {past} of {len(values)} seeds"


def _bound(row: Any) -> str:
    b = row.get("bound") if hasattr(row, "get") else None
    return b if isinstance(b, str) and b in ("above", "below") else ""


def _beyond(row: Any) -> bool:
    """The simulated value is strictly past the row's bound."""
    pub, sim = float(row["published"]), float(row["simulated"])
    bound = _bound(row)
    return (bound == "above" and sim > pub) or (bound == "below" and sim < pub)


def _relative_error(row: Any) -> float:
    """|simulated - published| / |published|; for a bound, the shortfall (0 when beyond it)."""
    pub, sim = float(row["published"]), float(row["simulated"])
    bound = _bound(row)
    if (bound == "above" and sim > pub) or (bound == "below" and sim < pub):
        return 0.0
    return abs(sim - pub) / abs(pub) if pub != 0 else abs(sim)


def _published_text(row: Any) -> str:
    bound = _bound(row)
    return {"above": "> ", "below": "< "}.get(bound, "") + _g(row["published"])


def point_checks(merged: pd.DataFrame, tolerance: float) -> tuple[list[float], list[str]]:
    """Per row: the relative error (as in `compare`) and a short check, e.g. 'within 25%',
    'above 96', 'off by +324%' (empty where a value is missing)."""
    errors: list[float] = []
    checks: list[str] = []
    for _, r in merged.iterrows():
        try:
            pub, sim = float(r["published"]), float(r["simulated"])
        except (TypeError, ValueError, KeyError):
            pub = sim = math.nan
        if math.isnan(pub) or math.isnan(sim):
            errors.append(math.nan)
            checks.append("")
            continue
        err = _relative_error(r)
        errors.append(err)
        bound = _bound(r)
        if bound:
            ok = _beyond(r)
            checks.append(f"{bound} {_g(pub)}" if ok else f"not {bound} {_g(pub)}")
        elif err <= tolerance:
            checks.append(f"within {100 * tolerance:.0f}%")
        else:
            sign = "+" if sim > pub else "-"
            checks.append(f"off by {sign}{100 * err:.0f}%")
    return errors, checks


def _same_trend(pub: list[float], sim: list[float]) -> bool:
    """Every pair that differs in the published data differs the same way in the simulation."""
    for i in range(len(pub)):
        for j in range(i + 1, len(pub)):
            dp = pub[j] - pub[i]
            if abs(dp) <= 1e-12 * max(abs(pub[i]), abs(pub[j]), 1e-300):
                continue
            if (sim[j] - sim[i]) * dp <= 0:
                return False
    return True


def _g(value: Any) -> str:
    v = float(value)
    if math.isnan(v):
        return "nan"
    return f"{v:.4g}"


# --- running -------------------------------------------------------------------------------------


def _override_key(item: str) -> str:
    return item.partition("=")[0].strip()


def _same_setting(a: str, b: str) -> bool:
    """Keys `a` and `b` set the same value, or one sets a table holding the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def check_what_ifs(exp: Experiment, what_if: Sequence[str], quick: bool) -> None:
    """Refuse a malformed `--set` of `vcpulab reproduce`, and one that sets a key the
    reproduction varies itself (between its points or over its grid): that would make
    its points the same runs, and the comparison it judges would be empty."""
    varied: dict[str, list[str]] = {}
    for pt in exp.points_for(quick):
        for item in pt.overrides:
            varied.setdefault(_override_key(item), []).append(f"point {pt.label!r}")
    for key in exp.grid_for(quick):
        varied.setdefault(key, []).append("its grid")
    for item in what_if:
        key, sep, _ = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. host.ple.policy=off")
        owners = [o for k, where in varied.items() if _same_setting(key, k) for o in where]
        if owners:
            shown = ", ".join(dict.fromkeys(owners[:3])) + (", ..." if len(owners) > 3 else "")
            raise UsageError(
                f"--set {key}: {exp.id} varies this key itself ({shown}), so the what-if "
                "would make its points the same runs; allowed are keys it does not vary"
            )


def run_experiment(
    exp: Experiment,
    *,
    quick: bool = False,
    out_dir: str | Path = "out/reproduce",
    executor: str | Executor = "local",
    jobs: int | None = None,
    store: str | Path | ResultsStore | None = None,
    progress: bool | None = None,
    backend: Backend | None = None,
    what_if: Sequence[str] = (),
) -> ExperimentResult:
    """Run one reproduction and write `<id>.csv`, `<id>.png`, `<id>.txt`, `<id>.json`.

    `what_if`: `KEY=VALUE` what-ifs applied to every run after the reproduction's own
    settings (a platform assumption the paper does not pin, say); a key the
    reproduction varies between its points or over its grid is refused."""
    import pandas as pd

    from vcpulab.sweeps import run_sweep

    what_if = tuple(what_if)
    check_what_ifs(exp, what_if, quick)
    start = time.monotonic()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [*exp.overrides, *(exp.quick_overrides if quick else ()), *what_if]
    seeds = exp.quick_seeds if quick else exp.seeds
    sweep_ids: str | dict[str, str]
    if exp.points:
        frame, sweep_ids, planned, failed = _run_points(
            exp,
            seeds,
            quick=quick,
            what_if=what_if,
            executor=executor,
            jobs=jobs,
            store=store,
            progress=progress,
            backend=backend,
        )
    else:
        outcome = run_sweep(
            scenario_path(exp.scenarios[0]),
            exp.grid_for(quick) or None,
            seeds,
            overrides=overrides,
            executor=executor,
            jobs=jobs,
            store=store,
            table=exp.table,
            progress=progress,
            backend=backend,
        )
        frame, sweep_ids = outcome.frame, outcome.sweep_id
        planned, failed = outcome.planned, outcome.failed
    if frame is None or frame.empty:
        reasons = "; ".join(f["error"] for f in failed[:3]) or "no results"
        raise RuntimeError(f"{exp.id}: every point failed: {reasons}")
    if exp.points:
        # Which points this run planned (--quick may run fewer): a point that ran but
        # left no row in the table (no epoch closed) is still a point of the run.
        frame.attrs[PLANNED_POINTS] = [p.label for p in exp.points_for(quick)]
    sim = exp.simulate(frame).reset_index(drop=True)
    pub = (
        exp.published(frame) if callable(exp.published) else pd.DataFrame(list(exp.published))
    ).reset_index(drop=True)
    merged = pub.merge(sim, on="x", how="outer", sort=False)
    if "simulated_ci95" not in merged.columns:
        merged["simulated_ci95"] = math.nan
    verdict, detail = compare(merged, exp.tolerance)
    merged["relative_error"], merged["check"] = point_checks(merged, exp.tolerance[0])
    if exp.explain is not None:
        detail += "; " + exp.explain(merged)
    if failed:
        detail += f"; {len(failed)} point(s) failed"
    warned = int(frame.attrs.get(WARNED_RUNS, 0))
    if warned:
        first = (frame.attrs.get(WARNINGS) or ["?"])[0]
        detail += f"; {warned} of {planned} runs warn ({first})"
    if exp.beside is not None and exp.beside_simulate is not None:
        beside = run_sweep(
            scenario_path(exp.beside),
            exp.grid_for(quick) or None,
            seeds,
            overrides=overrides,
            executor=executor,
            jobs=jobs,
            store=store,
            table=exp.table,
            progress=progress,
            backend=backend,
        )
        if beside.frame is not None and not beside.frame.empty:
            extra = exp.beside_simulate(beside.frame).reset_index(drop=True)
            merged = merged.merge(extra, on="x", how="left", sort=False)
    merged = merged.rename(columns={"x": exp.x})
    csv_path = out / f"{exp.id}.csv"
    merged.to_csv(csv_path, index=False)
    png_path: Path | None = out / f"{exp.id}.png"
    shown_verdict = f"{verdict} (quick run)" if quick else verdict
    if what_if:
        shown_verdict += f" (what if {', '.join(what_if)})"
    if plotting_available():
        assert png_path is not None
        (exp.plotter or plot)(exp, merged, shown_verdict, png_path)
    else:
        png_path = None
        detail += f"; no plot: {NO_PLOT_HINT}"
    summary = _summary_rows(merged)
    result = ExperimentResult(
        id=exp.id,
        title=exp.title,
        verdict=verdict,
        detail=detail,
        published=_series_text(summary, exp.x, "published", more=len(merged) - len(summary)),
        simulated=_series_text(
            summary, exp.x, "simulated", "simulated_ci95", more=len(merged) - len(summary)
        ),
        csv=csv_path,
        png=png_path,
        text=out / f"{exp.id}.txt",
        wall_s=time.monotonic() - start,
        frame=merged,
        quick=quick,
        what_if=what_if,
    )
    assert result.text is not None
    result.text.write_text(result.line() + "\n", encoding="utf-8")
    (out / f"{exp.id}.json").write_text(
        json.dumps(
            {
                "id": exp.id,
                "title": exp.title,
                "verdict": verdict,
                "detail": detail,
                "quick": quick,
                "what_if": list(what_if),
                "source": exp.source,
                "sweep_id": sweep_ids,
                "points": planned,
                "failed": failed,
                "rows": json.loads(merged.to_json(orient="records")),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return result


def _run_points(
    exp: Experiment,
    seeds: int,
    *,
    quick: bool,
    executor: str | Executor,
    jobs: int | None,
    store: str | Path | ResultsStore | None,
    progress: bool | None,
    backend: Backend | None,
    what_if: Sequence[str] = (),
) -> tuple[pd.DataFrame | None, dict[str, str], int, list[dict[str, Any]]]:
    """Run every point of `exp` as its own sweep (seeds x grid) on one executor and one
    store; the frames are stacked with a `point_label` column. One progress bar counts the
    runs of all points."""
    import pandas as pd

    from vcpulab.executors import make_executor
    from vcpulab.progress import Progress
    from vcpulab.store import ResultsStore
    from vcpulab.sweeps import run_sweep

    # Resolve every file first: a missing scenario is reported before anything runs.
    points = exp.points_for(quick)
    paths = [scenario_path(pt.scenario) for pt in points]
    ex = make_executor(executor, jobs) if isinstance(executor, str) else executor
    db = store if isinstance(store, ResultsStore) else ResultsStore(store or ":memory:")
    frames: list[pd.DataFrame] = []
    sweep_ids: dict[str, str] = {}
    failed: list[dict[str, Any]] = []
    warned_runs = 0
    warnings: list[str] = []
    planned = 0
    grid = exp.grid_for(quick)
    grid_size = math.prod(len(v) for v in grid.values()) if grid else 1
    bar = Progress(len(points) * seeds * grid_size, label="runs", enabled=progress)
    try:
        for pt, path in zip(points, paths, strict=True):
            outcome = run_sweep(
                path,
                grid or None,
                seeds,
                overrides=[
                    *exp.overrides,
                    *pt.overrides,
                    *(exp.quick_overrides if quick else ()),
                    *what_if,
                ],
                executor=ex,
                store=db,
                table=exp.table,
                progress=False,
                backend=backend,
            )
            sweep_ids[pt.label] = outcome.sweep_id
            planned += outcome.planned
            failed += [{"point_label": pt.label, **f} for f in outcome.failed]
            if outcome.frame is not None and not outcome.frame.empty:
                warned_runs += int(outcome.frame.attrs.get(WARNED_RUNS, 0))
                warnings += [w for w in outcome.frame.attrs.get(WARNINGS, []) if w not in warnings]
                frames.append(outcome.frame.assign(**{POINT_COLUMN: pt.label}))
            bar.update(outcome.planned - len(outcome.failed))
            if outcome.failed:
                bar.update(len(outcome.failed), failed=True)
    finally:
        bar.close()
        if isinstance(executor, str):
            ex.close()
        if not isinstance(store, ResultsStore):
            db.close()
    frame = pd.concat(frames, ignore_index=True, sort=False) if frames else None
    if frame is not None:
        frame.attrs[WARNED_RUNS] = warned_runs
        frame.attrs[WARNINGS] = warnings
    return frame, sweep_ids, planned, failed


SUMMARY_ROWS = 16
"""At most this many rows of an experiment appear in the one-line summaries (the
validation report's overview table); the CSV has them all."""


def _summary_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows for the one-line summaries: all of a short result; of a long one, those
    with a published value (the judged ones), at most `SUMMARY_ROWS`."""
    if len(frame) <= SUMMARY_ROWS or "published" not in frame.columns:
        return frame.head(SUMMARY_ROWS)
    judged = frame[frame["published"].notna()]
    return (judged if len(judged) else frame).head(SUMMARY_ROWS)


def _series_text(
    frame: pd.DataFrame, x: str, col: str, ci: str | None = None, *, more: int = 0
) -> str:
    parts = []
    for _, r in frame.iterrows():
        if "label" in frame.columns and isinstance(r["label"], str):
            label = r["label"]
        else:
            label = _g(r[x]) if isinstance(r[x], int | float) else str(r[x])
        v = r[col]
        if v is None or (isinstance(v, float) and math.isnan(v)):
            parts.append(f"{label}: -")
            continue
        text = f"{label}: {_published_text(r) if col == 'published' else _g(v)}"
        if ci and ci in frame.columns and not math.isnan(float(r[ci])):
            half = float(r[ci])
            # Rounding noise of identical runs is no uncertainty.
            text += f" ± {_g(0.0 if abs(half) <= 1e-9 * abs(float(v)) else half)}"
        parts.append(text)
    if more > 0:
        parts.append(f"… {more} more rows in the CSV")
    return "; ".join(parts)


def plot(exp: Experiment, merged: pd.DataFrame, verdict: str, path: Path) -> None:
    """Published beside simulated, as a PNG (Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    xs = merged[exp.x].tolist()
    pub = merged["published"].astype(float).tolist()
    sim = merged["simulated"].astype(float).tolist()
    err = [0.0 if math.isnan(e) else e for e in merged["simulated_ci95"].astype(float).tolist()]
    if exp.kind == "bar":
        labels = (
            merged["label"].astype(str).tolist()
            if "label" in merged.columns
            else [str(x) for x in xs]
        )
        pos = list(range(len(xs)))
        width = 0.38
        ax.bar([p - width / 2 for p in pos], pub, width, label="published", color="#9aa7b8")
        ax.bar(
            [p + width / 2 for p in pos],
            sim,
            width,
            yerr=err,
            capsize=3,
            label="simulated (95% CI)",
            color="#2f6db5",
        )
        ax.set_xticks(pos, labels)
        if exp.log_y:
            ax.set_yscale("log")
    else:
        order = sorted(range(len(xs)), key=lambda i: float(xs[i]))
        xo = [float(xs[i]) for i in order]
        ax.plot(xo, [pub[i] for i in order], "o--", color="#7b8794", label="published")
        ax.errorbar(
            xo,
            [sim[i] for i in order],
            yerr=[err[i] for i in order],
            fmt="s-",
            color="#2f6db5",
            capsize=3,
            label="simulated (95% CI)",
        )
        if exp.log_x:
            ax.set_xscale("log")
        if exp.log_y:
            ax.set_yscale("log")
    if exp.kind != "bar":
        colors = ("#c77c1f", "#4e9a4b", "#8d5fb5")
        for (column, label), color in zip(exp.beside_plot, itertools.cycle(colors)):
            if column not in merged.columns:
                continue
            pts = sorted(
                (float(x), float(y))
                for x, y in zip(xs, merged[column].astype(float), strict=True)
                if not math.isnan(float(y))
            )
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "^:", color=color, label=label)
    ax.set_xlabel(exp.x_label)
    ax.set_ylabel(exp.y_label)
    ax.set_title(figure_title(exp, verdict, fig.get_figwidth()), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
