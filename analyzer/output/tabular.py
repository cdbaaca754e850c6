"""Rows out, in the formats people already pipe: JSON, NL (one JSON object per
line), CSV, TSV, markdown (a GitHub table, for PR comments and job summaries)
and a plain text table. Every writer streams: rows are written as they come,
so listing 100,000 runs never holds them all.

Cells are made text-safe here: tabs and newlines inside a value would break a
TSV/markdown row, so they become spaces (and | is escaped in markdown)."""

from __future__ import annotations

import functools
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


# Rows are written this many at a time: one write (and one pass of the output boundary's check)
# per batch rather than per row, while the listing still streams in bounded memory.
BATCH_ROWS = 512


_PLAIN = frozenset((str, int, float, bool, type(None)))
_STR = frozenset((str,))
# json's C encoder (indent=None) with its item separator set to what indent=2 puts between the
# members of an object inside write_json_array's array: a raw newline never occurs inside an
# encoded string, so a flat object comes out laid out exactly as json.dumps(indent=2) lays it out.
_ARRAY_SEPARATORS = (",\n    ", ": ")
_LINE_SEPARATORS = (", ", ": ")


@functools.cache
def _encoder(separators: tuple[str, str]) -> Any:
    import json

    return json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False, separators=separators)


def _is_flat(item: Any) -> bool:
    """A non-empty dict of str keys and plain values (a listing row)."""
    return type(item) is dict and bool(item) and _STR.issuperset(map(type, item)) \
        and _PLAIN.issuperset(map(type, item.values()))


def _flat_object(item: Any, separators: tuple[str, str] = _LINE_SEPARATORS) -> str | None:
    """``item`` as one JSON object by json's C encoder when it is flat (``_is_flat``): the text
    ``dumps`` writes, laid out by ``separators``. None for anything else, and for a NaN or
    infinity (JSON has none; ``dumps`` writes null): the caller falls back to ``dumps``."""
    if not _is_flat(item):
        return None
    try:
        return _encoder(separators).encode(item)
    except ValueError:  # a non-finite float
        return None


def _one(item: Any, indented: bool) -> str:
    """One item as write_json_array lays out a member (``indented``) or write_nl a line."""
    if indented:
        body = _flat_object(item, _ARRAY_SEPARATORS)
        if body is None:
            return "\n".join("  " + line for line in dumps(item).splitlines())
        return "  {\n    " + body[1:-1] + "\n  }"
    line = _flat_object(item)
    return dumps(item, indent=None) if line is None else line


def _orjson_batch(items: list[dict[str, Any]], indented: bool) -> str | None:
    """Flat items (``_is_flat``) in one call of orjson, which encodes a listing row several times
    faster than json: the members of write_json_array joined by ",\n" (``indented``) or write_nl's
    lines joined by "\n", the very text ``_one`` gives. None where orjson writes other text than
    json: an int beyond 64 bits or a lone surrogate (orjson refuses both), and a float between
    1e-9 and 1e-4 (json writes 1e-05 and 1e-07, orjson 0.00001 and 1e-7: ``_orjson_differs``).
    Orjson's OPT_INDENT_2 text of a list of flat objects is json.dumps(indent=2)'s (NaN and the
    infinities are null in both); a raw newline never occurs inside an encoded string, so its
    layout is found again exactly."""
    try:
        import orjson

        text = orjson.dumps(items, option=orjson.OPT_INDENT_2).decode()
    except (ImportError, TypeError):  # orjson.JSONEncodeError is a TypeError
        return None
    if _orjson_differs(text):
        return None
    members = text[2:-2]  # "[\n" ... "\n]"
    if indented:
        return members
    lines = members.replace("\n  },\n  {\n    ", "}\n{").replace(",\n    ", ", ")
    return "{" + lines[len("  {\n    "):-len("\n  }")] + "}"


def _orjson_differs(text: str) -> bool:
    """Whether orjson's text may hold a float that json writes otherwise: one with a one-digit
    negative exponent (json pads it to two: 1e-07) or one below 1e-4 written out (json uses an
    exponent there: 1e-05). Either may also be found inside a string; that batch then takes
    json, which is never wrong, only slower. (Two substring searches: a regex with a
    look-behind took longer than orjson's encoding.)"""
    return "0.0000" in text or any(text[m.start() - 1].isdigit() for m in _one_digit_exponent().finditer(text))


@functools.cache
def _one_digit_exponent() -> re.Pattern[str]:
    return re.compile(r"e-\d(?!\d)")


def _chunks(items: Iterable[Any], indented: bool) -> Iterator[tuple[str, int]]:
    """The items' text (``_one``'s) with how many items each chunk holds: runs of flat items
    BATCH_ROWS at a time (joined by ",\n" when ``indented``, else by "\n"), any other item alone."""
    flat: list[dict[str, Any]] = []

    def flush() -> tuple[str, int]:
        # orjson only for a full batch: importing it costs about 30 ms, more than json spends on a few hundred rows
        text = _orjson_batch(flat, indented) if len(flat) >= BATCH_ROWS else None
        if text is None:
            text = (",\n" if indented else "\n").join(_one(item, indented) for item in flat)
        chunk = (text, len(flat))
        flat.clear()
        return chunk

    for item in items:
        if _is_flat(item):
            flat.append(item)
            if len(flat) >= BATCH_ROWS:
                yield flush()
        else:
            if flat:
                yield flush()
            yield _one(item, indented), 1
    if flat:
        yield flush()


def _batched(out: TextIO, pieces: Iterable[tuple[str, int]]) -> None:
    """The pieces of JSON text (each with the number of items it holds) written about BATCH_ROWS
    items at a time, escaped as ``dumps`` escapes (escape_json_text once per batch: the characters
    it escapes occur only inside strings, and text already escaped has none of them left)."""
    from analyzer.safe_text import escape_json_text

    batch: list[str] = []
    held = 0
    for piece, n in pieces:
        batch.append(piece)
        held += n
        if held >= BATCH_ROWS:
            out.write(escape_json_text("".join(batch)))
            batch.clear()
            held = 0
    if batch:
        out.write(escape_json_text("".join(batch)))


def write_json_array(out: TextIO, items: Iterable[Any]) -> None:
    """A JSON array written item by item (the same text json.dumps(indent=2) gives)."""
    def pieces() -> Iterator[tuple[str, int]]:
        first = True
        for chunk, n in _chunks(items, indented=True):
            yield ("[\n" if first else ",\n") + chunk, n
            first = False
        yield ("[]\n" if first else "\n]\n"), 0

    _batched(out, pieces())


def write_nl(out: TextIO, items: Iterable[Any]) -> None:
    """One JSON object per line (the same text json.dumps gives)."""
    _batched(out, ((chunk + "\n", n) for chunk, n in _chunks(items, indented=False)))


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
