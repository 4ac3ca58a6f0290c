"""Progress of a sweep: points done, rate and time left.

Three ways to show it, picked by where it runs: a bar redrawn in place on a terminal;
tqdm's notebook widget (`tqdm.auto`) in Jupyter when tqdm is installed; otherwise (logs,
CI, a notebook without tqdm, the API with `progress=True` on a pipe) one line per step of
10%, never a carriage return, so a log shows each line once.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Self, TextIO


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython with a kernel app), where stderr is no TTY."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    get = getattr(ipython, "get_ipython", None)
    shell = get() if callable(get) else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def _notebook_bar(total: int, initial: int, label: str) -> Any | None:
    try:
        from tqdm.auto import tqdm  # optional: only for notebooks
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, unit=label.rstrip("s") or "point")


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(
        self,
        total: int,
        *,
        initial: int = 0,
        label: str = "points",
        enabled: bool | None = None,
        stream: TextIO | None = None,
        width: int = 24,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if enabled is None:
            enabled = tty or in_notebook()
        self.enabled = enabled
        self._bar = (
            _notebook_bar(total, initial, label) if enabled and not tty and in_notebook() else None
        )
        # Without a terminal, one line per 10% step (and the last one).
        self._in_place = tty
        self._last_step = -1
        self.total = total
        self.done = initial
        self.initial = initial
        self.stored = initial
        self.label = label
        self.width = width
        self.failed = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self.draw(force=True)

    def update(self, n: int = 1, *, failed: bool = False) -> None:
        self.done += n
        if failed:
            self.failed += n
        if self._bar is not None:
            self._bar.update(n)
            if failed:
                self._bar.set_postfix(failed=self.failed)
            return
        self.draw()

    def skip(self, n: int, *, stored: int = 0) -> None:
        """`n` points are done without being computed (`stored` of them found in the
        store, the rest not runnable or repeated): they count toward the total, not
        toward the rate."""
        if n <= 0:
            return
        self.done += n
        self.initial += n
        self.stored += stored
        if self._bar is not None:
            self._bar.update(n)
            return
        self.draw()

    def line(self) -> str:
        frac = self.done / self.total if self.total else 1.0
        filled = round(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.monotonic() - self._start
        computed = self.done - self.initial
        rate = computed / elapsed if elapsed > 0 else 0.0
        remaining = self.total - self.done
        eta = _clock(remaining / rate) if rate > 0 else "?"
        parts = [
            f"{self.done}/{self.total} {self.label}",
            f"[{bar}] {100 * frac:3.0f}%",
            f"{rate:.1f}/s",
            f"elapsed {_clock(elapsed)}",
            f"left {eta}" if remaining else "done",
        ]
        if self.stored:
            parts.append(f"({self.stored} from store)")
        if self.failed:
            parts.append(f"{self.failed} failed")
        return "  ".join(parts)

    def draw(self, force: bool = False) -> None:
        if not self.enabled or self._bar is not None:
            return
        if not self._in_place:
            step = (10 * self.done // self.total) if self.total else 10
            if step == self._last_step and not (force and self.done == self.total):
                return
            if force and self._drawn and step == self._last_step:
                return
            self._last_step = step
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._drawn = True
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1 and self.done < self.total:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[2K" + self.line())
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            return
        if not self._in_place:
            self.draw(force=True)
            return
        if self.enabled and self._drawn:
            self.draw(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
