"""The TUI's read-only SQL and formatting helpers (no textual involved)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

from analyzer.store.queries import load_run
from analyzer.tui import queries
from analyzer.tui.model import bar, compact, capability_matrix, host_info, relative_to, utc_minutes
from analyzer.tui.queries import RunFilter, Store


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
        assert guest.diagnosis["baseline"]["run"] == 2 and "same hardware (Apple M1 Ultra" in \
            guest.diagnosis["baseline"]["why"]
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
    code = ("import sys, analyzer.cli, analyzer.tui.queries, analyzer.tui.model; "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_styles_agree_with_the_report():
    from analyzer import report
    from analyzer.tui import model

    assert model.VERDICT_STYLE == report.VERDICT_STYLE
    for v in (None, 12.634, float("inf"), 4871.99):
        assert model.fmt_tps(v) == report.fmt_tps(v)
