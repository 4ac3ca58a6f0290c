"""`vcpulab trace`: a trace that shows a lock-holder preemption, checked against the
Chrome trace-event format (the JSON Perfetto's importer reads): slices on pCPU and vCPU
tracks, a state track per vCPU, instants naming the lock, flow arrows that pair up,
counters, a window cut with --from/--to and gzip output."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import ROOT, needs_core
from test_core import cli

PHASES = {"X", "i", "M", "C", "s", "f"}
STATES = {"user", "kernel", "spin", "idle-poll", "hypervisor", "runnable (preempted)", "halted"}


def _check_format(events: list[dict[str, Any]]) -> None:
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and e["pid"] >= 1, e  # pid 0 is the idle task
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name", "thread_sort_index"}
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert e["dur"] > 0 and isinstance(e["tid"], int)
        if e["ph"] == "C":
            assert isinstance(e["args"]["value"], (int, float))
        if e["ph"] in {"s", "f"}:
            assert isinstance(e["id"], int) and e["id"] < 2**53
    starts = Counter(e["id"] for e in events if e["ph"] == "s")
    ends = Counter(e["id"] for e in events if e["ph"] == "f")
    assert all(n == 1 for n in starts.values()) and all(n == 1 for n in ends.values())
    # Every arrow that ends started in the trace.
    assert set(ends) <= set(starts)


@needs_core
def test_trace_shows_a_lock_holder_preemption(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    res = cli(
        "trace",
        str(ROOT / "scenarios/apple/pair.toml"),
        "--set",
        # dbench-like's clients first preempt a journal-lock holder between 30 and
        # 130 ms (at about 44 ms since the guest's and the host's affine wake-ups; the
        # window cut keeps the trace small)
        "run.duration=130ms",
        "--from",
        "30ms",
        "--to",
        "130ms",
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    events = json.loads(out.read_text())["traceEvents"]
    _check_format(events)
    names = [e["name"] for e in events if e["ph"] == "i"]
    lhp = [n for n in names if n.startswith("lock-holder preempted: ")]
    assert lhp, "no lock-holder preemption shown"
    # The instant names the lock and the holder thread.
    assert "(" in lhp[0] and lhp[0].endswith(")")
    states = {e["name"] for e in events if e["ph"] == "X" and e["tid"] >= 100_000}
    assert {"user", "spin", "runnable (preempted)"} <= states <= STATES
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert any(t.endswith(" state") for t in threads) and "pCPU 0" in threads
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert any(c.startswith("run queue pCPU") for c in counters)
    assert any(c.startswith("PLE window") for c in counters)
    assert any(e["ph"] == "s" for e in events), "no flow arrows (IPIs, wake-ups)"


@needs_core
def test_trace_window_and_gzip(tmp_path: Path) -> None:
    scenario = str(ROOT / "scenarios/apple/pair.toml")
    plain, packed = tmp_path / "w.json", tmp_path / "w.json.gz"
    for out in (plain, packed):
        res = cli(
            "trace",
            scenario,
            "--set",
            "run.duration=60ms",
            "--from",
            "20ms",
            "--to",
            "30ms",
            "-o",
            str(out),
        )
        assert res.returncode == 0, res.stderr
    events = json.loads(plain.read_text())["traceEvents"]
    assert json.loads(gzip.decompress(packed.read_bytes()))["traceEvents"] == events
    _check_format(events)
    timed = [e for e in events if e["ph"] != "M"]
    assert timed
    for e in timed:
        assert 20_000 <= e["ts"] < 30_000, e
        if e["ph"] == "X":
            assert e["ts"] + e["dur"] <= 30_000 + 1e-6, e
    bad = cli("trace", scenario, "--from", "30ms", "--to", "20ms", "-o", str(plain))
    assert bad.returncode == 2 and "--to" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("trace", scenario, "--from", "soon", "-o", str(plain))
    assert bad.returncode == 2 and "not a duration" in bad.stderr
    bad = cli("trace", scenario, "-o", str(tmp_path / "t.txt"))
    assert bad.returncode == 2 and ".json.gz" in bad.stderr
