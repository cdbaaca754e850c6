"""The typed diagnosis (analyzer.diagnosis, issue 39 item 2): the rules produce a ``Diagnosis``, the store
keeps it as the same JSON a dict made, and a stored report that does not fit is diagnosed again."""

from __future__ import annotations

import json
import sqlite3

from analyzer.diagnosis import Diagnosis, Finding, ProofItem
from analyzer.rules.diagnose import diagnose_runs, internal_error
from analyzer.store.db import open_db
from analyzer.store.queries import load_run
from tests.ingest_util import diagnosed

GUEST = "metal/m4-2026-08-guest-stock.log"
BASELINED = ("bench/host-m1-ultra.json", "bench/guest-stock.json")


def _report(db_path, run_id: int) -> str:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("SELECT report FROM diagnoses WHERE run_id = ?", (run_id,)).fetchone()[0]
    finally:
        conn.close()


def test_what_the_rules_produce_is_typed_and_reads_by_attribute(tmp_path):
    [run] = diagnosed(tmp_path, GUEST)
    d = run.diagnosis
    assert isinstance(d, Diagnosis) and d.verdict == "capability-downgrade" and d.fixable is False
    assert d.findings and all(isinstance(f, Finding) for f in d.findings)
    assert d.findings[0].evidence and isinstance(d.findings[0].evidence[0].line, int)
    assert d.proof_missing and d.fixable_reason


def test_the_stored_report_is_the_diagnosis_in_the_order_it_was_made(tmp_path):
    runs = diagnosed(tmp_path, *BASELINED)
    guest = next(r for r in runs if r.diagnosis.environment == "vm")
    stored = _report(tmp_path / "diagnosed.db", guest.id)
    assert stored == json.dumps(guest.diagnosis.stored())
    keys = list(json.loads(stored))
    assert keys[:3] == ["verdict", "fixable", "fixable_reason"] and keys.index("baseline") < keys.index("paired")
    # read back, it is the same diagnosis, and would be stored as the same bytes again
    db = open_db(tmp_path / "diagnosed.db")
    try:
        loaded = load_run(db, guest.id)
    finally:
        db.conn.close()
    assert loaded is not None and loaded.diagnosis is not None
    assert loaded.diagnosis.baseline is not None and loaded.diagnosis.baseline.run == guest.diagnosis.baseline.run
    assert json.dumps(loaded.diagnosis.stored()) == stored


def test_an_internal_error_keeps_its_own_shape(tmp_path):
    [run] = diagnosed(tmp_path, GUEST)
    made = internal_error(run, "ValueError: boom")
    stored = made.stored()
    assert list(stored) == ["verdict", "fixable", "fixable_reason", "confidence", "environment", "host_chip",
                            "host_family", "capabilities", "capabilities_inferred", "summary", "findings",
                            "next_steps", "paired", "rules_version"]
    assert stored["findings"] == [{"rule": "internal-error", "severity": "error", "message": made.summary,
                                   "evidence": []}]
    assert Diagnosis.load(json.loads(json.dumps(stored))).stored() == stored


def test_an_older_report_without_the_newer_keys_loads_with_the_defaults_readers_took():
    old = {"verdict": "healthy", "fixable": False, "confidence": "high", "environment": "bare-metal",
           "host_chip": "Apple M2 Max", "summary": "Full capabilities: nothing to fix.", "findings": []}
    d = Diagnosis.load(old)
    assert d.proof == [] and d.reference == [] and d.baseline is None and d.prediction == []
    assert d.headline_notes == {} and d.basis is None
    assert d.stored() == old  # nothing added that it did not say


def test_a_stored_report_that_does_not_fit_is_diagnosed_again(tmp_path):
    [run] = diagnosed(tmp_path, GUEST)
    db_path = tmp_path / "diagnosed.db"
    conn = sqlite3.connect(db_path)
    with conn:  # a database from elsewhere: a verdict capscan never gives, a fixable that is not a boolean
        conn.execute("UPDATE diagnoses SET report = ? WHERE run_id = ?",
                     (json.dumps({"verdict": "capability-downgrade", "fixable": "yes"}), run.id))
    conn.close()
    db = open_db(db_path)
    try:
        loaded = load_run(db, run.id)
        assert loaded is not None and loaded.diagnosis is None  # not loaded: it is no diagnosis of ours
        [again] = diagnose_runs(db, [run.id])
    finally:
        db.conn.close()
    assert again.diagnosis is not None and again.diagnosis.fixable is False
    assert _report(db_path, run.id) == json.dumps(again.diagnosis.stored())


def test_a_prediction_dropped_is_not_stored():
    d = Diagnosis.load({"verdict": "capability-downgrade", "fixable": True, "proof": [
        {"sign": "the guest names its host chip, Apple M1 Ultra", "line": 3, "text": "cpu_info", "provenance":
         "guest-process"}]})
    assert isinstance(d.proof[0], ProofItem) and d.proof[0].instance is None
    d.prediction = []
    assert "prediction" in d.stored()
    d.drop_prediction()
    assert "prediction" not in d.stored() and "instance" not in d.stored()["proof"][0]
