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

from analyzer.store.db import guard
from analyzer.store.run_list import SELECT_FIELDS, RunRow
from analyzer.store.stored_text import install as clean_reads

if TYPE_CHECKING:
    from analyzer.diagnosis import Diagnosis
    from analyzer.store.db import Database

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
class Facets:
    total: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    devices: list[tuple[str, int]] = field(default_factory=list)
    environments: list[tuple[str, int]] = field(default_factory=list)


# The page is chosen on ids alone (an inner query that the covering indexes of
# migration m004 answer without touching the wide rows), then only those ids
# are joined to their columns and best pp/tg.
_ROW_SQL = (
    f"SELECT {SELECT_FIELDS} "
    "FROM ({ids}) p JOIN runs r ON r.id = p.id JOIN sources s ON s.id = r.source_id "
    "LEFT JOIN diagnoses d ON d.run_id = r.id LEFT JOIN run_origins o ON o.run_id = r.id ORDER BY r.id DESC"
)


def _like(word: str) -> str:
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@dataclass
class _Sql:
    """A filter as SQL: conditions on runs ``r`` and on diagnoses ``d``, each
    with its arguments. ``outer`` when a condition needs runs without a
    diagnosis (the "-" choice), so the join must be a LEFT JOIN."""

    r_where: list[str] = field(default_factory=list)
    r_args: list[Any] = field(default_factory=list)
    d_where: list[str] = field(default_factory=list)
    d_args: list[Any] = field(default_factory=list)
    outer: bool = False
    nothing: bool = False  # a word matches no value at all (TextIndex): no run matches

    def ids(self, *, before: int | None = None, after: int | None = None, limit: int | None = None,
            oldest_first: bool = False) -> tuple[str, list[Any]]:
        """SELECT of the matching run ids, newest first. With only diagnosis
        conditions it reads diagnoses alone, in run id order (its indexes on
        verdict and environment hold the run id), so a page stops after its
        rows instead of sorting every match."""
        if self.d_where and not self.r_where and not self.outer:
            where, args, col = list(self.d_where), list(self.d_args), "d.run_id"
            sql = "SELECT d.run_id AS id FROM diagnoses d"
        else:
            where, args, col = self.r_where + self.d_where, self.r_args + self.d_args, "r.id"
            sql = "SELECT r.id FROM runs r"
            if self.d_where:
                sql += (" LEFT JOIN" if self.outer else " JOIN") + " diagnoses d ON d.run_id = r.id"
        if before is not None:
            where.append(f"{col} < ?")
            args.append(before)
        if after is not None:
            where.append(f"{col} > ?")
            args.append(after)
        if where:
            sql += " WHERE " + " AND ".join(where)
        if limit is not None:
            sql += f" ORDER BY {col} {'ASC' if oldest_first else 'DESC'} LIMIT ?"
            args.append(int(limit))
        return sql, args


def _matching(word: str, values: tuple[str, ...]) -> list[str]:
    """The values (verdicts, environments) that ``LIKE '%word%'`` matches (ASCII, case-insensitive as
    LIKE is): decided here, so no query scans the diagnoses for it."""
    w = word.lower()
    return [v for v in values if w in v]


# the environments a diagnosis states (analyzer.rules.environment): a word of the text filter matches them
# as it matches verdicts, so `/vm` finds the guests (the runs list shows the column)
ENVIRONMENTS = ("vm", "bare-metal")


# SQLite's LIKE folds the case of ASCII letters only; the text index folds the same way.
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
MAX_IN_VALUES = 400  # more matching source paths than this: the LIKE subquery instead of an IN list


