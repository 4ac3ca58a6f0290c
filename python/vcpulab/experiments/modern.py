"""Then and now: each seed study's headline comparison on its paper's platform and on
today's, side by side.

The "then" column is judged against the paper, as the study's own reproduction is; the
"now" columns have no published values (no paper ran them): they say which problem a
modern host (KVM on Linux 6.6 with EEVDF, Sapphire Rapids-class exits, APICv with
posted interrupts and IPI virtualization, host halt polling; a Linux 6.6 guest with
EEVDF, pv-qspinlock, wake_q, PV TLB flush and vcpu_is_preempted) still has.

- `modern-gleaner`: Gleaner's two-VM co-run (a 16-vCPU workload VM beside a 16-vCPU
  matmul VM on 16 pCPUs): Gleaner's speedup over HLT then and now, HLT's throughput now
  over then, and the lock-holder preemptions behind them.
- `modern-apple`: APPLE's one-VM-alone cost of pause-loop exiting (KVM's default PLE
  handling against PLE off) for its six workloads, then and now.
"""

from __future__ import annotations

from vcpulab.experiments import Point
from vcpulab.experiments.declare import (
    SIMULATED,
    SIMULATED_CELL,
    Col,
    Each,
    Mean,
    Plot,
    Pub,
    Ratio,
    Repro,
)
from vcpulab.experiments.gleaner_apps import (
    APP_VM,
    CORUNNERS,
    GLEANER,
    HLT,
    MITIGATIONS,
    MODEL_KEY,
    STEADY_STATE,
    STEADY_STATE_QUICK,
    THROUGHPUT,
)

# Today's KVM host in place of the scenario's pinned platform (both keys: the scenario
# file's own platform wins over a preset's).
NOW = ("preset=kvm-modern", "host.platform=kvm-6.6-spr")
ERAS: dict[str, tuple[str, ...]] = {"then": (), "now": NOW}

# --- 1. Gleaner's co-run ----------------------------------------------------------------------

GLEANER_MODELS = ("dedup", "streamcluster", "fluidanimate", "water_spatial")
GLEANER_QUICK = ("water_spatial",)

GLEANER_POINTS = tuple(
    Point(
        f"{era} {m}",
        "gleaner/corun.toml",
        (*MITIGATIONS[m], CORUNNERS["matmul"], *ERAS[era]),
    )
    for era in ERAS
    for m in (HLT, GLEANER)
)


def _lhp(at: str) -> Mean:
    return Mean(Col("lhp", vm=APP_VM), at=at, as_int=True)


GLEANER_THEN_NOW = Repro(
    id="modern-gleaner",
    system="modern",
    title="Gleaner's co-run with matmul, then and now: speedup over HLT",
    points=GLEANER_POINTS,
    grid={MODEL_KEY: list(GLEANER_MODELS)},
    quick_grid={MODEL_KEY: list(GLEANER_QUICK)},
    rows=MODEL_KEY,
    published=Each(1.0, "above"),
    simulated=Ratio(THROUGHPUT, f"then {GLEANER}", f"then {HLT}", paired=True),
    columns={
        SIMULATED: SIMULATED_CELL,
        "speedup_now": Ratio(THROUGHPUT, f"now {GLEANER}", f"now {HLT}", paired=True),
        "hlt_now_over_then": Ratio(THROUGHPUT, f"now {HLT}", f"then {HLT}", paired=True),
        "lhp_then_hlt": _lhp(f"then {HLT}"),
        "lhp_now_hlt": _lhp(f"now {HLT}"),
    },
    plot=Plot(
        "columns",
        [
            ("simulated", "then: Gleaner / HLT", "#2f6db5"),
            ("speedup_now", "now: Gleaner / HLT", "#e07b39"),
            ("hlt_now_over_then", "HLT now / then", "#8c8c8c"),
        ],
    ),
    source="Gleaner (USENIX ATC 2014), two-VM study: "
    "Gleaner speeds up the workload co-running with a CPU-bound VM; the 'now' columns "
    "have no published values",
    x="workload",
    x_label="workload (+ matmul VM); then: KVM 3.9, now: KVM 6.6",
    y_label="throughput ratio",
    seeds=2,
    quick_seeds=1,
    overrides=STEADY_STATE,
    quick_overrides=STEADY_STATE_QUICK,
    notes="Scenario `gleaner/corun.toml` on its platform (kvm-3.9-snb, preset kvm-default) "
    "and with `preset=kvm-modern host.platform=kvm-6.6-spr`; the workload runs for ever "
    "and throughput is over 1 s (20 Gleaner controller intervals; see gleaner-corun). "
    "Judged: Gleaner's speedup over HLT on the paper's host >= 1. Reported beside it: "
    "the same speedup on today's host, today's HLT throughput over the paper host's, and "
    "the workload VM's lock-holder preemptions under HLT on each. Why today's host gives "
    "the barrier workloads a fraction of the paper host's HLT throughput (traced on "
    "water_spatial, 1 s): two host changes, each enough on its own - 231 units/s on the "
    "3.9 host, 57 with only the host scheduler switched to EEVDF, 36 with only per-VM "
    "groups, 74 with both (today's platform). EEVDF gives a sleeper no credit: a vCPU "
    "that computes a few hundred us between barrier halts beside a CPU-bound vCPU wakes "
    "at best with zero lag (its deadline then no earlier than the running vCPU's) and "
    "mostly with the negative lag its last burst left (ineligible: every wake-up that did "
    "not preempt had an ineligible wakee), so it waits for the 4 ms host tick (dispatch "
    "wait p99 5.6 ms against 22 us under CFS, whose woken entity is placed up to half a "
    "latency behind min_vruntime and preempts at once). Neither a base slice of 0.01 ms "
    "(59) nor, in a test build, saving no negative lag (58) changes it: it is the missing "
    "sleeper credit, not RUN_TO_PARITY. With per-VM groups (on the CFS host) a VM's "
    "shares are split over the pCPUs by its load averages (calc_group_shares on PELT): "
    "its 16 vCPUs being runnable about 55% of the time, a waking vCPU's group entity "
    "weighs about 1/9 of the shares, its wake-up granularity grows about 9-fold while its "
    "sleeper credit does not, and it seldom preempts on wake-up. On today's platform the "
    "same averages make the barrier VM's group entity on a shared pCPU weigh more than "
    "the saturated matmul VM's (its vCPUs runnable about a quarter of the time there; by "
    "the formula about 220 against 64, the matmul VM's shares being spread over 16 fully "
    "loaded pCPUs), which is why both changes together lose less than EEVDF alone. Both "
    "are the kernels' rules (kernel/sched/fair.c place_entity, check_preempt_wakeup*, "
    "calc_group_shares); nothing here is tuned.",
)

