"""`vcpulab sweep … --plot METRIC`: one metric of a sweep's summary over its first grid key.

Thin: it draws what `sweeps.summarize` computed (mean and its confidence interval over
seeds); no numbers are made here. One line per entity (VM, pCPU, …) and per combination
of the other grid keys. Log axes where values span two decades or more, so ratios and
slices from 0.1 to 30 ms stay readable.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vcpulab.errors import UsageError

SPAN_FOR_LOG = 100.0


def spans_decades(values: Sequence[float]) -> bool:
    """True when all values are positive and max/min ≥ 100: drawn on a log axis."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite or min(finite) <= 0:
        return False
    return max(finite) / min(finite) >= SPAN_FOR_LOG


def _numeric(values: Sequence[Any]) -> list[float] | None:
    out: list[float] = []
    for v in values:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            return None
    return out


def plot_sweep(
    summary: Any,
    grid_columns: Sequence[str],
    id_columns: Sequence[str],
    metric: str,
    path: Path,
    *,
    title: str,
    ci_column: str = "",
) -> list[Path]:
    """Write `path` as PNG and the same figure as SVG beside it; return both paths."""
    from vcpulab.experiments import NO_PLOT_HINT, plotting_available

    if not plotting_available():
        raise UsageError(f"--plot needs matplotlib: {NO_PLOT_HINT}")
    mean = f"{metric}_mean"
    if mean not in summary.columns:
        allowed = sorted(c[: -len("_mean")] for c in summary.columns if c.endswith("_mean"))
        raise UsageError(
            f"--plot {metric!r}: not a metric of this sweep's table; "
            f"allowed values are {', '.join(allowed)}"
        )
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    # Durations in ns are drawn in the unit that reads best (the summary table's).
    scale, unit = 1.0, ""
    if metric.endswith("_ns"):
        peak = summary[mean].astype(float).abs().max()
        for factor, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
            if math.isfinite(peak) and peak >= factor:
                scale, unit = factor, name
                break
        else:
            unit = "ns"
    low = f"{metric}_min"
    non_negative = low in summary.columns and bool((summary[low].astype(float) >= 0).all())
    x_key = grid_columns[0] if grid_columns else None
    series_keys = [*grid_columns[1:], *id_columns]
    fig, ax = plt.subplots(figsize=(7.2, 4.4), dpi=100)
    all_y: list[float] = []
    all_x: list[float] = []
    groups = summary.groupby(series_keys, sort=False) if series_keys else [((), summary)]
    numeric_x = x_key is not None and _numeric(summary[x_key].tolist()) is not None
    categories = list(dict.fromkeys(summary[x_key].tolist())) if x_key is not None else [""]
    for key, group in groups:
        key_t = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{k}={v}" for k, v in zip(series_keys, key_t, strict=True)) or metric
        ys = [y / scale for y in group[mean].astype(float).tolist()]
        if not any(math.isfinite(y) for y in ys):
            continue  # a series without this metric (e.g. a VM that never woke)
        errs = (
            [0.0 if not math.isfinite(e) else e / scale for e in group[ci_column].astype(float)]
            if ci_column in group.columns
            else [0.0] * len(ys)
        )
        if x_key is None:
            xs: list[float] = [0.0] * len(ys)
        elif numeric_x:
            xs = [float(v) for v in group[x_key]]
        else:
            xs = [float(categories.index(v)) for v in group[x_key]]
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        # A quantity no seed saw negative (a latency, a count) gets no bar below 0.
        lower = [min(errs[i], ys[i]) if non_negative else errs[i] for i in order]
        ax.errorbar(
            [xs[i] for i in order],
            [ys[i] for i in order],
            yerr=[lower, [errs[i] for i in order]],
            fmt="o-",
            capsize=3,
            label=label,
        )
        all_y.extend(ys)
        all_x.extend(xs)
    if x_key is not None and not numeric_x:
        ax.set_xticks(range(len(categories)), [str(c) for c in categories])
    elif numeric_x and spans_decades(all_x):
        ax.set_xscale("log")
    if spans_decades(all_y):
        ax.set_yscale("log")
    ax.set_xlabel(x_key or "")
    level = ci_column.rsplit("_ci", 1)[-1] if "_ci" in ci_column else ""
    shown = f"{metric} [{unit}]" if unit else metric
    ax.set_ylabel(f"{shown}\n(mean over seeds" + (f" ± {level}% CI)" if level else ")"))
    if ax.get_yscale() == "linear":
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    path.parent.mkdir(parents=True, exist_ok=True)
    svg = path.with_suffix(".svg")
    # bbox_inches="tight": the wrapped title and the legend are never clipped.
    fig.savefig(path, bbox_inches="tight")
    fig.savefig(svg, bbox_inches="tight")
    plt.close(fig)
    return [path, svg]
