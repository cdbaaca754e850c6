"""Runs imported from another capscan's export, with where they came from (migration m009).

One export file is one source, written in one transaction like a log (``OriginWriter`` in
analyzer.store.writer); each run also gets its ``run_origins`` row: the instance, the origin's source name and sha256, its
run id there, the capscan that diagnosed it and that diagnosis.

Two reports of one run (one ``origin_key``) that differ are both kept: the first under the key,
each later one under ``conflict_key`` (the key, then ``SEP`` and its digest), so the unique key
still stores identical content once, and every report of a key is one index range away."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import TYPE_CHECKING, Any, Iterable

from analyzer.store.stored_text import clean_json, read_text

if TYPE_CHECKING:
    from analyzer.store.db import Database


def origin_key(instance: str | None, sha256: str | None, source: str | None, first_line: int, last_line: int,
               program: str | None) -> str:
    """What makes two imported runs the same run: the same lines of the same log on the same guest.
    The log's sha256 when the export names it, else its name (``diagnose --json`` has no sha256)."""
    return json.dumps([instance, sha256 or None, None if sha256 else source, first_line, last_line, program])


# A key is a JSON array, so it ends at its last "]": what follows is a conflicting report's digest.
# No other key starts with a whole key and "#" (that would not be one JSON array).
SEP = "#"


def content_digest(report: str, facts: str) -> str:
    """What makes two reports of one run the same report, from the stored text of its report and
    facts: the verdict, the fixable claim and the facts and speeds it rests on. Proof, findings and
    wording are left out: an aggregator's export of a report words them its own way, and the same
    run arriving by that road is the same report. Text is read back cleaned (``read_text``), so fresh
    text is cleaned alike."""
    try:
        r = json.loads(read_text(report.encode("utf-8", "surrogatepass")))
        f = json.loads(read_text(facts.encode("utf-8", "surrogatepass")))
    except (ValueError, RecursionError):
        return hashlib.sha256(f"{report}\n{facts}".encode("utf-8", "surrogatepass")).hexdigest()
    r, f = (x if isinstance(x, dict) else {} for x in (r, f))
    speeds = sorted((str(t.get("test")), t.get("tok_s"), str(t.get("model")))
                    for t in f.get("throughput_summary") or [] if isinstance(t, dict))
    subset = {"report": {k: r.get(k) for k in ("verdict", "fixable", "environment", "host_chip", "capabilities")},
              "facts": {k: f.get(k) for k in ("first_line", "last_line", "program", "backend", "device", "shim")},
              "speeds": speeds}
    return hashlib.sha256(json.dumps(subset, sort_keys=True, default=str).encode()).hexdigest()


def conflict_key(key: str, digest: str) -> str:
    return f"{key}{SEP}{digest}"


def base_key(key: str) -> str:
    return key[:key.rindex("]") + 1] if "]" in key else key


def key_range(key: str) -> tuple[str, str]:
    """The bounds of the conflicting reports' keys of ``key`` (``conflict_key``), for an index range."""
    base = base_key(key)
    return base + SEP, base + chr(ord(SEP) + 1)


def is_imported(db: Database, run_id: int) -> bool:
    """True for a run imported from another capscan's export: a report, never this store's evidence
    (no baseline, no prediction, no remedy)."""
    return bool(imported_ids(db, [run_id]))


def imported_ids(db: Database, run_ids: Iterable[int]) -> set[int]:
    """Those of ``run_ids`` that were imported (in batches: a whole store's ids may be asked)."""
    ids = list(run_ids)
    out: set[int] = set()
    try:
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            out.update(r[0] for r in db.conn.execute(
                f"SELECT run_id FROM run_origins WHERE run_id IN ({','.join('?' * len(part))})", part))
    except sqlite3.OperationalError:  # older than m009 (read-only): nothing was imported
        return set()
    return out


def origin_instances(db: Database, run_ids: Iterable[int]) -> dict[int, str | None]:
    """The origin instance of each imported run among ``run_ids`` (a local run is not in the dict)."""
    ids = list(run_ids)
    out: dict[int, str | None] = {}
    try:
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            out.update((r[0], r[1]) for r in db.conn.execute(
                f"SELECT run_id, instance FROM run_origins WHERE run_id IN ({','.join('?' * len(part))})", part))
    except sqlite3.OperationalError:  # older than m009 (read-only): nothing was imported
        return {}
    return out


def load_origin(db: Database, run_id: int) -> dict[str, Any] | None:
    """A run's origin (with its ``report``), or None for a run stored from a log here. ``conflicts``:
    the other runs stored as a different report of the same run (at most 20)."""
    try:
        row = db.conn.execute(
            "SELECT instance, source, sha256, origin_run_id, capscan_version, diagnosed_at, report, key "
            "FROM run_origins WHERE run_id = ?", (run_id,)).fetchone()
    except sqlite3.OperationalError:  # a database older than m009, opened read-only, has no such table
        return None
    if row is None:
        return None
    base = base_key(row[7])
    conflicts = [r[0] for r in db.conn.execute(
        "SELECT run_id FROM run_origins WHERE (key = ? OR (key >= ? AND key < ?)) AND run_id != ? ORDER BY run_id "
        "LIMIT 20", (base, *key_range(base), run_id))]
    try:
        report = clean_json(json.loads(row[6]))
    except (ValueError, TypeError, RecursionError):
        report = None
    return {"instance": row[0], "source": row[1], "sha256": row[2], "run_id": row[3], "capscan_version": row[4],
            "diagnosed_at": row[5], "report": report if isinstance(report, dict) else {}, "conflicts": conflicts}


def origin_name(origin: dict[str, Any] | None) -> str | None:
    """An imported run's source as lists show it: ``guest-a:guest.log`` (None for a local run)."""
    if origin is None:
        return None
    source = origin.get("source") or "?"
    return f"{origin['instance']}:{source}" if origin.get("instance") else source

