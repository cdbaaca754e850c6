"""Read-only SQL for the TUI, written for databases of 10^5 runs and more.

Nothing here imports textual: the app calls these from thread workers, the
benchmark and tests call them directly. Every list is paged by keyset
(``r.id < before``, newest first, ~200 rows a page), so no query ever
materialises the whole runs table; best pp/tg are correlated lookups on
``throughput(run_id, test)`` evaluated only for the rows of the page.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from sqlite_utils import Database

PAGE_SIZE = 200
NOT_DIAGNOSED = "-"  # the filter value (verdict or environment) for "none recorded"
BUSY_TIMEOUT_MS = 5_000


@dataclass(frozen=True)
class RunFilter:
    text: str = ""
    verdict: str | None = None
    device: str | None = None
    environment: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.text.strip() or self.verdict or self.device or self.environment)


@dataclass
class RunRow:
    id: int
    created_at: str
    source: str
    program: str | None
    device: str | None
    model: str | None
    verdict: str | None
    fixable: bool
    environment: str | None
    best_pp: float | None
    best_tg: float | None


@dataclass
class Facets:
    total: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    devices: list[tuple[str, int]] = field(default_factory=list)
    environments: list[tuple[str, int]] = field(default_factory=list)


# The page is chosen on ids alone (an inner query that the covering indexes of
# migration m004 answer without touching the wide rows), then only those ids
# are joined to their columns and best pp/tg.
_ROW_SQL = (
    "SELECT r.id, r.created_at, s.path, r.program, r.device_name, r.model, d.verdict, d.fixable, d.environment, "
    "(SELECT MAX(t.tok_s) FROM throughput t WHERE t.run_id = r.id AND (t.test LIKE 'pp%' OR t.test = 'prompt')), "
    "(SELECT MAX(t.tok_s) FROM throughput t WHERE t.run_id = r.id AND (t.test LIKE 'tg%' OR t.test = 'generation')) "
    "FROM ({ids}) p JOIN runs r ON r.id = p.id JOIN sources s ON s.id = r.source_id "
    "LEFT JOIN diagnoses d ON d.run_id = r.id ORDER BY r.id DESC"
)


def _like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _where(flt: RunFilter) -> tuple[list[str], list[Any], bool]:
    """Conditions on runs ``r`` (and diagnoses ``d`` when the third value is
    True). A word of the text matches device, program, model, source path or
    verdict; the last two through one-off subqueries, not per-row joins."""
    where: list[str] = []
    args: list[Any] = []
    esc = " ESCAPE '\\'"
    for word in flt.text.split():
        pat = _like(word)
        cond = (f"(r.device_name LIKE ?{esc} OR r.program LIKE ?{esc} OR r.model LIKE ?{esc} "
                f"OR r.source_id IN (SELECT id FROM sources WHERE path LIKE ?{esc}) "
                f"OR r.id IN (SELECT run_id FROM diagnoses WHERE verdict LIKE ?{esc})")
        args.extend([pat] * 5)
        if word.lstrip("#").isdigit():
            cond += " OR r.id = ?"
            args.append(int(word.lstrip("#")))
        where.append(cond + ")")
    if flt.device == NOT_DIAGNOSED:
        where.append("r.device_name IS NULL")
    elif flt.device:
        where.append("r.device_name = ?")
        args.append(flt.device)
    joins_d = False
    for column, value in (("verdict", flt.verdict), ("environment", flt.environment)):
        if value == NOT_DIAGNOSED:
            where.append(f"d.{column} IS NULL")
            joins_d = True
        elif value:
            where.append(f"d.{column} = ?")
            args.append(value)
            joins_d = True
    return where, args, joins_d


def _from(joins_d: bool) -> str:
    return "FROM runs r" + (" LEFT JOIN diagnoses d ON d.run_id = r.id" if joins_d else "")


def page(conn: sqlite3.Connection, flt: RunFilter, *, before: int | None = None,
         limit: int = PAGE_SIZE) -> list[RunRow]:
    """One page of runs matching ``flt``, newest first, with ids below ``before``."""
    where, args, joins_d = _where(flt)
    if before is not None:
        where.append("r.id < ?")
        args.append(before)
    ids = (f"SELECT r.id {_from(joins_d)}" + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY r.id DESC LIMIT ?")
    args.append(int(limit))
    return [RunRow(id=r[0], created_at=r[1], source=r[2], program=r[3], device=r[4], model=r[5], verdict=r[6],
                   fixable=bool(r[7]), environment=r[8], best_pp=r[9], best_tg=r[10])
            for r in conn.execute(_ROW_SQL.format(ids=ids), args)]


def count(conn: sqlite3.Connection, flt: RunFilter) -> int:
    if not flt.active:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    where, args, joins_d = _where(flt)
    return conn.execute(f"SELECT COUNT(*) {_from(joins_d)} WHERE " + " AND ".join(where), args).fetchone()[0]


def facets(conn: sqlite3.Connection, max_devices: int = 60) -> Facets:
    """Values for the filter selects, with their counts."""
    out = Facets(total=conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    out.verdicts = dict(conn.execute("SELECT verdict, COUNT(*) FROM diagnoses GROUP BY verdict"))
    out.devices = [(name if name is not None else NOT_DIAGNOSED, n) for name, n in conn.execute(
        "SELECT device_name, COUNT(*) FROM runs GROUP BY device_name ORDER BY 2 DESC, 1 LIMIT ?", (max_devices,))]
    out.environments = [(env if env is not None else NOT_DIAGNOSED, n) for env, n in conn.execute(
        "SELECT environment, COUNT(*) FROM diagnoses GROUP BY environment ORDER BY 2 DESC")]
    return out


def baseline_for(conn: sqlite3.Connection, run_id: int, model: str | None, diagnosis: dict | None) -> int | None:
    """The bare-metal run the diagnosis measured this run against (same model and quantization,
    same host chip; see analyzer.rules.baseline), or None. Never guessed here: a run of another
    machine is no baseline."""
    base = (diagnosis or {}).get("baseline") or {}
    rid = base.get("run")
    return rid if isinstance(rid, int) and rid != run_id else None


def neighbour(conn: sqlite3.Connection, run_id: int, flt: RunFilter, older: bool) -> int | None:
    """The next run in list order (older = further down the list)."""
    where, args, joins_d = _where(flt)
    where.append("r.id < ?" if older else "r.id > ?")
    args.append(run_id)
    sql = (f"SELECT r.id {_from(joins_d)} WHERE " + " AND ".join(where)
           + f" ORDER BY r.id {'DESC' if older else 'ASC'} LIMIT 1")
    row = conn.execute(sql, args).fetchone()
    return row[0] if row else None


class Store:
    """Connections for worker threads. Each worker opens its own short-lived
    connection (cheap with SQLite); the change poll keeps one, because
    ``PRAGMA data_version`` only moves relative to a connection."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._poll_conn: sqlite3.Connection | None = None
        self._poll_lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
                               isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute("PRAGMA query_only = ON")
            yield conn
        finally:
            conn.close()

    @contextmanager
    def database(self) -> Iterator[Database]:
        """A sqlite-utils Database for the core's readers (load_run, build_plan)."""
        from sqlite_utils import Database

        conn = self._connect()
        try:
            yield Database(conn)
        finally:
            conn.close()

    def change_token(self) -> tuple[int, int, int]:
        """Changes whenever another connection commits (a new run, a new or
        replaced diagnosis). Cheap: one pragma and two index lookups."""
        with self._poll_lock:
            if self._poll_conn is None:
                self._poll_conn = self._connect()
                self._poll_conn.execute("PRAGMA query_only = ON")
            c = self._poll_conn
            version = c.execute("PRAGMA data_version").fetchone()[0]
            max_id = c.execute("SELECT MAX(id) FROM runs").fetchone()[0] or 0
            diagnosed = c.execute("SELECT COUNT(*) FROM diagnoses").fetchone()[0]
            return version, max_id, diagnosed

    def close(self) -> None:
        with self._poll_lock:
            if self._poll_conn is not None:
                self._poll_conn.close()
                self._poll_conn = None
