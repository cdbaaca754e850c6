"""Work counted, not timed (issue 39): a machine's load changes how long a piece of work takes, never how many
Python functions it calls or how many instructions SQLite's virtual machine runs for it. Linearity is asserted
on these counts at two input sizes; the timed figures are bench/linearity.py's."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
SQLITE_STEP = 100  # SQLite virtual-machine instructions per count


def counted(work: Callable[[], T], conn: sqlite3.Connection | None = None) -> tuple[T, int, int]:
    """(what ``work`` returned, the Python and C functions it called, SQLite VM instructions / SQLITE_STEP on
    ``conn``)."""
    calls = steps = 0

    def on_call(_frame, event, _arg) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    def on_step() -> int:
        nonlocal steps
        steps += 1
        return 0

    if conn is not None:
        conn.set_progress_handler(on_step, SQLITE_STEP)
    previous = sys.getprofile()
    sys.setprofile(on_call)
    try:
        result = work()
    finally:
        sys.setprofile(previous)
        if conn is not None:
            conn.set_progress_handler(None, 0)
    return result, calls, steps
