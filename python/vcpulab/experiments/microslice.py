"""Micro-sliced vCPUs (Ahn, Park and Huh, "Micro-Sliced Virtual Processors to Hide the
Effect of Discontinuous CPU Availability for Consolidated Systems", MICRO 2014), on the
paper's platform: Xen 4.2.3 credit with Linux 3.5 guests (profile `xen-4.2.3`).

Five reproductions, scenarios in `scenarios/microslice/`:

- `microslice-spinlock`: guest kernel spinlock waiting and holding times of each
  PARSEC-like workload in a 4-vCPU VM, alone vs beside a swaptions-like VM (4 pCPUs).
- `microslice-pairs`: PARSEC-like workloads paired with swaptions-like in two VMs; each
  VM's throughput at 10, 5, 1 and 0.1 ms slices over its throughput at 30 ms, PLE on,
  and at 1 ms with PLE off.
- `microslice-mixed`: the four-VM set (ferret, vips, dedup, three swaptions + one
  streamcluster; 16 vCPUs on 4 pCPUs) at 1 and 0.1 ms over 30 ms.
- `microslice-iperf`: an open-loop UDP receiver sharing VM1 with a CPU-bound application
  beside the other three VMs of the set: RFC 3550 jitter at 30/1/0.1 ms (CSV columns
  `slice_ms`, `jitter_ms`), against the paper's 5.83 / 1.23 / 0.25 ms.
- `microslice-runq`: the run-queue length distribution of the fair scheduler at
  aggregate utilization 50-90%: runnable vCPUs per pCPU are mostly few.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vcpulab.experiments import Point
from vcpulab.experiments.declare import (
    SERIES_X,
    Col,
    Each,
    Fn,
    Mean,
    Plot,
    Pub,
    Ratio,
    Repro,
)
from vcpulab.experiments.suites import PARSEC_LIKE

if TYPE_CHECKING:
    import pandas as pd

PAPER = "Micro-sliced vCPUs (Ahn, Park and Huh, MICRO 2014)"
SLICE = "host.scheduler.slice_ms"
MODEL = "vm.0.workload.model"
RATELIMIT = "host.scheduler.ratelimit_us"


def at_slice(ms: str) -> tuple[str, ...]:
    """The slice, and Xen's context-switch rate limit (1 ms by default) lowered to it
    below 1 ms: otherwise csched_schedule keeps the running vCPU for the rate limit and a
    0.1 ms slice never happens (the paper's 0.1 ms runs need the same)."""
    limit = min(1000.0, float(ms) * 1000.0)
    return (f"{SLICE}={ms}", f"{RATELIMIT}={limit:g}")


# --- 1. spinlock waiting and holding, solo vs co-run --------------------------------------


def _lock_mean(column: str, kind: str = "kernel") -> Fn:
    """The mean `column` (wait or hold, ns) over the acquisitions of VM `a`'s locks of
    `kind` (kernel spinlocks, or the workload's user mutexes), weighted by each lock's
    acquisitions, in us."""

    def mean(run: pd.DataFrame) -> float:
        rows = run[(run["vm"] == "a") & (run["kind"] == kind)]
        n = rows["acquisitions"].astype(float)
        values = rows[column].astype(float).fillna(0.0)
        total = float(n.sum())
        return float((values * n).sum()) / total / 1e3 if total > 0 else float("nan")

    return Fn(mean)


WAIT = _lock_mean("wait_mean_ns")
HOLD = _lock_mean("hold_mean_ns")
USER_WAIT = _lock_mean("wait_mean_ns", "user")
USER_HOLD = _lock_mean("hold_mean_ns", "user")

SPINLOCK = Repro(
    id="microslice-spinlock",
    system="microslice",
    title="Guest kernel spinlock waiting and holding times, alone vs beside a "
    "swaptions-like VM (4-vCPU VMs, 4 pCPUs, 30 ms slices)",
    points=tuple(
        Point(f"{mode} {wl}", "microslice/pair.toml", (f"{MODEL}={wl}", *extra))
        for wl in PARSEC_LIKE
        for mode, extra in (("solo", ("run.mode=dedicated",)), ("co-run", ()))
    ),
    rows=SERIES_X,
    table="locks",
    published=Each(1.0, "above"),
    simulated=Ratio(WAIT, "co-run", "solo"),
    columns={
        "wait_solo_us": Mean(WAIT, at="solo"),
        "wait_corun_us": Mean(WAIT, at="co-run"),
        "hold_solo_us": Mean(HOLD, at="solo"),
        "hold_corun_us": Mean(HOLD, at="co-run"),
        "hold_ratio": Ratio(HOLD, "co-run", "solo"),
        "user_wait_solo_us": Mean(USER_WAIT, at="solo"),
        "user_wait_corun_us": Mean(USER_WAIT, at="co-run"),
        "user_hold_solo_us": Mean(USER_HOLD, at="solo"),
        "user_hold_corun_us": Mean(USER_HOLD, at="co-run"),
    },
    plot=Plot(
        "columns",
        [
            ("simulated", "waiting time, co-run / solo", "#c77c1f"),
            ("hold_ratio", "holding time, co-run / solo", "#2f6db5"),
        ],
        log_y=True,
        y_label="co-run / solo (log)",
    ),
    source=f"{PAPER}, the motivation study: beside a co-running VM, guest kernel "
    "spinlocks wait and are held far longer than alone, since holders and waiters are "
    "descheduled (LHP, LWP). No value is restated; checked: waiting time co-run / solo "
    "is at least 1 for every workload with kernel-lock acquisitions",
    x="workload",
    x_label="workload in VM a (VM b: swaptions-like)",
    y_label="kernel spinlock waiting time, co-run / solo",
    overrides=("run.duration=3s",),
    quick_overrides=("run.duration=500ms",),
    # Eight seeds: beside the co-runner, the dedup-like VM falls into a ticket-lock
    # convoy in some seeds and not in others (see the notes); two seeds made the
    # verdict a coin toss.
    seeds=8,
    quick_seeds=1,
    tolerance=(0.02, 0.10),
    notes="Solo is `run.mode = dedicated` (VM a alone on the host's pCPUs). Times are "
    "means over all acquisitions of the guest kernel's spinlocks (the `locks` table, "
    "kind kernel), weighted by acquisitions; workloads that take none give no judged "
    "value. The user_* columns are the same for the workload's own mutexes (kind user: "
    "spin, then futex sleep). Beside the co-runner the dedup-like VM sometimes falls "
    "into a convoy on its ticket-locked page-table lock (a holder, then each next "
    "waiter, descheduled by the 30 ms slices; hundreds of thousands of PLE exits) and "
    "stays in it for the rest of the run: over seeds 1-8 at 3 s its work ranges from 243 "
    "to 998 units (about 1,000 without a convoy) and its PLE exits from 882 to 372,000. "
    "The mean over eight seeds is judged. The ferret-like VM takes the futex hash-bucket "
    "lock about 1,800 (co-run) and 3,700 (solo) times per run and finds it held once in "
    "the eight co-run seeds and twice in the eight solo ones (waits of 2.5-2.9 us): its "
    "ratio, judged because it is defined, rests on those three acquisitions.",
)

# --- 2. PARSEC-like pairs over slices -----------------------------------------------------

PAIRS = ("dedup", "vips", "streamcluster", "bodytrack", "fluidanimate", "ferret")
PAIR_SERIES: dict[str, tuple[str, ...]] = {
    "30ms": at_slice("30"),
    "10ms": at_slice("10"),
    "5ms": at_slice("5"),
    "1ms": at_slice("1"),
    "0.1ms": at_slice("0.1"),
    "1ms-noPLE": (*at_slice("1"), "host.ple.policy=off"),
    "30ms-noPLE": (*at_slice("30"), "host.ple.policy=off"),
}
APP = Col("throughput_per_s", vm="a")
CORUNNER = Col("throughput_per_s", vm="b")

PAIRS_STUDY = Repro(
    id="microslice-pairs",
    system="microslice",
    title="PARSEC-like workloads beside swaptions-like (two 4-vCPU VMs, 4 pCPUs): "
    "throughput at shorter slices over 30 ms",
    points=tuple(
        Point(f"{series} {wl}", "microslice/pair.toml", (f"{MODEL}={wl}", *extra))
        for wl in PAIRS
        for series, extra in PAIR_SERIES.items()
    ),
    rows=SERIES_X,
    published=Each(1.0, "above"),
    simulated=Ratio(APP, "1ms", "30ms", paired=True),
    columns={
        "app_10ms": Ratio(APP, "10ms", "30ms", paired=True),
        "app_5ms": Ratio(APP, "5ms", "30ms", paired=True),
        "app_0.1ms": Ratio(APP, "0.1ms", "30ms", paired=True),
        "app_1ms_noPLE": Ratio(APP, "1ms-noPLE", "30ms-noPLE", paired=True),
        "corunner_1ms": Ratio(CORUNNER, "1ms", "30ms", paired=True),
        "corunner_0.1ms": Ratio(CORUNNER, "0.1ms", "30ms", paired=True),
        "lhp_30ms": Mean(Col("lhp", vm="a"), at="30ms"),
        "lhp_1ms": Mean(Col("lhp", vm="a"), at="1ms"),
    },
    plot=Plot(
        "columns",
        [
            ("app_10ms", "10 ms", "#9aa7b8"),
            ("app_5ms", "5 ms", "#7b8794"),
            ("simulated", "1 ms", "#2f6db5"),
            ("app_0.1ms", "0.1 ms", "#c77c1f"),
            ("app_1ms_noPLE", "1 ms, PLE off (vs 30 ms, PLE off)", "#4e9a4b"),
        ],
        y_label="throughput over 30 ms slices",
    ),
    source=f"{PAPER}, PARSEC pairs in two VMs: 1 ms slices improve most pairs over 30 ms; "
    "0.1 ms helps some and hurts others (switch and cache costs). No value is restated; "
    "checked: the PARSEC-like VM's throughput at 1 ms over 30 ms is at least 1",
    x="workload",
    x_label="workload in VM a (VM b: swaptions-like)",
    y_label="throughput, 1 ms / 30 ms slices",
    overrides=("run.duration=3s",),
    quick_overrides=("run.duration=500ms",),
    # Eight seeds: the dedup-like and vips-like pairs fall into a ticket-lock convoy in
    # some seeds and not in others, so their ratios are means over a bistable outcome.
    seeds=8,
    quick_seeds=1,
    tolerance=(0.02, 0.10),
    notes="The paper normalizes to equal-capped solo runs; a ratio to the same pair at "
    "30 ms is what its comparison of slices rests on, so that is judged here (the "
    "equal-capped solo reference is `run.mode = solo_capped`). Columns: each slice's "
    "ratio, the co-runner's, and PLE off (both runs without PLE). Eight seeds: at 30 ms "
    "the dedup-like VM falls into a ticket-lock convoy in some seeds and not others "
    "(throughput 50-260 units/s over seeds 1-8, against 254-269 at 1 ms in every "
    "seed), so its ratio is a mean over a bistable outcome; the vips-like pipeline is "
    "8-11 times faster at 1 ms in every seed, and ferret-like 2-30% slower.",
)

# --- 3. the four-VM set ----------------------------------------------------------------------

SET_VMS = ("ferret", "vips", "dedup", "mix")
SET_SLICES = ("1", "0.1")

MIXED = Repro(
    id="microslice-mixed",
    system="microslice",
    title="Four 4-vCPU VMs on 4 pCPUs (ferret, vips, dedup, swaptions + streamcluster): "
    "throughput at 1 and 0.1 ms over 30 ms",
    points=tuple(
        Point(f"{series} {s}", "microslice/mixed.toml", at_slice(value))
        for s in SET_SLICES
        for series, value in (("at", s), ("30ms", "30"))
    ),
    rows=SERIES_X,
    x_of=float,
    published=Each(1.0, "above"),
    simulated=Ratio(Col("throughput_per_s", vm="vips"), "at", "30ms", paired=True),
    columns={
        **{
            f"{vm}_ratio": Ratio(Col("throughput_per_s", vm=vm), "at", "30ms", paired=True)
            for vm in SET_VMS
            if vm != "vips"
        },
        "lhp_at": Mean(Col("lhp"), at="at"),
        "lhp_30ms": Mean(Col("lhp"), at="30ms"),
    },
    plot=Plot(
        "columns",
        [
            ("ferret_ratio", "ferret-like", "#9aa7b8"),
            ("simulated", "vips-like", "#2f6db5"),
            ("dedup_ratio", "dedup-like", "#c77c1f"),
            ("mix_ratio", "swaptions + streamcluster", "#4e9a4b"),
        ],
        y_label="throughput over 30 ms slices",
    ),
    source=f"{PAPER}, the four-VM set: short slices help the synchronization-heavy VMs "
    "(vips among them). No value is restated; checked: the vips-like VM's throughput at "
    "1 and 0.1 ms over 30 ms is at least 1",
    x="slice_ms",
    x_label="time slice (ms)",
    y_label="vips-like throughput over 30 ms",
    overrides=("run.duration=3s",),
    quick_overrides=("run.duration=500ms",),
    seeds=2,
    quick_seeds=1,
    tolerance=(0.02, 0.10),
    notes="Each row also runs the set at 30 ms (the same run for every row) as its reference.",
)

# --- 4. iperf jitter -------------------------------------------------------------------------

JITTER = Col("jitter_ms", how="mean")

IPERF = Repro(
    id="microslice-iperf",
    system="microslice",
    title="An open-loop UDP receiver sharing a VM with a CPU-bound application, beside "
    "three busy VMs (16 vCPUs on 4 pCPUs): RFC 3550 jitter vs time slice",
    points=tuple(Point(ms, "microslice/iperf.toml", at_slice(ms)) for ms in ("30", "1", "0.1")),
    x_of=float,
    table="net",
    published=[Pub(30.0, 5.83), Pub(1.0, 1.23), Pub(0.1, 0.25)],
    simulated=Mean(JITTER),
    columns={
        "jitter_ms": Mean(JITTER),
        "jitter_mean_ms": Mean(Col("jitter_mean_ms", how="mean")),
        "throughput_mbps": Mean(Col("throughput_mbps")),
        "drop_fraction": Mean(Col("drop_fraction")),
        "delay_mean_ms": Mean(Col("delay_mean_ms")),
    },
    plot=Plot("line", log_x=True, log_y=True),
    source=f"{PAPER}, the I/O study: iperf's jitter with the receiver sharing a VM with a "
    "CPU-bound application in the mixed four-VM set: 5.83 ms at 30 ms slices, 1.23 ms at "
    "1 ms, 0.25 ms at 0.1 ms",
    x="slice_ms",
    x_label="time slice (ms)",
    y_label="jitter (ms, RFC 3550)",
    overrides=("run.duration=5s",),
    quick_overrides=("run.duration=1s",),
    seeds=3,
    quick_seeds=1,
    tolerance=(0.25, 1.0),
    notes="jitter_ms is the RFC 3550 interarrival-jitter estimate (gain 1/16) at the end "
    "of the run, as iperf prints it for an interval; jitter_mean_ms is the estimate "
    "averaged over every datagram (steadier: the last value reflects only the last ~16 "
    "datagrams). The stream is open-loop at iperf's default UDP rate, 1 Mbit/s of "
    "1470-byte datagrams (guest/nic.rs); the device interrupt goes to vCPU 0, and the "
    "application keeps all four vCPUs busy, so the interrupt waits for vCPU 0's turn "
    "unless it is running. Below 1 ms the slice comes with Xen's rate limit lowered to "
    "it (see at_slice).",
)

# --- 5. run-queue length distribution -----------------------------------------------------------

UTILIZATION_SLEEP = {"50": "7ms", "60": "5667us", "70": "4714us", "80": "4ms", "90": "3444us"}


def _at_most_two(run: pd.DataFrame) -> float:
    """Share of pCPU time with at most two vCPUs running or queued there."""
    rows = run[run["length"].astype(int) <= 2]
    return float(rows["fraction"].astype(float).sum())


def _mean_length(run: pd.DataFrame) -> float:
    return float((run["length"].astype(float) * run["fraction"].astype(float)).sum())


RUNQ = Repro(
    id="microslice-runq",
    system="microslice",
    title="Run-queue length of a fair scheduler at aggregate utilization 50-90% "
    "(sixteen 1-vCPU VMs on 4 pCPUs)",
    points=tuple(
        Point(u, "microslice/runq.toml", (f"vm.0.workload.params.sleep=exp({sleep})",))
        for u, sleep in UTILIZATION_SLEEP.items()
    ),
    x_of=float,
    table="runq_length",
    published=Each(0.5, "above"),
    simulated=Mean(Fn(_at_most_two)),
    columns={"mean_length": Mean(Fn(_mean_length))},
    plot=Plot("line", ref=None),
    source=f"{PAPER}, the run-queue study: even at aggregate utilization up to 80-90%, "
    "runnable vCPUs per core are mostly few (its CDF). Checked: more than half of the "
    "pCPU time has at most two vCPUs running or queued",
    x="utilization_pct",
    x_label="aggregate utilization (%)",
    y_label="share of pCPU time with <= 2 vCPUs running or queued",
    overrides=("run.duration=10s",),
    quick_overrides=("run.duration=1s",),
    seeds=3,
    quick_seeds=1,
    tolerance=(0.02, 0.10),
    notes="Each VM computes exp(1 ms) and sleeps for a time set so that 16 x duty / 4 "
    "pCPUs gives the utilization. The CSV also has the time-weighted mean length.",
)

EXPERIMENTS = [SPINLOCK, PAIRS_STUDY, MIXED, IPERF, RUNQ]
