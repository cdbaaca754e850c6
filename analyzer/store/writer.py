"""Write one source in one transaction: its runs, evidence and throughput.

The write lock is taken at the first write (``BEGIN IMMEDIATE``), so
concurrent capscan processes wait for each other (busy timeout) instead of
failing. An interrupt or an error rolls the whole source back.

A source that brings at least as many throughput rows as the table held
before it (and at least ``DEFER_INDEX_ROWS``: a dense llama-bench file into a
young database) drops the table's indexes inside its transaction and builds
them again just before its commit: sorting every row once costs about a third
of keeping the index up to date row by row. Both happen in the transaction,
so a crash or an interrupt rolls them back with the rows, and readers keep
seeing the committed database, indexes included, until the commit.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import TYPE_CHECKING, Any, BinaryIO

from analyzer.model import facts_json

if TYPE_CHECKING:
    from analyzer.model import Evidence, RunFacts, Throughput
    from analyzer.store.db import Database

BLOB_PIECE = 1 << 20
DEFER_INDEX_ROWS = 20_000


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class SourceWriter:
    def __init__(self, db: Database, path: str):
        self.conn: sqlite3.Connection = db.conn
        self.path = path
        self.source_id: int | None = None
        self.run_ids: dict[int, int] = {}  # assembler seq -> runs.id
        self.rows_written = 0  # throughput rows of this source
        self.rows_before: int | None = None  # about how many the table held before it
        self.deferred_indexes: list[str] | None = None  # CREATE INDEX statements to run before the commit

    def begin(self) -> None:
        """Take the write lock now (a no-op when already taken): what is read
        after this (the duplicate check) cannot change before the commit."""
        self._begin()

    def _begin(self) -> None:
        if self.source_id is not None:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        cur = self.conn.execute(
            "INSERT INTO sources (path, size, sha256, ingested_at, lines, recognised_lines, unrecognised_lines, "
            "overlong_lines) VALUES (?, 0, '', ?, 0, 0, 0, 0)",
            (self.path, now()),
        )
        self.source_id = cur.lastrowid

    def _run_row(self, seq: int, facts: RunFacts) -> tuple:
        return (facts.first_line, facts.last_line, facts.program, facts.backend, facts.device.name,
                facts.device.apple_family, facts.model, facts_json(facts).decode())

    def _ensure_run(self, seq: int, facts: RunFacts, created_at: str | None = None) -> int:
        self._begin()
        if seq not in self.run_ids:
            cur = self.conn.execute(
                "INSERT INTO runs (source_id, seq, first_line, last_line, program, backend, device_name, apple_family, "
                "model, facts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self.source_id, seq, *self._run_row(seq, facts), created_at or now()),
            )
            self.run_ids[seq] = int(cur.lastrowid or 0)
        return self.run_ids[seq]

    def write_run(self, seq: int, facts: RunFacts, evidence, created_at: str | None = None) -> int:
        """``created_at``: when the run was stored, if not now (an imported run keeps its origin's time)."""
        existed = seq in self.run_ids
        run_id = self._ensure_run(seq, facts, created_at)
        if existed:
            self.conn.execute(
                "UPDATE runs SET first_line=?, last_line=?, program=?, backend=?, device_name=?, apple_family=?, "
                "model=?, facts=? WHERE id=?",
                (*self._run_row(seq, facts), run_id),
            )
        self.conn.executemany(
            "INSERT INTO evidence (run_id, line, kind, text, inner) VALUES (?, ?, ?, ?, ?)",
            [(run_id, e.line, e.kind, e.text, e.inner) for e in evidence],
        )
        return run_id

    def write_throughput(self, seq: int, facts: RunFacts, rows: list[Throughput]) -> None:
        run_id = int(self._ensure_run(seq, facts))
        self._maybe_defer_indexes(len(rows))
        # Columns in Throughput's field order, so each row is bound as it is (a million rows
        # are not copied to add the run id: that is part of the statement, an integer).
        self.conn.executemany(
            "INSERT INTO throughput (test, tok_s, stddev, model, line, kind, n_prompt, n_gen, n_depth, run_id) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {run_id})",
            rows,
        )

    def _maybe_defer_indexes(self, adding: int) -> None:
        if self.deferred_indexes is not None:
            return
        if self.rows_before is None:
            self.rows_before = self.conn.execute("SELECT MAX(rowid) FROM throughput").fetchone()[0] or 0
        self.rows_written += adding
        if self.rows_written < max(DEFER_INDEX_ROWS, self.rows_before):
            return
        indexes = self.conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'throughput' AND sql IS NOT NULL "
            "ORDER BY rowid").fetchall()
        for name, _ in indexes:
            self.conn.execute(f'DROP INDEX "{name}"')
        self.deferred_indexes = [sql for _, sql in indexes]

    def duplicate_of(self, sha256: str) -> tuple[int, list[int]] | None:
        row = self.conn.execute(
            "SELECT id FROM sources WHERE sha256 = ? AND id IS NOT ? ORDER BY id LIMIT 1", (sha256, self.source_id)
        ).fetchone()
        if row is None:
            return None
        runs = [r[0] for r in self.conn.execute("SELECT id FROM runs WHERE source_id = ? ORDER BY id", (row[0],))]
        return row[0], runs

    def commit(self, *, size: int, sha256: str, lines: int, recognised: int, unrecognised: int, overlong: int,
               raw_gzip: tuple[BinaryIO, int] | None, before_commit=None, rejected: int = 0,
               path: str | None = None) -> int:
        """``path``: the name to store the source under, when it is known only now (a pipe's)."""
        self._begin()
        if path is not None and path != self.path:
            self.path = path
            self.conn.execute("UPDATE sources SET path=? WHERE id=?", (path, self.source_id))
        if before_commit is not None:
            before_commit()
        self.conn.execute(
            "UPDATE sources SET size=?, sha256=?, lines=?, recognised_lines=?, unrecognised_lines=?, overlong_lines=?, "
            "rejected_records=? WHERE id=?",
            (size, sha256, lines, recognised, unrecognised, overlong, rejected, self.source_id),
        )
        if raw_gzip is not None:
            self._write_blob(*raw_gzip)
        for sql in self.deferred_indexes or ():
            self.conn.execute(sql)
        self.conn.execute("COMMIT")
        self.deferred_indexes = None
        return self.source_id  # type: ignore[return-value]

    def _write_blob(self, data: BinaryIO, size: int) -> None:
        """--keep-raw: the blob is sized first (zeroblob), then written in
        pieces through SQLite's incremental blob I/O, so a large log never
        sits in memory whole."""
        self.conn.execute("UPDATE sources SET raw_gzip = zeroblob(?) WHERE id = ?", (size, self.source_id))
        if size == 0:
            return
        assert self.source_id is not None  # the source row is written first
        with self.conn.blobopen("sources", "raw_gzip", self.source_id) as blob:
            while piece := data.read(BLOB_PIECE):
                blob.write(piece)

    def rollback(self) -> None:
        if self.source_id is not None and self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.source_id = None
        self.run_ids = {}
        self.rows_written, self.rows_before, self.deferred_indexes = 0, None, None

    def rollback_quietly(self) -> None:
        """Roll back; a rollback that fails too (the disk is full) must not hide
        the first error: SQLite undoes an unfinished transaction when the
        connection closes or the next process opens the file."""
        try:
            self.rollback()
        except sqlite3.Error:
            pass


