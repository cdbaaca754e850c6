"""Is a run's stored diagnosis still the one the rules would give now?

A diagnosis depends on the rules and the code that runs them, on the run itself, and on the
other stored runs and their diagnoses (baselines, predictions). A diagnosis is stamped with
all three when it was known to be current, and shown without running the rules only while
the stamp still matches; anything else is diagnosed again. Never a stale verdict:

- rules and code: ``RULES_VERSION``, capscan's version, and the size and modification time
  of every module of the core (an edited or reinstalled capscan stamps differently);
- the run: a digest of what was loaded (facts, throughput, evidence);
- everything else: ``store_generation.n``, which the database's own triggers advance on
  any change to runs, throughput, evidence or diagnosis content (migration m007).

A run is stamped only when nothing at all changed while it was being diagnosed (the
generation read before is the one found, under the write lock, after its final
diagnosis was stored), so a stamp never vouches for a result computed from a state
that has since moved on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from analyzer.store.diagnoses import UPSERT_DIAGNOSES
from analyzer.store.stored_text import clean_json

if TYPE_CHECKING:
    from analyzer.model import StoredRun
    from analyzer.store.db import Database


@functools.cache
def code_fingerprint(rules_version: str) -> str:
    """The rules' version (``analyzer.rules.version``, passed in: the store sits below the rules),
    capscan's version and every core module's size and mtime, hashed."""
    import analyzer

    h = hashlib.sha256(f"{rules_version}\0{analyzer.__version__}".encode())
    root = os.path.dirname(os.path.abspath(analyzer.__file__))
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("tui", "cli", "__pycache__"))
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                h.update(f"\0{os.path.relpath(os.path.join(folder, name), root)}\0{st.st_size}\0{st.st_mtime_ns}"
                         .encode())
    return h.hexdigest()[:16]


def run_digest(run: StoredRun) -> str:
    """What the rules read of the run itself, hashed."""
    from analyzer.model import facts_json

    h = hashlib.sha256(facts_json(run.facts))
    h.update(json.dumps([run.created_at, run.load_error, run.throughput], default=str).encode())
    for e in run.evidence:
        h.update(f"\0{e.line}\0{e.kind}\0{e.text}".encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def stamp(generation: int, run: StoredRun, rules_version: str) -> str:
    return f"{code_fingerprint(rules_version)}:{generation}:{run_digest(run)}"


def generation(db: Database) -> int | None:
    row = db.conn.execute("SELECT n FROM store_generation WHERE id = 1").fetchone()
    return row[0] if row else None


def current_diagnosis(db: Database, run: StoredRun, rules_version: str) -> dict[str, Any] | None:
    """The run's stored diagnosis when its stamp matches the database and the code as they are
    now (read in one statement: the report, its stamp and the generation are one snapshot);
    None when it must be diagnosed again."""
    row = db.conn.execute(
        "SELECT i.inputs, d.report, g.n FROM diagnosis_inputs i JOIN diagnoses d ON d.run_id = i.run_id "
        "JOIN store_generation g ON g.id = 1 WHERE i.run_id = ?", (run.id,)).fetchone()
    if row is None or run.load_error or row[0] != stamp(row[2], run, rules_version):
        return None
    try:
        diagnosis = clean_json(json.loads(row[1]))
    except (ValueError, TypeError, RecursionError):
        return None
    return diagnosis if isinstance(diagnosis, dict) else None


def store_final(db: Database, rows: list[tuple], runs: list[StoredRun], started_at: int | None,
                rules_version: str) -> None:
    """When nothing changed while the runs were diagnosed (the generation is still ``started_at``),
    store their final diagnoses (``rows`` as ``diagnose._row`` makes them: with the prediction
    made after their peers were refreshed) and, if that changed nothing either, stamp them current."""
    if started_at is None or generation(db) != started_at:
        return  # something changed meanwhile (this ingest's own runs, say): nothing can be stamped
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(UPSERT_DIAGNOSES, rows)
        now = generation(db)
        if now == started_at:
            conn.executemany("INSERT INTO diagnosis_inputs (run_id, inputs) VALUES (?, ?) "
                             "ON CONFLICT(run_id) DO UPDATE SET inputs = excluded.inputs",
                             [(run.id, stamp(now, run, rules_version)) for run in runs if not run.load_error])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise

