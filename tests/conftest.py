from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def core_available() -> bool:
    try:
        from vcpulab import _core  # noqa: F401
    except ImportError:
        return False
    return True


needs_core = pytest.mark.skipif(not core_available(), reason="vcpulab._core is not built")


def default_sigint() -> None:
    """A subprocess's `preexec_fn`: SIGINT's default action. A runner that starts the
    tests as a background job (a non-interactive shell's `&`) leaves SIGINT ignored,
    children inherit that, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


Rows = list[dict[str, str]]


@pytest.fixture(scope="session")
def quick_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One results store for every test that runs reproductions quick: a point any of
    them ran is reused by the others (what `--store` is for, and a point is the same
    report whether run or reused: runs are deterministic). Each test still runs its
    `reproduce`/`validate` command and checks the outputs it writes."""
    return tmp_path_factory.mktemp("quick") / "results.sqlite"


def reproduce_quick(ids: tuple[str, ...], out: Path, store: Path) -> dict[str, tuple[str, Rows]]:
    """`vcpulab reproduce ID... --quick` for `ids` into `out`, in one command with the
    shared results store: each writes its CSV, plot, text and JSON; returns each one's
    lines of the output and CSV rows."""
    import csv

    from test_core import cli

    res = cli("reproduce", *ids, "--quick", "--out", str(out), "--store", str(store))
    assert res.returncode == 0, res.stderr
    # Each reproduction prints its verdict line ("ID: …") and what it wrote.
    lines: dict[str, list[str]] = {}
    current: str | None = None
    for line in res.stdout.splitlines():
        head = line.split(": ", 1)[0]
        if head in ids:
            current = head
            lines.setdefault(head, [])
        if current is not None:
            lines[current].append(line)
    results: dict[str, tuple[str, Rows]] = {}
    for exp_id in ids:
        assert exp_id in lines, (exp_id, res.stdout)
        for ext in ("csv", "png", "txt", "json"):
            assert (out / f"{exp_id}.{ext}").is_file(), (exp_id, ext)
        with (out / f"{exp_id}.csv").open(newline="") as f:
            results[exp_id] = ("\n".join(lines[exp_id]) + "\n", list(csv.DictReader(f)))
    return results


def csv_float(row: dict[str, str], key: str) -> float:
    """A CSV cell as a number (NaN when empty)."""
    import math

    value = row.get(key, "")
    return float(value) if value not in ("", None) else math.nan


@pytest.fixture
def fake_backend():
    import fakecore
    from vcpulab.sweeps import Backend

    return Backend(run=fakecore.run, resolve=fakecore.resolve, version=fakecore.version)
