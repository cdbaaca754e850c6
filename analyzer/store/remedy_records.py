"""What capscan remedy did: one row per applied action (what, when, result,
how to undo it), and the links from remedied runs to their stock runs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from analyzer.store.stored_text import clean_json
from analyzer.store.writer import now

if TYPE_CHECKING:
    from analyzer.store.db import Database


def record(db: Database, action: str, args: dict[str, Any], result: str, undo: dict[str, Any] | None) -> int:
    with db.conn:
        cur = db.conn.execute(
            "INSERT INTO remedy_actions (at, action, args, result, undo) VALUES (?, ?, ?, ?, ?)",
            (now(), action, json.dumps(args), result, json.dumps(undo) if undo is not None else None))
    return int(cur.lastrowid or 0)


def set_result(db: Database, action_id: int, result: str, args: dict[str, Any] | None = None) -> None:
    with db.conn:
        if args is None:
            db.conn.execute("UPDATE remedy_actions SET result = ? WHERE id = ?", (result, action_id))
        else:
            db.conn.execute("UPDATE remedy_actions SET result = ?, args = ? WHERE id = ?",
                            (result, json.dumps(args), action_id))


def reconcile_lost(db: Database, host: str, alive: Callable[[int], bool]) -> list[int]:
    """Records left 'running' by a capscan of this host that is gone (kill -9, a crash, a power cut): each
    becomes 'lost', with the time it was noticed and whether its child was still running then. A
    record of another host, or without the pid (older capscan), is left as it is. Returns their ids."""
    lost = []
    for a in actions(db):
        args = a["args"] if isinstance(a["args"], dict) else {}
        pid = args.get("capscan_pid")
        if a["result"] != "running" or args.get("host") != host or not isinstance(pid, int) or alive(pid):
            continue
        child = args.get("child_pid")
        child_alive = isinstance(child, int) and alive(child)
        when = now()
        still = f"; its child (pid {child}) was still running then" if child_alive else ""
        set_result(db, a["id"], f"lost: the capscan that ran it (pid {pid}) ended without recording a result "
                                f"(noticed {when}){still}", {**args, "lost_at": when, "child_alive": child_alive})
        lost.append(a["id"])
    return lost


def mark_undone(db: Database, action_id: int) -> None:
    with db.conn:
        db.conn.execute("UPDATE remedy_actions SET undone_at = ? WHERE id = ?", (now(), action_id))


def _decoded(text: Any) -> Any:
    """A stored JSON column, decoded and cleaned; text that is not JSON comes back as that text, so the
    reader that checks the record's shape refuses it (a handed-over database can hold anything)."""
    if not isinstance(text, str):
        return text
    try:
        return clean_json(json.loads(text))
    except ValueError:
        return text


def _row(r: tuple) -> dict[str, Any]:
    return {"id": r[0], "at": r[1], "action": r[2], "args": _decoded(r[3]), "result": r[4],
            "undo": _decoded(r[5]) if r[5] else None, "undone_at": r[6]}


def actions(db: Database, action: str | None = None) -> list[dict[str, Any]]:
    sql = "SELECT id, at, action, args, result, undo, undone_at FROM remedy_actions"
    params: tuple = ()
    if action:
        sql += " WHERE action = ?"
        params = (action,)
    return [_row(r) for r in db.conn.execute(sql + " ORDER BY id", params)]


def get(db: Database, action_id: int) -> dict[str, Any] | None:
    from analyzer.store.queries import storable_id

    if not storable_id(action_id):
        return None
    r = db.conn.execute("SELECT id, at, action, args, result, undo, undone_at FROM remedy_actions WHERE id = ?",
                        (action_id,)).fetchone()
    return _row(r) if r else None


def undoable(db: Database) -> list[dict[str, Any]]:
    """Applied actions with an undo record, newest first. The record is data only: what it says is
    checked, and the command rebuilt, by analyzer.remedy.hostdefault (``undo_plan``)."""
    return [a for a in reversed(actions(db)) if a["undo"] is not None and not a["undone_at"]
            and a["result"] == "applied"]


def link_runs(db: Database, run_ids: list[int], stock_run_id: int, relation: str, action_id: int | None) -> None:
    with db.conn:
        db.conn.executemany(
            "INSERT OR REPLACE INTO run_links (run_id, stock_run_id, relation, action_id) VALUES (?, ?, ?, ?)",
            [(rid, stock_run_id, relation, action_id) for rid in run_ids])


def links(db: Database) -> list[dict[str, Any]]:
    return [{"run_id": r[0], "stock_run_id": r[1], "relation": r[2], "action_id": r[3]}
            for r in db.conn.execute("SELECT run_id, stock_run_id, relation, action_id FROM run_links ORDER BY run_id")]


def latest_stock_run(db: Database, *, downgraded: bool = False) -> int | None:
    """The newest stored run of this machine that capscan remedy did not produce itself: neither a
    remedied run (linked), nor the output of its own probes (the kernel check, the self-test: sources
    named 'capscan remedy...'), nor a run imported from another machine's export (its before/after
    would compare two machines). ``downgraded``: only runs stored as a capability-downgrade (fixable
    or not), what `remedy plan` is for; a host run stored after the guest's is not."""
    import sqlite3

    sql = ("SELECT MAX(id) FROM runs WHERE id NOT IN (SELECT run_id FROM run_links) AND source_id NOT IN "
           "(SELECT id FROM sources WHERE path LIKE 'capscan remedy%')")
    if downgraded:
        sql += " AND id IN (SELECT run_id FROM diagnoses WHERE verdict = 'capability-downgrade')"
    try:
        row = db.conn.execute(sql + " AND id NOT IN (SELECT run_id FROM run_origins)").fetchone()
    except sqlite3.OperationalError:  # older than m009, opened read-only: nothing was imported
        row = db.conn.execute(sql).fetchone()
    return row[0] if row else None
