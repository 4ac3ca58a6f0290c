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


def reproduce_quick(ids: tuple[str, ...], out: Path) -> dict[str, tuple[str, Rows]]:
    """`vcpulab reproduce ID --quick` for each id into `out`: each writes its CSV, text
    and JSON; returns each one's stdout and CSV rows."""
    import csv

    from test_core import cli

    results: dict[str, tuple[str, Rows]] = {}
    for exp_id in ids:
        res = cli("reproduce", exp_id, "--quick", "--out", str(out))
        assert res.returncode == 0, res.stderr
        for ext in ("csv", "txt", "json"):
            assert (out / f"{exp_id}.{ext}").is_file(), (exp_id, ext)
        with (out / f"{exp_id}.csv").open(newline="") as f:
            results[exp_id] = (res.stdout, list(csv.DictReader(f)))
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
