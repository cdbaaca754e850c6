"""Issue 22: each configuration its own figure. Rows of one test at different thread counts (batch,
KV types, flash attention, offload ...) are never averaged into one number, two timing blocks of two
processes are two runs, and a guest's figure is compared with the host's of the same configuration.

Through the real pipeline (ingest into a temp database, diagnose, the report and --json). The real
logs are in configs/ (see its README for their sources); the JSON variants are the committed
llama-bench fixtures with their rows repeated at another thread count, as `llama-bench -t 4,8` prints."""

from __future__ import annotations

import copy
import io
import json
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.model import figure_key, like_pairs
from analyzer.output.run_report import run_lines
from analyzer.output.runjson import run_to_json as run_json
from analyzer.output.styled import plain_text
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

HERE = Path(__file__).resolve().parent / "configs"
FIX = Path(__file__).resolve().parent.parent / "fixtures"
SWEEP = (HERE / "kleidiai-pr11390-thread-sweep-tg64-2025.md").read_text()
TABBY = (HERE / "tabby-pr393-f16-then-q8_0-timings-2023.log").read_text()


def diagnosed(*texts: str) -> list:
    """Every run of the texts (ingested in order into one database), diagnosed with its peers."""
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "c.db")
        ids = []
        for i, text in enumerate(texts):
            ids += ingest(db, Input(f"log{i}.txt", io.BytesIO(text.encode()))).run_ids
        runs = list(diagnose_runs(db, ids, refresh_peers=True))
        db.conn.close()
    return runs


def report(run) -> str:
    return plain_text(run_lines(run))


def _rows_at(path: str, threads: dict[int, float]) -> list[dict]:
    """The fixture's rows, once per thread count, the tg rows' speed scaled by its factor."""
    rows = json.loads((FIX / path).read_text())
    out = []
    for n, scale in threads.items():
        for row in rows:
            r = copy.deepcopy(row)
            r["n_threads"] = n
            if r["n_gen"]:
                r["avg_ts"] = round(r["avg_ts"] * scale, 6)
            out.append(r)
    return out


def test_a_thread_sweep_is_six_figures_each_findable():
    [run] = diagnosed(SWEEP)
    by_config = {(t["test"], t["config"]): t for t in run.throughput}
    assert len(run.throughput) == 6
    for n, tok_s, line in ((1, 47.84, 5), (2, 87.31, 6), (4, 157.63, 7), (6, 188.15, 8), (8, 237.40, 9),
                           (10, 243.65, 10)):
        t = by_config[("tg64", f"threads={n}")]
        assert (t["tok_s"], t["n"], t["line"]) == (tok_s, 1, line)
    text = report(run)
    # each figure as printed, with its ± (issue 38)
    assert "tg64 [threads=1] 47.84 ± " in text and "tg64 [threads=10] 243.65 ± " in text
    js = run_json(run)["throughput"]
    assert [(t["config"], t["tok_s"], t["line"]) for t in js][:2] == [("threads=1", 47.84, 5), ("threads=2", 87.31, 6)]


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_rows_at_two_thread_counts_stay_apart(fmt):
    rows = _rows_at("bench/guest-stock.json", {4: 0.5, 8: 1.0})
    text = json.dumps(rows, indent=2) if fmt == "json" else "".join(json.dumps(r) + "\n" for r in rows)
    [run] = diagnosed(text)
    tg = {t["config"].split()[0]: t["tok_s"] for t in run.throughput if t["test"] == "tg128"}
    assert tg == {"threads=4": pytest.approx(6.315), "threads=8": pytest.approx(12.63)}
    # the rest of the configuration is stated too, so the figure is findable by every parameter
    assert all("n_batch=2048" in t["config"] and "type_k=f16" in t["config"] for t in run.throughput)
    # the report names only what tells the figures apart
    assert "tg128 [threads=4] 6.315 ± " in report(run)


def test_same_configuration_repeated_is_still_one_figure():
    """Each printed row is shown as printed (issue 38); compared, they are one figure: the best."""
    rows = _rows_at("bench/guest-stock.json", {8: 1.0}) * 3
    [run] = diagnosed(json.dumps(rows))
    assert sorted((t["test"], t["n"]) for t in run.throughput) == [("pp512", 1)] * 3 + [("tg128", 1)] * 3
    assert len({figure_key(t["test"], t["config"]) for t in run.throughput}) == 2


def test_baseline_pairs_like_with_like():
    """The guest at 4 and 8 threads, the host at 8 and 16: tg128 at 8 threads pairs with the host's 8."""
    host = _rows_at("bench/host-m1-ultra.json", {8: 1.0, 16: 1.2})
    guest = _rows_at("bench/guest-stock.json", {4: 0.5, 8: 1.0})
    _, g = diagnosed(json.dumps(host), json.dumps(guest))
    paired = g.diagnosis.stored()["paired"]
    assert paired is not None
    tg = {t["config"].split()[0]: t for t in paired["tests"] if t["test"] == "tg128"}
    assert tg["threads=8"]["baseline_tok_s"] == pytest.approx(286.71)
    assert tg["threads=8"]["ratio"] == pytest.approx(12.63 / 286.71)
    assert tg["threads=8"]["baseline_config"].split()[0] == "threads=8"
    # no host figure at 4 threads: that figure is not compared with another configuration's
    assert "threads=4" not in tg


def test_a_side_that_states_no_parameter_pairs_with_any():
    assert like_pairs({"tg128 [threads=8]": 10.0}, {"tg128": 100.0}) == [("tg128 [threads=8]", "tg128")]
    assert like_pairs({"tg128": 10.0}, {"tg128 [threads=4]": 50.0, "tg128 [threads=8]": 90.0}) == \
        [("tg128", "tg128 [threads=8]")]
    assert like_pairs({"tg128 [threads=8 fa=1]": 10.0}, {"tg128 [threads=8 fa=0]": 9.0}) == []
    assert like_pairs({"tg128 [threads=8 ngl=99]": 10.0}, {"tg128 [threads=8 ngl=0]": 9.0}, ignore=("ngl",)) == \
        [("tg128 [threads=8 ngl=99]", "tg128 [threads=8 ngl=0]")]


def test_two_timing_blocks_of_two_processes_are_two_runs():
    runs = diagnosed(TABBY)
    assert [{t["test"]: t["tok_s"] for t in r.throughput} for r in runs] == [
        {"prompt": 64.33, "generation": 12.36}, {"prompt": 95.98, "generation": 40.01}]
    assert [r.facts.first_line for r in runs] == [5, 14]


def test_server_requests_stay_one_run():
    """llama-server prints a block per request: one process, one run (tests/fixtures/timings)."""
    runs = diagnosed((FIX / "timings" / "server-slot-2024-10.log").read_text())
    assert len(runs) == 1
