"""`vcpulab reproduce modern-…`: the then-and-now reproductions run (--quick), judge the
paper's platform against the paper, and report today's platform beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Rows, core_available, csv_float, needs_core, reproduce_quick

IDS = ("modern-gleaner", "modern-apple")


@pytest.fixture(scope="module")
def reproduced(
    tmp_path_factory: pytest.TempPathFactory, quick_store: Path
) -> dict[str, tuple[str, Rows]]:
    if not core_available():
        pytest.skip("vcpulab._core is not built")
    return reproduce_quick(IDS, tmp_path_factory.mktemp("modern"), quick_store)


_f = csv_float


@needs_core
def test_then_is_judged_and_now_is_reported(reproduced: dict[str, tuple[str, Rows]]) -> None:
    now_column = {"modern-gleaner": "speedup_now", "modern-apple": "kvm_over_off_now"}
    for exp_id, (stdout, rows) in reproduced.items():
        assert f"{exp_id}: " in stdout and "[quick run" in stdout
        assert any(v in stdout for v in ("agrees", "partly", "disagrees")), stdout
        assert rows, exp_id
        for row in rows:
            then, now = _f(row, "simulated"), _f(row, now_column[exp_id])
            assert then > 0 and now > 0, (exp_id, row)
        # The judged rows carry a published value; 'now' has none.
        assert any(_f(r, "published") > 0 for r in rows), exp_id


@needs_core
def test_then_and_now_run_on_different_platforms(
    reproduced: dict[str, tuple[str, Rows]],
) -> None:
    # The same workload on the two hosts does not give the same throughput: the 'now'
    # points really ran on today's platform.
    _, rows = reproduced["modern-gleaner"]
    assert all(_f(r, "hlt_now_over_then") != 1.0 for r in rows), rows
