"""The runs list's fields: one named list of SQL expressions read by ``capscan runs`` and the TUI.

Each field is a name (the key of ``runs --json`` and the attribute of ``RunRow``) and the SQL that
reads it, over ``runs r``, ``sources s``, ``diagnoses d`` and ``run_origins o``. Rows are named by
zipping with ``strict=True``, so a field added to one side only fails at once instead of shifting
every value after it. Adding a listed column: a field here, its column in
``analyzer/output/run_columns.py``, and a test."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from analyzer.safe_text import clean
from analyzer.store.stored_text import SOURCE_NAME_SQL, exact_text

if TYPE_CHECKING:
    from analyzer.store.db import Database

_BEST = "(SELECT MAX(t.tok_s) FROM throughput t WHERE t.run_id = r.id AND (t.test LIKE '{p}%' OR t.test = '{name}'))"

RUN_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "r.id"),
    ("created_at", "r.created_at"),
    ("source", SOURCE_NAME_SQL),  # an imported run: guest-a:guest.log
    ("program", "r.program"),
    ("backend", "r.backend"),
    ("device", "r.device_name"),
    ("apple_family", "r.apple_family"),
    ("model", "r.model"),
    ("verdict", "d.verdict"),
    ("fixable", "d.fixable"),
    ("environment", "d.environment"),
    ("best_pp", _BEST.format(p="pp", name="prompt")),
    ("best_tg", _BEST.format(p="tg", name="generation")),
)
RUN_COLUMNS = tuple(name for name, _ in RUN_FIELDS)
SELECT_FIELDS = ", ".join(f"{sql} AS {name}" for name, sql in RUN_FIELDS)


def named_row(values: Sequence[Any]) -> dict[str, Any]:
    """A listed run as the JSON outputs give it: its source's exact name, fixable a boolean."""
    row = dict(zip(RUN_COLUMNS, values, strict=True))
    row["source"] = exact_text(row["source"])
    if row["fixable"] is not None:  # SQLite stores it as 0/1: a boolean in every output (JSON true/false)
        row["fixable"] = bool(row["fixable"])
    return row


@dataclass
class RunRow:
    """A listed run as the screens show it: every text cleaned (``analyzer.safe_text``)."""

    id: int
    created_at: str
    source: str
    program: str | None
    backend: str | None
    device: str | None
    apple_family: int | None
    model: str | None
    verdict: str | None
    fixable: bool
    environment: str | None
    best_pp: float | None
    best_tg: float | None

    @classmethod
    def of(cls, values: Sequence[Any]) -> RunRow:
        row = named_row(values)
        for name, value in row.items():
            if isinstance(value, str):
                row[name] = clean(value)
        row["created_at"] = row["created_at"] or ""
        row["fixable"] = bool(row["fixable"])
        return cls(**row)

    def __getitem__(self, name: str) -> Any:
        """``row["device"]``, as for the listing's dicts: one cell function serves both."""
        return getattr(self, name)



Claim = tuple  # (verdict, fixable, environment, rules_version, stamp) as stored


def claims(db: Database, rules_version: str, settled: Sequence[str], among: Sequence[int] | None = None
           ) -> dict[int, Claim]:
    """The runs whose stored diagnosis claims what only the rules may decide (fixable: any value but 0; a
    verdict not in ``settled``: the capability-downgrade, or a word capscan never wrote; rules other than
    ``rules_version``), with what their stamp covers (``unstamped`` checks it). ``among``: only those runs
    (a page); else every run, from the covering index ``diagnoses_claims`` (m011), without reading a
    report."""
    marks = ", ".join("?" * len(settled))
    cond = f"(fixable IS NOT 0 OR verdict IS NULL OR verdict NOT IN ({marks}) OR rules_version IS NOT ?)"
    args: list[Any] = [*settled, rules_version]
    cols = "run_id, verdict, fixable, environment, rules_version, stamp"
    if among is None:
        try:
            rows = db.conn.execute(f"SELECT {cols} FROM diagnoses INDEXED BY diagnoses_claims WHERE {cond}", args)
            return {r[0]: r[1:] for r in rows}
        except sqlite3.OperationalError as exc:  # a database without the index (dropped by hand): slower, same answer
            if "no such index" not in str(exc):
                raise
            return {r[0]: r[1:] for r in db.conn.execute(f"SELECT {cols} FROM diagnoses WHERE {cond}", args)}
    out: dict[int, Claim] = {}
    ids = list(among)
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        out.update((r[0], r[1:]) for r in db.conn.execute(
            f"SELECT {cols} FROM diagnoses WHERE run_id IN ({', '.join('?' * len(chunk))}) AND {cond}",
            [*chunk, *args]))
    return out


def unstamped(db: Database, claimed: dict[int, Claim], rules_version: str) -> list[int]:
    """The claims to decide again: all but those this installation stamped itself, under today's rules, on
    facts unchanged since (analyzer.store.stamp). Reads the facts of the stamped ones only."""
    stamped = [rid for rid, c in claimed.items() if c[4] is not None and c[3] == rules_version]
    trusted: set[int] = set()
    if stamped:
        from analyzer.store import stamp
        from analyzer.store.diagnoses import facts_bytes

        secret = stamp.key(create=False)
        if secret is not None:
            facts = facts_bytes(db, stamped)
            for rid in stamped:
                verdict, fixable, environment, version, given = claimed[rid]
                if stamp.verified(secret, rid, verdict, fixable, environment, version, facts.get(rid), given):
                    trusted.add(rid)
    return [rid for rid in claimed if rid not in trusted]

