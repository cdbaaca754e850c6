"""Follow log files like ``tail -F`` and store each run as it completes.

One ``Follower`` per path. Each ``poll`` reads what was appended (complete
lines only: a partial last line waits for its newline), and stores a piece of
the file when the runs in it are complete:

- when a new run starts, the runs before it are complete;
- when the file has been quiet for ``settle`` seconds (a runtime printed its
  device block and is now serving), everything read so far is stored;
- when the file is rotated (renamed away, a new one created) or truncated
  (copytruncate), the rest of the old content is read and stored first;
- when it is rewritten in place (same file, new content, already longer than
  what was read: ``cat new > server.log`` between two polls), its first KiB
  no longer matches what was read: what was read is stored, then the new
  content from the start;
- ``final=True`` (``capscan watch --once``) stores everything read.

Restart safety: the database keeps one cursor per followed file (table
``watch_cursors``): everything before ``offset`` is stored. A piece of the file
and its cursor move are one transaction, and the cursor only moves if it is
still where this follower left it (compare-and-set), so two watchers on one
file, or a crash between two writes, never store a line twice or lose one.
A file is recognised by the sha256 of its first KiB, so a cursor follows its
content when server.log becomes server-1.log while capscan is stopped.

Pieces without any recognised run move the cursor without storing a source
(a busy server log would otherwise leave thousands of empty sources).

What is read is scanned once (``analyzer.pipeline.read_piece``): the runs found in that scan
decide what is complete, the piece is stored from the same scan (``store_piece``), and what is left
after a cut keeps it (``piece_after``) unless a scan of it alone could differ. Lines read at a later
poll are scanned with those still pending, as one piece.
"""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from analyzer.pipeline import piece_after, read_piece, store_piece
from analyzer.read.reader import InputError
from analyzer.store import cursors
from analyzer.store.writer import now as utc_now

if TYPE_CHECKING:
    from analyzer.pipeline import Piece
    from analyzer.store.db import Database

HEAD = 1024  # bytes that identify a file's content
READ_MAX = 8 << 20  # read at most this much per file per poll (a huge backlog is caught up over several polls)
PENDING_MAX = 32 << 20  # a single run larger than this is stored in pieces
DEFAULT_SETTLE = 5.0


class CursorMoved(Exception):
    """Another watcher stored this piece first."""


@dataclass
class StoredPiece:
    path: str
    first_line: int
    last_line: int
    run_ids: list[int] = field(default_factory=list)


def _head_sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _offset_of_line(data: bytes | bytearray, lines_before: int) -> int:
    """Byte offset in ``data`` where its (lines_before + 1)-th line starts."""
    pos = 0
    for _ in range(lines_before):
        pos = data.index(b"\n", pos) + 1
    return pos


