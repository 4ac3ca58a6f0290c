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


def test_each_reproduction_says_how_many_seeds_its_points_ran(tmp_path: Path) -> None:
    from vcpulab.experiments import ExperimentResult, registry

    exp = registry()["cvs-vor"]
    result = ExperimentResult(
        id=exp.id,
        title=exp.title,
        verdict="agrees",
        detail="test",
        published="p",
        simulated="s",
        csv=None,
        png=None,
        text=None,
        wall_s=0.0,
    )
    for quick, n in ((False, exp.seeds), (True, exp.quick_seeds)):
        md, page = write_reports([result], tmp_path, quick=quick, version="test")
        line = f"- seeds: {n} per point"
        assert line in md.read_text(encoding="utf-8"), (quick, n)
        assert f"Seeds: {n} per point" in page.read_text(encoding="utf-8"), (quick, n)
