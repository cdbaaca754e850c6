"""Issue 38, item 1: figures as printed. Every speed capscan shows is one a log printed, per row, with its
``±`` and its configuration; where one figure stands for several it says so (``reduced``), and it is a
printed value (the best, or a median that is one of the rows), never the mean of two.

Through the real pipeline: each log ingested in-process into a temporary database, read back as
``capscan show --json`` and the report print it. The last test is the invariant over every fixture log:
each speed shown as printed occurs in the log's own text, to its printed precision."""

from __future__ import annotations

import gzip
import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from analyzer.ingest import ingest
from analyzer.output.run_report import run_lines
from analyzer.output.runjson import run_to_json
from analyzer.output.styled import plain_text
from analyzer.read.reader import Input, InputError
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db
from analyzer.store.queries import _throughput, load_run

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def ingested(data: bytes, name: str = "log.txt", *, diagnose: bool = True) -> list:
    """Every run of one input, as stored (diagnosed, as `capscan` after an ingest shows them)."""
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "f.db")
        try:
            ids = ingest(db, Input(name, io.BytesIO(data))).run_ids
            if diagnose:
                return list(diagnose_runs(db, ids, refresh_peers=True))
            return [load_run(db, i) for i in ids]
        finally:
            db.conn.close()


def shown(data: bytes, name: str = "log.txt") -> list[dict[str, Any]]:
    """The ``throughput`` entries of every run's ``--json``."""
    return [t for run in ingested(data, name) for t in run_to_json(run)["throughput"]]


def speeds(entries: list[dict[str, Any]], test: str) -> list[float]:
    return [t["tok_s"] for t in entries if t["test"] == test]


