"""Rows out, in the formats people already pipe: JSON, NL (one JSON object per
line), CSV, TSV, markdown (a GitHub table, for PR comments and job summaries)
and a plain text table. Every writer streams: rows are written as they come,
so listing 100,000 runs never holds them all.

Cells are made text-safe here: tabs and newlines inside a value would break a
TSV/markdown row, so they become spaces (and | is escaped in markdown)."""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Iterator, Sequence, TextIO

FORMATS = ("json", "nl", "csv", "tsv", "markdown")


def finite_json(o: Any) -> Any:
    """The object with non-finite floats as null and keys as strings (JSON has no NaN)."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {str(k): finite_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite_json(v) for v in o]
    return o


def dumps(obj: Any, *, indent: int | None = 2) -> str:
    """JSON; NaN and infinities (which JSON has not) become null. Log text is kept, escaped:
    json escapes C0 (ESC is \u001b), escape_json_text the C1, bidi and lone-surrogate rest."""
    import json

    from analyzer.safe_text import escape_json_text

    return escape_json_text(json.dumps(finite_json(obj), indent=indent, ensure_ascii=False))


# Rows are written this many at a time: one encoder call, one write and one pass of the output
# boundary's check per batch rather than per row, while the listing still streams in bounded memory.
BATCH_ROWS = 512


def _json_text(item: Any, indented: bool) -> str:
    """One item by the standard json module: a member of write_json_array (indented by two) or a
    line of write_nl (compact, as orjson writes it)."""
    import json

    if indented:
        # split at "\n" only: json escapes it inside strings, not U+2028 or U+0085 (splitlines' line ends too)
        return "\n  ".join(("  " + json.dumps(finite_json(item), indent=2, ensure_ascii=False)).split("\n"))
    return json.dumps(finite_json(item), ensure_ascii=False, separators=(",", ":"))


def _orjson_text(items: list[Any], indented: bool) -> str | None:
    """The batch by orjson, several times faster than json on listing rows: the same layout as
    ``_json_text`` (its OPT_INDENT_2 indents by two; NaN and the infinities are null, as
    ``finite_json`` makes them), escaped. None where orjson is not installed, or refuses an item:
    an int beyond 64 bits, a lone surrogate, a key that is not a string (json takes that batch)."""
    try:
        import orjson
    except ImportError:
        return None
    from analyzer.safe_text import escape_json_utf8

    try:
        if indented:
            return escape_json_utf8(orjson.dumps(items, option=orjson.OPT_INDENT_2)[2:-2])  # "[\n" ... "\n]"
        return escape_json_utf8(b"\n".join(map(orjson.dumps, items)))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None


def _batches(items: Iterable[Any], indented: bool) -> Iterator[str]:
    """The items' JSON text BATCH_ROWS at a time, each batch write_json_array's members joined by
    ",\n" (``indented``) or write_nl's lines joined by "\n", log text escaped as ``dumps`` escapes it
    (once per batch: the characters escaped occur only inside strings). orjson only for a full
    batch: importing it costs more than json spends on a few hundred rows."""
    from analyzer.safe_text import escape_json_text

    batch: list[Any] = []

    def text() -> str:
        got = _orjson_text(batch, indented) if len(batch) >= BATCH_ROWS else None
        if got is not None:
            return got
        return escape_json_text((",\n" if indented else "\n").join(_json_text(i, indented) for i in batch))

    for item in items:
        batch.append(item)
        if len(batch) >= BATCH_ROWS:
            yield text()
            batch = []
    if batch:
        yield text()


def write_json_array(out: TextIO, items: Iterable[Any]) -> None:
    """A JSON array, written a batch of items at a time."""
    first = True
    for text in _batches(items, indented=True):
        out.write(("[\n" if first else ",\n") + text)
        first = False
    out.write("[]\n" if first else "\n]\n")


def write_nl(out: TextIO, items: Iterable[Any]) -> None:
    """One JSON object per line, written a batch of lines at a time."""
    for text in _batches(items, indented=False):
        out.write(text + "\n")


# control characters (C0, DEL, C1) and the bidi/zero-width format characters that reorder or hide text
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def safe_text(value: Any) -> str:
    """One line of inert text: whitespace runs and control/bidi characters become one space."""
    from analyzer.safe_text import clean

    text = clean(str(value))  # escape sequences removed whole, with their bodies (the one sanitizer)
    return _UNSAFE.sub(" ", text) if _UNSAFE.search(text) else text


def text_cell(value: Any, *, decimals: int | None = None) -> str:
    """A table cell: '' for absent, yes/no, floats in full (or rounded), inert text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return repr(value) if decimals is None else f"{value:,.{decimals}f}"
    return safe_text(value)


def write_delimited(out: TextIO, columns: Sequence[str], rows: Iterable[dict[str, Any]], *, tsv: bool) -> None:
    """--csv and --tsv: the same cells; a yes/no value is true/false in both (as in JSON), absent is empty."""
    if tsv:
        out.write("\t".join(columns) + "\n")
        for row in rows:
            out.write("\t".join(_tsv_cell(row.get(c)) for c in columns) + "\n")
        return
    import csv

    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_csv_cell(row.get(c)) for c in columns])


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...) from a log line):
# such a text cell gets a leading apostrophe, as OWASP's CSV-injection advice says. Numbers stay numbers.
_FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def neutral_cell(text: str) -> str:
    return "'" + text if text.startswith(_FORMULA_LEADS) else text


def _tsv_cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    cell = text_cell(value)
    return neutral_cell(cell) if isinstance(value, str) else cell


def _csv_cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return neutral_cell(safe_text(value)) if isinstance(value, str) else value


# Every character GitHub markdown gives a meaning to inside a line (emphasis, links and images, code,
# tables, strikethrough, HTML), backslash-escaped as CommonMark allows for any ASCII punctuation; a cell
# never starts a line, so heading and list markers (# - + 1.) mean nothing there and stay readable
_MD_ACTIVE = re.compile(r"[\\`*_\[\]|~<>]")
# GitHub links what no escape stops, in text: @mentions, #123 references, bare URLs and www. names, e-mail
# addresses. A word joiner (U+2060, invisible) after the @ or #, or inside the scheme, breaks each pattern.
_MD_LINKED = re.compile(r"(?<=@)(?=\w)|(?<=#)(?=\d)|(?<=[A-Za-z]:)(?=//)|(?i:(?<=\bwww))(?=\\?\.)")
WORD_JOINER = "\u2060"


def markdown_cell(value: Any) -> str:
    """Inert in GitHub markdown: log text can split no cell, start no HTML, link, image, code span, emphasis,
    mention or reference; numbers are written as they are."""
    text = text_cell(value, decimals=2)
    if not isinstance(value, str):
        return text or " "
    text = _MD_ACTIVE.sub(lambda m: "\\" + m.group(0), text.replace("&", "&amp;"))
    return _MD_LINKED.sub(WORD_JOINER, text) or " "


def write_markdown(out: TextIO, columns: Sequence[str], rows: Iterable[dict[str, Any]],
                   *, right: Sequence[str] = ()) -> None:
    out.write("| " + " | ".join(columns) + " |\n")
    out.write("|" + "|".join("---:" if c in right else ":---" for c in columns) + "|\n")
    for row in rows:
        out.write("| " + " | ".join(markdown_cell(row.get(c)) for c in columns) + " |\n")
