"""`vcpulab reproduce dcs-…`: DCS's seven reproductions run (--quick), write their
outputs, and their columns carry what the paper's comparisons need."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Rows, core_available, csv_float, needs_core, reproduce_quick

IDS = (
    "dcs-parsec",
    "dcs-utslice-lhp",
    "dcs-utslice-tlb",
    "dcs-allowance",
    "dcs-dedup-pair",
    "dcs-resched-co",
    "dcs-delayed-ipi",
)


@pytest.fixture(scope="module")
def reproduced(
    tmp_path_factory: pytest.TempPathFactory, quick_store: Path
) -> dict[str, tuple[str, Rows]]:
    if not core_available():
        pytest.skip("vcpulab._core is not built")
    return reproduce_quick(IDS, tmp_path_factory.mktemp("dcs"), quick_store)


_f = csv_float


@needs_core
def test_every_dcs_reproduction_states_a_verdict(reproduced: dict[str, tuple[str, Rows]]) -> None:
    for exp_id, (stdout, rows) in reproduced.items():
        assert f"{exp_id}: " in stdout and "[quick run" in stdout
        assert any(v in stdout for v in ("agrees", "partly", "disagrees")), stdout
        assert rows, exp_id


@needs_core
def test_parsec_study_has_every_workload_and_configuration(
    reproduced: dict[str, tuple[str, Rows]],
) -> None:
    from vcpulab.experiments.dcs import CONFIGS, PARSEC_LIKE

    _, rows = reproduced["dcs-parsec"]
    assert [r["workload"] for r in rows] == list(PARSEC_LIKE)
    for r in rows:
        assert _f(r, "throughput_baseline") > 0, r
        for cfg in list(CONFIGS)[1:-1]:
            assert _f(r, f"speedup_{cfg}") > 0, (cfg, r)
        assert _f(r, "x264_vms_DCS_vs_baseline") > 0
    # DCS removes lock-holder preemptions where the baseline has many (streamcluster,
    # vips). Counted over the suite: one quick seed of one workload is too few (dedup
    # has 16 to 106 in the baseline's first second across seeds).
    total = {cfg: sum(_f(r, f"lhp_{cfg}") for r in rows) for cfg in ("baseline", "DCS")}
    assert total["DCS"] < total["baseline"] / 2, total


@needs_core
def test_sweeps_are_judged_against_their_own_reference(
    reproduced: dict[str, tuple[str, Rows]],
) -> None:
    _, tlb = reproduced["dcs-utslice-tlb"]
    assert [float(r["utslice_us"]) for r in tlb] == [100, 250, 500, 1000, 2500, 5000]
    for r in tlb:
        # The judged value is TLB-Co's wait over the baseline's at the same slice.
        ratio = _f(r, "tlb_wait_us") / _f(r, "tlb_wait_baseline_us")
        assert ratio == pytest.approx(_f(r, "simulated"), rel=0.35)
    _, allowance = reproduced["dcs-allowance"]
    assert [float(r["allowance_ms"]) for r in allowance] == [1, 3, 6, 12, 24]
    # Each allowance is judged against the same runs without one (paired), for both VMs.
    # Whether a larger allowance helps the vips-like VM is the full validation's to
    # judge (docs/validation.md, dcs-allowance): one 2 s seed puts the 1 ms and 24 ms
    # points within noise of each other (1.010 and 0.991 on 2026-11-29).
    for r in allowance:
        assert 0.5 < _f(r, "simulated") < 2.0
        assert 0.5 < _f(r, "facesim_ratio") < 2.0
    _, co = reproduced["dcs-resched-co"]
    assert sorted(r["spin"] for r in co) == sorted(["0us", "20us", "100us", "1ms"])
