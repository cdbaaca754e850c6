"""Reads: runs, one run with its throughput and evidence, database stats."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator

from analyzer.store.stored_text import EXACT_PATH, clean_json, exact_text

if TYPE_CHECKING:  # (imported where used: listing runs needs neither pydantic nor sqlite-utils)
    from analyzer.model import StoredRun
    from analyzer.store.db import Database


def _throughput(db: Database, run_id: int) -> list[dict[str, Any]]:
    """A run's figures as ``RunBuilder.throughput_summary`` gives them, for a run stored without that
    summary: each row as printed (``n`` 1, ``reduced`` None) in the order of its lines; a (model, test,
    kind) with more than MAX_ROWS_SHOWN rows is one entry, the median of its rows as one of them
    (median_low), labelled ``reduced``. (The table keeps no configuration: rows of one test at several
    configurations are told apart only while each is listed.) In SQL: a run may hold a million rows."""
    from analyzer.model import MAX_ROWS_SHOWN  # (as load_run imports it: listing runs needs no pydantic)

    conn = db.conn
    groups = conn.execute("SELECT model, test, kind, COUNT(*), MIN(line), MIN(rowid) FROM throughput WHERE run_id = ? "
                          "GROUP BY model, test, kind", (run_id,)).fetchall()
    found: list[tuple] = []  # (line, rowid, entry)
    if all(g[3] <= MAX_ROWS_SHOWN for g in groups):  # every row is listed: one pass, in file order
        rows = conn.execute("SELECT model, test, kind, tok_s, stddev, line, rowid FROM throughput WHERE run_id = ?",
                            (run_id,)).fetchall()
    else:  # (a million rows of one test: only the listed groups' rows are read, the rest by the index)
        rows = []
        for model, test, kind, n, line, first in groups:
            where = "run_id = ? AND test = ? AND kind = ? AND model IS ?"
            if n <= MAX_ROWS_SHOWN:
                rows += conn.execute(f"SELECT model, test, kind, tok_s, stddev, line, rowid FROM throughput WHERE {where}",
                                     (run_id, test, kind, model)).fetchall()
                continue
            middle = conn.execute(f"SELECT tok_s FROM throughput WHERE {where} ORDER BY tok_s LIMIT 1 OFFSET ?",
                                  (run_id, test, kind, model, (n - 1) // 2)).fetchone()[0]
            found.append((line, first, {"test": test, "tok_s": middle, "stddev": None, "model": model, "kind": kind,
                                        "n": n, "line": line, "config": None, "reduced": {"by": "median", "of": n}}))
    for model, test, kind, tok_s, stddev, line, rowid in rows:
        found.append((line, rowid, {"test": test, "tok_s": tok_s, "stddev": stddev, "model": model, "kind": kind,
                                    "n": 1, "line": line, "config": None, "reduced": None}))
    found.sort(key=lambda f: (f[0] if f[0] is not None else -1, f[1]))
    return [f[2] for f in found]


MAX_ID = (1 << 63) - 1  # SQLite's INTEGER PRIMARY KEY range; a larger number is no stored id


def storable_id(value: int) -> bool:
    """Could this be a stored row id? (SQLite cannot even bind a larger integer.)"""
    return -MAX_ID - 1 <= value <= MAX_ID


def _facts(stored: Any) -> Any:
    """A run's stored facts, type-checked. Text without a backslash holds no JSON escape, so the connection's
    cleaning already covered it; with one, an escaped newline or control may hide inside a string."""
    from analyzer.model import facts_from_dict, load_facts

    if isinstance(stored, str) and "\\" in stored:
        import json

        return facts_from_dict(clean_json(json.loads(stored)))
    return load_facts(stored)


def load_run(db: Database, run_id: int) -> StoredRun | None:
    if not storable_id(run_id):
        return None
    row = db.conn.execute(
        f"SELECT r.id, r.source_id, {EXACT_PATH}, r.created_at, r.facts, s.lines FROM runs r JOIN sources s "
        "ON s.id = r.source_id WHERE r.id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    from analyzer.model import FactsError, RunFacts, StoredRun, evidence_from_rows

    errors: list[str] = []
    try:
        facts = _facts(row[4])
    except (FactsError, TypeError, ValueError, RecursionError) as exc:
        facts = RunFacts(first_line=0, last_line=0)
        errors.append(f"its stored facts do not load ({type(exc).__name__})")
    summary = facts.throughput_summary
    try:
        ev = evidence_from_rows(db.conn.execute(
            "SELECT line, kind, text, inner FROM evidence WHERE run_id = ? ORDER BY line, rowid", (run_id,)))
    except FactsError as exc:
        ev = []
        errors.append(f"its evidence lines do not load ({type(exc).__name__})")
    diag = db.conn.execute("SELECT report FROM diagnoses WHERE run_id = ?", (run_id,)).fetchone()
    import json  # (here: listing runs does not need it)

    from analyzer.diagnosis import Diagnosis

    try:
        report = clean_json(json.loads(diag[0])) if diag else None
        diagnosis = Diagnosis.load(report) if isinstance(report, dict) else None
    except (ValueError, TypeError, RecursionError):  # (pydantic's ValidationError is a ValueError)
        diagnosis = None  # diagnosed again on the next read
    from analyzer.store.origins import load_origin, origin_name

    origin = load_origin(db, run_id)
    return StoredRun(id=row[0], source_id=row[1], source=origin_name(origin) or exact_text(row[2]),
                     created_at=row[3] or "", facts=facts,
                     throughput=summary if summary is not None else _throughput(db, run_id), evidence=ev,
                     diagnosis=diagnosis, load_error="; ".join(errors) or None, origin=origin,
                     source_lines=_source_lines(row[5]) if origin is None else None)


def load_peer_runs(db: Database, run_ids: list[int]) -> dict[int, StoredRun]:
    """The runs that may serve as another run's baseline, as ``load_run`` reads them but without their
    diagnosis (a baseline is made from facts and evidence) and in three statements per 500 runs, not
    four per run: a guest's 200 peers were 800 statements and most of ``show``'s time. Imported runs
    (another capscan's summary) and runs that do not load whole are left out: neither is a baseline."""
    from analyzer.model import FactsError, StoredRun, evidence_from_rows

    out: dict[int, StoredRun] = {}
    ids = list(dict.fromkeys(rid for rid in run_ids if storable_id(rid)))
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ", ".join("?" * len(chunk))
        imported = _imported(db, chunk, marks)
        rows = [r for r in db.conn.execute(
            f"SELECT r.id, r.source_id, {EXACT_PATH}, r.created_at, r.facts, s.lines FROM runs r "
            f"JOIN sources s ON s.id = r.source_id WHERE r.id IN ({marks})", chunk) if r[0] not in imported]
        evidence: dict[int, list[tuple]] = {}
        for run_id, *line in db.conn.execute(
                f"SELECT run_id, line, kind, text, inner FROM evidence WHERE run_id IN ({marks}) ORDER BY run_id, line, rowid",
                chunk):
            evidence.setdefault(run_id, []).append(line)
        for rid, source_id, path, created_at, stored, lines in rows:
            try:  # (the errors load_run turns into a load_error: such a run is no baseline)
                facts = _facts(stored)
            except (FactsError, TypeError, ValueError, RecursionError):
                continue
            try:
                ev = evidence_from_rows(evidence.get(rid, ()))
            except FactsError:
                continue
            summary = facts.throughput_summary
            out[rid] = StoredRun(id=rid, source_id=source_id, source=exact_text(path), created_at=created_at or "",
                                 facts=facts, throughput=summary if summary is not None else _throughput(db, rid),
                                 evidence=ev, source_lines=_source_lines(lines))
    return out


def _source_lines(lines: Any) -> int | None:
    """A source's line count as a run reports it ("lines 1-62 of 105"); None when not a count."""
    return lines if isinstance(lines, int) and lines > 0 else None


def _imported(db: Database, chunk: list[int], marks: str) -> set[int]:
    import sqlite3

    try:
        return {r[0] for r in db.conn.execute(f"SELECT run_id FROM run_origins WHERE run_id IN ({marks})", chunk)}
    except sqlite3.OperationalError:  # a database older than m009, opened read-only, has no such table
        return set()


def recent_run_times(db: Database, limit: int) -> list[tuple[int, str]]:
    """(id, created_at) of the newest ``limit`` runs, newest first (the fleet exports' window)."""
    return db.conn.execute("SELECT id, created_at FROM runs ORDER BY id DESC LIMIT ?", (int(limit),)).fetchall()


def run_ids_since(db: Database, since: str | None) -> Iterator[int]:
    """Run ids in storing order, those stored at or after ``since`` (UTC ISO-8601) when given."""
    sql, args = "SELECT id FROM runs", []
    if since is not None:
        sql += " WHERE created_at >= ?"
        args.append(since)
    last = 0
    while True:  # keyset pages: the cursor never holds the table open while runs are written
        page = [r[0] for r in db.conn.execute(
            sql + (" AND" if since is not None else " WHERE") + " id > ? ORDER BY id LIMIT ?", [*args, last, 500])]
        if not page:
            return
        yield from page
        last = page[-1]


def newest_run_of_source(db: Database, name: str) -> int | None:
    """The newest run of the sources stored under exactly this name (the remedy's per-boot kernel check)."""
    row = db.conn.execute("SELECT MAX(r.id) FROM runs r JOIN sources s ON s.id = r.source_id WHERE s.path = ?",
                          (name,)).fetchone()
    return row[0] if row else None


def last_run_id(db: Database) -> int | None:
    row = db.conn.execute("SELECT MAX(id) FROM runs").fetchone()
    return row[0] if row else None


def iter_runs(db: Database, limit: int | None = 50, verdict: str | None = None, text: str | None = None,
              offset: int = 0, instance: str | None = None) -> Iterator[dict[str, Any]]:
    """The runs list, newest first, one row at a time (all 100,000 runs never sit in memory).

    Reads only indexes and narrow rows: the runs' listed columns from the
    covering index ``runs_listing`` (migration m006), each diagnosis from
    ``diagnoses_list``, best pp/tg from ``throughput_run``; the wide rows
    (facts, reports) are never touched, so listing 10^5 runs reads a few MB,
    not the whole file."""
    from analyzer.store.run_list import SELECT_FIELDS, named_row  # (here: `show` and `db stats` list nothing)

    where, args = [], []
    if verdict:
        where.append("d.verdict = ?")
        args.append(verdict)
    if text:
        where.append("(r.device_name LIKE ? OR s.path LIKE ? OR r.program LIKE ? OR r.model LIKE ? "
                     "OR o.instance LIKE ? OR o.source LIKE ?)")
        args.extend([f"%{text}%"] * 6)
    if instance is not None:  # the runs imported from that guest's export
        where.append("o.instance = ?")
        args.append(instance)
    sql = (
        f"SELECT {SELECT_FIELDS} FROM runs r JOIN sources s ON s.id = r.source_id "
        "LEFT JOIN diagnoses d INDEXED BY diagnoses_list ON d.run_id = r.id "
        "LEFT JOIN run_origins o ON o.run_id = r.id"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.id DESC"
    if limit:
        sql += f" LIMIT {int(limit)} OFFSET {int(offset)}"
    for r in db.conn.execute(sql, args):
        yield named_row(r)


def run_ids_of_source(db: Database, source_id: int) -> list[int]:
    return [r[0] for r in db.conn.execute("SELECT id FROM runs WHERE source_id = ? ORDER BY id", (source_id,))]


def stats(db: Database, path: str | os.PathLike[str]) -> dict[str, Any]:
    q = lambda sql: db.conn.execute(sql).fetchone()[0]  # noqa: E731
    verdicts = dict(db.conn.execute("SELECT verdict, COUNT(*) FROM diagnoses GROUP BY verdict ORDER BY 2 DESC"))
    path = os.fspath(path)
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return {
        "path": str(path),
        "size_bytes": size,
        "sources": q("SELECT COUNT(*) FROM sources"),
        "runs": q("SELECT COUNT(*) FROM runs"),
        "throughput_rows": q("SELECT COUNT(*) FROM throughput"),
        "evidence_lines": q("SELECT COUNT(*) FROM evidence"),
        "raw_sources_kept": q("SELECT COUNT(*) FROM sources WHERE raw_gzip IS NOT NULL"),
        "verdicts": verdicts,
        "schema_migrations": [r[0] for r in db.conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = 'capscan' ORDER BY rowid")],
    }


def run_count(db: Database) -> int:
    return db.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def run_exists(db: Database, run_id: int) -> bool:
    return storable_id(run_id) and db.conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None


def runs_of_last_source(db: Database) -> list[int] | None:
    """The runs of the most recently stored input, in order; None when nothing is stored."""
    row = db.conn.execute("SELECT source_id FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    return run_ids_of_source(db, row[0])


def source_sha256(db: Database, source_id: int) -> str | None:
    row = db.conn.execute("SELECT sha256 FROM sources WHERE id = ?", (source_id,)).fetchone()
    return row[0] if row else None


def recent_diagnosed_runs(db: Database, limit: int) -> list[tuple]:
    """Newest first: (id, program, backend, device_name, apple_family, model, created_at, verdict, fixable,
    environment, host_chip, report JSON) of diagnosed runs, for the fleet exports."""
    return db.conn.execute(
        "SELECT r.id, r.program, r.backend, r.device_name, r.apple_family, r.model, r.created_at, "
        "d.verdict, d.fixable, d.environment, d.host_chip, d.report "
        "FROM runs r JOIN diagnoses d ON d.run_id = r.id ORDER BY r.id DESC LIMIT ?", (int(limit),)).fetchall()


def last_remedy_outcome(db: Database) -> str | None:
    """The result of the latest remedy that was verified or failed ('verified', 'failed: ...'), if any."""
    row = db.conn.execute("SELECT result FROM remedy_actions WHERE result = 'verified' OR result LIKE 'failed%' "
                          "ORDER BY id DESC LIMIT 1").fetchone()
    return row[0] if row else None
