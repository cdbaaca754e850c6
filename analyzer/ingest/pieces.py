"""A piece of a followed log (``capscan watch``), scanned once: what watch decides from and what it stores.

Watch must know where the runs of what it read end before it stores any of it (a run is stored only
once complete), and used to scan each piece twice for that: once in memory to find the runs, then
again inside ``ingest``. ``scan_piece`` scans the piece once, as ``ingest`` reads it (the same
``Input`` chunks, scanner and dispatcher), and keeps the dispatcher's events, so that:

- the runs' line spans come from replaying those events into an assembler (no line is matched again);
- ``write_piece`` writes the piece, or its first lines up to a run boundary, by replaying the same
  events into a fresh assembler and the source's one transaction, with the counts ``ingest`` would
  have stored for those lines.

Replaying the first lines is what a scan of those lines alone would give only when nothing read
before the cut waits on a line after it: no multi-line block open at the cut, no run of llama-bench
rows handed over across it, no overlong line, and bytes ``Input`` passes on unchanged (no UTF-16,
byte-order mark or NUL, not a capscan export). Otherwise the cut is stored by ``ingest`` itself,
and a piece ``Input`` would change is found by today's raw scan: the result is the same either way.
The events are held in memory: a piece is bounded by watch's ``PENDING_MAX`` plus one read.
"""

from __future__ import annotations

import copy
import io
import sqlite3
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from analyzer.parsers import Dispatcher
from analyzer.parsers.base import Event
from analyzer.parsers.exports import sniff
from analyzer.parsers.scanner import Scanner
from analyzer.read.reader import CHUNK, Input, InputError
from analyzer.runs.assembler import Assembler
from analyzer.store.db import StoreError
from analyzer.store.writer import SourceWriter

if TYPE_CHECKING:
    from analyzer.ingest import IngestResult
    from analyzer.model import Throughput
    from analyzer.runs.builder import RunBuilder
    from analyzer.store.db import Database


@dataclass(frozen=True)
class _Fed:
    """The dispatcher after one of the scanner's calls (one line, or a stretch of rows)."""

    first: int
    last: int
    recognised: int
    unrecognised: int
    rejected: int
    collecting: bool
    fresh: bool  # nothing carried to the next line: no block open, no process named, no rows' configuration


class _Noting(Dispatcher):
    """A dispatcher that notes its counts after each of the scanner's calls, so the counts of the
    piece's first lines are known without scanning them again."""

    def __init__(self) -> None:
        super().__init__()
        self.fed: list[_Fed] = []
        self._inner = 0  # feed_many calls feed for lines that are not rows: noted once, as the stretch

    def feed(self, line_no: int, raw: bytes) -> list[Event]:
        self._inner += 1
        try:
            events = super().feed(line_no, raw)
        finally:
            self._inner -= 1
        if not self._inner:
            self._note(line_no, line_no)
        return events

    def feed_many(self, first: int, lines: list[bytes | None]) -> list[Event]:
        self._inner += 1
        try:
            events = super().feed_many(first, lines)
        finally:
            self._inner -= 1
        self._note(first, first + len(lines) - 1)
        return events

    def _note(self, first: int, last: int) -> None:
        fresh = not self.collecting and self._last_proc is None and self._jsonl.config is None
        self.fed.append(_Fed(first, last, self.recognised, self.unrecognised, self.rejected, self.collecting, fresh))


@dataclass
class Piece:
    """One scan of ``data`` (whole lines of ``path``, its first numbered ``first_line``)."""

    path: str
    data: bytes
    first_line: int
    spans: list[tuple[int, int]] = field(default_factory=list)  # (first_line, last_line) of each run
    plain: bool = False  # scanned as Input passes it on: the events below are the piece's
    batches: list[tuple[int, list[Event]]] = field(default_factory=list)  # (index in fed, events); -1: at the end
    fed: list[_Fed] = field(default_factory=list)
    lines: int = 0
    recognised: int = 0
    unrecognised: int = 0
    rejected: int = 0
    overlong: int = 0
    size: int = 0
    sha256: str = ""


