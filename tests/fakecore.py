"""A stand-in for the compiled core, injected into pure-Python tests (never shipped).

`resolve` echoes the scenario with its overrides and seed; `run` makes a small schema-1
report whose numbers depend only on (resolved text, seed). Special override keys:
`fake.sleep_s` (seconds to sleep per run), `fake.fail` (raise), `bad.*` (rejected).
"""

from __future__ import annotations

import hashlib
import json
import random
import time

from vcpulab.errors import ScenarioError, SimulationError


def resolve(text: str, overrides: list[str], seed: int | None) -> str:
    for item in overrides:
        key, value = item.split("=", 1)
        if key.startswith("bad.") or value == "invalid":
            raise ScenarioError(f"unknown key {key!r} (value {value!r}); allowed: host, vm, run")
    lines = [f"seed = {seed if seed is not None else 7}", text.strip(), "# overrides"]
    lines += [f"# {o}" for o in sorted(overrides)]
    return "\n".join(lines) + "\n"


def explain(text: str, overrides: list[str], seed: int | None) -> str:
    return resolve(text, overrides, seed)


def _params(resolved: str) -> dict[str, str]:
    out = {}
    for line in resolved.splitlines():
        if line.startswith("# ") and "=" in line:
            k, v = line[2:].split("=", 1)
            out[k] = v
    return out


def run(text: str, overrides: list[str], seed: int | None) -> str:
    resolved = text if "# overrides" in text else resolve(text, overrides, seed)
    params = _params(resolved)
    if "fake.fail" in params:
        raise SimulationError("fake failure requested")
    if "fake.sleep_s" in params:
        time.sleep(float(params["fake.sleep_s"]))
    digest = hashlib.sha256(f"{resolved}|{seed}".encode()).digest()
    rng = random.Random(digest)
    slice_ms = float(params.get("host.scheduler.slice_ms", "30"))
    vms = []
    for i, w in enumerate((1, 3)):
        share = w / 4 + rng.uniform(-0.01, 0.01)
        vms.append(
            {
                "vm": f"vm{i}",
                "vcpus": 2,
                "weight": w,
                "cap_pct": None,
                "user_ns": int(share * 1e9),
                "kernel_ns": 0,
                "spin_ns": 0,
                "idle_poll_ns": 0,
                "halted_ns": 0,
                "runnable_ns": int((1 - share) * 1e9),
                "overhead_ns": 1000,
                "cpu_ns": int(share * 1e9),
                "cpu_share": share,
                "entitlement": w / 4,
                "share_ratio": share / (w / 4),
                "finished": True,
                "completion_ns": 10**9,
                "work_units": 100,
                "throughput_per_s": 100.0,
                "vcpu_switches": 10,
                "halts": 0,
                "wakes": 5,
                "idle_transitions_per_s": 0.0,
                "wake_latency_mean_ns": slice_ms * 5e5,
                "wake_latency_p50_ns": int(slice_ms * 4e5),
                "wake_latency_p99_ns": int(slice_ms * 1e6),
            }
        )
    report = {
        "schema": 1,
        "scenario": {
            "name": "fake",
            "seed": seed,
            "preset": None,
            "scheduler": "credit",
            "pcpus": 1,
            "duration_ns": 10**9,
        },
        "end_ns": 10**9,
        "stop_reason": "duration",
        "events": 1234,
        "vms": vms,
        "vcpus": [
            {
                "vm": v["vm"],
                "vcpu": j,
                "user_ns": 1,
                "switches": 3,
                "migrations": 0,
                "halts": 0,
                "wakes": 0,
            }
            for v in vms
            for j in range(2)
        ],
        "pcpus": [
            {"pcpu": 0, "guest_ns": 10**9 - 2000, "overhead_ns": 2000, "idle_ns": 0, "poll_ns": 0}
        ],
        "fairness": {"jain_index": 0.99},
        "histograms": {
            "wake_latency": {
                "count": 10,
                "mean_ns": 5.0,
                "p50_ns": 4,
                "p90_ns": 8,
                "p99_ns": 9,
                "max_ns": 10,
                "buckets": [[0, 4, 5], [4, 16, 5]],
            }
        },
    }
    return json.dumps(report)


def version() -> str:
    return "fake-0"


def trace(
    text: str,
    out_path: str,
    overrides: list[str],
    seed: int | None,
    window_from: str | None = None,
    window_to: str | None = None,
) -> str:
    report = run(text, overrides, seed)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump({"traceEvents": []}, fh)
    return report


def presets() -> list[tuple[str, str]]:
    return [("fake-preset", "a preset of the fake core")]


def workloads() -> list[tuple[str, str]]:
    return [("fake-bomb", "a CPU bomb of the fake core")]


def platforms() -> list[tuple[str, str]]:
    return [("fake-host", "a host platform of the fake core")]


def kernels() -> list[tuple[str, str]]:
    return [("fake-linux", "a guest kernel of the fake core")]


def split_histograms(report_json: str) -> tuple[str, str | None]:
    data = json.loads(report_json)
    hists = data.pop("histograms", None)
    return json.dumps(data), None if hists is None else json.dumps(hists)
