import sqlite3
from pathlib import Path

from vcpulab.store import ResultsStore, point_key


def test_point_key_depends_on_text_and_seed() -> None:
    assert point_key("a", 1) == point_key("a", 1)
    assert point_key("a", 1) != point_key("a", 2)
    assert point_key("a", 1) != point_key("b", 1)
    assert len(point_key("a", 1)) == 64


def test_record_and_read(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with ResultsStore(path) as db:
        db.register_sweep(
            "abc123",
            name="n",
            source="f.toml",
            scenario="text",
            overrides=["a=1"],
            grid=[("k", ["1", "2"])],
            seeds=[1],
            table="vms",
            points=[(0, "k1", {"k": "1"}, 1), (1, "k2", {"k": "2"}, 1)],
        )
        db.record("k1", seed=1, resolved="r1", status="ok", report='{"schema": 1}')
        db.record("k2", seed=1, resolved="r2", status="failed", error="boom")
        assert db.finished_keys() == {"k1"}
        [s] = db.sweeps()
        assert (s["ok"], s["failed"], s["planned"]) == (1, 1, 2)
        assert db.find_sweep("abc")["id"] == "abc123"
        assert db.find_point("k2").error == "boom"
        db.record("k2", seed=1, resolved="r2", status="ok", report="{}")
        assert db.get_point("k2").attempts == 2
        assert db.finished_keys(["k1", "k2", "zz"]) == {"k1", "k2"}
    # WAL mode is persistent in the file; another connection sees committed data.
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 2


def test_point_key_depends_on_the_core() -> None:
    assert point_key("a", 1, "0.1.0+aaaa") != point_key("a", 1, "0.1.0+bbbb")
    assert point_key("a", 1, "0.1.0+aaaa") != point_key("a", 1)
    assert point_key("a", 1, "0.1.0+aaaa") == point_key("a", 1, "0.1.0+aaaa")


def test_find_sweep_by_prefix_counts_only_its_own_points(tmp_path: Path) -> None:
    import pytest

    from vcpulab.store import StoreError

    with ResultsStore(tmp_path / "r.sqlite") as db:
        for sid, keys in (("ab12", ["p1", "p2"]), ("ab34", ["p3"]), ("cd56", ["p4"])):
            db.register_sweep(
                sid,
                name=sid,
                source="f.toml",
                scenario="text",
                overrides=[],
                grid=[("k", [str(i) for i in range(len(keys))])],
                seeds=[1],
                table="vms",
                points=[(i, k, {"k": str(i)}, 1) for i, k in enumerate(keys)],
            )
        for k in ("p1", "p2", "p3", "p4"):
            db.record(k, seed=1, resolved=k, status="ok", report="{}")
        found = db.find_sweep("AB1")
        assert (found["id"], found["planned"], found["ok"]) == ("ab12", 2, 2)
        assert db.find_sweep("cd56")["planned"] == 1
        with pytest.raises(StoreError, match="ambiguous"):
            db.find_sweep("ab")
        for missing in ("ab5", "a%", "a_", "zz", "cd567"):
            with pytest.raises(StoreError, match="no sweep"):
                db.find_sweep(missing)
