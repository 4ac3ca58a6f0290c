"""A tiny progress bar on stderr: points done, rate and time left (TTY only)."""

from __future__ import annotations

import sys
import time
from typing import Self, TextIO


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
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.total = total
        self.done = initial
        self.initial = initial
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
        if self.initial:
            parts.append(f"({self.initial} from store)")
        if self.failed:
            parts.append(f"{self.failed} failed")
        return "  ".join(parts)

    def draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1 and self.done < self.total:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[2K" + self.line())
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.draw(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