def fixture(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


# -- rows that look alike: a CPU build's -ngl 0,99 ------------------------------------------------------------

@pytest.mark.parametrize("path", ["bench/cpu-ngl-0-99-2026.md", "bench/cpu-ngl-0-99-2026.csv",
                                  "bench/cpu-ngl-0-99-2026.json", "bench/cpu-ngl-0-99-2026.jsonl"])
def test_a_cpu_builds_ngl_sweep_is_four_printed_figures(path):
    """A CPU build's table has no ngl column: -ngl 0,99 prints two pp64/tg16 pairs that look alike. Each
    row is its own printed figure with its stddev, never their mean (1393.92, printed nowhere)."""
    entries = shown(fixture(path), Path(path).name)
    assert sorted(round(v, 2) for v in speeds(entries, "pp64")) == [1386.12, 1401.73]
    assert sorted(round(v, 2) for v in speeds(entries, "tg16")) == [305.02, 312.44]
    assert all(t["stddev"] is not None and t["reduced"] is None for t in entries), entries
    if not path.endswith(".md"):  # CSV and JSON state n_gpu_layers: the configuration tells the rows apart
        assert sorted(re.search(r"\bngl=\d+", t["config"]).group() for t in entries if t["test"] == "pp64") == \
            ["ngl=0", "ngl=99"]


def test_csv_rows_between_verbose_lines_are_each_read():
    """llama-bench -o csv -v 2>&1 (a real 2026 CPU build, -ngl 0,99): the verbose output of each test comes
    between the table's rows; every row is a printed figure, not only the one after the header."""
    entries = shown(fixture("bench/csv-verbose-interleaved-2026.log"), "csv-v.log")
    assert [(t["test"], t["tok_s"], t["stddev"]) for t in entries] == [
        ("pp64", 94327.172832, 15328.099273), ("tg16", 1108.994029, 1131.892353),
        ("pp64", 90596.980588, 15972.203378), ("tg16", 1373.232229, 179.882976)]
    assert [re.search(r"\bngl=\d+", t["config"]).group() for t in entries] == ["ngl=0"] * 2 + ["ngl=99"] * 2


def test_the_report_shows_both_rows_of_one_visible_configuration():
    run, = ingested(fixture("bench/cpu-ngl-0-99-2026.md"))
    text = plain_text(run_lines(run))
    for printed in ("1386.12 ± 41.07", "1401.73 ± 18.30", "312.44 ± 9.86", "305.02 ± 12.51"):
        assert printed in text, text
    assert "1393.92" not in text  # the mean of the two pp64 rows


# -- one measurement printed twice at different precision ----------------------------------------------------

@pytest.mark.parametrize(("path", "prompt", "generation"), [
    ("timings/llama-cli-2026-lv4-print-timing.log", [20.01], [9.81]),
    ("timings/llama-cli-2026-two-turns-perf-then-summary.log", [407.04, 367.36], [55.03, 51.68]),
    ("timings/llama-cli-2026-summary-then-common-perf.log", [38.54], [14.30]),
])
def test_a_measurement_printed_twice_is_one_figure_the_more_precise(path, prompt, generation):
    """The 2026 llama-cli at -lv 4 prints the perf lines (20.01) and its own summary ([ Prompt: 20.0 t/s ]) of
    the same request: one figure, 20.01 (not 20.005000000000003), whichever comes first."""
    entries = shown(fixture(path))
    assert speeds(entries, "prompt") == prompt
    assert speeds(entries, "generation") == generation


def test_two_figures_that_differ_are_kept_even_from_two_sources():
    """A summary line that is not the rounding of the perf line before it is another measurement."""
    text = fixture("timings/llama-cli-2026-lv4-print-timing.log").replace(b"[ Prompt: 20.0 t/s",
                                                                           b"[ Prompt: 24.3 t/s")
    assert sorted(speeds(shown(text), "prompt")) == [20.01, 24.3]


# -- streamed running totals ------------------------------------------------------------------------------------

def test_a_streamed_requests_running_timings_count_once():
    """llama-server -v logs each streamed chunk with its running timings (604.59 ... 940.50): the request's
    figure is the last (940.5, also printed by its print_timing block), not a median of the chunks."""
    entries = shown(fixture("timings/server-stream-verbose-2026.log"))
    assert speeds(entries, "generation") == [940.5]
    assert speeds(entries, "prompt") == [604.59]


def test_two_streamed_requests_are_two_figures():
    entries = shown(fixture("timings/server-stream-sse-two-requests-2026.log"))
    assert speeds(entries, "generation") == [254.434429, 249.293668]
    assert speeds(entries, "prompt") == [506.189315, 510.486238]


def test_a_streaming_slots_running_rate_counts_once_per_task():
    """LM Studio's llama.cpp engine at debug level logs a running 'n_decoded = N, tg = 3.65 t/s' while it
    streams: one measurement per task, its last value (3.63, then 4.17 for the next task)."""
    entries = shown(fixture("timings/server-running-tg-two-tasks-2026.log"))
    assert speeds(entries, "generation") == [3.63, 4.17]


@pytest.mark.parametrize(("path", "decoded", "generation"), [
    ("timings/llama-simple-decoded-speed-2026.log", [512.33], [622.07]),
    ("timings/llama-simple-decoded-speed-2024.log", [41.45], [42.80]),
])
def test_llama_simples_decoded_speed_is_a_printed_figure(path, decoded, generation):
    """llama-simple prints its own 'main: decoded 16 tokens in 0.03 s, speed: 512.33 t/s' (glued to the
    generated text when it ends without a newline) beside the perf lines: another measurement (its
    clock includes the prompt's batch and sampling), a figure of its own test, never generation."""
    entries = shown(fixture(path))
    assert speeds(entries, "decoded") == decoded
    assert speeds(entries, "generation") == generation  # the perf line's, apart


# -- separate prompts and separate runs ----------------------------------------------------------------------

def test_each_ollama_prompts_eval_rate_is_its_own_figure():
    entries = shown(fixture("timings/ollama-verbose-four-prompts.log"))
    assert speeds(entries, "generation") == [19.62, 19.31, 18.94, 19.12]
    assert speeds(entries, "prompt") == [97.91, 156.40, 183.77, 201.08]


def test_eval_rates_pasted_in_markdown_bold_are_read_as_printed():
    entries = shown(fixture("timings/ollama-verbose-markdown-bold.log"))
    assert speeds(entries, "generation") == [31.05, 33.78]
    assert speeds(entries, "prompt") == [123.30, 131.24]


def test_two_mlx_lm_runs_are_two_figures():
    entries = shown(fixture("timings/mlx-lm-generate-before-after.log"))
    assert speeds(entries, "generation") == [88.214, 104.517]
    assert speeds(entries, "prompt") == [412.377, 498.902]


# -- one figure standing for several: labelled, and a printed value ---------------------------------------------

def _repeats(n: int) -> bytes:
    """llama-bench -o jsonl rows of one configuration, repeated n times (a loop appending to one file)."""
    rows = fixture("bench/cpu-ngl-0-99-2026.jsonl").decode().splitlines()
    row = json.loads(rows[3])  # tg16 at ngl 99
    out = []
    for i in range(n):
        row["avg_ts"] = 300 + i * 0.25 + (0.125 if i % 2 else 0)
        out.append(json.dumps(row))
    return ("\n".join(out) + "\n").encode()


def test_many_rows_of_one_configuration_are_one_labelled_median_that_was_printed():
    """Past the per-figure budget, the rows of one configuration are shown as their median, labelled, and
    the median is one of the rows (median_low), never the mean of the middle two."""
    n = 200
    entries = shown(_repeats(n), "loop.jsonl")
    entry, = entries
    assert entry["reduced"] == {"by": "median", "of": n}
    printed = {300 + i * 0.25 + (0.125 if i % 2 else 0) for i in range(n)}
    assert entry["tok_s"] in printed
    assert entry["stddev"] is None


def test_a_few_rows_of_one_configuration_are_each_shown():
    entries = shown(_repeats(3), "loop.jsonl")
    assert [t["tok_s"] for t in entries] == [300.0, 300.375, 300.5]
    assert all(t["reduced"] is None and t["stddev"] is not None for t in entries)


def test_the_stored_reader_gives_the_same_printed_rows():
    """``capscan show`` of a run stored without its summary reads the throughput table in SQL: the same
    printed rows, and a labelled median_low past the budget."""
    for n in (2, 3, 200):
        with tempfile.TemporaryDirectory() as d:
            db = open_db(Path(d) / "f.db")
            try:
                rid, = ingest(db, Input("loop.jsonl", io.BytesIO(_repeats(n)))).run_ids
                from_sql = _throughput(db, rid)
                summary = load_run(db, rid).throughput
            finally:
                db.conn.close()
        keys = ("test", "tok_s", "stddev", "line", "n", "reduced")
        assert [{k: t.get(k) for k in keys} for t in from_sql] == [{k: t.get(k) for k in keys} for t in summary]


def test_the_pairing_with_a_baseline_is_the_best_row_and_says_of_how_many():
    """A guest whose llama-bench was run three times into one file, against its host's run: each tg128 is
    paired through the best row of its configuration, a printed figure, and the pairing says of how many."""
    guest = json.loads(fixture("bench/guest-stock.json"))
    rows = []
    for scale in (1.0, 0.96, 0.98):
        for row in guest:
            r = dict(row)
            r["avg_ts"] = round(r["avg_ts"] * scale, 6)
            rows.append(r)
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "p.db")
        try:
            ids = ingest(db, Input("host.json", io.BytesIO(fixture("bench/host-m1-ultra.json")))).run_ids
            ids += ingest(db, Input("guest.json", io.BytesIO(json.dumps(rows).encode()))).run_ids
            runs = list(diagnose_runs(db, ids, refresh_peers=True))
        finally:
            db.conn.close()
    paired = run_to_json(runs[-1])["pairing"]
    tg = next(t for t in paired["tests"] if t["test"] == "tg128")
    assert tg["tok_s"] == max(r["avg_ts"] for r in rows if r["n_gen"]) and tg["rows"] == 3
    assert "tg128 " in plain_text(run_lines(runs[-1])) and "best of 3 rows)" in plain_text(run_lines(runs[-1]))


