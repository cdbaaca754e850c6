"""diagnoses.full_caps_speeds_on: the one statement a prediction reads per host chip and batch."""

from __future__ import annotations

import io
from pathlib import Path

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import diagnoses
from analyzer.store.db import open_db
from tests.ingest_util import json_invocation

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SHIM = json_invocation((FIX / "metal/m4-2026-08-guest-lume-shim.log").read_bytes(), (FIX / "bench/guest-shim.json").read_bytes())
HOST = json_invocation((FIX / "metal/m4-2026-08-host-m1-ultra.log").read_bytes(), (FIX / "bench/host-m1-ultra.json").read_bytes())
STOCK = ((FIX / "metal/m4-2026-08-guest-stock.log").read_bytes().split(b"| model")[0]
         + (FIX / "bench/gemma-12b-stock.jsonl").read_bytes())


def _db(tmp_path: Path):
    db = open_db(tmp_path / "s.db")
    for name, data in (("shim.log", SHIM), ("host.log", HOST), ("stock.log", STOCK)):
        diagnose_runs(db, ingest(db, Input(name, io.BytesIO(data)), force=True).run_ids, refresh_peers=True)
    return db


def test_the_best_speed_per_model_side_and_test_of_full_capability_runs(tmp_path):
    db = _db(tmp_path)
    try:
        rows = diagnoses.full_caps_speeds_on(db, "Apple M1 Ultra")
        other_chip = diagnoses.full_caps_speeds_on(db, "Apple M2 Max")
    finally:
        db.conn.close()
    by = {(m, env, test): tok_s for m, env, test, tok_s in rows}
    # the shim guest and the host, both full capabilities; the clamped stock guest (gemma) is not a figure
    assert {env for _, env, _ in by} == {"vm", "bare-metal"}
    assert not any(m.startswith("gemma") for m, _, _ in by)
    assert len(rows) == len(by)  # one row per (model, side, test)
    assert other_chip == []


def test_a_database_without_imports_table_reads_the_same(tmp_path):
    """A database older than m009 (no run_origins, opened read-only so never migrated) holds no
    imported run: the same figures, read without the origin clause."""
    db = _db(tmp_path)
    try:
        want = diagnoses.full_caps_speeds_on(db, "Apple M1 Ultra")
        db.conn.execute("DROP TABLE run_origins")
        assert want and diagnoses.full_caps_speeds_on(db, "Apple M1 Ultra") == want
    finally:
        db.conn.close()
