"""Every recognised input format, and the dispatcher that turns prefiltered
lines into events.

The union of the formats' literals is the prefilter: a line that contains
none of them never reaches a regex (see ``analyzer.scanner``).
"""

from __future__ import annotations

from analyzer.normalize import normalize
from analyzer.parsers.base import Collector, Event, Format
from analyzer.parsers.bench import BENCH, JSONL_PREFIX, JsonlRows
from analyzer.parsers.context import CONTEXT
from analyzer.parsers.gpu_backends import CUDA, VULKAN
from analyzer.parsers.metal import METAL
from analyzer.parsers.probes import PROBE, SHIMS, SYSTEM_PROFILER
from analyzer.parsers.system import OLLAMA, SYSTEM
from analyzer.parsers.timings import TIMINGS

FORMATS: tuple[Format, ...] = (METAL, SHIMS, VULKAN, CUDA, BENCH, TIMINGS, PROBE, SYSTEM_PROFILER, SYSTEM, OLLAMA, CONTEXT)

LITERALS: tuple[str, ...] = tuple(dict.fromkeys(lit for fmt in FORMATS for lit in fmt.literals))
LITERAL_BYTES: tuple[bytes, ...] = tuple(lit.encode() for lit in LITERALS)

__all__ = ["Dispatcher", "Event", "FORMATS", "LITERALS", "LITERAL_BYTES"]


class Dispatcher:
    """Stateful per source: holds the collector of an open multi-line block."""

    def __init__(self) -> None:
        self.collector: Collector | None = None
        self.recognised = 0
        self.unrecognised = 0
        self._last_proc: str | None = None
        self._jsonl = JsonlRows()

    @property
    def collecting(self) -> bool:
        return self.collector is not None

    def feed(self, line_no: int, raw: bytes) -> list[Event]:
        if self.collector is None and raw.startswith(JSONL_PREFIX):
            row = self._jsonl.row(raw)
            if row is not None:
                self.recognised += 1
                return [Event("bench.row", line_no, "", row)]
        texts, proc = normalize(raw.decode("utf-8", errors="replace"))
        events: list[Event] = []
        if proc and proc != self._last_proc:
            self._last_proc = proc
            events.append(Event("hint.process", line_no, "", {"name": proc}))
        for text in texts:
            if self.collector is not None:
                got = self.collector.feed(line_no, text)
                if got is not None:
                    for ev in got:
                        if not ev.text:
                            ev.text = text
                    events.extend(got)
                    self.recognised += 1
                    continue
                events.extend(self.collector.finish())
                self.collector = None
            before = len(events)
            self._dispatch(line_no, text, events)
            if len(events) > before:
                self.recognised += 1
            else:
                self.unrecognised += 1
        return events

    def feed_many(self, lines: list[tuple[int, bytes]]) -> list[Event]:
        """Like ``feed`` for each line, in order; consecutive llama-bench JSONL
        rows of one configuration become a single ``bench.rows`` event (config +
        measurements), so files of a million rows cost one event per block."""
        events: list[Event] = []
        batch: list[tuple] | None = None
        jsonl = self._jsonl
        for line_no, raw in lines:
            if self.collector is None and raw.startswith(JSONL_PREFIX):
                m = jsonl.measure(raw)
                if m is not None:
                    self.recognised += 1
                    if batch is None:
                        batch = []
                        events.append(Event("bench.rows", line_no, "", {"config": jsonl.config, "rows": batch}))
                    batch.append((line_no, *m))
                    continue
            batch = None
            events.extend(self.feed(line_no, raw))
        return events

    def _dispatch(self, line_no: int, text: str, events: list[Event]) -> None:
        for fmt in FORMATS:
            if not any(lit in text for lit in fmt.literals):
                continue
            hit = fmt.parse(text)
            if hit is None:
                continue
            pattern, data = hit
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
