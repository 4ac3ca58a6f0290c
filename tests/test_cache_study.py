"""The LLC cache study (run.mode = "cache_study") from Python and the CLI, and its
reproductions with --quick.

The quick runs are too short to judge the published trends; the assertions are what
holds by construction: every file is written, SIP-best (the best static insertion found
by trying every combination, MRU for all included) is never worse than MRU for all, and
bad configurations are refused with exit 2 naming the key.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import ROOT, core_available, needs_core, reproduce_quick

IDS = ("cache-pollution-2to1", "cache-policies-2to1", "cache-policies-4to1")
MIX2 = ROOT / "scenarios" / "cache" / "mix2.toml"
SHORT = ["run.duration=300ms", "run.warmup=50ms"]
Rows = dict[str, dict[str, str]]


@needs_core
def test_llc_table_per_context() -> None:
    from vcpulab import _core

    report = json.loads(_core.run(MIX2.read_text(), SHORT))
    rows = report["llc"]
    assert [r["vm"] for r in rows] == ["a", "b"]
    assert [r["class"] for r in rows] == ["CFR", "THR"]
    for r in rows:
        assert r["cpi"] > 0 and r["cpi_solo"] > 0
        assert r["traffic_bytes_per_ki"] >= r["prefetch_bytes_per_ki"] >= 0
    # Deterministic: the same scenario and seed give the same report.
    assert _core.run(MIX2.read_text(), SHORT) == _core.run(MIX2.read_text(), SHORT)


@needs_core
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("host.pcpus=2", "host.pcpus"),
        ("host.cache.model=footprint", "host.cache.model"),
        ("host.cache.llc.size_kib=3000", "host.cache.llc"),
        ("vm.0.workload.model=dedup", "vm.0.workload.model"),
        ("host.cache.llc.insertion=random", "insertion"),
    ],
)
def test_bad_study_configuration_is_refused(override: str, key: str) -> None:
    from test_core import cli

    res = cli("run", str(MIX2), "--set", override, *(a for s in SHORT for a in ("--set", s)))
    assert res.returncode == 2, res.stdout
    assert key in res.stderr


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory, quick_store: Path) -> dict[str, Rows]:
    if not core_available():
        pytest.skip("vcpulab._core is not built")
    out: Path = tmp_path_factory.mktemp("cache")
    done = reproduce_quick(IDS, out, quick_store)
    return {exp_id: {r["point"]: r for r in rows} for exp_id, (_, rows) in done.items()}


@needs_core
def test_pollution_has_every_mix_and_slice(reproduced: dict[str, Rows]) -> None:
    rows = reproduced["cache-pollution-2to1"]
    for mix in ("CPU-CPU", "CPU-CFR", "CPU-THR", "CFR-CFR", "CFR-THR", "THR-THR"):
        for s in ("30", "1"):
            assert math.isfinite(float(rows[f"2:1 {mix} {s} ms"]["simulated"])), (mix, s)


@needs_core
@pytest.mark.parametrize(("exp_id", "n"), [("cache-policies-2to1", 2), ("cache-policies-4to1", 4)])
def test_sip_best_is_never_worse_than_mru(reproduced: dict[str, Rows], exp_id: str, n: int) -> None:
    rows = reproduced[exp_id]
    for mix in ("CPU-CPU", "CPU-CFR", "CPU-THR", "CFR-CFR", "CFR-THR", "THR-THR"):
        sip = float(rows[f"{n}:1 {mix} sip-best"]["simulated"])
        mru = float(rows[f"{n}:1 {mix} mru"]["simulated"])
        assert sip <= mru + 1e-9, (mix, sip, mru)


@needs_core
def test_whole_host_run_with_llc_profiles() -> None:
    from vcpulab import _core

    base = [*SHORT, "run.mode=consolidated", "host.scheduler.slice_ms=1"]
    fp = json.loads(_core.run(MIX2.read_text(), [*base, "host.cache.model=footprint"]))
    llc = json.loads(_core.run(MIX2.read_text(), [*base, "host.cache.model=llc"]))
    # The thrashing VM (b) has little worth refetching under the profiles, unlike under
    # the footprint model, which charges both classes alike.
    share = {
        name: {v["vm"]: v["cache_refill_ns"] / v["cpu_ns"] for v in r["vms"]}
        for name, r in (("fp", fp), ("llc", llc))
    }
    assert share["llc"]["b"] < share["fp"]["b"] / 5
    assert share["llc"]["a"] > share["llc"]["b"]


@needs_core
def test_whole_host_llc_refuses_insertion_policies() -> None:
    from test_core import cli

    res = cli(
        "run",
        str(MIX2),
        "--set",
        "run.mode=consolidated",
        "--set",
        "host.cache.llc.insertion=preservation",
    )
    assert res.returncode == 2
    assert "host.cache.llc.insertion" in res.stderr
