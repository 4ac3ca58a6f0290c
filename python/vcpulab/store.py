"""The results store: one SQLite file, crash-safe, keyed by (resolved scenario, seed).

Why SQLite: see docs/results-store.md. Every finished point is committed in its own
transaction, so a sweep killed at any moment (SIGINT, SIGKILL) keeps everything that
had finished; the write-ahead log keeps readers (`vcpulab results ls`) from blocking
a running sweep.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

DEFAULT_STORE = "vcpulab-results.sqlite"
STORE_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- One row per (resolved scenario, seed): the pure function's input and its output.
CREATE TABLE IF NOT EXISTS points (
    key          TEXT PRIMARY KEY,          -- sha256(resolved scenario, seed, core)
    scenario     TEXT,                      -- scenario name, for listing
    seed         INTEGER NOT NULL,
    resolved     TEXT NOT NULL,             -- the resolved scenario (or the input, if it
                                            -- could not be resolved)
    status       TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    error        TEXT,
    report       TEXT,                      -- report JSON (schema 1) when status = 'ok'
    core_version TEXT,                      -- version+build id of the core
    wall_s       REAL,
    created_at   REAL NOT NULL,             -- when this result was written
    attempts     INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS sweeps (
    id          TEXT PRIMARY KEY,
    name        TEXT,
    source      TEXT,                       -- file name or '<text>'
    scenario    TEXT NOT NULL,              -- the input scenario text
    overrides   TEXT NOT NULL,              -- JSON list of base overrides
    grid        TEXT NOT NULL,              -- JSON list of [key, [values...]]
    seeds       TEXT NOT NULL,              -- JSON list of seeds
    table_name  TEXT NOT NULL DEFAULT 'vms',
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sweep_points (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    idx      INTEGER NOT NULL,
    key      TEXT NOT NULL,
    params   TEXT NOT NULL,                 -- JSON object: grid key -> value string
    seed     INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, idx)
);
CREATE INDEX IF NOT EXISTS sweep_points_key ON sweep_points(key);
"""


def point_key(resolved: str, seed: int, core: str | None = None) -> str:
    """The identity of a run: the resolved scenario text, the seed and the core that ran
    it (version + build id), so that a core whose results differ never reuses another's."""
    h = hashlib.sha256()
    h.update(resolved.encode("utf-8"))
    h.update(b"\x00seed=")
    h.update(str(int(seed)).encode("ascii"))
    if core is not None:
        h.update(b"\x00core=")
        h.update(core.encode("utf-8"))
    return h.hexdigest()


@dataclass(frozen=True)
class StoredPoint:
    key: str
    scenario: str | None
    seed: int
    resolved: str
    status: str
    error: str | None
    report: str | None
    core_version: str | None
    wall_s: float | None
    created_at: float
    attempts: int


class StoreError(LookupError):
    pass


_OWN_TABLES = {"meta", "points", "sweeps", "sweep_points"}


