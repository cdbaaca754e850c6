"""The SQL behind diagnosing: choosing peers (possible baselines), storing
diagnoses, and the figures a prediction of a remedied guest's speed reads.
The rules decide; this module only reads and writes rows."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analyzer.store.db import Database


_PEER_CANDIDATES = (
    "SELECT r.id FROM runs r LEFT JOIN diagnoses d{indexed} ON d.run_id = r.id WHERE r.model = ? AND r.id IS NOT ? "
    "AND (d.run_id IS NULL OR d.host_chip = ?) ORDER BY r.id DESC LIMIT ?")


def peer_candidate_ids(db: Database, model: str, run_id: int | None, host_chip: str, limit: int) -> list[int]:
    """Runs of the same model (but ``run_id``), newest first, either not diagnosed yet or diagnosed
    on the same host chip. The model's runs come from ``runs_model``, each one's chip from the covering
    index ``diagnoses_peer_chip`` (m012), never from the diagnoses' rows (SQLite's planner takes the
    primary key, and the rows that hold the reports, unless told)."""
    args = (model, run_id, host_chip, limit)
    try:
        return [r[0] for r in db.conn.execute(_PEER_CANDIDATES.format(indexed=" INDEXED BY diagnoses_peer_chip"), args)]
    except sqlite3.OperationalError as exc:  # a database older than m012, opened read-only: slower, same answer
        if "no such index" not in str(exc):
            raise
        return [r[0] for r in db.conn.execute(_PEER_CANDIDATES.format(indexed=""), args)]


def same_hardware_run_ids(db: Database, model: str, host_chip: str, limit: int) -> list[int]:
    """Diagnosed runs of this model on this host chip, newest first."""
    return [r[0] for r in db.conn.execute(
        "SELECT r.id FROM runs r JOIN diagnoses d ON d.run_id = r.id WHERE r.model = ? AND d.host_chip = ? "
        "ORDER BY r.id DESC LIMIT ?", (model, host_chip, limit))]


# An upsert: an unchanged diagnosis stays the same row (INSERT OR REPLACE would delete it first).
UPSERT_DIAGNOSES = (
    "INSERT INTO diagnoses (run_id, verdict, fixable, confidence, environment, host_chip, report, rules_version, "
    "diagnosed_at, stamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
    "verdict = excluded.verdict, fixable = excluded.fixable, confidence = excluded.confidence, "
    "environment = excluded.environment, host_chip = excluded.host_chip, report = excluded.report, "
    "rules_version = excluded.rules_version, diagnosed_at = excluded.diagnosed_at, stamp = excluded.stamp")


def save_diagnoses(db: Database, rows: list[tuple]) -> None:
    """(run_id, verdict, fixable, confidence, environment, host_chip, report JSON, rules_version,
    diagnosed_at) rows, in one short write transaction; each stamped (analyzer.store.stamp) over what it
    says and its run's facts as stored."""
    if not rows:
        return
    from analyzer.store import stamp

    secret = stamp.key(create=True)
    with db.conn:
        facts = facts_bytes(db, [r[0] for r in rows]) if secret is not None else {}
        db.conn.executemany(UPSERT_DIAGNOSES, [
            (*r, stamp.stamp(secret, r[0], r[1], int(r[2]), r[4], r[7], facts.get(r[0])) if secret else None)
            for r in rows])


def facts_bytes(db: Database, run_ids: list[int]) -> dict[int, bytes]:
    """Each run's stored facts as bytes, what a stamp covers (analyzer.store.stamp)."""
    out: dict[int, bytes] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i:i + 500]
        out.update(db.conn.execute(f"SELECT id, CAST(facts AS BLOB) FROM runs WHERE id IN "
                                   f"({', '.join('?' * len(chunk))})", chunk).fetchall())
    return out


# One pass over the runs of a chip: the best finite speed per (model, side, test) of local runs
# whose capabilities are full. json_extract reads the two flags in SQLite, so no report reaches
# Python; a run with an origin (an import: another machine's report) is never a measurement here.
_SPEEDS_ON = (
    "SELECT r.model, d.environment, t.test, MAX(t.tok_s) FROM runs r JOIN diagnoses d ON d.run_id = r.id "
    "JOIN throughput t ON t.run_id = r.id "
    "WHERE d.host_chip = ? AND r.model IS NOT NULL AND d.environment IN ('vm', 'bare-metal') "
    "AND json_extract(d.report, '$.capabilities.simdgroup_reduction') "
    "AND json_extract(d.report, '$.capabilities.simdgroup_mm') "
    "AND t.tok_s > 0 AND t.tok_s < 1e308{local} GROUP BY r.model, d.environment, t.test")
_LOCAL = " AND NOT EXISTS (SELECT 1 FROM run_origins o WHERE o.run_id = r.id)"


def full_caps_speeds_on(db: Database, host_chip: str) -> list[tuple[str, str, str, float]]:
    """(model, environment, test, best tok/s) over the local runs diagnosed on this host chip, in a VM
    or on bare metal, with full simdgroup capabilities: what a prediction of a remedied guest reads,
    in one statement whatever the number of runs."""
    try:
        return db.conn.execute(_SPEEDS_ON.format(local=_LOCAL), (host_chip,)).fetchall()
    except sqlite3.OperationalError as exc:  # a database older than m009, opened read-only: no imports in it
        if "run_origins" not in str(exc):
            raise
        return db.conn.execute(_SPEEDS_ON.format(local=""), (host_chip,)).fetchall()
