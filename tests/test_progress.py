"""Sweep progress: a bar redrawn in place on a terminal, one line per 10% elsewhere."""

from __future__ import annotations

import io

from vcpulab.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_terminal_each_step_is_one_line() -> None:
    out = io.StringIO()
    with Progress(200, enabled=True, stream=out) as bar:
        for _ in range(200):
            bar.update()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    # 0%, 10%, …, 100%: eleven lines, each printed once.
    assert len(lines) == 11
    assert lines[0].startswith("0/200 points") and lines[-1].startswith("200/200 points")
    assert len(set(lines)) == len(lines)


def test_on_a_terminal_the_bar_is_redrawn_in_place() -> None:
    out = _Tty()
    with Progress(3, stream=out) as bar:
        for _ in range(3):
            bar.update()
    text = out.getvalue()
    assert text.count("\r\x1b[2K") >= 2 and text.endswith("\n")
    assert "3/3 points" in text


def test_auto_is_quiet_on_a_pipe_outside_notebooks() -> None:
    out = io.StringIO()
    with Progress(5, stream=out) as bar:
        bar.update(5)
    assert out.getvalue() == ""
