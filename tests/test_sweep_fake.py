"""Sweep plumbing against the injected fake core (no simulation)."""

from pathlib import Path

import pandas as pd
import pytest

import vcpulab
from vcpulab.executors import LocalExecutor, SerialExecutor
from vcpulab.sweeps import normalize_grid, parse_grid_arg, run_sweep, summarize

SCENARIO = 'name = "fake"\n'
GRID = {"host.scheduler.slice_ms": [30, 1], "vm.1.weight": ["256", "512"]}


def test_grid_parsing() -> None:
    assert parse_grid_arg("a.b=1, 2,3") == ("a.b", ["1", "2", "3"])
    assert normalize_grid({"a": [0.1, 30]}) == [("a", ["0.1", "30"])]
    assert normalize_grid(["a=1,2", "b=x"]) == [("a", ["1", "2"]), ("b", ["x"])]
    with pytest.raises(vcpulab.UsageError):
        normalize_grid(["a=1", "a=2"])
    with pytest.raises(vcpulab.UsageError):
        parse_grid_arg("a=1,,2")


def test_frame_shape_and_columns(fake_backend) -> None:
    df = vcpulab.sweep(SCENARIO, GRID, 3, backend=fake_backend, jobs=1)
    # 2 x 2 grid points x 3 seeds x 2 VMs
    assert len(df) == 24
    assert {"host.scheduler.slice_ms", "vm.1.weight", "seed", "vm", "cpu_share"} <= set(df.columns)
    assert sorted(df["seed"].unique()) == [7, 8, 9]  # from the scenario's seed (fake: 7)
    assert df["host.scheduler.slice_ms"].dtype.kind in "if"
    assert df.attrs["computed"] == 12
    summ = summarize(df)
    assert len(summ) == 8 and (summ["n"] == 3).all()
    assert {"cpu_share_mean", "cpu_share_ci95"} <= set(summ.columns)


def test_explicit_seeds_and_overrides(fake_backend) -> None:
    df = vcpulab.sweep(
        SCENARIO, None, [11, 3], overrides={"run.duration": "1s"}, backend=fake_backend, jobs=1
    )
    assert sorted(df["seed"].unique()) == [3, 11]


def test_resume_skips_finished_points(tmp_path: Path, fake_backend) -> None:
    store = tmp_path / "r.sqlite"
    first = run_sweep(SCENARIO, GRID, 2, store=store, backend=fake_backend, executor="serial")
    assert (first.computed, first.skipped) == (8, 0)
    again = run_sweep(SCENARIO, GRID, 2, store=store, backend=fake_backend, executor="serial")
    assert (again.computed, again.skipped) == (0, 8)
    pd.testing.assert_frame_equal(first.frame, again.frame)
    # A bigger sweep reuses the points it shares with the first one.
    bigger = run_sweep(SCENARIO, GRID, 3, store=store, backend=fake_backend, executor="serial")
    assert (bigger.computed, bigger.skipped) == (4, 8)
    forced = run_sweep(
        SCENARIO, GRID, 2, store=store, backend=fake_backend, executor="serial", force=True
    )
    assert forced.computed == 8


def test_failed_points_are_recorded_and_sweep_goes_on(tmp_path: Path, fake_backend) -> None:
    store = tmp_path / "r.sqlite"
    grid = {"fake.fail": ["1"], "x.y": ["1", "2"]}
    out = run_sweep(
        SCENARIO, {"x.y": ["1", "2"]}, 1, store=store, backend=fake_backend, executor="serial"
    )
    assert not out.failed
    out = run_sweep(SCENARIO, grid, 2, store=store, backend=fake_backend, executor="serial")
    assert len(out.failed) == 4 and out.frame.empty
    assert "fake failure requested" in out.failed[0]["error"]


def test_unresolvable_grid_is_scenario_error(fake_backend) -> None:
    with pytest.raises(vcpulab.ScenarioError, match=r"bad\.key"):
        vcpulab.sweep(SCENARIO, {"bad.key": [1, 2]}, 1, backend=fake_backend, jobs=1)


