"""A connection that serves the database to whoever asks (``capscan db serve``)."""

from __future__ import annotations

import sqlite3


def distrust_schema(conn: sqlite3.Connection) -> None:
    """Views and triggers in the file may call only innocuous SQL functions, whatever the SQLite build's
    default (``trusted_schema``): the file is data, whoever wrote it."""
    conn.execute("PRAGMA trusted_schema = OFF")
