"""`capscan compare` draws (issue 25 item 3): per test a bar per run, scaled to the fastest run of that
test, the speed and the share of the reference beside it; the stock guest, remedied guest and host of the
bundled examples, through the real CLI and a real SQLite file."""

from __future__ import annotations

from analyzer.output.chart import Bar, Group, bar_text, chart_groups, chart_html
from tests.conftest import REPO, run_capscan

EXAMPLES = REPO / "examples"


def _db(tmp_path):
    db = tmp_path / "c.db"
    for name in ("m1-ultra-guest-stock.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log"):
        run_capscan("ingest", str(EXAMPLES / name), db=db, check=True)
    return db


def test_compare_of_three_runs_draws_a_bar_per_run_and_test(tmp_path):
    out = run_capscan("compare", "1", "2", "3", db=_db(tmp_path), check=True).stdout.decode()
    lines = out.splitlines()
    assert lines[0].startswith("Throughput per test")
    bars = [line for line in lines[1:9] if "t/s" in line]
    assert [next(r for r in ("stock guest #1", "remedied guest #2", "host #3") if r in line) for line in bars] == [
        "stock guest #1", "remedied guest #2", "host #3"] * 2
    assert bars[0].startswith("pp512") and bars[3].startswith("tg128")
    tg = bars[3:6]
    stock, remedied, host = (line.count("█") for line in tg)
    assert stock < remedied < host          # 12.63 < 206.60 < 286.71, drawn to scale
    assert "12.63 t/s  4% of host" in tg[0] and "206.60 t/s  72% of host" in tg[1] and "reference" in tg[2]


def test_two_runs_draw_a_and_b():
    doc = {"pairs": [{"a": 3, "b": 1, "tests": [{"test": "tg128", "config": "", "a_tok_s": 286.71, "b_tok_s": 12.63,
                                                  "ratio": 12.63 / 286.71, "per_token_s": 0.0}]}]}
    (group,) = chart_groups(doc)
    assert [(b.role, b.run) for b in group.bars] == [("A", 3), ("B", 1)]
    assert abs(group.bars[1].share - 0.044) < 0.001


def test_bars_are_to_scale_and_never_vanish():
    assert bar_text(100, 100, 10) == "█" * 10
    assert bar_text(50, 100, 10) == "█" * 5
    assert bar_text(0.001, 100, 10) == "▏"     # a sliver for any speed above zero
    assert bar_text(0, 100, 10) == "" and bar_text(float("nan"), 100, 10) == ""


def test_the_html_chart_escapes_what_it_shows():
    table = chart_html([Group("<tg128>&\u202e\x1b[2J", [Bar("host", 1, 10.0, None)])])
    assert "&lt;tg128&gt;&amp;" in table and "<tg128>" not in table and "http" not in table
    assert 'title="&lt;tg128&gt;&amp;"' in table and "\u202e" not in table and "\x1b" not in table
