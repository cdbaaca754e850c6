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
# An indented array member's separators: json's C encoder (indent=None) with its item separator set to
# what indent=2 puts between the members of an object inside write_json_array's array, and for NL a
# raw newline that the caller turns back into ", ". A raw newline never occurs inside an encoded
# string, so the separators are found again exactly in the text.
_ARRAY_SEPARATORS = (",\n    ", ": ")
_NL_SEPARATORS = (",\n", ": ")


@functools.cache
def _encoder(separators: tuple[str, str]) -> Any:
    import json

    return json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False, separators=separators)


def _is_flat(item: Any) -> bool:
    """A non-empty dict of str keys and plain values (a listing row): what the C encoder writes
    exactly as ``dumps`` does."""
    return type(item) is dict and bool(item) and _STR.issuperset(map(type, item)) \
        and _PLAIN.issuperset(map(type, item.values()))


def _flat_object(item: Any, separators: tuple[str, str] = (", ", ": ")) -> str | None:
    """``item`` as one JSON object by json's C encoder when it is flat (``_is_flat``); None for
    anything else, and for a NaN or infinity (JSON has none; ``dumps`` writes null): the caller
    falls back to ``dumps``."""
    if not _is_flat(item):
        return None
    try:
        return _encoder(separators).encode(item)
    except ValueError:  # a non-finite float
        return None


def _flat_objects(items: list[dict[str, Any]], separators: tuple[str, str]) -> list[str] | None:
    """Several flat objects in one call of the C encoder (one call per row was half the time of
    listing 100,000 runs as JSON), each as ``_flat_object`` gives it; None when one holds a NaN
    or an infinity. A flat object's text never holds ``},<separator>{``: a member ends with a
    quote, a digit, or a letter of true/false/null, never a brace, and a raw newline never
    occurs inside an encoded string."""
    try:
        text = _encoder(separators).encode(items)
    except ValueError:
        return None
    return ["{" + body + "}" for body in text[2:-2].split("}" + separators[0] + "{")]


def _encoded(items: Iterable[Any], separators: tuple[str, str]) -> Iterator[tuple[Any, str | None]]:
    """Each item with its flat encoding (``_flat_object``'s text, or None), the flat ones
    encoded BATCH_ROWS at a time."""
    flat: list[Any] = []

    def flush() -> Iterator[tuple[Any, str | None]]:
        together = _flat_objects(flat, separators)
        texts: list[str | None] = list(together) if together is not None and len(together) == len(flat) \
            else [_flat_object(item, separators) for item in flat]
        yield from zip(flat, texts, strict=True)
        flat.clear()

    for item in items:
        if _is_flat(item):
            flat.append(item)
            if len(flat) >= BATCH_ROWS:
                yield from flush()
        else:
            if flat:
                yield from flush()
            yield item, None
    if flat:
        yield from flush()


def _batched(out: TextIO, pieces: Iterable[str]) -> None:
    """The pieces of JSON text written BATCH_ROWS at a time, escaped as ``dumps`` escapes
    (escape_json_text once per batch: the characters it escapes occur only inside strings,
    and text already escaped has none of them left)."""
    from analyzer.safe_text import escape_json_text

    batch: list[str] = []
    for piece in pieces:
        batch.append(piece)
        if len(batch) >= BATCH_ROWS:
            out.write(escape_json_text("".join(batch)))
            batch.clear()
    if batch:
        out.write(escape_json_text("".join(batch)))


def write_json_array(out: TextIO, items: Iterable[Any]) -> None:
    """A JSON array written item by item (the same text json.dumps(indent=2) gives)."""
    def pieces() -> Iterator[str]:
        first = True
        for item, body in _encoded(items, _ARRAY_SEPARATORS):
            if body is None:
                body = "\n".join("  " + line for line in dumps(item).splitlines())
            else:
                body = "  {\n    " + body[1:-1] + "\n  }"
            yield ("[\n" if first else ",\n") + body
            first = False
        yield "[]\n" if first else "\n]\n"

    _batched(out, pieces())


def write_nl(out: TextIO, items: Iterable[Any]) -> None:
    """One JSON object per line (the same text json.dumps gives)."""
    def pieces() -> Iterator[str]:
        for item, line in _encoded(items, _NL_SEPARATORS):
            yield (dumps(item, indent=None) if line is None else line.replace(",\n", ", ")) + "\n"

    _batched(out, pieces())


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
    if tsv:
        out.write("\t".join(columns) + "\n")
        for row in rows:
            out.write("\t".join(text_cell(row.get(c)) for c in columns) + "\n")
        return
    import csv

    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_csv_cell(row.get(c)) for c in columns])


def _csv_cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return safe_text(value) if isinstance(value, str) else value


def markdown_cell(value: Any) -> str:
    """Inert in GitHub markdown: | splits no cell, < > & start no HTML, backticks no code."""
    text = text_cell(value, decimals=2)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "\\`")):
        text = text.replace(a, b)
    return text or " "


def write_markdown(out: TextIO, columns: Sequence[str], rows: Iterable[dict[str, Any]],
                   *, right: Sequence[str] = ()) -> None:
    out.write("| " + " | ".join(columns) + " |\n")
    out.write("|" + "|".join("---:" if c in right else ":---" for c in columns) + "|\n")
    for row in rows:
        out.write("| " + " | ".join(markdown_cell(row.get(c)) for c in columns) + " |\n")