class OriginWriter(SourceWriter):
    """A ``SourceWriter`` whose runs carry an origin."""

    def same_key(self, key: str) -> dict[int, str]:
        """The runs stored under ``key`` (the same run of the same guest's log, every report of it
        when reports conflict) -> the digest of what each holds (``content_digest``)."""
        from analyzer.store.origins import content_digest, key_range

        return {rid: content_digest(report, facts) for rid, report, facts in self.conn.execute(
            "SELECT o.run_id, o.report, r.facts FROM run_origins o JOIN runs r ON r.id = o.run_id "
            "WHERE o.key = ? OR (o.key >= ? AND o.key < ?) ORDER BY o.run_id LIMIT 100", (key, *key_range(key)))}

    def write_imported(self, seq: int, facts: RunFacts, evidence: list[Evidence], rows: list[Throughput],
                       origin: dict[str, Any], report: str) -> int:
        """``report``: the origin's report as JSON text, as ``content_digest`` read it."""
        # stored at the origin's time: --max-age and the lists see when the run was made, not imported
        run_id = self.write_run(seq, facts, evidence, created_at=origin.get("stored_at"))
        if rows:
            self.write_throughput(seq, facts, rows)
        self.conn.execute(
            "INSERT INTO run_origins (run_id, key, instance, source, sha256, origin_run_id, capscan_version, "
            "diagnosed_at, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, origin["key"], origin.get("instance"), origin.get("source"), origin.get("sha256"),
             origin.get("run_id"), origin.get("capscan_version"), origin.get("diagnosed_at"), report))
        return run_id

    def source_of(self, run_id: int) -> int | None:
        row = self.conn.execute("SELECT source_id FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None
