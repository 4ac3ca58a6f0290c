"""Gleaner's application studies (SYSTEMS.md 4.1 and 6, issue 7).

Gleaner runs inside the benchmark VM's guest (`guest.gleaner.mode = "gleaner"`:
yielding threads with the halt/wake round-trip timeout, plus consolidation). Every study
also shows the mitigations the paper did not compare with: KVM's host halt polling
(`host.halt_poll.enabled`) and the guest cpuidle-haltpoll driver (`guest.idle =
"haltpoll"`), and the never-sleeping yielding thread ("idle daemon").

The paper's figures are not in CALIBRATION.md; the published rows here are the trends
its text states ("Gleaner ... improve[s] the performance of individual applications by
[up to] 16x and system throughput by 3x"): Gleaner is judged against a bound (no slower
than without it), never against a number. Slowdowns and speedups are ratios of
throughput (work units per second until the workload finished), mean over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vcpulab.experiments import POINT_COLUMN, Experiment, Point

if TYPE_CHECKING:
    import pandas as pd

APP_VM = "app"
CO_VM = "corunner"
MODEL_KEY = "vm.0.workload.model"

PARSEC_SPLASH = (
    "blackscholes",
    "bodytrack",
    "canneal",
    "dedup",
    "facesim",
    "ferret",
    "fluidanimate",
    "freqmine",
    "raytrace",
    "streamcluster",
    "swaptions",
    "vips",
    "x264",
    "cholesky",
    "lu_ncb",
    "volrend",
    "water_nsquared",
    "water_spatial",
)
QUICK_MODELS = ("canneal", "water_spatial", "blackscholes")

NATIVE = "native"
HLT = "HLT"
GLEANER = "Gleaner"
IDLE_DAEMON = "idle daemon"
HOST_POLL = "host halt-poll"
GUEST_POLL = "guest haltpoll"

# The benchmark VM's mitigation, as overrides (VM 0 is the benchmark VM everywhere).
MITIGATIONS: dict[str, tuple[str, ...]] = {
    HLT: (),
    GLEANER: ("vm.0.guest.gleaner.mode=gleaner",),
    IDLE_DAEMON: ("vm.0.guest.gleaner.mode=retention",),
    HOST_POLL: ("host.halt_poll.enabled=true",),
    GUEST_POLL: ("vm.0.guest.idle=haltpoll",),
}
CORUNNERS: dict[str, str] = {
    "matmul": 'vm.1.workload={ model = "matmul", params = { forever = true } }',
    "freqsleep": 'vm.1.workload={ model = "freqsleep" }',
}
COLORS = {
    HLT: "#8c8c8c",
    GLEANER: "#2f6db5",
    IDLE_DAEMON: "#7fa7d9",
    HOST_POLL: "#c7621a",
    GUEST_POLL: "#4e9a4b",
}


def _metric(frame: pd.DataFrame, point: str, vm: str, column: str, by: str) -> dict[str, float]:
    """Mean over seeds of `column` of VM `vm` in `point`, per value of grid column `by`."""
    rows = frame[(frame[POINT_COLUMN] == point) & (frame["vm"] == vm)]
    out: dict[str, float] = {}
    for key, g in rows.groupby(by, sort=False):
        vals = [float(v) for v in g[column] if v is not None and not math.isnan(float(v))]
        out[str(key)] = sum(vals) / len(vals) if vals else math.nan
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def _published_above_one(xs: Sequence[str]) -> list[dict[str, object]]:
    return [{"x": x, "published": 1.0, "bound": "above"} for x in xs]


def _grouped_bars(
    exp: Experiment,
    merged: pd.DataFrame,
    verdict: str,
    path: Path,
    series: Sequence[tuple[str, str, str]],
    *,
    ref_line: float | None = 1.0,
) -> None:
    """Bars per x for each (column, legend, color) of `series`."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    xs = [str(x) for x in merged[exp.x]]
    present = [s for s in series if s[0] in merged.columns]
    width = 0.8 / max(len(present), 1)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.55 * len(xs) * max(len(present), 1) / 2), 4.4))
    for k, (col, legend, color) in enumerate(present):
        ys = [float(v) for v in merged[col]]
        pos = [i + (k - (len(present) - 1) / 2) * width for i in range(len(xs))]
        ax.bar(pos, ys, width, label=legend, color=color, edgecolor="#444444", linewidth=0.4)
    if ref_line is not None:
        ax.axhline(ref_line, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(xs)), xs, rotation=45, ha="right", fontsize=7)
    ax.set_xlabel(exp.x_label)
    ax.set_ylabel(exp.y_label)
    ax.set_title(f"{exp.id}: {exp.title}\nverdict: {verdict}", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _losses(merged: pd.DataFrame, column: str, label: str = "x") -> str:
    """Where `column` (a speedup) is below 1: the list, or 'nowhere'."""
    lost = [
        f"{r[label]} {float(r[column]):.3f}"
        for _, r in merged.iterrows()
        if column in merged.columns and float(r[column]) < 1.0
    ]
    return ", ".join(lost) if lost else "nowhere"


# --- 3: single VM, 16 vCPUs on 16 pCPUs ---------------------------------------------------


SINGLE_POINTS = (
    Point(NATIVE, "gleaner/single-vm.toml", ("run.mode=native",)),
    *(Point(name, "gleaner/single-vm.toml", ov) for name, ov in MITIGATIONS.items()),
)


def _single_simulated(frame: pd.DataFrame) -> pd.DataFrame:
    """Per workload: Gleaner's speedup over HLT (judged), the slowdown vs native of every
    configuration, HLT's vCPU halts per second, Gleaner's mean active vCPUs and the
    change of the host's energy against HLT."""
    import pandas as pd

    thr = {
        p.label: _metric(frame, p.label, APP_VM, "throughput_per_s", MODEL_KEY)
        for p in SINGLE_POINTS
    }
    energy = {
        p.label: _metric(frame, p.label, APP_VM, "energy.joules", MODEL_KEY) for p in SINGLE_POINTS
    }
    halts = _metric(frame, HLT, APP_VM, "idle_transitions_per_s", MODEL_KEY)
    active = _metric(frame, GLEANER, APP_VM, "active_vcpus_mean", MODEL_KEY)
    rows = []
    for model in thr[HLT]:
        row: dict[str, object] = {
            "x": model,
            "simulated": _ratio(thr[GLEANER].get(model, math.nan), thr[HLT][model]),
            "halts_per_s": halts.get(model, math.nan),
            "gleaner_active_vcpus": active.get(model, math.nan),
        }
        for name in MITIGATIONS:
            row[f"slowdown_{name}"] = _ratio(
                thr[NATIVE].get(model, math.nan), thr[name].get(model, math.nan)
            )
            row[f"energy_change_pct_{name}"] = 100 * (
                _ratio(energy[name].get(model, math.nan), energy[HLT][model]) - 1
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _single_explain(merged: pd.DataFrame) -> str:
    col = f"energy_change_pct_{GLEANER}"
    energy = [float(v) for v in merged.get(col, []) if not math.isnan(float(v))]
    mean_e = sum(energy) / len(energy) if energy else math.nan
    return (
        f"Gleaner slower than HLT at: {_losses(merged, 'simulated')}; "
        f"mean energy change with Gleaner {mean_e:+.1f}%"
    )


def _single_plot(exp: Experiment, merged: pd.DataFrame, verdict: str, path: Path) -> None:
    _grouped_bars(
        exp,
        merged,
        verdict,
        path,
        [(f"slowdown_{n}", n, COLORS[n]) for n in MITIGATIONS],
    )


SINGLE = Experiment(
    id="gleaner-single-vm",
    system="gleaner",
    title="One 16-vCPU VM on 16 pCPUs: slowdown vs native, with and without Gleaner",
    scenarios=(),
    points=SINGLE_POINTS,
    grid={MODEL_KEY: list(PARSEC_SPLASH)},
    quick_grid={MODEL_KEY: list(QUICK_MODELS)},
    published=lambda frame: __import__("pandas").DataFrame(
        _published_above_one(list(dict.fromkeys(str(m) for m in frame[MODEL_KEY])))
    ),
    simulate=_single_simulated,
    explain=_single_explain,
    plotter=_single_plot,
    source="Gleaner (USENIX ATC 2014), single-VM study; trend from its text: Gleaner "
    "reduces the cost of blocking synchronization (speedup >= 1, up to 16x)",
    x="workload",
    x_label="workload (PARSEC/SPLASH-2x-like)",
    y_label="slowdown vs native (bars); judged: Gleaner's speedup over HLT",
    seeds=2,
    quick_seeds=1,
    tolerance=(0.05, 0.20),
    kind="bar",
    notes="Scenario `gleaner/single-vm.toml` with the model as the grid. Points: native "
    "(`run.mode=native`), HLT (kvm-default), Gleaner, idle daemon (yielding threads "
    "that never sleep), host halt polling, guest haltpoll. Judged: Gleaner's speedup "
    "over HLT >= 1 for every workload. The CSV lists every configuration's slowdown vs "
    "native, HLT's halts per second, Gleaner's mean active vCPUs and the energy change "
    "of each configuration against HLT (energy proxy: busy pCPU time at host.power."
    "busy_w, halted at host.power.halted_w).",
)


# --- 4: two VMs, workload + co-runner -------------------------------------------------------

CORUN_MODELS = (
    "bodytrack",
    "canneal",
    "dedup",
    "facesim",
    "fluidanimate",
    "streamcluster",
    "vips",
    "water_spatial",
)
CORUN_QUICK = ("water_spatial",)
CORUN_MITIGATIONS = (HLT, GLEANER, HOST_POLL, GUEST_POLL)

CORUN_POINTS = tuple(
    Point(f"{name} +{co}", "gleaner/corun.toml", (*MITIGATIONS[name], CORUNNERS[co]))
    for co in CORUNNERS
    for name in CORUN_MITIGATIONS
)


def _corun_simulated(frame: pd.DataFrame) -> pd.DataFrame:
    """Per workload and co-runner: the workload's speedup with Gleaner over HLT (judged)
    and the weighted speedup (mean of both VMs' speedups); the same for host halt
    polling and guest haltpoll."""
    import pandas as pd

    rows = []
    for co in CORUNNERS:
        app = {
            n: _metric(frame, f"{n} +{co}", APP_VM, "throughput_per_s", MODEL_KEY)
            for n in CORUN_MITIGATIONS
        }
        other = {
            n: _metric(frame, f"{n} +{co}", CO_VM, "throughput_per_s", MODEL_KEY)
            for n in CORUN_MITIGATIONS
        }
        energy = {
            n: _metric(frame, f"{n} +{co}", APP_VM, "energy.joules", MODEL_KEY)
            for n in CORUN_MITIGATIONS
        }
        for model in app[HLT]:
            row: dict[str, object] = {"x": f"{model}+{co}"}
            for n in CORUN_MITIGATIONS[1:]:
                s_app = _ratio(app[n].get(model, math.nan), app[HLT][model])
                s_co = _ratio(other[n].get(model, math.nan), other[HLT].get(model, math.nan))
                row[f"speedup_{n}"] = s_app
                row[f"corunner_speedup_{n}"] = s_co
                row[f"weighted_speedup_{n}"] = (s_app + s_co) / 2
                row[f"energy_change_pct_{n}"] = 100 * (
                    _ratio(energy[n].get(model, math.nan), energy[HLT][model]) - 1
                )
            row["simulated"] = row[f"speedup_{GLEANER}"]
            rows.append(row)
    return pd.DataFrame(rows)


def _corun_explain(merged: pd.DataFrame) -> str:
    return (
        f"Gleaner slower than HLT at: {_losses(merged, 'simulated')}; "
        f"weighted speedup below 1 at: {_losses(merged, f'weighted_speedup_{GLEANER}')}"
    )


def _corun_plot(exp: Experiment, merged: pd.DataFrame, verdict: str, path: Path) -> None:
    series = []
    for n in CORUN_MITIGATIONS[1:]:
        series.append((f"speedup_{n}", f"{n}: workload", COLORS[n]))
        series.append((f"weighted_speedup_{n}", f"{n}: weighted", COLORS[n] + "88"))
    _grouped_bars(exp, merged, verdict, path, series)


CORUN = Experiment(
    id="gleaner-corun",
    system="gleaner",
    title="Two 16-vCPU VMs on 16 pCPUs (workload + matmul or freqsleep): speedup over HLT",
    scenarios=(),
    points=CORUN_POINTS,
    grid={MODEL_KEY: list(CORUN_MODELS)},
    quick_grid={MODEL_KEY: list(CORUN_QUICK)},
    published=lambda frame: __import__("pandas").DataFrame(
        _published_above_one(
            [
                f"{m}+{co}"
                for co in CORUNNERS
                for m in dict.fromkeys(str(x) for x in frame[MODEL_KEY])
            ]
        )
    ),
    simulate=_corun_simulated,
    explain=_corun_explain,
    plotter=_corun_plot,
    source="Gleaner (USENIX ATC 2014), two-VM study; trend from its text: Gleaner speeds "
    "up the workload and raises system throughput (up to 3x)",
    x="pair",
    x_label="workload + co-runner",
    y_label="speedup over HLT",
    seeds=2,
    quick_seeds=1,
    kind="bar",
    notes="Scenario `gleaner/corun.toml` (VM `app` 16 vCPUs + VM `corunner` 16 vCPUs on "
    "16 pCPUs); the mitigation applies to the benchmark VM (host halt polling: to the "
    "host). Judged: the workload's speedup with Gleaner over HLT >= 1. Weighted speedup "
    "= mean of the workload's and the co-runner's speedups (throughput ratios).",
)


EXPERIMENTS = [SINGLE, CORUN]
