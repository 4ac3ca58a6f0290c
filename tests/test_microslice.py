"""`vcpulab reproduce microslice-…`: the micro-slicing study's five reproductions run
(--quick), write their outputs, and carry the columns the paper's comparisons need."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Rows, core_available, csv_float, needs_core, reproduce_quick

IDS = (
    "microslice-spinlock",
    "microslice-pairs",
    "microslice-mixed",
    "microslice-iperf",
    "microslice-runq",
)


@pytest.fixture(scope="module")
def reproduced(
    tmp_path_factory: pytest.TempPathFactory, quick_store: Path
) -> dict[str, tuple[str, Rows]]:
    if not core_available():
        pytest.skip("vcpulab._core is not built")
    return reproduce_quick(IDS, tmp_path_factory.mktemp("microslice"), quick_store)


_f = csv_float


@needs_core
def test_every_microslice_reproduction_states_a_verdict(
    reproduced: dict[str, tuple[str, Rows]],
) -> None:
    for exp_id, (stdout, rows) in reproduced.items():
        assert f"{exp_id}: " in stdout and "[quick run" in stdout
        assert any(v in stdout for v in ("agrees", "partly", "disagrees")), stdout
        assert rows, exp_id


@needs_core
def test_iperf_csv_has_slice_and_jitter_beside_the_published_values(
    reproduced: dict[str, tuple[str, Rows]],
) -> None:
    _, unordered = reproduced["microslice-iperf"]
    rows = sorted(unordered, key=lambda r: -float(r["slice_ms"]))
    assert [float(r["slice_ms"]) for r in rows] == [30.0, 1.0, 0.1]
    assert [float(r["published"]) for r in rows] == [5.83, 1.23, 0.25]
    for r in rows:
        assert _f(r, "jitter_ms") == _f(r, "simulated")
        assert _f(r, "jitter_mean_ms") > 0 and _f(r, "throughput_mbps") > 0
    # Shorter slices shorten the wait for vCPU 0's turn: jitter falls from 30 to 1 ms.
    assert _f(rows[1], "jitter_ms") < _f(rows[0], "jitter_ms")


@needs_core
def test_runq_distribution_is_a_share_of_time(reproduced: dict[str, tuple[str, Rows]]) -> None:
    _, unordered = reproduced["microslice-runq"]
    rows = sorted(unordered, key=lambda r: float(r["utilization_pct"]))
    assert [float(r["utilization_pct"]) for r in rows] == [50, 60, 70, 80, 90]
    for r in rows:
        assert 0.0 <= _f(r, "simulated") <= 1.0
    # Higher utilization, longer queues.
    assert _f(rows[-1], "mean_length") > _f(rows[0], "mean_length")


@needs_core
def test_a_sub_millisecond_slice_lowers_xens_rate_limit() -> None:
    from vcpulab.experiments.microslice import at_slice

    assert at_slice("30") == ("host.scheduler.slice_ms=30", "host.scheduler.ratelimit_us=1000")
    assert at_slice("0.1") == ("host.scheduler.slice_ms=0.1", "host.scheduler.ratelimit_us=100")
