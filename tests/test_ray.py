"""The Ray executor runs the same points as the local pool and gives the same results."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from conftest import ROOT, TESTS, core_available
from vcpulab.executors import RayExecutor, SerialExecutor
from vcpulab.sweeps import Backend, run_sweep

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[ray]')")

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_executor():
    # Local Ray workers inherit this environment: make the test helpers importable there.
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "python"), str(TESTS), old or "") if p
    )
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.pop("RAY_ADDRESS", None)  # a local Ray, started and stopped here
    ex = RayExecutor(jobs=2)
    try:
        yield ex
    finally:
        ex.close()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _compare(scenario, grid, seeds, backend, ray_executor, **kw) -> None:
    serial = run_sweep(scenario, grid, seeds, backend=backend, executor=SerialExecutor(), **kw)
    on_ray = run_sweep(scenario, grid, seeds, backend=backend, executor=ray_executor, **kw)
    assert on_ray.computed == serial.computed > 0
    pd.testing.assert_frame_equal(serial.frame, on_ray.frame)


def test_ray_equals_local_fake(ray_executor, fake_backend) -> None:
    _compare('name = "r"\n', {"x.y": [1, 2, 3]}, 2, fake_backend, ray_executor)


@pytest.mark.skipif(not core_available(), reason="vcpulab._core is not built")
def test_ray_equals_local_real_core(ray_executor) -> None:
    scenario = ROOT / "scenarios" / "examples" / "xen-slice-sweep.toml"
    _compare(
        scenario,
        {"host.scheduler.slice_ms": [30, 1]},
        2,
        Backend(),
        ray_executor,
        overrides=["run.duration=500ms"],
    )
