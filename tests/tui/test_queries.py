"""The TUI's read-only SQL and formatting helpers (no textual involved)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

from analyzer.store.queries import load_run
from analyzer.store import browse as queries
from analyzer.tui.model import bar, compact, capability_matrix, host_info, relative_to, utc_minutes
from analyzer.store.browse import RunFilter, Store


def test_page_count_and_filters(tui_db):
    store = Store(tui_db)
    with store.read() as conn:
        rows = queries.page(conn, RunFilter())
        assert [r.id for r in rows] == [5, 4, 3, 2, 1]
        assert rows[-1].verdict == "capability-downgrade" and rows[-1].best_tg == 12.63
        assert [r.id for r in queries.page(conn, RunFilter(), before=3)] == [2, 1]
        assert [r.id for r in queries.page(conn, RunFilter(), limit=2)] == [5, 4]
        assert [r.id for r in queries.page(conn, RunFilter(text="ULTRA"))] == [2]
        assert [r.id for r in queries.page(conn, RunFilter(text="paravirtual lume"))] == [3]
        assert [r.id for r in queries.page(conn, RunFilter(text="downgrade"))] == [1]
        assert queries.page(conn, RunFilter(text="100%")) == []  # LIKE wildcards are literal
        # the env column's words too (issue 41): `/vm` finds the guests, `/bare` the hosts
        assert [r.id for r in queries.page(conn, RunFilter(text="vm"))] == [3, 1]
        assert [r.id for r in queries.page(conn, RunFilter(text="bare"))] == [4, 2]
        assert queries.count(conn, RunFilter(text="VM")) == 2
        assert [r.id for r in queries.page(conn, RunFilter(environment="bare-metal"))] == [4, 2]
        assert queries.count(conn, RunFilter(device="Apple Paravirtual device")) == 2
        assert queries.count(conn, RunFilter()) == 5
        f = queries.facets(conn)
        assert f.total == 5 and f.verdicts["healthy"] == 1
        assert ("Apple Paravirtual device", 2) in f.devices
        assert queries.neighbour(conn, 3, RunFilter(), older=True) == 2
        assert queries.neighbour(conn, 3, RunFilter(), older=False) == 4


def test_change_token_moves_on_commits_from_other_connections(tui_db):
    from tests.tui.conftest import ingest_logs

    store = Store(tui_db)
    first = store.change_token()
    assert store.change_token() == first
    ingest_logs(tui_db, ["metal/m4-2026-09-m5-max.log"])
    after = store.change_token()
    assert after != first and after[1] == 6
    store.close()


def test_baseline_and_capability_matrix(tui_db):
    store = Store(tui_db)
    with store.database() as db:
        guest = load_run(db, 1)
        assert queries.baseline_for(db.conn, 1, guest.facts.model, guest.diagnosis) == 2
        host_run = load_run(db, 2)
        assert queries.baseline_for(db.conn, 2, host_run.facts.model, host_run.diagnosis) is None
        assert guest.diagnosis.stored()["baseline"]["run"] == 2 and "same hardware (Apple M1 Ultra" in \
            guest.diagnosis.stored()["baseline"]["why"]
        host = host_info(guest, host_run)
        assert host.family == 1007 and host.chip == "Apple M1 Ultra" and "guest" in host.basis
        rows = {r["capability"]: r for r in capability_matrix(guest, host)}
        assert rows["GPU family"]["device"] == "Apple5" and rows["GPU family"]["status"] == "clamped"
        assert rows["simdgroup matrix mul"] == {**rows["simdgroup matrix mul"], "device": "no", "host": "yes",
                                                "runtime": "off", "status": "downgraded"}
        assert rows["tensor API"]["host"] == "no"


def test_formatting_helpers():
    assert utc_minutes("2026-08-14T09:05:00+00:00") == "2026-08-14 09:05"
    fmt = compact(dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc))
    assert fmt("2026-08-14T09:05:00+00:00") == "Aug 14 09:05"
    assert fmt("2025-08-14T09:05:00+00:00") == "2025-08-14"
    fmt = relative_to(dt.datetime(2026, 8, 14, 9, 10, tzinfo=dt.timezone.utc))
    assert fmt("2026-08-14T09:05:00+00:00") == "5 min ago"
    assert fmt("2026-08-10T09:05:00+00:00") == "2026-08-10 09:05"
    assert bar(50, 100, width=8) == "████"
    assert bar(1, 100, width=8) == "▏"
    assert bar(None, 100) == "" and bar(float("inf"), 100) == ""


def test_core_and_tui_helpers_never_import_textual():
    code = ("import sys, analyzer.cli, analyzer.store.browse, analyzer.tui.model; "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_styles_agree_with_the_report():
    from analyzer.output import display
    from analyzer.tui import model

    assert model.VERDICT_STYLE == display.VERDICT_STYLE  # the report's styles and speeds come from display
    for v in (None, 12.634, float("inf"), 4871.99):
        assert model.fmt_tps(v) == display.fmt_tps(v)


def test_every_filter_agrees_with_a_reference(tui_db):
    """page, count and neighbour against the filter's meaning evaluated in
    Python over every run: text words (device, program, model, source path,
    verdict, run id), verdict/device/environment selects, "-" (none), and
    their combinations; with the SQL reading diagnoses alone or joined."""
    import itertools
    import sqlite3

    from analyzer.store.browse import NOT_DIAGNOSED

    with sqlite3.connect(tui_db) as conn:
        conn.execute("DELETE FROM diagnoses WHERE run_id = 5")  # a run without a diagnosis
        conn.execute("UPDATE diagnoses SET environment = NULL WHERE run_id = 4")
    store = Store(tui_db)
    with store.read() as conn:
        every = {r.id: r for r in queries.page(conn, RunFilter(), limit=1000)}
        paths = dict(conn.execute("SELECT r.id, s.path FROM runs r JOIN sources s ON s.id = r.source_id"))

        def matches(r, flt: RunFilter) -> bool:
            for word in flt.text.split():
                w = word.lower()
                fields = [r.device, r.program, r.model, paths[r.id], r.verdict, r.environment]
                if not any(f and w in f.lower() for f in fields) and word.lstrip("#") != str(r.id):
                    return False
            for want, got in ((flt.verdict, r.verdict), (flt.environment, r.environment), (flt.device, r.device)):
                if want == NOT_DIAGNOSED and got is not None or want not in (None, NOT_DIAGNOSED) and got != want:
                    return False
            return True

        texts = ["", "apple", "VM ultra", "downgrade", "healthy", "log", "#3", "zzq", "-"]
        verdicts = [None, NOT_DIAGNOSED] + sorted({r.verdict for r in every.values() if r.verdict})
        envs = [None, NOT_DIAGNOSED, "vm", "bare-metal"]
        devices = [None, NOT_DIAGNOSED, "Apple M1 Ultra", "Apple Paravirtual device"]
        for text, verdict, env, device in itertools.product(texts, verdicts, envs, devices):
            flt = RunFilter(text=text, verdict=verdict, environment=env, device=device)
            want = sorted((i for i, r in every.items() if matches(r, flt)), reverse=True)
            assert [r.id for r in queries.page(conn, flt)] == want, flt
            assert [r.id for r in queries.page(conn, flt, before=4)] == [i for i in want if i < 4], flt
            assert queries.count(conn, flt) == len(want), flt
            assert queries.neighbour(conn, 3, flt, older=True) == next((i for i in want if i < 3), None), flt
            assert queries.neighbour(conn, 3, flt, older=False) == next((i for i in reversed(want) if i > 3), None)


def _varied_db(path):
    """Runs whose text columns vary in case, non-ASCII letters, LIKE's wildcards and escape, digits
    and NULLs; some diagnosed, most sources with several runs."""
    import random

    from analyzer.store.db import open_db

    rnd = random.Random(4)
    db = open_db(path)
    conn = db.conn
    words = ["Apple M1 Ultra", "apple m2 MAX", "Äpfel ß GPU", "äpfel", "100% fast_path", "back\\slash", "AMD Radeon",
             "Intel(R) Iris", "llama-bench", "LLAMA.cpp", "ollama", "Qwen2.5-7B", "tinyllama-1.1b", "7", "#42", None]
    conn.execute("BEGIN")
    for sid in range(1, 41):
        conn.execute("INSERT INTO sources (id, path, size, sha256, ingested_at, lines, recognised_lines, "
                     "unrecognised_lines, overlong_lines) VALUES (?, ?, 0, ?, '2026-01-01', 0, 0, 0, 0)",
                     (sid, f"~/logs/{rnd.choice(['Guest', 'host', 'CI_runs', 'ßtage'])}/run-{sid:03d}.log", str(sid)))
    for rid in range(1, 401):
        conn.execute("INSERT INTO runs (id, source_id, seq, first_line, last_line, program, device_name, model, "
                     "created_at, facts) VALUES (?, ?, 0, 1, 2, ?, ?, ?, '2026-01-01T00:00:00', '{}')",
                     (rid, rnd.randint(1, 40), rnd.choice(words), rnd.choice(words), rnd.choice(words)))
        if rnd.random() < 0.7:
            conn.execute("INSERT INTO diagnoses (run_id, verdict, fixable, environment, report, rules_version, "
                         "diagnosed_at) VALUES (?, ?, 0, ?, '{}', 'x', '2026')",
                         (rid, rnd.choice(["healthy", "capability-downgrade", "unknown"]), rnd.choice(["vm", None])))
    conn.execute("COMMIT")
    return db


import pytest  # noqa: E402


@pytest.mark.parametrize("max_in", [400, 2])  # 2: words matching many source paths take the LIKE subquery
def test_the_text_index_finds_what_like_finds(tmp_path, monkeypatch, max_in):
    """The TUI's text filter through the text index (IN lists, no LIKE on every run) gives the
    same pages and counts as the LIKE query it replaces, on a varied database."""
    monkeypatch.setattr(queries, "MAX_IN_VALUES", max_in)
    db = _varied_db(tmp_path / "v.db")
    index = queries.text_index(db.conn)
    texts = ["", "apple", "APPLE", "m1 ultra", "Ä", "ä", "ß", "äpfel gpu", "100%", "%", "_", "fast_path", "\\",
             "back\\s", "llama", "LLAMA", "7", "#42", "42", "down", "grade", "u", "zzq", "guest", "ci_", "run-01",
             "apple zzq", "intel(r)", "(", "."]
    import dataclasses

    # a page looks a common verdict up run by run, a rare one through the set of its runs: both ways
    rare = dataclasses.replace(index, runs=10 ** 9)
    for text in texts:
        for flt in (RunFilter(text=text), RunFilter(text=text, verdict="healthy"),
                    RunFilter(text=text, environment=queries.NOT_DIAGNOSED), RunFilter(text=text, device="7")):
            like = [r.id for r in queries.page(db.conn, flt, limit=1000)]
            assert [r.id for r in queries.page(db.conn, flt, limit=1000, index=index)] == like, flt
            assert [r.id for r in queries.page(db.conn, flt, limit=1000, index=rare)] == like, flt
            assert queries.count(db.conn, flt, index) == queries.count(db.conn, flt) == len(like), flt
    assert queries.page(db.conn, RunFilter(text="zzq"), index=index) == []
