"""Plausible numbers only (issue 21, item 4): a bare-metal run whose speeds no machine can have
(100x an M1 Ultra's, negative, NaN, infinite, zero for tokens processed) is refused at the parser
boundary, counted as rejected, and never becomes the baseline that turns an earlier guest into
"2270x slower, fixable"; real results, the fastest included, are stored as before."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.parsers import Dispatcher
from analyzer.read.reader import Input, open_input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db
from analyzer.store.queries import load_run
from tests.conftest import run_capscan

FIX = Path(__file__).resolve().parent.parent / "fixtures"
HOST = (FIX / "bench" / "host-m1-ultra.json").read_text()  # llama-bench -o json on the M1 Ultra: pp512 4871.99, tg128 286.71
GUEST = "bench/guest-stock.json"  # its stock guest: same model, build and chip (cpu_info 'Apple M1 Ultra (Virtual)')


def host_with(pp: str, tg: str) -> str:
    """The host's own log with its two speeds (and their samples) replaced, as a corrupted or forged file has them."""
    text = HOST.replace('"avg_ts": 4871.990000', f'"avg_ts": {pp}').replace('"avg_ts": 286.710000', f'"avg_ts": {tg}')
    assert text != HOST
    return re.sub(r'"samples_ts": \[[^\]]*\]', f'"samples_ts": [ {pp} ]', text, count=1)


def add(db, path: Path) -> tuple[list, int]:
    """Ingest a file as the CLI does (diagnose it, then the runs it may be a baseline of): its runs and rejected count."""
    src = open_input(str(path))
    try:
        result = ingest(db, src, force=True)
        return diagnose_runs(db, result.run_ids, refresh_peers=True), result.rejected
    finally:
        src.close()


def verdict(db, run_id: int) -> tuple:
    d = load_run(db, run_id).diagnosis.stored()
    return d["verdict"], d["fixable"], d["confidence"], (d.get("baseline") or {}).get("run")


BAD = {
    "100x an M1 Ultra": ("487199.0", "28671.0"),
    "negative": ("-4871.99", "-286.71"),
    "zero with tokens": ("0.0", "0.000000"),
    "NaN": ("NaN", "NaN"),  # json.loads reads them (llama-bench -o json is read field by field)
    "infinite": ("Infinity", "Infinity"),
}


@pytest.mark.parametrize("case", BAD)
def test_an_impossible_host_log_never_becomes_the_guests_baseline(tmp_path, case):
    db = open_db(tmp_path / "p.db")
    (guest,), rejected = add(db, FIX / GUEST)
    assert rejected == 0
    before = verdict(db, guest.id)
    # no baseline: only the guest's speed against its host chip's bandwidth, a low-confidence downgrade, not fixable
    assert before == ("capability-downgrade", False, "low", None)
    host = tmp_path / "host.json"
    host.write_text(host_with(*BAD[case]))
    runs, rejected = add(db, host)
    assert (runs, rejected) == ([], 2)  # both rows refused and counted; no run of them is stored
    assert verdict(db, guest.id) == before  # not 'capability-downgrade (fixable)', '2270x slower'
    assert db.conn.execute("SELECT COUNT(*) FROM throughput WHERE tok_s > 4871.99 OR tok_s <= 0").fetchone()[0] == 0
    assert db.conn.execute("SELECT rejected_records FROM sources ORDER BY id DESC LIMIT 1").fetchone()[0] == 2


def test_the_refused_rows_are_counted_where_the_user_sees_them(tmp_path):
    host = tmp_path / "host-100x.json"
    host.write_text(host_with("487199.0", "286.71"))  # pp 100x, tg real: one row refused, the other stored
    out = run_capscan("--json", "ingest", str(host), db=tmp_path / "c.db", check=True)
    doc = json.loads(out.stdout)[0]
    assert doc["malformed_records"] == 1 and len(doc["run_ids"]) == 1
    assert b"1 record(s) skipped (wrong types" in out.stderr
    conn = sqlite3.connect(str(tmp_path / "c.db"))
    try:
        assert conn.execute("SELECT test, tok_s FROM throughput").fetchall() == [("tg128", 286.71)]
        assert conn.execute("SELECT rejected_records FROM sources").fetchall() == [(1,)]
    finally:
        conn.close()


