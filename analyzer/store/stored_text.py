"""The one way text comes back out of the database: cleaned like live log text.

A database capscan did not write (an older capscan, another tool, a hand edit)
can hold anything: a newline in a device name would print a fake step at
column 0 of ``remedy plan``, an escape sequence would reach the terminal, bytes
that are not UTF-8 would raise. Every connection capscan opens reads TEXT
through ``read_text`` (newlines and controls become spaces or go, invalid
UTF-8 becomes U+FFFD), and the JSON documents stored in text columns are
cleaned string by string once decoded (``clean_json``), so no reader has to
remember to.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from analyzer.safe_text import clean, clean_deep

# Printable ASCII: a value made only of these needs no cleaning (checked at C speed)
_PLAIN = bytes(range(0x20, 0x7F))


def read_text(raw: bytes) -> str:
    if raw.isascii() and not raw.translate(None, _PLAIN):
        return raw.decode("ascii")
    return clean(raw.decode("utf-8", "replace"))


# A source's name is the one text read exactly (``CAST(path AS BLOB)``, then ``exact_text``): JSON keeps a
# file's real name, escaped, and every human output cleans it where it names the source.
EXACT_PATH = "CAST(s.path AS BLOB)"
# A run's source as lists name it: an imported run's ``instance:source`` (o: run_origins LEFT JOINed,
# analyzer.store.origins.origin_name), else the exact path.
# Two different reports of one run are both listed, each marked (analyzer.store.origins: a later
# report's key ends with its digest, not the key's "]"; the first has such a key after its own).
SOURCE_NAME_SQL = ("CASE WHEN o.run_id IS NULL THEN CAST(s.path AS BLOB) ELSE "
                   "CAST(COALESCE(o.instance || ':', '') || COALESCE(o.source, '?') || "
                   "CASE WHEN substr(o.key, -1) != ']' OR EXISTS (SELECT 1 FROM run_origins c "
                   "WHERE c.key >= o.key || '#' AND c.key < o.key || '$') THEN ' (conflicting imports)' ELSE '' END "
                   "AS BLOB) END")


def exact_text(raw: bytes | str | None) -> str:
    if raw is None:
        return ""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")


def install(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.text_factory = read_text
    return conn


def clean_json(value: Any) -> Any:
    """A decoded JSON document from a text column, every string in it cleaned (escaped newlines and
    controls inside JSON strings are not seen by ``read_text``)."""
    return clean_deep(value)
