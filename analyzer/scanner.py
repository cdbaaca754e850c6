"""Stream an input in chunks and hand only the relevant lines on.

The input is never read whole: it arrives in chunks of a few MiB. In each
chunk, every prefilter literal is located with ``bytes.find`` (C speed), the
lines around the hits are cut out, and only those lines reach the parsers.
While a parser collects a multi-line block, every line goes to it.

Lines longer than ``MAX_LINE`` are skipped and counted; memory stays bounded
whatever the input (a 50 MB line without a newline costs ``MAX_LINE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable

from analyzer.parsers import LITERAL_BYTES, Dispatcher
from analyzer.parsers.base import Event

CHUNK = 4 << 20
MAX_LINE = 1 << 20


@dataclass
class ScanStats:
    lines: int = 0
    gated: int = 0
    overlong: int = 0
    bytes: int = 0


def _hit_starts(body: bytes, literals: Iterable[bytes]) -> list[int]:
    starts: set[int] = set()
    find, rfind = body.find, body.rfind
    for lit in literals:
        i = find(lit)
        while i != -1:
            ls = rfind(b"\n", 0, i) + 1
            starts.add(ls)
            le = find(b"\n", i)
            if le == -1:
                break
            i = find(lit, le)
    return sorted(starts)


class Scanner:
    def __init__(self, dispatcher: Dispatcher, on_events: Callable[[list[Event]], None],
                 literals: tuple[bytes, ...] = LITERAL_BYTES):
        self.dispatcher = dispatcher
        self.on_events = on_events
        self.literals = literals
        self.stats = ScanStats()
        self._carry = b""
        self._discarding = False  # inside an overlong line

    def feed(self, chunk: bytes) -> None:
        self.stats.bytes += len(chunk)
        if self._discarding:
            nl = chunk.find(b"\n")
            if nl == -1:
                return
            self._discarding = False
            self.stats.lines += 1
            chunk = chunk[nl + 1:]
        buf = self._carry + chunk if self._carry else chunk
        last_nl = buf.rfind(b"\n")
        if last_nl == -1:
            self._carry = buf
            self._check_overlong()
            return
        body, self._carry = buf[: last_nl + 1], buf[last_nl + 1:]
        self._process(body)
        self._check_overlong()

    def _check_overlong(self) -> None:
        if len(self._carry) > MAX_LINE:
            self._carry = b""
            self._discarding = True
            self.stats.overlong += 1

    def close(self) -> None:
        if self._carry and not self._discarding:
            self._process(self._carry + b"\n")
        elif self._discarding:
            self.stats.lines += 1
        self._carry = b""
        events = self.dispatcher.finish()
        if events:
            self.on_events(events)

    def _process(self, body: bytes) -> None:
        """``body`` ends with a newline; line numbers are 1-based."""
        base = self.stats.lines  # lines before this body
        total = body.count(b"\n")
        dispatcher = self.dispatcher
        pos, line_no = 0, base  # line_no = number of the line ending before pos
        count = body.count
        hits = _hit_starts(body, self.literals) if not dispatcher.collecting else None
        hit_index = 0
        while True:
            if dispatcher.collecting:
                # Every line goes to the open block until it closes.
                end = body.find(b"\n", pos)
                if end == -1:
                    break
                line_no += 1
                self._emit(line_no, body[pos:end])
                pos = end + 1
                continue
            if hits is None:
                hits = [h + pos for h in _hit_starts(body[pos:], self.literals)]
                hit_index = 0
            while hit_index < len(hits) and hits[hit_index] < pos:
                hit_index += 1
            if hit_index >= len(hits):
                break
            start = hits[hit_index]
            hit_index += 1
            line_no += count(b"\n", pos, start) + 1
            end = body.find(b"\n", start)
            self._emit(line_no, body[start:end])
            pos = end + 1
            if dispatcher.collecting:
                hits = None  # recomputed from where the block closes
        self.stats.lines = base + total

    def _emit(self, line_no: int, raw: bytes) -> None:
        self.stats.gated += 1
        if len(raw) > MAX_LINE:
            self.stats.overlong += 1
            return
        events = self.dispatcher.feed(line_no, raw)
        if events:
            self.on_events(events)
