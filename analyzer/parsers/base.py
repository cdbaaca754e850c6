"""The declarative shape of an input format.

Each format declares the literals that let a line through the prefilter, the
patterns that turn a (normalised) line into an event, and sample lines with the
event they must produce. ``capscan formats`` prints the samples and one
parametrised test checks every one of them (as lnav's format files do).

Some formats span several lines (a llama-bench JSON object, a CSV table, the
devices listed under ``ggml_cuda_init: found 2 CUDA devices:``). A pattern
that opens such a block names a ``collector``: while it is active, every
following line goes to it, not just the prefiltered ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeAlias

import regex

from analyzer.safe_text import clean


class Rejected(ValueError):
    """A line that is recognisably a record of some format, whose fields have
    the wrong types or impossible values (a ``cpu_info`` that is a list, an
    integer SQLite cannot hold, a speed no machine can have: see
    analyzer.parsers.plausible). The dispatcher skips it and counts it, so one
    bad row never reaches the store. ``records``: how many records the line held
    (a one-line JSON array of llama-bench rows, all refused)."""

    def __init__(self, message: str = "", records: int = 1):
        super().__init__(message)
        self.records = records


# An event's data may say how many of the records on its line were refused (the rest stand):
# the dispatcher adds them to its count and removes the key.
REJECTED_KEY = "_rejected"


SQLITE_INT_MAX = 2**63 - 1


def fits_sqlite(value: int | None) -> bool:
    return value is None or -SQLITE_INT_MAX - 1 <= value <= SQLITE_INT_MAX


def text_field(obj: dict[str, Any], key: str) -> str | None:
    """A string field of a decoded JSON/CSV/SQL record, cleaned for storage and
    display; absent, null or empty is None; any other type rejects the record."""
    value = obj.get(key)
    if value is None or value == "":
        return None
    if type(value) is not str:
        raise Rejected(f"{key} is a {type(value).__name__}, not a string")
    return clean(value).strip() or None


@dataclass(slots=True)
class Event:
    """One fact recognised on one input line."""

    kind: str
    line: int
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    inner: int | None = None  # the line's number inside a JSON string that held several (20:5); None otherwise


class Collector(Protocol):
    """Consumes the lines that follow a block-opening line."""

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        """Return events for this line, or None when the block has ended
        (the line is then dispatched normally)."""

    def finish(self) -> list[Event]:
        """Called at end of input while still collecting."""


# Patterns are the `regex` package's (possessive quantifiers, atomic groups: see rx).
Compiled: TypeAlias = regex.Pattern
Builder = Callable[[regex.Match], dict[str, Any] | None]


# A Metal block's head: the lines ggml prints before the block's GPU name line, which alone says whose run
# the block is. An M4-era block (``ggml_metal_device_init``) opened while a run is placed waits at its first
# line; a legacy block (``ggml_metal_init``) reopened in a run that named its device waits too (runs/metal.py).
M4_HEAD = "M4"
LEGACY_HEAD = "legacy"


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: Compiled
    build: Builder | None = None
    collector: Callable[[dict[str, Any], int, str], Collector] | None = None  # (the opening line's data, line, text)
    # The Metal block heads (M4_HEAD, LEGACY_HEAD) this line may belong to: while such a head waits for its
    # GPU name line, the line waits with it; any other line releases the head to the run being read
    # (runs.assembler reads this, so a new head line needs no list of its own).
    heads: tuple[str, ...] = ()

    def match(self, text: str) -> dict[str, Any] | None:
        m = self.regex.search(text)
        if m is None:
            return None
        if self.build is None:
            return {k: v for k, v in m.groupdict().items() if v is not None}
        return self.build(m)


@dataclass(frozen=True)
class Sample:
    line: str
    kind: str
    data: dict[str, Any]
    # For lines only seen inside a block (a collector's continuation lines):
    # the pattern that parses them there.
    via: "Pattern | None" = None
    # A line of this format that the parser refuses and counts (a speed no machine can have).
    rejected: bool = False


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    literals: tuple[str, ...]
    patterns: tuple[Pattern, ...]
    samples: tuple[Sample, ...]

    def parse(self, text: str) -> tuple[Pattern, dict[str, Any]] | None:
        for pattern in self.patterns:
            data = pattern.match(text)
            if data is not None:
                return pattern, data
        return None

    def declared_patterns(self) -> list[Pattern]:
        """Its patterns and those its samples name (``via``: a collector's inner pattern), each once."""
        seen: dict[int, Pattern] = {id(p): p for p in self.patterns}
        for sample in self.samples:
            if sample.via is not None:
                seen.setdefault(id(sample.via), sample.via)
        return list(seen.values())


def rx(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def to_bool(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    if v in ("true", "yes", "1"):
        return True
    if v in ("false", "no", "0"):
        return False
    return None


_NUM = regex.compile(r"[-+]?(?:\d[\d.,]*|inf|nan)", regex.IGNORECASE)
_THOUSANDS = regex.compile(r"-?\d{1,3}(?:,\d{3})++")


def to_float(value: str | None) -> float | None:
    """Numbers as printed: ``13,77`` (locale comma), ``1,234.5``, ``inf``."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    low = v.lower()
    if low in ("inf", "+inf", "infinity"):
        return float("inf")
    if low in ("nan", "-nan"):
        return None
    if "," in v:
        if "." in v:
            v = v.replace(",", "")  # 1,234.56
        elif _THOUSANDS.fullmatch(v) and len(v.split(",")[-1]) == 3 and v.count(",") > 1:
            v = v.replace(",", "")  # 1,234,567
        else:
            v = v.replace(",", ".")  # 13,77 (decimal comma)
    try:
        return float(v)
    except ValueError:
        return None


def to_int(value: str | None) -> int | None:
    """An integer as printed; None when it is not one, or too large for SQLite to store."""
    if value is None:
        return None
    try:
        n = int(value.strip(), 0) if value.strip().lower().startswith("0x") else int(value.strip())
    except ValueError:
        return None
    return n if fits_sqlite(n) else None
