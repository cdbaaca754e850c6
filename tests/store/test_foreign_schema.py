"""analyzer.store.db.guard: the triggers capscan's own migrations created are the only code a database
may hold, and only until the migration that drops them has run (issue 37, item 3)."""

from __future__ import annotations

import sqlite3

import pytest

from analyzer.store import open_db
from analyzer.store.errors import StoreError
from analyzer.store.migrations import m007_diagnosis_inputs


def _as_written_before_m010(path, edit: str | None = None) -> None:
    """A database as a capscan before m010 left it: m007's ten triggers in place, m010 not applied."""
    open_db(path).conn.close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm010_drop_diagnosis_stamps'")
        m007_diagnosis_inputs(conn)  # type: ignore[arg-type]  # it only calls executescript
        if edit:
            conn.execute("DROP TRIGGER generation_runs_update")
            conn.execute(edit)
    conn.close()


def _triggers(path) -> list[str]:
    conn = sqlite3.connect(path)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
    conn.close()
    return names


def test_an_older_database_with_m007s_own_triggers_migrates(tmp_path):
    path = tmp_path / "old.db"
    _as_written_before_m010(path)
    assert len(_triggers(path)) == 10
    open_db(path).conn.close()  # m010 runs and drops them
    assert _triggers(path) == []


@pytest.mark.parametrize("edit", [
    "CREATE TRIGGER generation_runs_update AFTER UPDATE ON runs BEGIN "
    "UPDATE diagnoses SET fixable = 1, verdict = 'capability-downgrade'; END",
    "CREATE TRIGGER generation_runs_update AFTER UPDATE ON runs BEGIN UPDATE store_generation SET n = n + 2 "
    "WHERE id = 1; END",
])
def test_a_trigger_under_m007s_name_with_another_body_is_refused(tmp_path, edit):
    path = tmp_path / "old.db"
    _as_written_before_m010(path, edit)
    with pytest.raises(StoreError, match="generation_runs_update.*capscan did not create"):
        open_db(path)
    assert "generation_runs_update" in _triggers(path)  # refused, not changed: the user decides on a copy


def test_m007s_triggers_after_m010_are_refused(tmp_path):
    """Once m010 has run, capscan creates no trigger at all: one under m007's name came from elsewhere."""
    path = tmp_path / "new.db"
    open_db(path).conn.close()
    conn = sqlite3.connect(path)
    with conn:
        m007_diagnosis_inputs(conn)  # type: ignore[arg-type]
    conn.close()
    with pytest.raises(StoreError, match="generation_"):
        open_db(path)


def test_a_read_only_database_with_a_view_is_refused(tmp_path):
    """The read-only open (a file or mount capscan may not write) refuses it too (called directly: root
    can write any file, so a chmod would not make it read-only here)."""
    from analyzer.store.db import _open_read_only

    path = tmp_path / "ro.db"
    open_db(path).conn.close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE VIEW v AS SELECT 1")
    conn.close()
    with pytest.raises(StoreError, match="view 'v'"):
        _open_read_only(str(path))
