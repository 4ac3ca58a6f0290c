"""`vcpulab reproduce gleaner-...`: Gleaner's application studies, each run with --quick."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from conftest import core_available, needs_core, reproduce_quick

Rows = list[dict[str, str]]

STUDIES = (
    "gleaner-single-vm",
    "gleaner-corun",
    "gleaner-frequency",
    "gleaner-dedup",
    "gleaner-mysql",
    "gleaner-vms",
)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gleaner-apps")


@pytest.fixture(scope="module")
def reproduced(out_dir: Path, quick_store: Path) -> dict[str, tuple[str, Rows]]:
    if not core_available():
        pytest.skip("vcpulab._core is not built")
    return reproduce_quick(STUDIES, out_dir, quick_store)


def _f(row: dict[str, str], key: str) -> float:
    v = row.get(key, "")
    return float(v) if v not in ("", None) else math.nan


@needs_core
@pytest.mark.parametrize("study", STUDIES)
def test_writes_outputs_and_a_verdict(
    reproduced: dict[str, tuple[str, Rows]], out_dir: Path, study: str
) -> None:
    stdout, rows = reproduced[study]
    assert f"{study}: " in stdout
    assert any(v in stdout for v in ("agrees", "partly", "disagrees"))
    for ext in ("csv", "png", "txt", "json"):
        assert (out_dir / f"{study}.{ext}").is_file(), ext
    judged = [r for r in rows if r.get("published")]
    assert judged, "no judged row"
    assert all(r["check"] for r in judged if r.get("simulated"))


@needs_core
def test_single_vm_lists_every_mitigation_and_energy(
    reproduced: dict[str, tuple[str, Rows]],
) -> None:
    rows = reproduced["gleaner-single-vm"][1]
    assert sorted(r["workload"] for r in rows) == ["blackscholes", "canneal", "water_spatial"]
    for r in rows:
        for name in ("HLT", "Gleaner", "idle daemon", "host halt-poll", "guest haltpoll"):
            assert _f(r, f"slowdown_{name}") > 0.5, name
        assert _f(r, "energy_change_pct_HLT") == 0.0
        assert _f(r, "halts_per_s") >= 0
    # The never-sleeping yielding threads keep every pCPU busy: more energy than HLT
    # wherever the workload idles at all.
    idle = [r for r in rows if _f(r, "halts_per_s") > 1000]
    assert idle and all(_f(r, "energy_change_pct_idle daemon") > 0 for r in idle)


@needs_core
def test_corun_reports_weighted_speedup(reproduced: dict[str, tuple[str, Rows]]) -> None:
    rows = reproduced["gleaner-corun"][1]
    assert {r["pair"] for r in rows} == {"water_spatial+matmul", "water_spatial+freqsleep"}
    for r in rows:
        s, co, w = (
            _f(r, "speedup_Gleaner"),
            _f(r, "corunner_speedup_Gleaner"),
            _f(r, "weighted_speedup_Gleaner"),
        )
        assert w == pytest.approx((s + co) / 2)
        assert _f(r, "simulated") == s


@needs_core
def test_frequency_judges_rank_correlations(reproduced: dict[str, tuple[str, Rows]]) -> None:
    rows = reproduced["gleaner-frequency"][1]
    judged = [r for r in rows if r["row"].startswith("rank corr")]
    assert len(judged) == 4
    assert all(-1.0 <= _f(r, "simulated") <= 1.0 for r in judged)
    per_model = [r for r in rows if not r["row"].startswith("rank corr")]
    assert len(per_model) == 3
    for r in per_model:
        # A CPU-bound co-runner never makes a workload faster than running alone.
        assert _f(r, "slowdown +matmul") >= _f(r, "slowdown dedicated") - 1e-9


@needs_core
def test_mysql_and_vms_gains(reproduced: dict[str, tuple[str, Rows]]) -> None:
    mysql = reproduced["gleaner-mysql"][1]
    assert [r["connections"] for r in mysql] == ["16 connections", "48 connections"]
    assert all(_f(r, "throughput_HLT") > 0 for r in mysql)
    vms = reproduced["gleaner-vms"][1]
    assert [r["case"] for r in vms] == ["dedup x1", "dedup x2", "mysql x1", "mysql x2"]
    for r in mysql + vms:
        for name in ("Gleaner", "host halt-poll", "guest haltpoll"):
            assert _f(r, f"gain_{name}") > 0, name


@needs_core
def test_a_run_too_short_for_gleaner_warns_and_sweeps_count_it() -> None:
    import vcpulab

    single = str(Path(__file__).resolve().parents[1] / "scenarios/gleaner/single-vm.toml")
    short = ["vm.0.workload.model=water_spatial", "vm.0.guest.gleaner.mode=gleaner"]
    report = vcpulab.run(single, overrides=short)
    assert len(report.warnings) == 1
    assert "controller measured 0 time(s)" in report.warnings[0]
    hlt = vcpulab.run(single, overrides=short[:1])
    assert hlt.warnings == []
    frame = vcpulab.sweep(
        single,
        {"vm.0.guest.gleaner.mode": ["gleaner", "off"]},
        1,
        overrides=short[:1],
    )
    assert frame.attrs["warned_runs"] == 1
    assert frame.attrs["warnings"] == report.warnings
