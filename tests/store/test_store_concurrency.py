"""Many capscan processes opening one new database at once: every one of them
gets a migrated database (the migration race is lost gracefully, never as a
'corrupt database' error)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("round_", range(3))
def test_simultaneous_first_opens_all_succeed(tmp_path, round_):
    db = tmp_path / f"new{round_}.db"
    log = FIX / "metal/m4-2026-08-guest-stock.log"
    procs = [subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db), "ingest", "--force", str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for rc, err in results:
        assert rc == 0, err.decode()
    import sqlite3

    conn = sqlite3.connect(db)
    names = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations WHERE migration_set = 'capscan'")]
    assert len(names) == len(set(names)) >= 4
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 8
