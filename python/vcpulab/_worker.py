"""What runs inside an executor's worker: one point, never raising.

Kept free of heavy imports (no pandas) so that worker processes start fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

Runner = Callable[[str, list[str], "int | None"], str]


@dataclass(frozen=True)
class PointTask:
    """One pure run: (resolved scenario, seed). Small and picklable."""

    key: str
    scenario: str
    seed: int
    runner: Runner


@dataclass(frozen=True)
class PointResult:
    key: str
    ok: bool
    report: str | None
    error: str | None
    wall_s: float


def execute_point(task: PointTask) -> PointResult:
    start = time.perf_counter()
    try:
        report = task.runner(task.scenario, [], task.seed)
    except Exception as exc:  # noqa: BLE001 - a failed point is data, not a crash
        message = str(exc).strip() or type(exc).__name__
        return PointResult(
            task.key, False, None, f"{type(exc).__name__}: {message}", time.perf_counter() - start
        )
    return PointResult(task.key, True, report, None, time.perf_counter() - start)
