"""Migrations run their scripts through ``migrations._script`` (sqlite-utils' splitter is quadratic).
Its statements must be the ones SQLite itself would run: the oracle is sqlite3's own ``executescript``."""

import sqlite3

import pytest

from analyzer.store.db import open_db
from analyzer.store.migrations import MIGRATIONS, _script

# (bytes: capscan's connections clean the text they read)
SCHEMA = ("SELECT type, name, tbl_name, CAST(sql AS BLOB) FROM sqlite_master WHERE tbl_name != '_sqlite_migrations' "
          "ORDER BY name")

SCRIPTS = {
    "plain": "CREATE TABLE a (x); CREATE INDEX a_x ON a(x);",
    "trigger body with its own semicolons": (
        "CREATE TABLE n (v); INSERT INTO n VALUES (0); CREATE TABLE t (x);"
        "CREATE TRIGGER t_ins AFTER INSERT ON t BEGIN UPDATE n SET v = v + 1; UPDATE n SET v = v * 1; END;"
        "INSERT INTO t VALUES (1);"),
    "semicolons in strings, quoted names and comments": (
        "CREATE TABLE \"a;b\" (x TEXT DEFAULT 'p;q'); -- a comment; with one\n"
        "INSERT INTO \"a;b\" (x) VALUES ('one; two'); /* block; comment */ INSERT INTO \"a;b\" VALUES (';');"),
    "no final semicolon": "CREATE TABLE c (x); INSERT INTO c VALUES (1)",
}


def _state(conn: sqlite3.Connection) -> list:
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    rows = {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    return [conn.execute(SCHEMA).fetchall(), rows]


@pytest.mark.parametrize("sql", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_a_script_in_a_transaction_runs_what_sqlite_runs(sql):
    ours, theirs = sqlite3.connect(":memory:", isolation_level=None), sqlite3.connect(":memory:")
    ours.execute("BEGIN")
    _script(ours, sql)
    ours.execute("COMMIT")
    theirs.executescript(sql)
    assert _state(ours) == _state(theirs)


def test_a_new_database_has_the_schema_sqlite_scripts_give(tmp_path):
    """Every migration applied by open_db (in transactions: our splitter) against each run by sqlite3's
    executescript on a plain connection (the split SQLite makes itself)."""
    db = open_db(tmp_path / "capscan.db")
    reference = sqlite3.connect(":memory:", isolation_level=None)
    for fn in (fn for _, fn, _ in MIGRATIONS._registered):
        fn(reference)
    assert db.conn.execute(SCHEMA).fetchall() == reference.execute(SCHEMA).fetchall()
    assert len(db.conn.execute(SCHEMA).fetchall()) > 10