class Follower:
    """One followed path: an open file, a cursor in the database, and the
    complete lines read since the cursor (``pending``)."""

    def __init__(self, db: Database, path: str, *, settle: float = DEFAULT_SETTLE,
                 on_notice: Callable[[str], None] | None = None):
        self.db = db
        self.path = os.path.abspath(path)
        self.settle = settle
        self.notice = on_notice or (lambda msg: None)
        self.fh: io.BufferedReader | None = None
        self.ident: tuple[int, int] | None = None
        self.cursor_id: int | None = None
        self.base_offset = 0  # == the cursor's offset: everything before it is stored
        self.base_line = 0  # lines before base_offset
        self.pending = bytearray()  # complete lines after base_offset
        self.partial = b""  # an unfinished last line
        self.last_growth = 0.0
        self.missing_told = False
        self.synthetic_nl = 0  # 1 when pending ends with a newline the file lacks (an old file's last line)
        self.reopening = False
        self.head_seen = b""  # the file's first bytes (up to HEAD) as read: a rewrite changes them
        self.scanned: Piece | None = None  # the one scan of pending, while pending is what it scanned

    # -- opening and recognising the file ------------------------------------
    @property
    def read_pos(self) -> int:
        return self.base_offset + len(self.pending) + len(self.partial)

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open while followed
        except FileNotFoundError:
            if not self.missing_told:
                self.notice(f"{self.path}: not there (yet); waiting for it to appear")
                self.missing_told = True
            return False
        except OSError as exc:
            if not self.missing_told:
                self.notice(f"{self.path}: cannot open ({exc.strerror or exc}); will retry")
                self.missing_told = True
            return False
        st = os.fstat(fh.fileno())
        if not os.path.isfile(self.path):
            fh.close()
            if not self.missing_told:
                self.notice(f"{self.path}: not a regular file; skipped")
                self.missing_told = True
            return False
        self.missing_told = False
        self.fh = fh
        self.ident = (st.st_dev, st.st_ino)
        self._attach_cursor()
        self.head_seen = self._head(min(HEAD, self.base_offset))
        fh.seek(self.base_offset)
        self.scanned = None
        self.pending.clear()
        self.partial = b""
        return True

    def _head(self, n: int) -> bytes:
        assert self.fh is not None
        return os.pread(self.fh.fileno(), n, 0)

    def _attach_cursor(self) -> None:
        """Find this file's cursor (or create it at 0), in one write
        transaction so that two watchers starting together share one."""
        assert self.fh is not None
        size = os.fstat(self.fh.fileno()).st_size
        head = self._head(HEAD)
        conn = self.db.conn
        with cursors.immediate(conn):
            rows = cursors.candidates(conn, self.path, HEAD, _head_sha(head))
            chosen = None
            for row in rows:  # this path, same content
                cid, path, head_len, sha, offset, line = row
                if path == self.path and head_len <= len(head) and _head_sha(head[:head_len]) == sha \
                        and offset <= size:
                    chosen = row
                    break
            if chosen is None:  # the same content, moved here from another path (rotated while stopped)
                for row in rows:
                    cid, path, head_len, sha, offset, line = row
                    if path != self.path and head_len == HEAD and offset <= size and not _holds(path, head_len, sha):
                        chosen = row
                        self.notice(f"{self.path}: continues {path} (renamed), from line {line + 1}")
                        break
            if chosen is None:
                stale = [r for r in rows if r[1] == self.path]
                if stale and stale[0][4] and not self.reopening:
                    self.notice(f"{self.path}: replaced or truncated since last seen; reading from the start")
                self.cursor_id = cursors.create(conn, self.path, _head_sha(b""), utc_now())
                self.base_offset, self.base_line = 0, 0
            else:
                self.cursor_id, self.base_offset, self.base_line = chosen[0], chosen[4], chosen[5]
                if chosen[1] != self.path:
                    cursors.rename(conn, chosen[0], self.path)

    # -- one poll -------------------------------------------------------------
    def poll(self, now: float, *, final: bool = False) -> list[StoredPiece]:
        if self.fh is None and not self._open():
            return []
        stored: list[StoredPiece] = []
        changed = self._changed_underneath()
        if changed:
            if changed == "rewritten":  # the old content is gone: what is past read_pos is the new one's
                self.partial = b""
            else:
                while self._read_to_eof(take_partial=True):  # the rest of the old file
                    stored += self._store(len(self.pending))
            stored += self._store(len(self.pending))
            self.fh.close()  # type: ignore[union-attr]
            self.fh = None
            if changed == "rewritten":
                self.notice(f"{self.path}: rewritten in place; reading the new content from the start")
            elif changed == "truncated":
                self.notice(f"{self.path}: truncated; reading from the start")
            else:
                self.notice(f"{self.path}: rotated; following the new file")
            self.reopening = True
            try:
                if not self._open():
                    return stored
            finally:
                self.reopening = False
        while self._read_to_eof(take_partial=False):  # READ_MAX at a time; --once (final) reads to the end
            self.last_growth = now
            stored += self._store_complete_runs()
            if len(self.pending) >= PENDING_MAX:  # one huge run, or a long stretch of unrecognised lines
                stored += self._store(len(self.pending))
            if not final:
                break
        if self.pending and (final or len(self.pending) >= PENDING_MAX or now - self.last_growth >= self.settle):
            stored += self._store(len(self.pending))
        return stored

    def _changed_underneath(self) -> str | None:
        assert self.fh is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None  # renamed away, the new one not created yet: keep reading the old one
        if (st.st_dev, st.st_ino) != self.ident:
            return "rotated"
        if st.st_size < self.read_pos:
            return "truncated"
        if self.head_seen and self._head(len(self.head_seen)) != self.head_seen:
            return "rewritten"  # one pread of at most HEAD bytes a poll
        return None

    def _read_to_eof(self, *, take_partial: bool) -> bool:
        assert self.fh is not None
        self.fh.seek(self.read_pos)
        data = self.fh.read(READ_MAX)
        buf = self.partial + data if data else self.partial
        if not buf:
            return False
        nl = buf.rfind(b"\n")
        if take_partial and not data and not buf.endswith(b"\n"):
            buf += b"\n"  # the old file is finished: its last line is complete
            nl = len(buf) - 1
            self.synthetic_nl = 1
        if nl == -1:
            self.partial = buf
            return bool(data)
        self.pending += buf[: nl + 1]
        self.partial = buf[nl + 1:]
        if len(self.head_seen) < HEAD and len(self.head_seen) < self.read_pos:
            self.head_seen = self._head(min(HEAD, self.read_pos))
        return True

    def _scan(self) -> Piece:
        """Pending, scanned once: again only after it changed (lines read, or a piece stored)."""
        piece = self.scanned
        if piece is None or piece.first_line != self.base_line + 1 or len(piece.data) != len(self.pending):
            piece = self.scanned = read_piece(self.path, bytes(self.pending), first_line=self.base_line + 1)
        return piece

    def _store_complete_runs(self) -> list[StoredPiece]:
        spans = self._scan().spans
        if len(spans) < 2:
            return []
        # Cut right after the last line of the complete runs: lines between them and the open run
        # (a markdown table's header, say) stay with the open run, whose parse may need them.
        done_until = max(last for _, last in spans[:-1])
        if done_until >= spans[-1][0]:
            return []
        cut = _offset_of_line(self.pending, done_until - self.base_line)
        return self._store(cut, has_runs=True) if cut else []

    def _store(self, nbytes: int, has_runs: bool | None = None) -> list[StoredPiece]:
        """Store the first ``nbytes`` of pending (whole lines) and move the cursor past them."""
        if nbytes <= 0:
            return []
        piece = self._scan()
        lines = piece.data.count(b"\n", 0, nbytes)
        synthetic = self.synthetic_nl if nbytes == len(self.pending) else 0
        end_offset, end_line = self.base_offset + nbytes - synthetic, self.base_line + lines
        head_len = min(HEAD, end_offset)
        head_sha = _head_sha(self._head(head_len)) if head_len else _head_sha(b"")
        assert self.cursor_id is not None  # attached when the file was opened
        expected = (self.cursor_id, self.base_offset)

        def move_cursor() -> None:
            if not cursors.move(self.db.conn, expected[0], expected[1], offset=end_offset, line=end_line,
                                head_len=head_len, head_sha=head_sha, path=self.path, at=utc_now()):
                raise CursorMoved()

        stored = StoredPiece(self.path, self.base_line + 1, end_line)
        try:
            if has_runs if has_runs is not None else piece.spans:
                stored.run_ids = self._ingest(piece, nbytes, move_cursor)
            else:
                self._cursor_only(move_cursor)
        except CursorMoved:
            self._resync()
            return []
        # what is left is scanned again only if the scan of it alone could differ (analyzer.ingest.pieces)
        self.scanned = piece_after(piece, nbytes) if nbytes < len(piece.data) else None
        del self.pending[:nbytes]
        self.base_offset, self.base_line = end_offset, end_line
        self.synthetic_nl -= synthetic
        return [stored] if stored.run_ids else []

    def _ingest(self, piece: Piece, nbytes: int, move_cursor: Callable[[], None]) -> list[int]:
        try:
            result = store_piece(self.db, piece, nbytes=nbytes, before_commit=move_cursor)
        except InputError as exc:  # e.g. NUL bytes: not a text log; skip this piece, counted in the notice
            last = self.base_line + piece.data.count(b"\n", 0, nbytes)
            self.notice(f"{exc} (lines {self.base_line + 1}-{last} skipped)")
            self._cursor_only(move_cursor)
            return []
        return result.run_ids

    def _cursor_only(self, move_cursor: Callable[[], None]) -> None:
        with cursors.immediate(self.db.conn):
            move_cursor()

    def _resync(self) -> None:
        """Another watcher stored what we were about to: continue from its cursor."""
        row = cursors.position(self.db.conn, self.cursor_id) if self.cursor_id is not None else None
        self.scanned = None
        self.pending.clear()
        self.partial = b""
        self.synthetic_nl = 0
        if row is None:  # gone: start over with a fresh lookup
            if self.fh is not None:
                self.fh.close()
            self.fh = None
            return
        self.base_offset, self.base_line = row

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _holds(path: str, head_len: int, sha: str) -> bool:
    """Does the file at ``path`` still start with the content a cursor describes?"""
    try:
        with open(path, "rb") as fh:
            return _head_sha(fh.read(head_len)) == sha
    except OSError:
        return False