class ResultsStore:
    """A SQLite results store. Use one instance per process (writes come from one place)."""

    def __init__(self, path: str | Path = DEFAULT_STORE) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode; transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        try:
            self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open results store {self.path}: {exc}") from None
        self._db.row_factory = sqlite3.Row
        if self.path != ":memory:":
            self._check_before_writing()
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed transaction survives a crash or kill of the
            # process; only an OS crash or power loss may drop the last commits.
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._tx():
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self._db.execute(stmt)
            self._db.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('store_version', ?)",
                (str(STORE_VERSION),),
            )
        version = self._db.execute("SELECT value FROM meta WHERE key='store_version'").fetchone()
        if version and int(version[0]) > STORE_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer vcpulab (store version {version[0]})"
            )

    def _check_before_writing(self) -> None:
        """Refuse a file that is not SQLite, a damaged database (`PRAGMA quick_check`) or
        a SQLite database of another program, before anything is written to it."""
        try:
            tables = {
                str(r[0])
                for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if tables and not tables <= _OWN_TABLES | {"sqlite_sequence"}:
                raise StoreError(
                    f"{self.path} is a SQLite database but not a vcpulab results store "
                    f"(it has tables {', '.join(sorted(tables - _OWN_TABLES))}); "
                    "give another --store"
                )
            if tables and "meta" not in tables:
                raise StoreError(f"{self.path} is not a vcpulab results store (no meta table)")
            check = self._db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(
                f"{self.path} is not a usable results store ({exc}); give another --store"
            ) from None
        except StoreError:
            self._db.close()
            raise
        if check is None or str(check[0]) != "ok":
            self._db.close()
            detail = "" if check is None else str(check[0])[:80]
            raise StoreError(
                f"results store {self.path} is damaged (PRAGMA quick_check: {detail}); "
                "nothing was written to it: restore a backup or give another --store"
            )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ---------------------------------------------------------------------

    def register_sweep(
        self,
        sweep_id: str,
        *,
        name: str | None,
        source: str | None,
        scenario: str,
        overrides: Sequence[str],
        grid: Sequence[tuple[str, Sequence[str]]],
        seeds: Sequence[int],
        table: str,
        points: Iterable[tuple[int, str, Mapping[str, str], int]],
    ) -> None:
        """Record a sweep and its planned points (idx, key, params, seed); idempotent."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO sweeps(id, name, source, scenario, overrides, grid, seeds,"
                " table_name, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(id) DO UPDATE SET updated_at=excluded.updated_at",
                (
                    sweep_id,
                    name,
                    source,
                    scenario,
                    json.dumps(list(overrides)),
                    json.dumps([[k, list(v)] for k, v in grid]),
                    json.dumps(list(seeds)),
                    table,
                    now,
                    now,
                ),
            )
            db.executemany(
                "INSERT OR REPLACE INTO sweep_points(sweep_id, idx, key, params, seed)"
                " VALUES (?,?,?,?,?)",
                [
                    (sweep_id, idx, key, json.dumps(dict(params), sort_keys=True), seed)
                    for idx, key, params, seed in points
                ],
            )

    def record(
        self,
        key: str,
        *,
        seed: int,
        resolved: str,
        status: str,
        scenario: str | None = None,
        report: str | None = None,
        error: str | None = None,
        core_version: str | None = None,
        wall_s: float | None = None,
    ) -> None:
        """Write one finished point in its own transaction."""
        if status not in ("ok", "failed"):
            raise ValueError(f"bad status {status!r}")
        with self._tx() as db:
            db.execute(
                "INSERT INTO points(key, scenario, seed, resolved, status, error, report,"
                " core_version, wall_s, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(key) DO UPDATE SET scenario=excluded.scenario,"
                " seed=excluded.seed, resolved=excluded.resolved, status=excluded.status,"
                " error=excluded.error, report=excluded.report,"
                " core_version=excluded.core_version, wall_s=excluded.wall_s,"
                " created_at=excluded.created_at, attempts=points.attempts + 1",
                (
                    key,
                    scenario,
                    int(seed),
                    resolved,
                    status,
                    error,
                    report,
                    core_version,
                    wall_s,
                    time.time(),
                ),
            )

    def delete_sweep(self, sweep_id: str) -> int:
        """Forget a sweep (its points stay: other sweeps may share them)."""
        with self._tx() as db:
            db.execute("DELETE FROM sweep_points WHERE sweep_id=?", (sweep_id,))
            return db.execute("DELETE FROM sweeps WHERE id=?", (sweep_id,)).rowcount

    # --- reading ---------------------------------------------------------------------

    def finished_keys(self, keys: Iterable[str] | None = None) -> set[str]:
        """Keys of points that finished successfully (failed ones are retried)."""
        rows = self._db.execute("SELECT key FROM points WHERE status='ok'").fetchall()
        done = {r[0] for r in rows}
        return done if keys is None else done & set(keys)

    def get_point(self, key: str) -> StoredPoint | None:
        row = self._db.execute("SELECT * FROM points WHERE key=?", (key,)).fetchone()
        return _point(row) if row else None

    def find_point(self, prefix: str) -> StoredPoint:
        rows = self._db.execute(
            "SELECT * FROM points WHERE key LIKE ? LIMIT 2", (prefix.lower() + "%",)
        ).fetchall()
        if not rows:
            raise StoreError(f"no point with id {prefix!r} in {self.path}")
        if len(rows) > 1:
            raise StoreError(f"point id {prefix!r} is ambiguous in {self.path}")
        return _point(rows[0])

    def points(self) -> list[StoredPoint]:
        return [_point(r) for r in self._db.execute("SELECT * FROM points ORDER BY created_at")]

    def sweeps(self) -> list[dict[str, Any]]:
        return self._sweeps_where("", ())

    def _sweeps_where(self, where: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        """Sweeps with their point counts; `where` filters the sweeps before the join,
        so finding one sweep does not count the points of every other."""
        rows = self._db.execute(
            f"""
            SELECT s.*,
                   COUNT(sp.idx) AS planned,
                   SUM(CASE WHEN p.status='ok' THEN 1 ELSE 0 END) AS ok,
                   SUM(CASE WHEN p.status='failed' THEN 1 ELSE 0 END) AS failed,
                   GROUP_CONCAT(DISTINCT p.core_version) AS cores
            FROM sweeps s
            LEFT JOIN sweep_points sp ON sp.sweep_id = s.id
            LEFT JOIN points p ON p.key = sp.key
            {where}
            GROUP BY s.id
            ORDER BY s.created_at
            """,
            args,
        ).fetchall()
        return [_sweep(r) for r in rows]

    def find_sweep(self, prefix: str) -> dict[str, Any]:
        # Ids are lowercase hex: a prefix match by range uses the primary key's index
        # (LIKE would scan, and '%'/'_' in the prefix would be wildcards).
        lo = prefix.lower()
        matches = self._sweeps_where("WHERE s.id >= ? AND s.id < ?", (lo, lo + "\U0010ffff"))
        if not matches:
            raise StoreError(f"no sweep with id {prefix!r} in {self.path}")
        if len(matches) > 1:
            raise StoreError(f"sweep id {prefix!r} is ambiguous in {self.path}")
        return matches[0]

    def sweep_points(self, sweep_id: str) -> list[dict[str, Any]]:
        """The planned points of a sweep with their stored results (if any)."""
        rows = self._db.execute(
            """
            SELECT sp.idx, sp.key, sp.params, sp.seed, p.status, p.error, p.report,
                   p.created_at, p.wall_s
            FROM sweep_points sp LEFT JOIN points p ON p.key = sp.key
            WHERE sp.sweep_id = ? ORDER BY sp.idx
            """,
            (sweep_id,),
        ).fetchall()
        return [
            {
                "idx": r["idx"],
                "key": r["key"],
                "params": json.loads(r["params"]),
                "seed": r["seed"],
                "status": r["status"],
                "error": r["error"],
                "report": r["report"],
                "created_at": r["created_at"],
                "wall_s": r["wall_s"],
            }
            for r in rows
        ]


def _point(row: sqlite3.Row) -> StoredPoint:
    return StoredPoint(**{k: row[k] for k in row.keys()})  # noqa: SIM118 - sqlite3.Row


def _sweep(row: sqlite3.Row) -> dict[str, Any]:
    out = {k: row[k] for k in row.keys()}  # noqa: SIM118 - sqlite3.Row
    out["overrides"] = json.loads(out["overrides"])
    out["grid"] = [(k, list(v)) for k, v in json.loads(out["grid"])]
    out["seeds"] = json.loads(out["seeds"])
    out["ok"] = int(out["ok"] or 0)
    out["failed"] = int(out["failed"] or 0)
    out["planned"] = int(out["planned"] or 0)
    out["cores"] = sorted(set((out.get("cores") or "").split(",")) - {""})
    return out
