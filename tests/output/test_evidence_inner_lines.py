"""A log inside one JSON string (a CI artifact's stderr_tail) holds many log lines on one physical line:
the report lists each line read as evidence, not one line for the whole object (issue 41 item 5)."""

from __future__ import annotations

import json
import sqlite3

from analyzer.store.db import open_db
from analyzer.store.queries import load_run
from tests.conftest import REPO, run_capscan

ARTIFACT = REPO / "tests" / "fixtures" / "forms" / "json-ci-artifact-stderr-tail.json"


def test_each_line_inside_a_json_string_is_its_own_evidence_line(tmp_path):
    out = run_capscan("diagnose", str(ARTIFACT), db=tmp_path / "c.db", check=True).stdout.decode()
    evidence = out.split("  evidence:\n", 1)[1].split("  next:", 1)[0].splitlines()
    # every one on physical line 20 (the stderr_tail member), each with its own text, in the log's order
    # numbered physical line:line inside the string, as the string's own lines count (5 is the GPU name)
    assert evidence == [
        "      20:5  ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)",
        "      20:6  ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)",
        "      20:7  ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)",
        "      20:8  ggml_metal_device_init: simdgroup reduction   = false",
        "      20:9  ggml_metal_device_init: simdgroup matrix mul. = false",
        "     20:11  ggml_metal_device_init: has bfloat            = false",
    ]
    member = ARTIFACT.read_text().splitlines()[19]
    assert '"stderr_tail"' in member  # line 20 is that member
    inner = json.loads("{" + member.rstrip(",") + "}")["stderr_tail"].splitlines()
    assert inner[4].endswith("GPU name:   MTL0 (Apple Paravirtual device)")
    assert inner[10].endswith("has bfloat            = false")


def test_show_and_json_carry_the_inner_line_and_a_plain_log_has_none(tmp_path):
    db = tmp_path / "c.db"
    run_capscan("ingest", str(ARTIFACT), db=db, check=True)
    shown = run_capscan("show", "1", db=db, check=True).stdout.decode()
    assert "      20:5  ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)" in shown
    doc = json.loads(run_capscan("--json", "show", "1", db=db, check=True).stdout)
    evidence = [e for f in doc["findings"] for e in f["evidence"]]
    assert {(e["line"], e["inner"]) for e in evidence} >= {(20, 5), (20, 6), (20, 7), (20, 8), (20, 9), (20, 11)}
    assert all(e["line"] == 20 and type(e["inner"]) is int for e in evidence)
    run_capscan("report", "1", "--html", str(tmp_path / "r.html"), db=db, check=True)
    page = (tmp_path / "r.html").read_text()
    assert "20:5" in page and "20:11" in page  # the page's evidence lines are the report's
    # a log that is not JSON-wrapped: no inner key at all, numbers printed as before
    plain = json.loads(run_capscan("--json", db=tmp_path / "p.db", input=(REPO / "examples" / "m1-ultra-guest-stock.log")
                                   .read_bytes(), check=True).stdout)
    lines = [e for r in plain["runs"] for f in r["findings"] for e in f["evidence"]]
    assert lines and all(set(e) == {"line", "text"} for e in lines)


def test_the_store_keeps_each_evidence_lines_number_inside_the_string(tmp_path):
    db = tmp_path / "c.db"
    run_capscan("ingest", str(ARTIFACT), db=db, check=True)
    store = open_db(db)
    run = load_run(store, 1)
    assert run is not None and run.load_error is None
    assert [(e.line, e.inner) for e in run.evidence if "GPU name" in e.text] == [(20, 5)]
    assert len({e.inner for e in run.evidence}) == len(run.evidence) and None not in {e.inner for e in run.evidence}
    store.conn.close()


def test_a_store_from_before_the_inner_column_opens_and_reads(tmp_path):
    """m013 adds evidence.inner: a store made before it (the column and the migration's record gone, as an
    older capscan left it) opens, gains the column, and reads its evidence with inner null, shown as 20."""
    db = tmp_path / "c.db"
    run_capscan("ingest", str(ARTIFACT), db=db, check=True)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("ALTER TABLE evidence DROP COLUMN inner")
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm013_evidence_inner'")
    conn.close()
    store = open_db(db)
    assert "inner" in {r[1] for r in store.conn.execute("PRAGMA table_info(evidence)")}
    run = load_run(store, 1)
    assert run is not None and run.load_error is None and run.evidence
    assert all(e.inner is None and e.line == 20 for e in run.evidence)
    store.conn.close()
    shown = run_capscan("show", "1", db=db, check=True).stdout.decode()
    assert "        20  ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)" in shown
    doc = json.loads(run_capscan("--json", "show", "1", db=db, check=True).stdout)
    assert all("inner" not in e for f in doc["findings"] for e in f["evidence"])


def test_a_line_with_several_events_is_still_shown_once(tmp_path):
    # llama.cpp's perf lines and llama-bench rows can give several events on one line: one evidence line each
    out = run_capscan(db=tmp_path / "c.db", input=(REPO / "examples" / "m1-ultra-guest-stock-json.log").read_bytes(),
                      check=True).stdout.decode()
    numbers = [line.split()[0] for line in out.split("  evidence:\n", 1)[1].split("  next:", 1)[0].splitlines()]
    assert numbers == ["5", "6", "7", "8", "9", "11", "18"]
