"""Where ``capscan watch`` stopped reading each file (table ``watch_cursors``):
the byte offset and line, and a hash of the file's head that recognises it
after a rename. Moving a cursor is compare-and-set, so two watchers of one
file never store the same lines twice."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator

CursorRow = tuple[int, str, int, str, int, int]  # id, path, head_len, head_sha256, offset, line


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (BEGIN IMMEDIATE), rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def candidates(conn: sqlite3.Connection, path: str, head_len: int, head_sha: str) -> list[CursorRow]:
    """Cursors of this path, or of any file whose head has this length and hash; newest first."""
    return conn.execute(
        "SELECT id, path, head_len, head_sha256, offset, line FROM watch_cursors "
        "WHERE path = ? OR (head_len = ? AND head_sha256 = ?) ORDER BY id DESC", (path, head_len, head_sha)).fetchall()


def create(conn: sqlite3.Connection, path: str, empty_sha: str, at: str) -> int:
    cur = conn.execute("INSERT INTO watch_cursors (path, head_len, head_sha256, offset, line, updated_at) "
                       "VALUES (?, 0, ?, 0, 0, ?)", (path, empty_sha, at))
    return int(cur.lastrowid or 0)


def rename(conn: sqlite3.Connection, cursor_id: int, path: str) -> None:
    conn.execute("UPDATE watch_cursors SET path = ? WHERE id = ?", (path, cursor_id))


def position(conn: sqlite3.Connection, cursor_id: int) -> tuple[int, int] | None:
    """(offset, line) of a cursor, or None when it is gone."""
    row = conn.execute("SELECT offset, line FROM watch_cursors WHERE id = ?", (cursor_id,)).fetchone()
    return (row[0], row[1]) if row is not None else None


def move(conn: sqlite3.Connection, cursor_id: int, expected_offset: int, *, offset: int, line: int, head_len: int,
         head_sha: str, path: str, at: str) -> bool:
    """Move the cursor if it is still where this watcher left it; False when another watcher moved it."""
    row = conn.execute("SELECT offset FROM watch_cursors WHERE id = ?", (cursor_id,)).fetchone()
    if row is None or row[0] != expected_offset:
        return False
    conn.execute("UPDATE watch_cursors SET offset = ?, line = ?, head_len = ?, head_sha256 = ?, path = ?, "
                 "updated_at = ? WHERE id = ?", (offset, line, head_len, head_sha, path, at, cursor_id))
    return True