def _as_read(path: str, data: bytes) -> tuple[Input, list[bytes] | None]:
    """``data`` as ``Input`` hands it to ingest, in its chunks (its size and sha256 then known); None
    when Input refuses it."""
    source = Input(path, io.BytesIO(data))
    try:
        return source, list(source.chunks())
    except InputError:
        return source, None
    finally:
        _ = source.sha256  # the digest's thread ends here, whatever the caller does next


def scan_piece(path: str, data: bytes, *, first_line: int) -> Piece:
    """Scan ``data`` once and find its runs' spans; nothing is stored."""
    piece = Piece(path, data, first_line)
    # what ingest would refuse (chunks None) or change: the raw scan finds the runs, ingest stores them
    source, chunks = _as_read(path, data)
    if chunks is None or b"".join(chunks) != data or (first_line == 1 and chunks and sniff(chunks[0])):
        piece.spans = _raw_spans(data, first_line)
        return piece
    dispatcher = _Noting()
    batches = piece.batches
    scanner = Scanner(dispatcher, lambda events: batches.append((len(dispatcher.fed) - 1, events)))
    scanner.stats.lines = first_line - 1
    for chunk in chunks:
        scanner.feed(chunk)
    n_batches = len(batches)
    scanner.close()  # a block still open gives its events now: after every line, at the end
    batches[n_batches:] = [(-1, events) for _, events in batches[n_batches:]]
    piece.plain, piece.fed = True, dispatcher.fed
    piece.lines = scanner.stats.lines - (first_line - 1)
    piece.recognised, piece.unrecognised = dispatcher.recognised, dispatcher.unrecognised
    piece.rejected, piece.overlong = dispatcher.rejected, scanner.stats.overlong
    piece.size, piece.sha256 = source.size, source.sha256
    spans = piece.spans
    # handlers may keep or change an event's data: the spans are found on a copy, the store gets the originals
    _assemble(copy.deepcopy([events for _, events in batches]),
              lambda run: spans.append((run.facts.first_line, run.facts.last_line)), lambda run, rows: None)
    return piece


def _raw_spans(data: bytes, first_line: int) -> list[tuple[int, int]]:
    """The runs' spans of bytes scanned as they are (what watch did before: a piece ``Input`` changes)."""
    spans: list[tuple[int, int]] = []
    assembler = Assembler(lambda run: spans.append((run.facts.first_line, run.facts.last_line)),
                          lambda run, rows: None)
    scanner = Scanner(Dispatcher(), assembler.feed)
    scanner.stats.lines = first_line - 1
    scanner.feed(data)
    scanner.close()
    assembler.finish()
    return spans


def _assemble(batches: list[list[Event]], on_run: Callable[[RunBuilder], None],
              on_throughput: Callable[[RunBuilder, list[Throughput]], None]) -> None:
    assembler = Assembler(on_run, on_throughput)
    for events in batches:
        assembler.feed(events)
    assembler.finish()


def _prefix(piece: Piece, last_line: int) -> tuple[list[list[Event]], _Fed | None, int] | None:
    """The events and the dispatcher's counts of the piece's lines up to ``last_line``, when a scan of
    those lines alone gives the same (see the module's docstring); else None."""
    if not piece.plain or piece.overlong:
        return None
    upto = -1
    for i, fed in enumerate(piece.fed):
        if fed.first > last_line:
            break
        if fed.last > last_line:
            return None  # a stretch of rows across the cut is handed over as one
        upto = i
    at_cut = piece.fed[upto] if upto >= 0 else None
    if at_cut is not None and at_cut.collecting:
        return None  # a block open at the cut: its lines after the cut may change what it gives
    return [events for i, events in piece.batches if 0 <= i <= upto], at_cut, upto


