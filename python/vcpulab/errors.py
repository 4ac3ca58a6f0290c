"""Exceptions of the public API.

When the compiled core is present its exception classes are used, so that errors
raised inside Rust and errors raised by the Python front end are the same type.
"""

from __future__ import annotations

__all__ = [
    "CoreUnavailableError",
    "ScenarioError",
    "SimulationError",
    "UsageError",
    "WorkerLostError",
]

try:
    from vcpulab._core import ScenarioError, SimulationError
except ImportError:  # the extension is not built: keep the pure-Python parts usable

    class ScenarioError(ValueError):  # type: ignore[no-redef]
        """Bad scenario input; the message names the key, the value and what is allowed."""

    class SimulationError(RuntimeError):  # type: ignore[no-redef]
        """Internal failure of the simulator (a bug, not bad input)."""


class UsageError(ValueError):
    """Bad command-line or API usage that is not about the scenario itself."""


class CoreUnavailableError(ImportError):
    """The compiled simulation core (`vcpulab._core`) cannot be imported."""


class WorkerLostError(RuntimeError):
    """A worker process of a sweep's local pool exited abruptly (killed, out of memory,
    or it could not start); the points finished before are kept in the store."""
