"""A sweep killed mid-way (SIGKILL, SIGINT) loses nothing finished and resumes.

Runs the real `vcpulab` CLI in a subprocess. The 'fake' variant injects the fake core
(slow points on demand); the 'real' variant runs the compiled core when it is built.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT, TESTS, core_available, default_sigint
from vcpulab.store import ResultsStore
from vcpulab.sweeps import collect

FAKE_SCENARIO = 'name = "slow"\n'


def cli(mode: str) -> list[str]:
    if mode == "fake":
        return [sys.executable, str(TESTS / "fake_cli.py")]
    return [sys.executable, "-m", "vcpulab"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "python"), str(TESTS), e.get("PYTHONPATH", "")) if p
    )
    return e


def sweep_args(mode: str, tmp: Path) -> list[str]:
    if mode == "fake":
        scenario = tmp / "slow.toml"
        scenario.write_text(FAKE_SCENARIO)
        return [
            str(scenario),
            "--set",
            "fake.sleep_s=0.25",
            "--grid",
            "x=1,2,3,4,5,6",
            "--seeds",
            "2",
            "-j",
            "2",
        ]
    # Long enough simulated runs that each point takes about 0.4 s of wall time here, so
    # that the sweep can be killed half-way whatever the speed of the engine.
    scenario = ROOT / "scenarios" / "examples" / "weights-1-1-2-4.toml"
    base = _seconds_for(scenario, 0.4)
    durations = ",".join(f"{base + 10 * i}s" for i in range(4))
    return [
        str(scenario),
        "--grid",
        f"run.duration={durations}",
        "--seeds",
        "2",
        "-j",
        "2",
        "--metric",
        "cpu_share",
    ]


_CALIBRATED: dict[Path, int] = {}


def _seconds_for(scenario: Path, wall_s: float) -> int:
    """Simulated seconds of `scenario` that take about `wall_s` of wall time."""
    if scenario not in _CALIBRATED:
        import vcpulab

        probe = 100
        start = time.perf_counter()
        vcpulab.run(scenario, overrides=[f"run.duration={probe}s"])
        elapsed = max(time.perf_counter() - start, 1e-4)
        _CALIBRATED[scenario] = int(min(max(probe * wall_s / elapsed, 100), 100_000))
    return _CALIBRATED[scenario]


def ok_points(store: Path) -> dict[str, tuple[float, int]]:
    if not store.exists():
        return {}
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        rows = con.execute(
            "SELECT key, created_at, attempts FROM points WHERE status='ok'"
        ).fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        return {}
    finally:
        con.close()
    return {k: (c, a) for k, c, a in rows}


def start(mode: str, tmp: Path, store: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*cli(mode), "sweep", *sweep_args(mode, tmp), "--store", str(store), "--json"],
        env=env(),
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def wait_for_points(proc: subprocess.Popen[bytes], store: Path, n: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if len(ok_points(store)) >= n:
            return
        if proc.poll() is not None:
            pytest.fail(f"sweep ended before it could be killed: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    pytest.fail(f"fewer than {n} points finished within {limit} s")


def finish(mode: str, tmp: Path, store: Path) -> dict:
    out = subprocess.run(
        [*cli(mode), "sweep", *sweep_args(mode, tmp), "--store", str(store), "--json"],
        env=env(),
        cwd=tmp,
        capture_output=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr.decode()
    return json.loads(out.stdout)


def frame(store: Path, sweep_id: str) -> pd.DataFrame:
    with ResultsStore(store) as db:
        df, failed = collect(db, sweep_id)
    assert not failed
    df.attrs = {}
    return df


MODES = [
    "fake",
    pytest.param("real", marks=pytest.mark.skipif(not core_available(), reason="no core")),
]


@pytest.mark.parametrize("mode", MODES)
def test_sigkill_then_resume(mode: str, tmp_path: Path) -> None:
    store = tmp_path / "killed.sqlite"
    proc = start(mode, tmp_path, store)
    try:
        wait_for_points(proc, store, 3, limit=120)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = ok_points(store)
    assert len(before) >= 3

    resumed = finish(mode, tmp_path, store)
    total = resumed["points"]
    assert len(before) < total, "the sweep finished before it was killed; slow it down"
    assert resumed["from_store"] == len(before)
    assert resumed["computed"] == total - len(before)
    after = ok_points(store)
    assert len(after) == total
    for key, (created_at, attempts) in before.items():
        assert after[key] == (created_at, attempts), "a finished point was recomputed"

    clean_store = tmp_path / "clean.sqlite"
    clean = finish(mode, tmp_path, clean_store)
    assert clean["computed"] == total
    assert clean["sweep_id"] == resumed["sweep_id"]
    pd.testing.assert_frame_equal(
        frame(store, resumed["sweep_id"]), frame(clean_store, clean["sweep_id"])
    )
    assert resumed["summary"] == clean["summary"]


def test_sigint_keeps_finished_points(tmp_path: Path) -> None:
    store = tmp_path / "int.sqlite"
    proc = start("fake", tmp_path, store)
    try:
        wait_for_points(proc, store, 2, limit=120)
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C on a terminal: the whole group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err.decode()
    assert "run the same command again to resume" in err.decode()
    assert "Traceback" not in err.decode()
    kept = ok_points(store)
    assert len(kept) >= 2
    resumed = finish("fake", tmp_path, store)
    assert resumed["from_store"] == len(kept)
