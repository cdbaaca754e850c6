"""Stream an input in chunks and hand only the relevant lines on.

The input is never read whole: it arrives in chunks of a few MiB. In each
chunk, every prefilter literal is located once (one pass per literal, at C
speed), the lines around the hits are cut out, and only those lines reach the
parsers. While a parser collects a multi-line block, every line goes to it.

The search is ``analyzer.read.literal_search``: one Hyperscan pass per chunk for
all literals at once where the ``hyperscan`` package imports, else one pass
per literal (glibc's ``memmem`` or ``bytes.find``); every engine gives the
same lines. Newlines are counted once per chunk (up to each hit, then the
rest). Adjacent llama-bench JSONL rows among the hits go to the dispatcher
together (``Dispatcher.feed_many``: a million-row file costs one event per
stretch of rows of one configuration, not one per row).

Lines longer than ``MAX_LINE`` are skipped and counted; memory stays bounded
whatever the input (a 50 MB line without a newline costs ``MAX_LINE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from analyzer.parsers import LITERAL_BYTES, Dispatcher
from analyzer.parsers.base import Event
from analyzer.parsers.bench import JSONL_PREFIX
from analyzer.read.literal_search import HyperscanSearch, PureSearch, literal_search

CHUNK = 4 << 20
MAX_LINE = 1 << 20

@dataclass
class ScanStats:
    lines: int = 0
    overlong: int = 0


# -- the scanner ------------------------------------------------------------------

def _count_overlong(body: bytes, start: int, end: int) -> int:
    """Lines longer than MAX_LINE in ``body[start:end]``, found by looking for
    a newline in each window of MAX_LINE bytes (a few searches per chunk,
    not one per line)."""
    n, i = 0, start
    while end - i > MAX_LINE:
        k = body.rfind(b"\n", i, i + MAX_LINE + 1)
        if k == -1:  # no newline within MAX_LINE + 1 bytes: the line at i is overlong
            n += 1
            k = body.find(b"\n", i + MAX_LINE, end)
            if k == -1:
                break
        i = k + 1
    return n


class Scanner:
    def __init__(self, dispatcher: Dispatcher, on_events: Callable[[list[Event]], None],
                 literals: tuple[bytes, ...] = LITERAL_BYTES, search: HyperscanSearch | PureSearch | None = None):
        if any(b"\n" in lit or not lit for lit in literals):
            raise ValueError("prefilter literals must be non-empty and hold no newline")
        self.dispatcher = dispatcher
        self.on_events = on_events
        self.literals = literals
        self.search = search if search is not None else literal_search(literals)
        # a line opening so holds a literal: it passes the prefilter without the search
        self._rows_prefix = JSONL_PREFIX if any(lit in JSONL_PREFIX for lit in literals) else None
        self.stats = ScanStats()
        self._carry = b""
        self._discarding = False  # inside an overlong line

    def feed(self, chunk: bytes) -> None:
        pos = 0
        if self._discarding:
            nl = chunk.find(b"\n")
            if nl == -1:
                return
            self._discarding = False
            self.stats.lines += 1
            pos = nl + 1
        if self._carry:
            # Complete the pending line alone (no copy of the whole chunk).
            nl = chunk.find(b"\n", pos)
            if nl == -1:
                self._carry += chunk[pos:]
                self._check_overlong()
                return
            head = self._carry + chunk[pos: nl + 1]
            self._carry = b""
            self._process(head, 0, len(head))
            pos = nl + 1
        last_nl = chunk.rfind(b"\n", pos)
        if last_nl == -1:
            self._carry = chunk[pos:]
            self._check_overlong()
            return
        self._process(chunk, pos, last_nl + 1)
        self._carry = chunk[last_nl + 1:]
        self._check_overlong()

    def _check_overlong(self) -> None:
        if len(self._carry) > MAX_LINE:
            self._carry = b""
            self._discarding = True
            self.stats.overlong += 1

    def close(self) -> None:
        if self._carry and not self._discarding:
            tail = self._carry + b"\n"
            self._process(tail, 0, len(tail))
        elif self._discarding:
            self.stats.lines += 1
        self._carry = b""
        self._discarding = False
        events = self.dispatcher.finish()
        if events:
            self.on_events(events)

    def _process(self, body: bytes, start: int, end: int) -> None:
        """``body[start:end]`` is whole lines, ending with a newline; line
        numbers are 1-based."""
        if start >= end:
            return
        base = self.stats.lines  # lines before this body
        if end - start > MAX_LINE:
            self.stats.overlong += _count_overlong(body, start, end)
        dispatcher = self.dispatcher
        find, count, opens = body.find, body.count, body.startswith
        rows_prefix = self._rows_prefix
        picked: list[bytes | None] = []  # consecutive llama-bench JSONL rows, handed over together
        picked_first = 0  # the first one's line number
        pos, line_no = start, base  # line_no = number of the line ending before pos
        hits: list[int] | None = None  # computed once, over the whole range, when first needed
        hit_index = 0
        while pos < end:
            if dispatcher.collecting:
                # Every line goes to the open block until it closes.
                eol = find(b"\n", pos, end)
                line_no += 1
                self._emit(line_no, body[pos:eol])
                pos = eol + 1
                continue
            if rows_prefix and opens(rows_prefix, pos):
                # llama-bench JSONL rows hold a literal: taken without the search (a dense file is
                # all rows), as far as they go, to be handed over together (nothing is fed until then)
                if not picked:
                    picked_first = line_no + 1
                while True:
                    eol = find(b"\n", pos, end)
                    # (a line over MAX_LINE is fed to no one: counted by _count_overlong)
                    picked.append(body[pos:eol] if eol - pos <= MAX_LINE else None)
                    pos = eol + 1
                    if pos >= end or not opens(rows_prefix, pos):
                        break
                line_no = picked_first + len(picked) - 1
                continue
            if picked:
                # The rows go first: one may open a block, which then takes every line after it.
                self._deliver(dispatcher.feed_many(picked_first, picked))
                picked = []
                continue
            if hits is None:
                hits = self.search.line_starts(body, pos, end)
            n_hits = len(hits)
            while hit_index < n_hits and hits[hit_index] < pos:
                hit_index += 1
            if hit_index >= n_hits:
                break
            ls = hits[hit_index]
            hit_index += 1
            if rows_prefix and ls != pos and opens(rows_prefix, ls):
                line_no += count(b"\n", pos, ls)  # the row is taken at the top of the loop
                pos = ls
                continue
            line_no += count(b"\n", pos, ls) + 1
            eol = find(b"\n", ls, end)
            self._emit(line_no, body[ls:eol])
            pos = eol + 1
        if picked:
            self._deliver(dispatcher.feed_many(picked_first, picked))
        # line_no counts the lines ending before pos: only the rest is left to count
        self.stats.lines = line_no + count(b"\n", pos, end)

    def _deliver(self, events: list[Event]) -> None:
        if events:
            self.on_events(events)

    def _emit(self, line_no: int, raw: bytes) -> None:
        if len(raw) > MAX_LINE:
            return  # counted by _count_overlong
        events = self.dispatcher.feed(line_no, raw)
        if events:
            self.on_events(events)
