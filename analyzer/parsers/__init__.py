"""Every recognised input format, and the dispatcher that turns prefiltered
lines into events.

A line whose record has the wrong types or impossible values (``Rejected``,
or a decoder's own error on hostile input: JSON nested 100,000 deep, a number
of 400 digits), or a speed no machine can have (analyzer.parsers.plausible), is
skipped and counted in ``rejected``; it never stops the source and never
reaches the store.

The union of the formats' literals is the prefilter: a line that contains
none of them never reaches a regex (see ``analyzer.parsers.scanner``).
"""

from __future__ import annotations

from analyzer.parsers.base import REJECTED_KEY, Collector, Event, Format, Rejected
from analyzer.parsers.bench import BENCH, JSONL_PREFIX, JsonlRows
from analyzer.parsers.context import CONTEXT
from analyzer.parsers.crash import CRASH
from analyzer.parsers.gpu_backends import CUDA, DEVICE_INFO, VULKAN, WHISPER
from analyzer.parsers.metal import METAL
from analyzer.parsers.probes import PROBE, SHIMS, SYSTEM_PROFILER
from analyzer.parsers.starts import STARTS
from analyzer.parsers.system import OLLAMA, SYSTEM
from analyzer.parsers.tables import COMPARE
from analyzer.parsers.timings import TIMINGS
from analyzer.parsers.wrappers import WRAPPERS
from analyzer.read.normalize import normalize_numbered

FORMATS: tuple[Format, ...] = (METAL, SHIMS, VULKAN, CUDA, DEVICE_INFO, BENCH, COMPARE, WRAPPERS, TIMINGS, PROBE,
                               SYSTEM_PROFILER, SYSTEM, OLLAMA, CONTEXT, CRASH, WHISPER, STARTS)

LITERALS: tuple[str, ...] = tuple(dict.fromkeys(lit for fmt in FORMATS for lit in fmt.literals))


def head_kinds(head: str) -> frozenset[str]:
    """The event kinds whose patterns declare they may sit in a Metal block's head (``Pattern.heads``)."""
    return frozenset(p.kind for fmt in FORMATS for p in fmt.patterns if head in p.heads)

LITERAL_BYTES: tuple[bytes, ...] = tuple(lit.encode() for lit in LITERALS)

__all__ = ["Dispatcher", "Event", "FORMATS", "LITERALS", "LITERAL_BYTES", "Rejected", "head_kinds"]

# What hostile input makes a parser raise: a bad record is skipped and counted, never a traceback.
BAD_RECORD = (ValueError, TypeError, OverflowError, RecursionError, UnicodeError)


def _records(exc: BaseException) -> int:
    return exc.records if isinstance(exc, Rejected) else 1


class Dispatcher:
    """Stateful per source: holds the collector of an open multi-line block."""

    def __init__(self) -> None:
        self.collector: Collector | None = None
        self.recognised = 0
        self.unrecognised = 0
        self.rejected = 0  # records skipped for wrong types or impossible values
        self._last_proc: str | None = None
        self._jsonl = JsonlRows()

    @property
    def collecting(self) -> bool:
        return self.collector is not None

    def feed(self, line_no: int, raw: bytes) -> list[Event]:
        if self.collector is None and raw.startswith(JSONL_PREFIX):
            try:
                row = self._jsonl.row(raw)
            except BAD_RECORD as exc:
                self.rejected += _records(exc)
                return []
            if row is not None:
                self.recognised += 1
                return [Event("bench.row", line_no, "", row)]
        texts, proc = normalize_numbered(raw.decode("utf-8", errors="replace"))
        events: list[Event] = []
        if proc and proc != self._last_proc:
            self._last_proc = proc
            events.append(Event("hint.process", line_no, "", {"name": proc}))
        for inner, text in texts:
            if self.collector is not None:
                try:
                    got = self.collector.feed(line_no, text)
                except BAD_RECORD as exc:
                    self.rejected += _records(exc)  # the block's record is dropped, the line with it
                    if not getattr(self.collector, "survives_rejects", False):
                        self.collector = None  # (a table of one row a line goes on)
                    continue
                if got is not None:
                    for ev in got:
                        if not ev.text:
                            ev.text = text
                        if inner is not None and ev.inner is None and ev.text == text:
                            ev.inner = inner  # (a block's event for an earlier line keeps that line's)
                        if REJECTED_KEY in ev.data:  # records of the block refused, the rest stand
                            self.rejected += ev.data.pop(REJECTED_KEY)
                    events.extend(got)
                    self.recognised += 1
                    continue
                passes = getattr(self.collector, "passes", None)
                if passes is None or not passes(text):
                    events.extend(self.collector.finish())
                    self.collector = None
                # else: a line between the block's records (llama-bench -v stderr between CSV rows), read as any
                # other while the block stays open (a block it opens replaces it)
            before = len(events)
            try:
                self._dispatch(line_no, text, events)
            except BAD_RECORD as exc:
                self.rejected += _records(exc)
                del events[before:]
                continue
            if len(events) > before:
                self.recognised += 1
                if inner is not None:
                    for ev in events[before:]:
                        ev.inner = inner
            else:
                self.unrecognised += 1
        return events

    def feed_many(self, first: int, lines: list[bytes | None]) -> list[Event]:
        """Like ``feed`` for each of consecutive lines, numbered from ``first`` (None: a line
        skipped, too long to read); consecutive llama-bench JSONL rows of one configuration
        become a single ``bench.rows`` event (config + measurements), so files of a million
        rows cost one event per stretch of one configuration."""
        events: list[Event] = []
        batch: list[tuple] | None = None
        jsonl = self._jsonl
        measure = jsonl.measure  # None for any line that is not a row of the last configuration
        measured = 0
        line_no = first - 1
        for raw in lines:
            line_no += 1
            if raw is None:
                continue
            if self.collector is None:
                m = measure(raw)
                if m is not None:
                    measured += 1
                    if batch is None:
                        batch = []
                        events.append(Event("bench.rows", line_no, "", {"config": jsonl.config, "rows": batch}))
                    batch.append((line_no, *m))
                    continue
            batch = None
            events.extend(self.feed(line_no, raw))
        self.recognised += measured
        return events

    def _dispatch(self, line_no: int, text: str, events: list[Event]) -> None:
        for fmt in FORMATS:
            if not any(lit in text for lit in fmt.literals):
                continue
            hit = fmt.parse(text)
            if hit is None:
                continue
            pattern, data = hit
            if REJECTED_KEY in data:  # some of the line's records were refused, the rest stand
                self.rejected += data.pop(REJECTED_KEY)
            events.append(Event(pattern.kind, line_no, text, data))
            if pattern.collector is not None:
                self.collector = pattern.collector(data, line_no, text)
            return

    def finish(self) -> list[Event]:
        if self.collector is None:
            return []
        events = self.collector.finish()
        self.collector = None
        return events