# --- 2. APPLE's cost of PLE for one VM alone ---------------------------------------------------

APPLE_MODELS = ("streamcluster", "dedup", "raytrace", "dbench", "kernbench", "ebizzy")
APPLE_QUICK = ("dbench", "kernbench")
PLE: dict[str, tuple[str, ...]] = {"KVM": (), "off": ("host.ple.policy=off",)}

APPLE_POINTS = tuple(
    Point(f"{era} {ple}", "apple/solo.toml", (*ple_ov, *ERAS[era]))
    for era in ERAS
    for ple, ple_ov in PLE.items()
)
SOLO_THROUGHPUT = Col("throughput_per_s", how="sum")

APPLE_THEN_NOW = Repro(
    id="modern-apple",
    system="modern",
    title="APPLE's one VM alone, then and now: KVM's PLE handling vs PLE off",
    points=APPLE_POINTS,
    grid={"vm.0.workload.model": list(APPLE_MODELS)},
    quick_grid={"vm.0.workload.model": list(APPLE_QUICK)},
    rows="vm.0.workload.model",
    # APPLE: PLE handling costs a VM alone up to 8% (kernbench-like) against PLE off.
    published=(Pub("kernbench", 0.92),),
    simulated=Ratio(SOLO_THROUGHPUT, "then KVM", "then off", paired=True),
    columns={
        SIMULATED: SIMULATED_CELL,
        "kvm_over_off_now": Ratio(SOLO_THROUGHPUT, "now KVM", "now off", paired=True),
        "ple_exits_then": Mean(Col("ple_exits"), at="then KVM", as_int=True),
        "ple_exits_now": Mean(Col("ple_exits"), at="now KVM", as_int=True),
    },
    plot=Plot(
        "columns",
        [
            ("simulated", "then (KVM 3.19, Haswell)", "#2f6db5"),
            ("kvm_over_off_now", "now (KVM 6.6, Sapphire Rapids)", "#e07b39"),
        ],
    ),
    source="APPLE's PLE study (the APPLE paper), one VM alone: KVM's PLE "
    "handling costs up to 8% (kernbench-like) against PLE disabled; the 'now' column has "
    "no published value",
    x="workload",
    x_label="workload (one 16-vCPU VM alone on 16 pCPUs)",
    y_label="throughput, KVM's PLE / PLE off",
    seeds=2,
    quick_seeds=1,
    quick_overrides=("run.duration=200ms",),
    tolerance=(0.02, 0.10),
    notes="Scenario `apple/solo.toml` on its platform (kvm-3.19-hsw, preset kvm-default) "
    "and with `preset=kvm-modern host.platform=kvm-6.6-spr`; PLE off is "
    "`host.ple.policy=off`. Judged: kernbench-like's KVM / off on the paper's host "
    "against the published 0.92; the other rows and the 'now' column are reported.",
)

EXPERIMENTS = [GLEANER_THEN_NOW, APPLE_THEN_NOW]