def _jsonl(cpu: str, gpu: str, model: str, size: int, params: int, rows: list[tuple[int, int, float]],
           backends: str = "MTL,BLAS") -> str:
    return "".join(json.dumps({
        "build_commit": "ee3d1b54c", "build_number": 10167, "cpu_info": cpu, "gpu_info": gpu, "backends": backends,
        "model_filename": "/models/m.gguf", "model_type": model, "model_size": size, "model_n_params": params,
        "n_gpu_layers": 99, "n_prompt": p, "n_gen": g, "n_depth": 0, "avg_ts": ts, "stddev_ts": 0.5}) + "\n"
        for p, g, ts in rows)


# The fastest real results of their kind, each beside a row of the same configuration no machine can show.
REAL = [
    # llama.cpp's Apple-silicon table (discussion #4167): M2 Ultra 76-core GPU, LLaMA 7B Q4_0
    ("Apple M2 Ultra", "Apple M2 Ultra", "llama 7B Q4_0", 3_825_065_984, 6_738_415_616, [(512, 0, 1238.48), (0, 128, 94.27)],
     (0, 128, 950.0)),
    # TinyLlama on the M1 Ultra host (the reference's published figures), and its tg far beyond the bandwidth
    ("Accelerate, Apple M1 Ultra", "Apple M1 Ultra", "llama 1B Q4_K - Medium", 667_078_656, 1_100_048_384,
     [(512, 0, 4871.99), (0, 128, 286.71)], (0, 128, 28671.0)),
    # a tiny test model on the CPU: thousands of t/s, in the cache (no bandwidth ceiling), under the absolute caps
    ("Apple M1", "Apple M1", "llama ?B F32", 1_185_376, 292_160, [(512, 0, 250_000.0), (0, 128, 22_000.0)],
     (0, 128, 2e6)),
    # a mixture of experts reads a fraction of its weights a token: gpt-oss 120B on an M3 Ultra beats bandwidth/size
    ("Apple M3 Ultra", "Apple M3 Ultra", "gpt-oss 120B MXFP4 MoE", 63_387_346_464, 116_829_156_672,
     [(512, 0, 1750.0), (0, 128, 80.0)], (0, 128, -80.0)),
    # qwen3moe names its active parameters (30B.A3B)
    ("Apple M2 Max", "Apple M2 Max", "qwen3moe 30B.A3B Q4_K - Medium", 17_281_307_648, 30_532_122_624,
     [(512, 0, 1100.0), (0, 128, 85.0)], (512, 0, 0.0)),
    # a guest on its host's chip: never faster than the host, so the host's ceiling holds
    ("Apple M1 Ultra (Virtual)", "Apple Paravirtual device", "llama 1B Q4_K - Medium", 667_078_656, 1_100_048_384,
     [(512, 0, 4786.70), (0, 128, 206.60)], (512, 0, 487199.0)),
    # another vendor: no Apple bandwidth applies, the absolute caps do
    ("AMD Ryzen 9 7950X 16-Core Processor", "NVIDIA GeForce RTX 4090", "llama 1B Q4_K - Medium", 667_078_656,
     1_100_048_384, [(512, 0, 48_000.0), (0, 128, 600.0)], (0, 128, 5e6)),
]


