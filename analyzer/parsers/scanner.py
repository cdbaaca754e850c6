"""Stream an input in chunks and hand only the relevant lines on.

The input is never read whole: it arrives in chunks of a few MiB. In each
chunk, every prefilter literal is located once (one pass per literal, at C
speed), the lines around the hits are cut out, and only those lines reach the
parsers. While a parser collects a multi-line block, every line goes to it.

The search is ``analyzer.read.literal_search``: one Hyperscan pass per chunk for
all literals at once where the ``hyperscan`` package imports, else one pass
per literal (glibc's ``memmem`` or ``bytes.find``); every engine gives the
same lines. Newlines are counted once per chunk (up to each hit, then the
rest). A chunk that is mostly llama-bench JSONL rows (each line opens with a
literal) skips the search: each line is checked with ``startswith`` instead.

Lines longer than ``MAX_LINE`` are skipped and counted; memory stays bounded
whatever the input (a 50 MB line without a newline costs ``MAX_LINE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from analyzer.parsers import LITERAL_BYTES, Dispatcher
from analyzer.parsers.base import Event
from analyzer.read.literal_search import HyperscanSearch, PureSearch, literal_search

CHUNK = 4 << 20
MAX_LINE = 1 << 20

# Line openings that contain a literal: a line that starts with one passes the
# prefilter without a search. Used when most lines of a chunk start so.
DENSE_PREFIXES: tuple[bytes, ...] = (b'{"build_commit"',)


@dataclass
class ScanStats:
    lines: int = 0
    gated: int = 0
    overlong: int = 0
    bytes: int = 0


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
        self.dense_prefixes = tuple(p for p in DENSE_PREFIXES if any(lit in p for lit in literals))
        self.stats = ScanStats()
        self._carry = b""
        self._discarding = False  # inside an overlong line

    def feed(self, chunk: bytes) -> None:
        self.stats.bytes += len(chunk)
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
        if self.dense_prefixes and self._dense(body, start, end):
            self._process_lines(body, start, end)
            return
        base = self.stats.lines  # lines before this body
        if end - start > MAX_LINE:
            self.stats.overlong += _count_overlong(body, start, end)
        dispatcher = self.dispatcher
        find, count = body.find, body.count
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
            if hits is None:
                hits = self.search.line_starts(body, pos, end)
            n_hits = len(hits)
            while hit_index < n_hits and hits[hit_index] < pos:
                hit_index += 1
            if hit_index >= n_hits:
                break
            ls = hits[hit_index]
            hit_index += 1
            line_no += count(b"\n", pos, ls) + 1
            eol = find(b"\n", ls, end)
            self._emit(line_no, body[ls:eol])
            pos = eol + 1
        # line_no counts the lines ending before pos: only the rest is left to count
        self.stats.lines = line_no + count(b"\n", pos, end)

    def _dense(self, body: bytes, start: int, end: int) -> bool:
        """Do most lines of this range open with a dense prefix? (Sampled
        on its first lines: one line read, no pass over the range.)"""
        prefixes = self.dense_prefixes
        if not body.startswith(prefixes, start):
            return False
        # the first 16 lines must all open so
        pos = start
        for _ in range(16):
            eol = body.find(b"\n", pos, end)
            if eol == -1 or eol + 1 >= end:
                return True
            pos = eol + 1
            if not body.startswith(prefixes, pos):
                return False
        return True

    def _process_lines(self, body: bytes, start: int, end: int) -> None:
        """A dense range: runs of rows the dispatcher can take as a block
        (``feed_block``: consecutive llama-bench rows of one configuration,
        read without cutting the range into lines) go to it whole; the lines
        where a run stops go the line-by-line way (``_process_each``), one at
        first, twice as many after each stop that no block follows (a range
        that is dense but never a block costs what line by line costs)."""
        feed_block = getattr(self.dispatcher, "feed_block", None)
        if feed_block is None:
            self._process_each(body, start, end)
            return
        dispatcher, stats = self.dispatcher, self.stats
        pos, stretch = start, 1
        while pos < end:
            if not dispatcher.collecting:
                got = feed_block(body, pos, end, stats.lines, MAX_LINE)
                if got is not None:
                    events, pos, n = got
                    stats.lines += n
                    stats.gated += n
                    self._deliver(events)
                    stretch = 1
                    continue
            stop = pos
            for _ in range(stretch):
                stop = body.find(b"\n", stop, end) + 1  # the range ends with a newline
                if stop >= end:
                    break
            self._process_each(body, pos, stop)
            pos = stop
            stretch = min(stretch * 2, 4096)

    def _process_each(self, body: bytes, start: int, end: int) -> None:
        """Line by line: a line opening with a dense prefix holds a literal;
        any other line is checked against every literal. The range's events
        go on together (a dense range holds thousands of rows)."""
        prefixes, literals = self.dense_prefixes, self.literals
        dispatcher = self.dispatcher
        line_no = self.stats.lines
        gated = overlong = 0
        picked: list[tuple[int, bytes]] = []  # dense rows, handed over together (order kept)
        lines = body[start:end - 1].split(b"\n")  # ``end - 1`` is the final newline
        for raw in lines:
            line_no += 1
            if len(raw) > MAX_LINE:
                overlong += 1
                continue
            if raw.startswith(prefixes) and not dispatcher.collecting:
                gated += 1
                picked.append((line_no, raw))
                continue
            # Any other line: what came before goes first, since it may open a block.
            if picked:
                self._deliver(dispatcher.feed_many(picked))
                picked = []
            if not dispatcher.collecting:
                for lit in literals:
                    if lit in raw:
                        break
                else:
                    continue
            self._emit(line_no, raw)
        if picked:
            self._deliver(dispatcher.feed_many(picked))
        self.stats.lines = line_no
        self.stats.gated += gated
        self.stats.overlong += overlong

    def _deliver(self, events: list[Event]) -> None:
        if events:
            self.on_events(events)

    def _emit(self, line_no: int, raw: bytes) -> None:
        self.stats.gated += 1
        if len(raw) > MAX_LINE:
            return  # counted by _count_overlong
        events = self.dispatcher.feed(line_no, raw)
        if events:
            self.on_events(events)
