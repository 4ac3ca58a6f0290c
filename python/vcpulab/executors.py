"""Executors: where the independent points of a sweep run.

The sweep code only calls `map_unordered(fn, items)` and reads results as they finish;
it does not know whether they ran in this process, a local process pool or on Ray.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Self, TypeVar

from vcpulab.errors import UsageError, WorkerLostError

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")
WORKER_LOST = (
    "a worker process of the local pool exited abruptly: killed (out of memory?) or "
    "unable to start. The points finished before are kept in the store, if one is "
    "given. A script that calls vcpulab.sweep with more than one job must call it under "
    '`if __name__ == "__main__":` — the workers start by importing the main module'
)
RAY_INSTALL_HINT = (
    "the Ray executor needs Ray: install it with `pip install 'vcpulab[ray]'` "
    "(or `pip install 'ray[default]'`)"
)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _ignore_sigint() -> None:
    # Ctrl-C goes to the whole process group: let only the parent react to it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Executor(ABC):
    """Runs a picklable function over items; yields results in completion order."""

    name = "executor"

    @abstractmethod
    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]: ...

    def close(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release workers; the executor may not be used afterwards."""

    def describe(self) -> str:
        return self.name

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SerialExecutor(Executor):
    """In this process, one item after another (`--jobs 1`)."""

    name = "serial"

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)


class LocalExecutor(Executor):
    """A local process pool (`concurrent.futures.ProcessPoolExecutor`)."""

    name = "local"

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs if jobs and jobs > 0 else default_jobs()
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # forkserver: workers fork from a clean, single-threaded server process rather
            # than from this one (which may hold pandas/Arrow thread pools).
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["vcpulab._worker"])
            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs, mp_context=ctx, initializer=_ignore_sigint
            )
        return self._pool

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        if not items:
            return
        pool = self._get_pool()
        # Keep a bounded number of points in flight so that an interrupted sweep has
        # little queued work to throw away and memory stays flat for huge sweeps.
        window = self.jobs * 2
        it = iter(items)
        pending: set[Future[R]] = set()
        try:
            for item in it:
                pending.add(pool.submit(fn, item))
                if len(pending) >= window:
                    break
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
                for item in it:
                    pending.add(pool.submit(fn, item))
                    if len(pending) >= window:
                        break
        except BrokenProcessPool as exc:
            # A broken pool accepts nothing more: the next sweep starts a new one.
            self._pool = None
            raise WorkerLostError(WORKER_LOST) from exc
        finally:
            for fut in pending:
                fut.cancel()

    def describe(self) -> str:
        return f"local process pool, {self.jobs} workers"

    def abort(self) -> None:
        """Stop at once (Ctrl-C): running points are thrown away, finished ones are stored."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class RayExecutor(Executor):
    """Ray tasks on the cluster named by `RAY_ADDRESS`, or on a local Ray started here."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        try:
            import ray
        except ImportError as exc:
            raise UsageError(RAY_INSTALL_HINT) from exc
        self._ray: Any = ray
        self.address = address if address is not None else os.environ.get("RAY_ADDRESS") or None
        self._owns = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "ignore_reinit_error": True,
                "log_to_driver": False,
                "configure_logging": True,
                "logging_level": "ERROR",
            }
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs["include_dashboard"] = False
                if jobs:
                    kwargs["num_cpus"] = jobs
            ray.init(**kwargs)
            self._owns = True

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        if not items:
            return
        ray = self._ray
        remote = ray.remote(num_cpus=1)(fn)
        pending = [remote.remote(item) for item in items]
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    yield ray.get(ref)
        finally:
            for ref in pending:
                # Best effort: the cluster may already be gone.
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)

    def describe(self) -> str:
        where = self.address or "local Ray"
        return f"Ray ({where})"

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False


def make_executor(name: str = "local", jobs: int | None = None) -> Executor:
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise UsageError(f"jobs: {jobs!r} is not allowed; expected a whole number of at least 1")
    if name == "local":
        if jobs == 1:
            return SerialExecutor()
        return LocalExecutor(jobs)
    if name == "serial":
        return SerialExecutor()
    if name == "ray":
        return RayExecutor(jobs=jobs)
    raise UsageError(f"unknown executor {name!r}: allowed values are {', '.join(EXECUTORS)}")
