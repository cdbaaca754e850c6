"""capscan's own exports read back: ``export json``, ``--nl`` events, ``diagnose --json``.

An aggregator collects each guest's export and ingests it centrally; read as a log, such
a file would become a run whose device is a JSON fragment. Its first bytes say what it
is (``SHAPES``: the first key of its first object), and its runs are then streamed one
object at a time, so a file of 100,000 runs is read in bounded memory."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any, Iterator

import regex

MAX_OBJECT = 4 << 20  # one run object (its throughput and findings); larger is damage, not a run
MAX_HEAD = 1 << 20  # the document's keys before "runs", all of them together
MAX_HEAD_KEYS = 64  # capscan writes five
# What one run object may hold while it is decoded, before any model is built: a 30 KB gzip of
# 1.4 M proof items must not become 1.4 M dicts (then models). Past MAX_VALUES objects and numbers
# the decoder keeps one shared placeholder per item (a list slot, not an object) and the value is
# refused whole (OVER_BUDGET: the importer counts it); under it, every list is cut to MAX_LIST items
# and every object to MAX_KEYS keys. The importer's own caps are smaller still.
MAX_LIST = 2_000
MAX_KEYS = 256
MAX_VALUES = 50_000
INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Shape:
    name: str
    description: str
    sniff: regex.Pattern[str]  # matched against the input's first bytes
    sample: str  # the first line of such a file


SHAPES = (
    Shape("capscan-export", "capscan export json: every run with its origin (instance, source, sha256)",
          regex.compile(r'\A\s*\{\s*"capscan_version"\s*:\s*"[^"]*"\s*,\s*"export"\s*:\s*"capscan\.runs"'),
          '{"capscan_version": "0.1.0", "export": "capscan.runs", "instance": "guest-a", "runs": ['),
    Shape("capscan-events", "capscan --nl / watch --nl: one capscan.run event per line",
          regex.compile(r'\A\s*\{\s*"event"\s*:\s*"capscan\.run"'),
          '{"event":"capscan.run","time":"2026-12-02T11:40:00+00:00","capscan_version":"0.1.0",'
          '"host_name":"guest-a","sha256":"9f2c...","summary":"...","id":7}'),
    Shape("capscan-run", "capscan show --json: one run object (no origin)",
          regex.compile(r'\A\s*\{[ \t]*\r?\n\s*"id"\s*:\s*\d+\s*,\s*"source"\s*:'),
          '{\n  "id": 7,\n  "source": "guest.log",\n  "first_line": 1,'),
    Shape("capscan-runs", "capscan diagnose --nl / show --nl: one run object per line (no origin)",
          regex.compile(r'\A\s*\{\s*"id"\s*:\s*\d+\s*,\s*"source"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"first_line"\s*:'),
          '{"id": 7, "source": "guest.log", "first_line": 1, "last_line": 42, "program": "llama-bench"}'),
    Shape("capscan-report", "capscan diagnose --json / show --json (no origin: instance and sha256 unknown)",
          regex.compile(r'\A\s*\{\s*"capscan_version"\s*:\s*"[^"]*"\s*,\s*"(?:summary|runs)"\s*:'),
          '{"capscan_version": "0.1.0", "summary": {"verdict": "healthy", "runs": 1, "fixable": false}, "runs": ['),
    # not runs but the logs of a self-test's runs (analyzer.ingest.bundle): read back as logs, diagnosed here
    Shape("capscan-bundle", "capscan remedy selftest --bundle: the logs of the self-test's runs, each read as a log",
          regex.compile(r'\A\s*\{\s*"capscan_version"\s*:\s*"[^"]*"\s*,\s*"bundle"\s*:\s*"capscan\.selftest-bundle"'),
          '{"capscan_version": "0.1.0", "bundle": "capscan.selftest-bundle", "bundle_version": 1,'),
)


def sniff(head: bytes) -> Shape | None:
    """The export shape of an input, from its first bytes (a UTF-8 BOM allowed); None for a log."""
    text = head[:4096].decode("utf-8", "replace").lstrip("\ufeff")
    return next((s for s in SHAPES if s.sniff.match(text)), None)


class ExportError(ValueError):
    """The export is damaged past reading on (a truncated document, an object over budget)."""


class OutOfRange:
    """An integer no store column can hold (past 64 bits, or thousands of digits): kept as this
    marker so the run that holds it is rejected, never converted (int() of 5,000 digits raises)."""

    def __repr__(self) -> str:
        return "<integer out of range>"


OUT_OF_RANGE = OutOfRange()


class OverBudget:
    """A value that held more than MAX_VALUES objects and numbers: refused whole, never built."""

    def __repr__(self) -> str:
        return f"<a value of more than {MAX_VALUES:,} objects and numbers>"


OVER_BUDGET = OverBudget()
_DROPPED: dict[str, Any] = {}  # the shared placeholder past MAX_VALUES (the value is then refused)


class _Bounded:
    """The stdlib's C decoder with hooks that count what it builds: objects past MAX_VALUES (and
    their keys past MAX_KEYS) and numbers past it become shared placeholders, so one value costs
    a list slot however many the text holds; such a value is OVER_BUDGET. Under the budget, ``trim``
    cuts every list to MAX_LIST."""

    def __init__(self) -> None:
        self.values = 0
        self.decoder = json.JSONDecoder(object_pairs_hook=self._object, parse_int=self._int,
                                        parse_float=self._float)

    def _object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        self.values += 1
        if self.values > MAX_VALUES:
            return _DROPPED
        return dict(pairs[:MAX_KEYS])

    def _int(self, text: str) -> Any:
        self.values += 1
        if len(text) > 20:
            return OUT_OF_RANGE
        value = int(text)
        return value if INT64[0] <= value <= INT64[1] else OUT_OF_RANGE

    def _float(self, text: str) -> float:
        self.values += 1
        return float(text) if self.values <= MAX_VALUES else 0.0

    def raw_decode(self, text: str, pos: int) -> tuple[Any, int]:
        self.values = 0
        value, end = self.decoder.raw_decode(text, pos)
        return (OVER_BUDGET if self.values > MAX_VALUES else trim(value)), end


def trim(value: Any) -> Any:
    """Every list cut to MAX_LIST items (iterative: depth is the C decoder's to refuse, not this
    walk's)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            if len(v) > MAX_LIST:
                del v[MAX_LIST:]
            stack.extend(x for x in v if isinstance(x, (list, dict)))
        elif isinstance(v, dict):
            stack.extend(x for x in v.values() if isinstance(x, (list, dict)))
    return value


def decode(text: str) -> Any:
    """One bounded JSON value, the whole of ``text`` (an NL line); ValueError when it is not one."""
    try:
        value, end = _Bounded().raw_decode(text, 0)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if text[end:].strip():
        raise ValueError("extra data")
    return value


@dataclass
class Trailing:
    """Text after the export's end (a tool appended to the file): ignored, but counted and said."""

    chars: int
    line: int


@dataclass
class Exported:
    """One run object as the origin wrote it, the document's header keys, and where it was."""

    run: Any  # a dict when well formed; anything else is the importer's to reject
    header: dict[str, Any]
    line: int  # the line of the export the object starts on


class _Stream:
    """UTF-8 text decoded from chunks, held from ``pos`` on; what was consumed is dropped."""

    def __init__(self, chunks: Iterator[bytes]):
        self.chunks = chunks
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf = ""
        self.pos = 0
        self.dropped = 0  # characters consumed and dropped from buf: dropped + pos is the offset
        self.line = 1  # the line of buf[pos]
        self.eof = False

    def more(self) -> bool:
        if self.eof:
            return False
        chunk = next(self.chunks, None)
        if chunk is None:
            self.eof = True
            self.buf += self.decoder.decode(b"", final=True)
            return False
        if self.pos > (1 << 20):
            self.buf, self.dropped, self.pos = self.buf[self.pos:], self.dropped + self.pos, 0
        self.buf += self.decoder.decode(chunk)
        return True

    def advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def skip_ws(self) -> str:
        """The next character after whitespace ('' at the end)."""
        while True:
            i = self.pos
            n = len(self.buf)
            while i < n and self.buf[i] in " \t\r\n\ufeff":
                i += 1
            self.advance(i)
            if i < n:
                return self.buf[i]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            raise ExportError(f"expected {' or '.join(repr(x) for x in chars)} at line {self.line}")
        self.advance(self.pos + 1)
        return c

    def value(self, budget: int) -> Any:
        """One JSON value; read on until it is whole (a number at the buffer's end may go on)."""
        decoder = _Bounded()
        self.skip_ws()
        while True:
            try:
                value, end = decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise ExportError(f"a value at line {self.line} is nested too deeply") from None
            except json.JSONDecodeError as exc:
                if len(self.buf) - self.pos > budget:
                    raise ExportError(f"an object at line {self.line} is larger than {budget >> 20} MiB") from None
                if not self.more():
                    raise ExportError(f"the export ends inside an object at line {self.line} ({exc.msg})") from None
                continue
            if end == len(self.buf) and not self.eof and self.more():
                continue  # `12` may be the start of `123`
            if end - self.pos > budget:
                raise ExportError(f"an object at line {self.line} is larger than {budget >> 20} MiB")
            self.advance(end)
            return value

    def rest(self) -> Trailing | None:
        """What follows the end: counted (read through, never held whole), or None."""
        if not self.skip_ws():
            return None
        line, chars = self.line, 0
        while True:
            chars += len(self.buf) - self.pos
            self.pos = len(self.buf)
            if not self.more():
                return Trailing(chars, line)


def read_document(chunks: Iterator[bytes]) -> Iterator[Exported | Trailing]:
    """The run objects of one JSON document (``export json``, ``diagnose --json``), streamed:
    the keys before ``runs`` are its header (at most MAX_HEAD_KEYS keys, MAX_HEAD characters);
    ``runs`` is read element by element. Text after the document ends is yielded as ``Trailing``."""
    s = _Stream(chunks)
    s.expect("{")
    header: dict[str, Any] = {}
    keys = head = 0
    if s.skip_ws() == "}":
        s.advance(s.pos + 1)
        if (tail := s.rest()) is not None:
            yield tail
        return
    while True:
        start = s.dropped + s.pos
        key = s.value(MAX_HEAD)
        if not isinstance(key, str):
            raise ExportError(f"expected a key at line {s.line}")
        keys += 1
        if keys > MAX_HEAD_KEYS:
            raise ExportError(f"its header has more than {MAX_HEAD_KEYS} keys")
        s.expect(":")
        if key == "runs" and s.skip_ws() == "[":
            s.advance(s.pos + 1)
            if s.skip_ws() == "]":
                s.advance(s.pos + 1)
            else:
                while True:
                    s.skip_ws()
                    line = s.line
                    yield Exported(s.value(MAX_OBJECT), header, line)
                    if s.expect(",]") == "]":
                        break
        else:
            header[key] = s.value(MAX_HEAD)
            head += s.dropped + s.pos - start
            if head > MAX_HEAD:
                raise ExportError(f"its header is larger than {MAX_HEAD >> 20} MiB")
        if s.expect(",}") == "}":
            if (tail := s.rest()) is not None:
                yield tail
            return


def read_object(chunks: Iterator[bytes]) -> Iterator[Exported]:
    """The one run object of ``show --json``."""
    s = _Stream(chunks)
    s.skip_ws()
    yield Exported(s.value(MAX_OBJECT), {}, s.line)
    if s.skip_ws():
        raise ExportError(f"more after the run object, at line {s.line}")


def read_events(chunks: Iterator[bytes], max_line: int = MAX_OBJECT) -> Iterator[Exported | int]:
    """The run events of an NL file, one per line. A line that is not one JSON object is
    yielded as its line number (the importer counts it as malformed)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    line = 0
    for chunk in chunks:
        pending += decoder.decode(chunk)
        *complete, pending = pending.split("\n")
        for text in complete:
            line += 1
            if text.strip():  # a blank line is nobody's run
                yield _event(text, line)
        if len(pending) > max_line:
            raise ExportError(f"line {line + 1} is longer than {max_line >> 20} MiB")
    pending += decoder.decode(b"", final=True)
    if pending.strip():
        yield _event(pending, line + 1)


def _event(text: str, line: int) -> Exported | int:
    try:
        obj = decode(text)
    except ValueError:
        return line
    return Exported(obj, {}, line) if isinstance(obj, dict) else line
