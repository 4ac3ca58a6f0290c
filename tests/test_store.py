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
