"""Issue 38: where the store's readers give one figure for several printed rows, it is one of the rows. The
canned query ``remedy_speedups`` (capscan db serve) sets a remedied run's best row against the stock run's;
the Prometheus/OTLP gauge of a run's test is the median of its rows as one of them (median_low), never a mean."""

from __future__ import annotations

import io
from pathlib import Path

from analyzer.fleet.metrics import collect
from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db
from analyzer.store.described import CANNED_QUERIES
from analyzer.store.remedy_records import link_runs

HEADER = ("| model                          |       size |     params | backend    | threads |          test "
          "|                  t/s |\n"
          "| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: "
          "| -------------------: |\n")
ROW = "| llama 1B Q4_K - Medium         | 636.18 MiB |     1.10 B | MTL,BLAS   |       8 |         {test} |  {tps} |\n"


def _table(rows: list[tuple[str, str]]) -> bytes:
    return (HEADER + "".join(ROW.format(test=t, tps=v) for t, v in rows) + "\nbuild: 9c2a77d10 (8890)\n").encode()


def test_remedy_speedups_set_the_best_printed_rows_against_each_other(tmp_path: Path):
    db = open_db(tmp_path / "s.db")
    try:
        # the stock command run twice into one log (two tg128 rows of one configuration), then the remedied one
        stock, = ingest(db, Input("stock.md", io.BytesIO(_table(
            [("pp512", "  431.86 ± 1.96"), ("tg128", "   12.63 ± 0.04"), ("tg128", "   12.11 ± 0.09")])))).run_ids
        fixed, = ingest(db, Input("fixed.md", io.BytesIO(_table(
            [("pp512", " 4786.70 ± 9.12"), ("tg128", "  206.60 ± 0.51")])))).run_ids
        link_runs(db, [fixed], stock, "remedied", None)
        cur = db.conn.execute(CANNED_QUERIES["remedy_speedups"]["sql"])
        names = [c[0] for c in cur.description]
        rows = {r["test"]: r for r in (dict(zip(names, row, strict=True)) for row in cur.fetchall())}
    finally:
        db.conn.close()
    assert rows["tg128"]["stock_tok_s"] == 12.63  # not 12.37, their mean
    assert rows["tg128"]["stock_rows"] == 2 and rows["tg128"]["remedied_rows"] == 1
    assert rows["tg128"]["speedup"] == round(206.6 / 12.63, 2)
    assert rows["pp512"]["stock_tok_s"] == 431.86


def test_a_runs_speed_gauge_is_one_of_its_printed_rows(tmp_path: Path):
    db = open_db(tmp_path / "m.db")
    try:
        ids = ingest(db, Input("stock.md", io.BytesIO(_table(
            [("tg128", "   12.63 ± 0.04"), ("tg128", "   12.11 ± 0.09")])))).run_ids
        diagnose_runs(db, ids)
        snap = collect(db, max_age_s=None)
    finally:
        db.conn.close()
    assert [v for k, v in snap.throughput.items() if k[0] == "tg128"] == [12.11]  # not 12.37, their mean
