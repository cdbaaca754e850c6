"""Issue 38: llama-bench -o csv -v prints its stderr (model load, llama_perf lines) between the CSV rows; every
row that fits the open header is a row of that table, read through the real pipeline (ingest into a temporary
SQLite file, diagnose). The real log is tests/fixtures/field/333-llama-bench-cpu-csv-ngl-0-99-verbose-2026.log."""

from __future__ import annotations

import io
from pathlib import Path

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "field"


def figures(tmp_path: Path, data: bytes) -> set[tuple[str, float, str | None]]:
    db = open_db(tmp_path / "t.db")
    try:
        ids = ingest(db, Input("t.log", io.BytesIO(data))).run_ids
        runs = list(diagnose_runs(db, ids, refresh_peers=True))
    finally:
        db.conn.close()
    return {(t["test"], t["tok_s"], t["config"]) for r in runs for t in r.throughput}


def test_real_verbose_csv_every_row(tmp_path):
    got = figures(tmp_path, (FIELD / "333-llama-bench-cpu-csv-ngl-0-99-verbose-2026.log").read_bytes())
    rows = {(t, v, dict(p.split("=") for p in (c or "").split())["ngl"]) for t, v, c in got}
    assert rows == {("pp64", 82384.506809, "0"), ("tg16", 153.27978, "0"), ("pp64", 101274.235819, "99"),
                    ("tg16", 41.912569, "99")}, sorted(got)


HEADER = ("build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,n_gpu_layers,n_prompt,n_gen,"
          "n_depth,avg_ns,stddev_ns,avg_ts,stddev_ts\n")


def _csv_row(ngl: int, n_prompt: int, n_gen: int, ts: str) -> str:
    return (f'"0c1e570","1","Intel(R) Xeon(R) Processor","","CPU","m.gguf","llama ?B Q4_0","{ngl}","{n_prompt}",'
            f'"{n_gen}","0","797455","181310","{ts}","18.5"\n')


def test_csv_rows_between_verbose_stderr_lines(tmp_path):
    """llama-bench -o csv -v: the stderr of the same process falls between the CSV rows; each row that
    fits the open header is a row of that table, and the stderr lines are still read."""
    text = (HEADER + _csv_row(0, 64, 0, "82384.506809")
            + "llama_perf_context_print:        load time =     488.01 ms\n"
            + "set_n_threads: n_threads = 2, n_threads_batch = 2\n"
            + "load_tensors: layer   0 assigned to device CPU, is_swa = 0\n"
            + _csv_row(0, 0, 16, "153.279780")
            + "set_n_threads: n_threads = 2, n_threads_batch = 2\n"
            + '"0c1e570","1","cut off\n'
            + _csv_row(99, 64, 0, "101274.235819"))
    got = figures(tmp_path, text.encode())
    tests = {(t, v) for t, v, _ in got}
    assert {("pp64", 82384.506809), ("tg16", 153.27978), ("pp64", 101274.235819)} <= tests, sorted(got)


def test_csv_table_ends_after_its_budget(tmp_path):
    """A line that looks like a row, far after the table (past the budget of interleaved lines), is not
    read as one of its rows."""
    filler = "set_n_threads: n_threads = 2, n_threads_batch = 2\n" * 6000
    text = HEADER + _csv_row(0, 64, 0, "82384.506809") + filler + _csv_row(0, 0, 16, "153.279780")
    got = figures(tmp_path, text.encode())
    assert {(t, v) for t, v, _ in got} == {("pp64", 82384.506809)}, sorted(got)