class Watcher:
    """Several followed paths, polled in turn; stored runs are diagnosed and
    handed to ``on_runs`` as each piece is stored."""

    def __init__(self, db: Database, paths: list[str], *, settle: float = DEFAULT_SETTLE,
                 on_runs: Callable[[list], None] | None = None, on_notice: Callable[[str], None] | None = None,
                 discover: Callable[[], list[str]] | None = None):
        self.db = db
        self.settle = settle
        self.on_runs = on_runs or (lambda runs: None)
        self.on_notice = on_notice or (lambda msg: None)
        self.discover = discover  # re-read the known locations now and then (new daily log files)
        self.followers: dict[str, Follower] = {}
        self.last_discovery = 0.0
        for p in paths:
            self.add(p)

    def add(self, path: str) -> None:
        key = os.path.abspath(path)
        if key not in self.followers:
            self.followers[key] = Follower(self.db, key, settle=self.settle, on_notice=self.on_notice)

    def poll(self, now: float | None = None, *, final: bool = False) -> list:
        from analyzer.pipeline import diagnose_and_store

        now = time.monotonic() if now is None else now
        if self.discover is not None and now - self.last_discovery >= 10.0:
            self.last_discovery = now
            for p in self.discover():
                self.add(p)
        out = []
        for follower in list(self.followers.values()):
            try:
                pieces = follower.poll(now, final=final)
            except sqlite3.OperationalError as exc:
                self.on_notice(f"{follower.path}: database busy ({exc}); will retry")
                continue
            ids = [rid for piece in pieces for rid in piece.run_ids]
            if ids:
                runs = diagnose_and_store(self.db, ids, refresh_peers=True)
                out += runs
                self.on_runs(runs)
        return out

    def run(self, *, interval: float = 0.5, stop: Callable[[], bool] | None = None) -> None:
        """Poll until ``stop()`` is true (or forever; Ctrl-C raises KeyboardInterrupt)."""
        while stop is None or not stop():
            self.poll()
            time.sleep(interval)

    def close(self) -> None:
        for f in self.followers.values():
            f.close()
