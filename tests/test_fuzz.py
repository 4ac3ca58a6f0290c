"""Fuzzing the scenario input (issue 19): mutations of the shipped scenario files, each
run in its own subprocess under a time and memory limit. No case may end in a traceback,
an abort (a signal), a hang, or exit 0 after an impossible value was put in.

Fixed seed; about 200 cases on two workers in well under a minute.
"""

from __future__ import annotations

import math
import random
import resource
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, needs_core

tomli_w = pytest.importorskip("tomli_w")

SEED = 19
CASES = 160
WALL_S = 20.0  # a case that takes longer hangs
RUN_TIMEOUT_S = "3"  # the run's own wall-clock budget (--timeout)
MEMORY = 2 << 30

# Values that are wrong for every numeric key of a scenario.
IMPOSSIBLE = [math.nan, math.inf, -math.inf, -1.5, -1]
# Values that may or may not be allowed, depending on the key.
ODD = [0, 1, 2**31, 2**63 - 1, 0.0, 1e300, "", "forever", "x" * 300, True, [], {}, [[1]]]

# The program ops a mutation may splice in (some of them take no time).
OPS = [
    {"count": 1},
    {"yield": 1},
    {"lock": "m"},
    {"unlock": "m"},
    {"barrier": "b"},
    {"parsec_barrier": {"name": "pb", "spin": "10us"}},
    {"sem_post": "s"},
    {"sem_spin_wait": {"sem": "s", "spin": "1ms"}},
    {"lock_spin": {"mutex": "m", "spin": "1000s"}},
    {"push": "q"},
    {"pop": "q"},
    {"compute": "1us"},
    {"dispense": {"tickets": "d", "n": 3, "body": [{"count": 1}]}},
    {"group_flush": {"name": "log", "io": "100us"}},
    {"lock_spin": {"mutex": "w", "spin": "10us", "wake_all": True}},
    {"unlock": "w"},
    {"rw_spin_write": {"lock": "r", "spin": "10us"}},
    {"rw_unlock": "r"},
    {"dispense": {"tickets": "d", "n": 2**62, "mutex": "m", "body": [{"yield": 1}]}},
    {"loop": {"n": "forever", "body": [{"count": 1}]}},
    {"loop": {"n": 2**62, "body": [{"yield": 1}]}},
]


def _sources() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "scenarios").rglob("*.toml")):
        data = tomllib.loads(path.read_text())
        if "vm" in data:
            out.append((path, data))
    return out


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(node, list):
        return [leaf for i, v in enumerate(node) for leaf in _leaves(v, (*path, i))]
    return [(path, node)]


def _set(root: Any, path: tuple[Any, ...], value: Any) -> None:
    node = root
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def mutate(rng: random.Random, data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """One mutation; True when it put in a value no key allows."""
    import copy

    data = copy.deepcopy(data)
    data.setdefault("run", {})["duration"] = rng.choice(["5ms", "20ms", "50ms"])
    data["run"].pop("warmup", None)
    leaves = [(p, v) for p, v in _leaves(data) if p[:2] != ("run", "duration") and p != ("seed",)]
    kind = rng.random()
    if kind < 0.35:
        numeric = [(p, v) for p, v in leaves if isinstance(v, float) and not isinstance(v, bool)]
        if numeric:
            path, _ = rng.choice(numeric)
            _set(data, path, rng.choice(IMPOSSIBLE[:4]))
            return data, True
    if kind < 0.7 and leaves:
        path, _ = rng.choice(leaves)
        _set(data, path, rng.choice(ODD + IMPOSSIBLE))
        return data, False
    if kind < 0.85:
        vm = rng.choice(data["vm"])
        vm["workload"] = {
            "model": "program",
            "group": [
                {
                    "threads": rng.choice([1, 2, 3]),
                    "ops": [rng.choice(OPS) for _ in range(rng.randint(1, 3))],
                }
            ],
        }
        if rng.random() < 0.5:
            vm["workload"]["group"][0]["ops"] = [
                {"loop": {"n": "forever", "body": vm["workload"]["group"][0]["ops"]}}
            ]
        return data, False
    if leaves:
        path, _ = rng.choice(leaves)
        node = data
        for p in path[:-1]:
            node = node[p]
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return data, False


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_case(case: tuple[int, Path, dict[str, Any], bool], tmp: Path) -> str | None:
    i, source, data, impossible = case
    path = tmp / f"case{i}.toml"
    try:
        path.write_text(tomli_w.dumps(data))
    except (TypeError, ValueError):
        return None
    for extra in source.parent.glob("*.trace"):
        target = tmp / extra.name
        if not target.exists():
            target.write_bytes(extra.read_bytes())
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "vcpulab",
                "run",
                str(path),
                "--json",
                "--timeout",
                RUN_TIMEOUT_S,
            ],
            capture_output=True,
            text=True,
            timeout=WALL_S,
            preexec_fn=_limit,
        )
    except subprocess.TimeoutExpired:
        return f"case {i} ({source.name}): hung"
    what = f"case {i} ({source.name}, exit {p.returncode}): {p.stderr.strip()[-400:]}"
    if "Traceback" in p.stderr or p.returncode not in (0, 1, 2):
        return what
    if p.returncode == 1 and "internal error" in p.stderr:
        return what
    if impossible and p.returncode == 0:
        return f"case {i} ({source.name}): an impossible value was accepted"
    if p.returncode != 0 and len([ln for ln in p.stderr.splitlines() if ln.strip()]) != 1:
        return what
    return None


@needs_core
def test_fuzzed_scenarios(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    sources = _sources()
    cases = []
    for i in range(CASES):
        source, data = rng.choice(sources)
        mutated, impossible = mutate(rng, data)
        cases.append((i, source, mutated, impossible))
    with ThreadPoolExecutor(max_workers=2) as pool:
        problems = [p for p in pool.map(lambda c: run_case(c, tmp_path), cases) if p]
    assert not problems, "\n".join(problems[:10])
