"""`vcpulab characterize` and the `native-scaling` reproduction (--quick)."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import needs_core


@needs_core
def test_characterize_prints_speedups_per_thread_count() -> None:
    from test_core import cli

    res = cli("characterize", "dedup", "--threads", "1,4", "--param", "scale=0.1", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["threads"] for r in rows] == [1, 4]
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] > 1.0
    # fixed work: the same units at every thread count
    assert rows[0]["work_units"] == rows[1]["work_units"]
    for key in ("idle_per_s_cpu", "wakeups_per_s", "lock_acq_per_s", "tlb_shootdowns_per_s"):
        assert rows[1][key] >= 0.0, key


@needs_core
def test_characterize_function_and_bad_input() -> None:
    import vcpulab
    from test_core import cli

    rows = vcpulab.characterize("streamcluster", (1, 2), params={"scale": 0.1})
    assert len(rows) == 2 and rows[1]["run_s"] < rows[0]["run_s"]
    res = cli("characterize", "no-such-model", "--threads", "1")
    assert res.returncode == 2
    assert "no-such-model" in res.stdout + res.stderr
    res = cli("characterize", "dedup", "--threads", "0")
    assert res.returncode == 2


@needs_core
def test_native_scaling_quick(tmp_path: pytest.TempPathFactory) -> None:
    from test_core import cli

    res = cli("reproduce", "native-scaling", "--quick", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "native-scaling: " in res.stdout
    with (tmp_path / "native-scaling.csv").open(newline="") as f:  # type: ignore[operator]
        rows = {r["point"]: r for r in csv.DictReader(f)}
    assert float(rows["dedup 16/4"]["published"]) == pytest.approx(7.1 / 7.6)
    assert float(rows["dedup 16/1"]["simulated"]) > 1.0
