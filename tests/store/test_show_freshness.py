"""`capscan show` reuses a stored diagnosis only while it is provably current
(analyzer/store/freshness.py): a new rules version, a changed run, a new run, a changed
diagnosis all make it diagnose again. It never shows a stale verdict."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).resolve().parent.parent / "fixtures"
GUEST = FIX / "baselines/guest-stock-block-and-json.log"  # a fixable stock guest (its cpu_info names the host)
HOST = FIX / "metal/m4-2026-08-host-m1-ultra.log"

# show in a subprocess; stderr's last line says whether the rules ran (the diagnose module loaded)
_SHOW = ("import sys, runpy, io, contextlib\n"
         "rules = sys.argv.pop(1)\n"
         "if rules != '-':\n"
         "    import analyzer.rules.version as v; v.RULES_VERSION = rules\n"
         "sys.argv = ['capscan'] + sys.argv[1:]\n"
         "try:\n"
         "    runpy.run_module('analyzer', run_name='__main__')\n"
         "except SystemExit as exc:\n"
         "    assert not exc.code, exc.code\n"
         "sys.stdout.flush()\n"
         "sys.stderr.write('\\nRULES_RAN=%d' % ('analyzer.rules.diagnose' in sys.modules))\n")


def _ingest(db: Path, log: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), "ingest", str(log)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _show(db: Path, run: int, *, rules: str = "-", json_out: bool = True) -> tuple[str, bool]:
    argv = ["--db", str(db), "show", str(run)] + (["--json"] if json_out else [])
    proc = subprocess.run([sys.executable, "-c", _SHOW, rules, *argv], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr.endswith("RULES_RAN=1")


def _settled(db: Path, run: int, **kw) -> str:
    """Show until the stored diagnosis is used (a first show after an ingest diagnoses again and
    stamps it; it converges at once when nothing changes)."""
    outs = []
    for _ in range(3):
        out, ran = _show(db, run, **kw)
        outs.append(out)
        if not ran:
            assert len(set(outs)) == 1, "the stored diagnosis differs from the one the rules gave"
            return out
    raise AssertionError("show never reused its stored diagnosis")


def _sql(db: Path, sql: str, *args) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, args)


def test_show_reuses_a_current_diagnosis_and_prints_exactly_what_the_rules_print(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    stored = _settled(db, 1)
    assert json.loads(stored)["verdict"] == "capability-downgrade"
    assert _show(db, 1) == (stored, False)
    human, ran = _show(db, 1, json_out=False)
    assert not ran and "CAPABILITY-DOWNGRADE" in human


def test_a_new_rules_version_diagnoses_again(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    _settled(db, 1)
    out, ran = _show(db, 1, rules="next-test-version")
    assert ran
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT rules_version FROM diagnoses WHERE run_id = 1").fetchone()[0] == "next-test-version"
    # and back under the current rules: diagnosed again, not the other version's stamp
    assert _show(db, 1)[1]


def test_a_tampered_stored_verdict_is_never_shown(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    _settled(db, 1)
    with sqlite3.connect(db) as conn:
        report = json.loads(conn.execute("SELECT report FROM diagnoses WHERE run_id = 1").fetchone()[0])
    report.update(verdict="healthy", fixable=False)
    _sql(db, "UPDATE diagnoses SET verdict = 'healthy', fixable = 0, report = ? WHERE run_id = 1", json.dumps(report))
    out, ran = _show(db, 1)
    assert ran and json.loads(out)["verdict"] == "capability-downgrade"


def test_a_changed_run_diagnoses_again(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    before = json.loads(_settled(db, 1))
    # the run's facts rewritten (here: no longer a paravirtual device, an AMD GPU): a trigger sees it
    with sqlite3.connect(db) as conn:
        facts = json.loads(conn.execute("SELECT facts FROM runs WHERE id = 1").fetchone()[0])
    facts["device"]["name"] = "AMD Radeon Pro 5500M"
    _sql(db, "UPDATE runs SET facts = ?, device_name = 'AMD Radeon Pro 5500M' WHERE id = 1", json.dumps(facts))
    out, ran = _show(db, 1)
    after = json.loads(out)
    assert ran and after["device"]["name"] == "AMD Radeon Pro 5500M"
    assert after["fixable"] is False and before["fixable"] is True


def test_a_row_added_to_the_run_behind_capscans_back_diagnoses_again(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    _settled(db, 1)
    # an INSERT fires no generation trigger (ingest inserts rows with their run); the run's digest sees it
    _sql(db, "INSERT INTO evidence (run_id, line, kind, text) VALUES (1, 9999, 'device', 'added later')")
    assert _show(db, 1)[1]


def test_a_new_run_diagnoses_again(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    _settled(db, 1)
    _ingest(db, HOST)  # may be run 1's baseline
    assert _show(db, 1)[1]
    _settled(db, 1)


def test_stamps_and_generation_on_a_fresh_database(tmp_path):
    db = tmp_path / "c.db"
    _ingest(db, GUEST)
    with sqlite3.connect(db) as conn:
        gen = conn.execute("SELECT n FROM store_generation").fetchone()[0]
        assert gen > 0  # the run and its diagnosis
        assert conn.execute("SELECT COUNT(*) FROM diagnosis_inputs").fetchone()[0] == 0  # ingest changed things
    _settled(db, 1)
    with sqlite3.connect(db) as conn:
        stamp = conn.execute("SELECT inputs FROM diagnosis_inputs WHERE run_id = 1").fetchone()[0]
        gen2 = conn.execute("SELECT n FROM store_generation").fetchone()[0]
    assert stamp.split(":")[1] == str(gen2)