def rest_of_piece(piece: Piece, nbytes: int) -> Piece | None:
    """The rest of the piece after its first ``nbytes`` (whole lines, a run boundary), from the same scan,
    when a scan of the rest alone gives the same: nothing read before carried over (no block open, no
    process named, no llama-bench configuration held), one chunk (``CHUNK``: the same stretches of rows),
    and bytes ``Input`` passes on unchanged. Else None: the rest is scanned again."""
    if not piece.plain or piece.overlong or len(piece.data) > CHUNK:
        return None
    rest = piece.data[nbytes:]
    last_line = piece.first_line + piece.data.count(b"\n", 0, nbytes) - 1
    found = _prefix(piece, last_line)
    if found is None or (found[1] is not None and not found[1].fresh):
        return None
    _, at_cut, upto = found
    head, chunks = _as_read(piece.path, rest)
    if chunks is None or b"".join(chunks) != rest:
        return None
    base = (at_cut.recognised, at_cut.unrecognised, at_cut.rejected) if at_cut is not None else (0, 0, 0)
    after = Piece(piece.path, rest, last_line + 1, plain=True)
    after.fed = [replace(f, recognised=f.recognised - base[0], unrecognised=f.unrecognised - base[1],
                         rejected=f.rejected - base[2]) for f in piece.fed[upto + 1:]]
    after.batches = [(i - upto - 1 if i >= 0 else -1, events) for i, events in piece.batches if i > upto or i < 0]
    after.lines = piece.lines - (last_line + 1 - piece.first_line)
    after.recognised, after.unrecognised = piece.recognised - base[0], piece.unrecognised - base[1]
    after.rejected, after.size, after.sha256 = piece.rejected - base[2], head.size, head.sha256
    spans = after.spans
    _assemble(copy.deepcopy([events for _, events in after.batches]),
              lambda run: spans.append((run.facts.first_line, run.facts.last_line)), lambda run, rows: None)
    return after


def write_piece(db: Database, piece: Piece, *, nbytes: int, before_commit: Callable[[], None]) -> IngestResult:
    """Store the piece's first ``nbytes`` (whole lines: all of it, or up to the end of a run) as one
    source, as ``ingest(..., force=True)`` would; ``before_commit`` runs inside its transaction.
    Raises InputError as ingest does for bytes it refuses."""
    from analyzer.ingest import IngestResult, ingest

    data = piece.data[:nbytes]
    lines = data.count(b"\n")
    last_line = piece.first_line + lines - 1
    found = _prefix(piece, last_line) if nbytes < len(piece.data) else (
        ([events for _, events in piece.batches], None, -1) if piece.plain else None)
    if found is None:  # the scan of these lines alone is what ingest does
        return ingest(db, Input(piece.path, io.BytesIO(data)), force=True, first_line=piece.first_line,
                      before_commit=before_commit)
    batches, at_cut, _ = found
    overlong = 0  # (a cut is replayed only when the piece has no overlong line)
    if nbytes == len(piece.data):
        lines, counts = piece.lines, (piece.recognised, piece.unrecognised, piece.rejected)
        size, sha256, overlong = piece.size, piece.sha256, piece.overlong
    else:
        counts = (at_cut.recognised, at_cut.unrecognised, at_cut.rejected) if at_cut is not None else (0, 0, 0)
        head, chunks = _as_read(piece.path, data)
        if chunks is None or b"".join(chunks) != data:  # (as scan_piece: it changes nothing of a plain piece)
            return ingest(db, Input(piece.path, io.BytesIO(data)), force=True, first_line=piece.first_line,
                          before_commit=before_commit)
        size, sha256 = head.size, head.sha256
    writer = SourceWriter(db, piece.path)
    result = IngestResult(path=piece.path)
    order: dict[int, None] = {}

    def on_run(run: RunBuilder) -> None:
        order[writer.write_run(run.seq, run.facts, run.evidence)] = None

    def on_throughput(run: RunBuilder, rows: list[Throughput]) -> None:
        writer.write_throughput(run.seq, run.facts, rows)

    try:
        _assemble(batches, on_run, on_throughput)
        result.lines, (result.recognised, result.unrecognised, result.rejected) = lines, counts
        result.overlong, result.size = overlong, size
        writer.begin()
        result.source_id = writer.commit(
            size=size, sha256=sha256, lines=lines, recognised=result.recognised, unrecognised=result.unrecognised,
            overlong=overlong, rejected=result.rejected, raw_gzip=None, before_commit=before_commit)
    except sqlite3.Error as exc:  # as ingest says it
        writer.rollback_quietly()
        raise StoreError(f"cannot store {piece.path} ({exc}); nothing of it was stored, and what the database "
                         "held before is unchanged") from None
    except BaseException:
        writer.rollback_quietly()
        raise
    result.run_ids = list(order)
    return result
