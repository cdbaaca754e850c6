"""Write one source in one transaction: its runs, evidence and throughput.

The write lock is taken at the first write (``BEGIN IMMEDIATE``), so
concurrent capscan processes wait for each other (busy timeout) instead of
failing. An interrupt or an error rolls the whole source back.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from analyzer.model import RunFacts, Throughput
    from analyzer.store.db import Database

BLOB_PIECE = 1 << 20


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class SourceWriter:
    def __init__(self, db: Database, path: str):
        self.conn: sqlite3.Connection = db.conn
        self.path = path
        self.source_id: int | None = None
        self.run_ids: dict[int, int] = {}  # assembler seq -> runs.id

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
                facts.device.apple_family, facts.model, facts.model_dump_json())

    def _ensure_run(self, seq: int, facts: RunFacts) -> int:
        self._begin()
        if seq not in self.run_ids:
            cur = self.conn.execute(
                "INSERT INTO runs (source_id, seq, first_line, last_line, program, backend, device_name, apple_family, "
                "model, facts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self.source_id, seq, *self._run_row(seq, facts), now()),
            )
            self.run_ids[seq] = int(cur.lastrowid or 0)
        return self.run_ids[seq]

    def write_run(self, seq: int, facts: RunFacts, evidence) -> int:
        existed = seq in self.run_ids
        run_id = self._ensure_run(seq, facts)
        if existed:
            self.conn.execute(
                "UPDATE runs SET first_line=?, last_line=?, program=?, backend=?, device_name=?, apple_family=?, "
                "model=?, facts=? WHERE id=?",
                (*self._run_row(seq, facts), run_id),
            )
        self.conn.executemany(
            "INSERT INTO evidence (run_id, line, kind, text) VALUES (?, ?, ?, ?)",
            [(run_id, e.line, e.kind, e.text) for e in evidence],
        )
        return run_id

    def write_throughput(self, seq: int, facts: RunFacts, rows: list[Throughput]) -> None:
        run_id = int(self._ensure_run(seq, facts))
        # Columns in Throughput's field order, so each row is bound as it is (a million rows
        # are not copied to add the run id: that is part of the statement, an integer).
        self.conn.executemany(
            "INSERT INTO throughput (test, tok_s, stddev, model, line, kind, n_prompt, n_gen, n_depth, run_id) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {run_id})",
            rows,
        )

    def duplicate_of(self, sha256: str) -> tuple[int, list[int]] | None:
        row = self.conn.execute(
            "SELECT id FROM sources WHERE sha256 = ? AND id IS NOT ? ORDER BY id LIMIT 1", (sha256, self.source_id)
        ).fetchone()
        if row is None:
            return None
        runs = [r[0] for r in self.conn.execute("SELECT id FROM runs WHERE source_id = ? ORDER BY id", (row[0],))]
        return row[0], runs

    def commit(self, *, size: int, sha256: str, lines: int, recognised: int, unrecognised: int, overlong: int,
               raw_gzip: tuple[BinaryIO, int] | None, before_commit=None) -> int:
        self._begin()
        if before_commit is not None:
            before_commit()
        self.conn.execute(
            "UPDATE sources SET size=?, sha256=?, lines=?, recognised_lines=?, unrecognised_lines=?, overlong_lines=? "
            "WHERE id=?",
            (size, sha256, lines, recognised, unrecognised, overlong, self.source_id),
        )
        if raw_gzip is not None:
            self._write_blob(*raw_gzip)
        self.conn.execute("COMMIT")
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
