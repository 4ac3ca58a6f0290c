"""Run the vcpulab CLI against the fake core (for subprocess tests without the real one)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import functools

import fakecore
from vcpulab import _native, sweeps
from vcpulab.cli import main

_native._CORE = fakecore  # type: ignore[assignment]
# Worker processes do not share the patched module: hand them the fake functions.
sweeps.Backend = functools.partial(  # type: ignore[misc]
    sweeps.Backend, run=fakecore.run, resolve=fakecore.resolve, version=fakecore.version
)

if __name__ == "__main__":
    sys.exit(main())