@dataclass
class TextIndex:
    """The distinct values a text filter matches against, read once (``text_index``): device
    names, programs, models and source paths. A word then becomes IN lists of the values that
    contain it, found here as SQLite's LIKE '%word%' finds them (ASCII letters in either case),
    so that no query evaluates LIKE on every run; a word that no value contains matches no run
    without any query at all."""

    devices: list[Any] = field(default_factory=list)  # as stored (the IN lists compare them as stored)
    programs: list[Any] = field(default_factory=list)
    models: list[Any] = field(default_factory=list)
    sources: list[tuple[int, Any]] = field(default_factory=list)
    instances: list[Any] = field(default_factory=list)  # the guests imported runs came from (run_origins)
    verdicts: dict[str, int] = field(default_factory=dict)  # runs per verdict
    runs: int = 0

    def __post_init__(self) -> None:
        self._folded = {name: [(v, str(v).translate(_ASCII_FOLD)) for v in getattr(self, name)]
                        for name in ("devices", "programs", "models", "instances")}
        self._sources = [(i, str(p).translate(_ASCII_FOLD)) for i, p in self.sources]

    def containing(self, word: str) -> tuple[dict[str, list[Any]], list[int]]:
        w = word.translate(_ASCII_FOLD)
        values = {name: [v for v, f in folded if w in f] for name, folded in self._folded.items()}
        return values, [i for i, f in self._sources if w in f]


