"""Every reading command leaves the database file byte-identical (issue 28): `show` diagnoses its run
in memory with its peers as stored and writes nothing, and so does every other command that only reads.
The database is a real one, with a fixable guest, its bare-metal host and an imported run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_capscan
from tests.ingest_util import db_bytes

FIX = Path(__file__).resolve().parent.parent / "fixtures"
GUEST = FIX / "baselines/guest-stock-block-and-json.log"  # a fixable stock guest (its cpu_info names the host)
HOST = FIX / "metal/m4-2026-08-host-m1-ultra.log"


def _capscan(db: Path, *args: str) -> subprocess.CompletedProcess:
    return run_capscan(*args, db=db, check=True)




@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("read") / "capscan.db"
    _capscan(db, "ingest", str(GUEST), str(HOST))
    export = db.parent / "export.json"
    _capscan(db, "export", "json", "--instance", "guest-b", "--out", str(export))
    other = db.parent / "other.db"
    _capscan(other, "ingest", str(export))
    _capscan(other, "export", "json", "--instance", "central", "--out", str(export))
    return db


READING = [("show", "1"), ("show", "1", "--json"), ("show", "2", "--markdown"), ("runs",), ("runs", "--json"),
           ("runs", "--instance", "guest-b"), ("compare", "1", "2"), ("compare", "1", "2", "--json"),
           ("db", "stats"), ("db", "path"), ("export", "prometheus"), ("export", "json"), ("remedy", "plan"),
           ("remedy", "status"), ("schema",), ("formats",)]


@pytest.mark.parametrize("args", READING, ids=" ".join)
def test_a_reading_command_leaves_the_database_byte_identical(store, args):
    before = db_bytes(store)
    _capscan(store, *args)
    assert db_bytes(store) == before


def test_report_writes_its_page_and_nothing_stored(store, tmp_path):
    before = db_bytes(store)
    page = tmp_path / "report.html"
    _capscan(store, "report", "1", "2", "--html", str(page))
    assert db_bytes(store) == before
    assert "capability-downgrade" in page.read_text(encoding="utf-8")


def test_show_prints_what_diagnose_stores(store, tmp_path):
    """In memory, with the same peers and prediction: the same JSON as the diagnosis the ingest kept."""
    shown = json.loads(_capscan(store, "show", "1", "--json").stdout)
    copy = tmp_path / "copy.db"
    copy.write_bytes(store.read_bytes())
    diagnosed = json.loads(_capscan(copy, "diagnose", "--run", "1", "--json").stdout)["runs"][0]
    assert shown == diagnosed
    assert shown["fixable"] is True and shown["baseline"]["run"] == 2


def test_the_stamp_machinery_is_gone_from_the_schema(store):
    import sqlite3

    con = sqlite3.connect(store)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    con.close()
    assert not names & {"store_generation", "diagnosis_inputs"}
    assert not [n for n in names if n.startswith("generation_")]
    assert "sources_raw_kept" in names