@pytest.mark.parametrize("cpu,gpu,model,size,params,real,impossible", REAL, ids=[r[2] + " on " + r[1] for r in REAL])
def test_real_results_are_stored_and_only_the_impossible_row_refused(tmp_path, cpu, gpu, model, size, params, real,
                                                                     impossible):
    rows = real * 3 + [impossible] + real * 300  # enough rows for the dense path, the odd one among them
    text = _jsonl(cpu, gpu, model, size, params, rows)
    db = open_db(tmp_path / "r.db")
    result = ingest(db, Input("bench.jsonl", __import__("io").BytesIO(text.encode())))
    assert result.rejected == 1
    stored = sorted(r[0] for r in db.conn.execute("SELECT tok_s FROM throughput"))
    assert stored == sorted(ts for _, _, ts in real * 303)
    # line by line (no dense path) the same rows are refused
    d = Dispatcher()
    for no, line in enumerate(text.splitlines(), 1):
        d.feed(no, line.encode())
    assert d.rejected == 1


def test_timing_lines_refuse_impossible_rates_and_keep_fast_real_ones():
    d = Dispatcher()
    lines = [
        "llama_perf_context_print: prompt eval time =       1.20 ms /   512 tokens (    0.00 ms per token, 426666.67 "
        "tokens per second)",  # a tiny model's prompt on a big GPU: fast, real
        "llama_perf_context_print:        eval time =     127.00 ms /   127 runs   (    1.00 ms per token,  1000.00 "
        "tokens per second)",
        "llama_print_timings:        eval time =    7262.21 ms /    99 runs   (   73.36 ms per token,    -13.77 tokens "
        "per second)",  # negative
        "llama_print_timings:        eval time =    7262.21 ms /    99 runs   (   73.36 ms per token,    nan tokens "
        "per second)",  # NaN for 99 tokens
        "llama_print_timings:        eval time =    7262.21 ms /    99 runs   (   73.36 ms per token,    0.00 tokens "
        "per second)",  # zero for 99 tokens
        "eval rate:            12000000.00 tokens/s",  # a token in 83 ns
        "llama_print_timings:        eval time =       0.00 ms /     0 runs   (    nan ms per token,    nan tokens "
        "per second)",  # nothing measured: not a record at all
        "[ Prompt: 45.3 t/s | Generation: -12.1 t/s ]",  # one of two refused: the prompt rate stands
    ]
    events = [e for no, line in enumerate(lines, 1) for e in d.feed(no, line.encode())]
    rates = [(e.data.get("tok_s"), e.data.get("prompt_tok_s"), e.data.get("eval_tok_s")) for e in events]
    assert rates == [(426666.67, None, None), (1000.0, None, None), (None, 45.3, None)]
    assert d.rejected == 5


@pytest.mark.parametrize("pp,tg", [("487199.0", "28671.0"), ("-4871.99", "-286.71")])
def test_a_stored_impossible_row_of_an_older_capscan_is_no_baseline(tmp_path, monkeypatch, pp, tg):
    """A database an older capscan filled holds the 100x (or negative) host: the guest is still not measured
    against it."""
    import analyzer.parsers.bench as bench
    from analyzer.parsers import plausible

    db = open_db(tmp_path / "old.db")
    (guest,), _ = add(db, FIX / GUEST)
    host = tmp_path / "host.json"
    host.write_text(host_with(pp, tg))
    with monkeypatch.context() as m:  # the parser of before: every speed stored
        m.setattr(plausible, "ceilings", lambda *a: (float("inf"), float("inf")))
        m.setattr(bench, "_plausible", lambda m_, limits: m_)
        (old_host,), rejected = add(db, host)
    assert rejected == 0 and {r[0] for r in db.conn.execute(
        "SELECT tok_s FROM throughput WHERE run_id = ?", (old_host.id,))} == {float(pp), float(tg)}
    diagnose_runs(db, [guest.id])
    assert verdict(db, guest.id) == ("capability-downgrade", False, "low", None)  # its own speed's verdict, no more
    assert load_run(db, guest.id).diagnosis.stored()["baseline"]["why"].startswith("no bare-metal run of llama 1B")
