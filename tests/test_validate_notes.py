"""`vcpulab validate` includes the hand-written notes on what changed
(docs/validation-changes.md) after its generated table, and nothing when there are none."""

from __future__ import annotations

from pathlib import Path

from vcpulab.validate import CHANGES_FILE, write_reports


def test_changes_notes_follow_the_table(tmp_path: Path) -> None:
    md, _ = write_reports([], tmp_path, quick=True, version="test")
    assert "What changed" not in md.read_text(encoding="utf-8")
    (tmp_path / CHANGES_FILE).write_text("## What changed\n\nThe barrier fix.\n", encoding="utf-8")
    md, _ = write_reports([], tmp_path, quick=True, version="test")
    text = md.read_text(encoding="utf-8")
    assert "## What changed\n\nThe barrier fix." in text
    assert text.index("|---|") < text.index("## What changed")
