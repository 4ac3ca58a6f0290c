from __future__ import annotations

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


@pytest.fixture
def fake_backend():
    import fakecore
    from vcpulab.sweeps import Backend

    return Backend(run=fakecore.run, resolve=fakecore.resolve, version=fakecore.version)