def test_partly_unresolvable_grid_records_failures(fake_backend) -> None:
    # Only some values are rejected: those points fail with the message, the others run.
    df = vcpulab.sweep(SCENARIO, ["x.y=1,invalid,2"], 1, backend=fake_backend, jobs=1)
    assert len(df) == 4
    [failed] = df.attrs["failed"]
    assert failed["params"] == {"x.y": "invalid"}
    assert failed["error"].startswith("ScenarioError: ")


def test_process_pool_equals_serial(fake_backend) -> None:
    serial = run_sweep(SCENARIO, GRID, 2, backend=fake_backend, executor=SerialExecutor())
    with LocalExecutor(2) as ex:
        pool = run_sweep(SCENARIO, GRID, 2, backend=fake_backend, executor=ex)
    pd.testing.assert_frame_equal(serial.frame, pool.frame)


def test_a_worker_that_dies_is_a_clear_error_and_the_pool_starts_anew() -> None:
    import os

    with LocalExecutor(2) as ex:
        with pytest.raises(vcpulab.WorkerLostError, match="__name__"):
            list(ex.map_unordered(os._exit, [3]))
        # The broken pool is dropped: the executor works again.
        assert sorted(ex.map_unordered(abs, [-2, 1])) == [1, 2]


def test_a_script_without_the_main_guard_is_told_so(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "noguard.py"
    script.write_text(
        "import vcpulab\n"
        "from vcpulab.executors import LocalExecutor\n"
        "with LocalExecutor(2) as ex:\n"
        "    print(sorted(ex.map_unordered(abs, [-1, -2])))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    assert "WorkerLostError" in done.stderr
    assert 'if __name__ == "__main__":' in done.stderr


def test_a_different_core_does_not_reuse_stored_results(tmp_path: Path) -> None:
    import fakecore
    from vcpulab.store import ResultsStore
    from vcpulab.sweeps import Backend

    store = tmp_path / "r.sqlite"

    def backend(core: str) -> Backend:
        return Backend(run=fakecore.run, resolve=fakecore.resolve, version=lambda: core)

    first = run_sweep(SCENARIO, GRID, 1, store=store, backend=backend("1+aa"), executor="serial")
    same = run_sweep(SCENARIO, GRID, 1, store=store, backend=backend("1+aa"), executor="serial")
    other = run_sweep(SCENARIO, GRID, 1, store=store, backend=backend("1+bb"), executor="serial")
    assert (first.computed, same.computed, same.skipped) == (4, 0, 4)
    assert (other.computed, other.skipped) == (4, 0)
    with ResultsStore(store) as db:
        [sweep] = db.sweeps()
        # The sweep's points are now those of the newer core; the old ones stay stored.
        assert sweep["cores"] == ["1+bb"]
        assert {p.core_version for p in db.points()} == {"1+aa", "1+bb"}


def test_sweeps_are_planned_stored_and_run_in_chunks(
    tmp_path: Path, fake_backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fakecore
    from vcpulab import sweeps
    from vcpulab.sweeps import Backend

    monkeypatch.setattr(sweeps, "CHUNK_POINTS", 3)
    store = tmp_path / "r.sqlite"
    whole = run_sweep(SCENARIO, GRID, 2, store=tmp_path / "w.sqlite", backend=fake_backend)
    chunked = run_sweep(SCENARIO, GRID, 2, store=store, backend=fake_backend, executor="serial")
    assert (chunked.planned, chunked.computed) == (8, 8)
    pd.testing.assert_frame_equal(whole.frame, chunked.frame)

    # Killed in the third chunk: the two finished chunks are kept, and the rerun
    # computes only the rest.
    calls = {"n": 0}

    def dies_on_the_seventh(text, overrides, seed):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return fakecore.run(text, overrides, seed)

    store2 = tmp_path / "k.sqlite"
    dying = Backend(run=dies_on_the_seventh, resolve=fakecore.resolve, version=fakecore.version)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(SCENARIO, GRID, 2, store=store2, backend=dying, executor="serial")
    again = run_sweep(SCENARIO, GRID, 2, store=store2, backend=fake_backend, executor="serial")
    assert (again.skipped, again.computed) == (6, 2)