def text_index(conn: sqlite3.Connection) -> TextIndex:
    def distinct(column: str) -> list[Any]:
        return [v for (v,) in conn.execute(f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL")]

    return TextIndex(devices=distinct("device_name"), programs=distinct("program"), models=distinct("model"),
                     sources=conn.execute("SELECT id, path FROM sources WHERE path IS NOT NULL").fetchall(),
                     instances=[v for (v,) in conn.execute(
                         "SELECT DISTINCT instance FROM run_origins WHERE instance IS NOT NULL")],
                     verdicts=dict(conn.execute("SELECT verdict, COUNT(*) FROM diagnoses GROUP BY verdict")),
                     runs=conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def _word_by_index(word: str, index: TextIndex, q: _Sql) -> str:
    """A word's condition from the text index: what ``_sql`` writes with LIKE, as IN lists."""
    values, source_ids = index.containing(word)
    terms = []
    for column, name in (("r.device_name", "devices"), ("r.program", "programs"), ("r.model", "models")):
        if values[name]:
            terms.append(f"{column} IN ({', '.join('?' * len(values[name]))})")
            q.r_args.extend(values[name])
    if values["instances"]:
        terms.append(f"r.id IN (SELECT run_id FROM run_origins WHERE instance IN "
                     f"({', '.join('?' * len(values['instances']))}))")
        q.r_args.extend(values["instances"])
    if len(source_ids) > MAX_IN_VALUES:
        terms.append("r.source_id IN (SELECT id FROM sources WHERE path LIKE ? ESCAPE '\\')")
        q.r_args.append(_like(word))
    elif source_ids:
        terms.append(f"r.source_id IN ({', '.join('?' * len(source_ids))})")
        q.r_args.extend(source_ids)
    return " OR ".join(terms)


def _sql(flt: RunFilter, index: TextIndex | None = None, *, counting: bool = False) -> _Sql:
    """A word of the text matches device, program, model, source path, the guest
    an imported run came from, verdict or environment; the path through a one-off subquery (an index of paths), the
    verdict through the verdicts it names. With a ``TextIndex`` the first four
    are IN lists of the values that contain the word (``nothing`` is set when
    a word matches nothing at all)."""
    from analyzer.verdicts import VERDICTS

    q = _Sql()
    esc = " ESCAPE '\\'"
    for word in flt.text.split():
        if index is None:
            pat = _like(word)
            cond = (f"(r.device_name LIKE ?{esc} OR r.program LIKE ?{esc} OR r.model LIKE ?{esc} "
                    f"OR r.source_id IN (SELECT id FROM sources WHERE path LIKE ?{esc}) "
                    f"OR r.id IN (SELECT run_id FROM run_origins WHERE instance LIKE ?{esc})")
            q.r_args.extend([pat] * 5)
        else:
            cond = "(" + _word_by_index(word, index, q)
        verdicts = _matching(word, VERDICTS)
        per_run = False
        if index is not None:
            # Only verdicts some run has. A page looks them up run by run unless few runs have them: the
            # set of every such run is built before the first row is read, a lookup per run stops with the page.
            verdicts = [v for v in verdicts if index.verdicts.get(v)]
            per_run = not counting and 20 * sum(index.verdicts[v] for v in verdicts) > index.runs
        if verdicts:
            marks = ", ".join("?" * len(verdicts))
            cond += (" OR " if cond != "(" else "")
            cond += (f"EXISTS (SELECT 1 FROM diagnoses dv WHERE dv.run_id = r.id AND dv.verdict IN ({marks}))"
                     if per_run else f"r.id IN (SELECT run_id FROM diagnoses WHERE verdict IN ({marks}))")
            q.r_args.extend(verdicts)
        environments = _matching(word, ENVIRONMENTS)
        if environments:
            cond += (" OR " if cond != "(" else "")
            cond += f"r.id IN (SELECT run_id FROM diagnoses WHERE environment IN ({', '.join('?' * len(environments))}))"
            q.r_args.extend(environments)
        if word.lstrip("#").isdigit():
            cond += (" OR " if cond != "(" else "") + "r.id = ?"
            q.r_args.append(int(word.lstrip("#")))
        if cond == "(":
            q.nothing = True
            cond += "0"
        q.r_where.append(cond + ")")
    if flt.device == NOT_DIAGNOSED:
        q.r_where.append("r.device_name IS NULL")
    elif flt.device:
        q.r_where.append("r.device_name = ?")
        q.r_args.append(flt.device)
    for column, value in (("verdict", flt.verdict), ("environment", flt.environment)):
        if value == NOT_DIAGNOSED:
            q.d_where.append(f"d.{column} IS NULL")
            q.outer = True
        elif value:
            q.d_where.append(f"d.{column} = ?")
            q.d_args.append(value)
    return q


def page(conn: sqlite3.Connection, flt: RunFilter, *, before: int | None = None,
         limit: int = PAGE_SIZE, index: TextIndex | None = None) -> list[RunRow]:
    """One page of runs matching ``flt``, newest first, with ids below ``before``."""
    q = _sql(flt, index)
    if q.nothing:
        return []
    ids, args = q.ids(before=before, limit=limit)
    return [RunRow.of(r) for r in conn.execute(_ROW_SQL.replace("{ids}", ids), args)]


def count(conn: sqlite3.Connection, flt: RunFilter, index: TextIndex | None = None) -> int:
    if not flt.active:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    q = _sql(flt, index, counting=True)
    if q.nothing:
        return 0
    ids, args = q.ids()
    return conn.execute(f"SELECT COUNT(*) FROM ({ids})", args).fetchone()[0]


def facets(conn: sqlite3.Connection, max_devices: int = 60) -> Facets:
    """Values for the filter selects, with their counts."""
    out = Facets(total=conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    out.verdicts = dict(conn.execute("SELECT verdict, COUNT(*) FROM diagnoses GROUP BY verdict"))
    out.devices = [(name if name is not None else NOT_DIAGNOSED, n) for name, n in conn.execute(
        "SELECT device_name, COUNT(*) FROM runs GROUP BY device_name ORDER BY 2 DESC, 1 LIMIT ?", (max_devices,))]
    out.environments = [(env if env is not None else NOT_DIAGNOSED, n) for env, n in conn.execute(
        "SELECT environment, COUNT(*) FROM diagnoses GROUP BY environment ORDER BY 2 DESC")]
    return out


def baseline_for(conn: sqlite3.Connection, run_id: int, model: str | None, diagnosis: Diagnosis | None) -> int | None:
    """The bare-metal run the diagnosis measured this run against (same model and quantization,
    same host chip; see analyzer.rules.baseline), or None. Never guessed here: a run of another
    machine is no baseline."""
    rid = diagnosis.baseline.run if diagnosis and diagnosis.baseline else None
    return rid if isinstance(rid, int) and rid != run_id else None


def neighbour(conn: sqlite3.Connection, run_id: int, flt: RunFilter, older: bool) -> int | None:
    """The next run in list order (older = further down the list)."""
    if older:
        sql, args = _sql(flt).ids(before=run_id, limit=1)
    else:
        sql, args = _sql(flt).ids(after=run_id, limit=1, oldest_first=True)
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
        conn = clean_reads(sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False,
                                           isolation_level=None))
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            guard(conn, str(self.path))  # every connection, not only the first open: a trigger added since
        except BaseException:
            conn.close()
            raise
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
        """The store's Database on a fresh connection, for the core's readers (load_run, build_plan)."""
        from analyzer.store.db import Database

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
