"""Runs imported from another capscan's export, with where they came from (migration m009).

One export file is one source, written in one transaction like a log (``OriginWriter`` in
analyzer.store.writer); each run also gets its ``run_origins`` row: the instance, the origin's source name and sha256, its
run id there, the capscan that diagnosed it and that diagnosis."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from analyzer.store.stored_text import clean_json

if TYPE_CHECKING:
    from analyzer.store.db import Database


def origin_key(instance: str | None, sha256: str | None, source: str | None, first_line: int, last_line: int,
               program: str | None) -> str:
    """What makes two imported runs the same run: the same lines of the same log on the same guest.
    The log's sha256 when the export names it, else its name (``diagnose --json`` has no sha256)."""
    return json.dumps([instance, sha256 or None, None if sha256 else source, first_line, last_line, program])


def load_origin(db: Database, run_id: int) -> dict[str, Any] | None:
    """A run's origin (with its ``report``), or None for a run stored from a log here."""
    try:
        row = db.conn.execute(
            "SELECT instance, source, sha256, origin_run_id, capscan_version, diagnosed_at, report "
            "FROM run_origins WHERE run_id = ?", (run_id,)).fetchone()
    except sqlite3.OperationalError:  # a database older than m009, opened read-only, has no such table
        return None
    if row is None:
        return None
    try:
        report = clean_json(json.loads(row[6]))
    except (ValueError, TypeError, RecursionError):
        report = None
    return {"instance": row[0], "source": row[1], "sha256": row[2], "run_id": row[3], "capscan_version": row[4],
            "diagnosed_at": row[5], "report": report if isinstance(report, dict) else {}}


def origin_name(origin: dict[str, Any] | None) -> str | None:
    """An imported run's source as lists show it: ``guest-a:guest.log`` (None for a local run)."""
    if origin is None:
        return None
    source = origin.get("source") or "?"
    return f"{origin['instance']}:{source}" if origin.get("instance") else source