def test_the_compare_is_the_best_row_and_says_of_how_many():
    from analyzer.rules.compare import compare_runs

    a, = ingested(_repeats(3), "a.jsonl")
    b, = ingested(_repeats(1), "b.jsonl")
    tg, = compare_runs(a, b)["tests"]
    assert (tg["a_tok_s"], tg["a_rows"], tg["b_tok_s"], tg["b_rows"]) == (300.5, 3, 300.0, 1)


def test_the_report_labels_a_reduced_figure():
    run, = ingested(_repeats(200), "loop.jsonl")
    text = plain_text(run_lines(run))
    assert "median of 200 rows" in text, text


# -- the invariant: each speed shown as printed occurs in the log's own text ----------------------------------

# fixtures whose shown figures are not yet all printed as such, with the reason (strict xfail)
NOT_YET: dict[str, str] = {}


def _logs() -> list[str]:
    out = []
    for p in sorted(FIXTURES.rglob("*")):
        rel = p.relative_to(FIXTURES).as_posix()
        if not p.is_file() or p.name in ("README.md", "expected.json") or p.suffix == ".py":
            continue
        if rel.startswith("field/first-sight/"):
            continue
        if p.suffix == ".json" and rel.startswith("field/") and p.with_suffix(".log").exists():
            continue  # a field log's sidecar of labels, written from the thread
        out.append(rel)
    return out


def _text(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            pass
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    head = data[:400]
    if head[1::2].count(0) > len(head) // 4:  # UTF-16 without its BOM, as the reader sniffs it
        return data.decode("utf-16-le", errors="replace")
    if head[0::2].count(0) > len(head) // 4:
        return data.decode("utf-16-be", errors="replace")
    return data.decode("utf-8", errors="replace")


def printed_in(value: float, text: str) -> bool:
    """Does the text print this value, to its precision (20.01 as ``20.01``, ``20,01`` or ``20.010000``)?"""
    s = repr(float(value))
    if "e" in s or "inf" in s or "nan" in s:
        s = f"{value:.10f}".rstrip("0")
    whole, _, frac = s.partition(".")
    frac = frac.rstrip("0")
    number = re.escape(whole) + (rf"[.,]{frac}0*" if frac else r"(?:[.,]0*)?")
    return re.search(rf"(?<![\d]){number}(?![\d])", text) is not None


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[p]))
                                  if p in NOT_YET else p for p in _logs()])
def test_every_speed_shown_as_printed_occurs_in_the_log(path):
    data = (FIXTURES / path).read_bytes()
    try:
        runs = ingested(data, Path(path).name, diagnose=False)
    except InputError:
        return  # an input refused with its one-line error shows no figure
    text = _text(data)
    unprinted = [(t["test"], t["tok_s"], t["line"]) for run in runs for t in run_to_json(run)["throughput"]
                 if not t.get("reduced") and t["tok_s"] is not None and not printed_in(t["tok_s"], text)]
    assert not unprinted, unprinted
