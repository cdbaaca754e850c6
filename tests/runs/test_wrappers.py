"""Issue 38, printed figures of new shapes: wrapper programs' results (normiebench and mlx_lm benchmark
JSON, obench's eval-rate table and its average), llama-simple's `main: decoded ... speed:` after the
generated text on the same line, koboldcpp's Total rate, and llama-bench CSV rows between -v stderr
lines. Each figure is found as printed (its own test or configuration, never a mean), through the real
pipeline (ingest into a temporary SQLite file, diagnose)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def read(tmp_path: Path, data: bytes) -> list:
    db = open_db(tmp_path / "t.db")
    try:
        ids = ingest(db, Input("t.log", io.BytesIO(data))).run_ids
        return list(diagnose_runs(db, ids, refresh_peers=True))
    finally:
        db.conn.close()


def figures(runs) -> set[tuple[str, float, str | None]]:
    return {(t["test"], t["tok_s"], t["config"]) for r in runs for t in r.throughput}


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


CASES = {
    # real logs (sources in their sidecars)
    "field/066-normiebench-m1-max-json-result-2026.log": {("pp512", 499.58, None), ("tg128", 46.2, None)},
    "field/223-normiebench-arc-a770-vulkan-result-json-2026.log": {("pp512", 556.61, None), ("tg128", 6.1, None)},
    "field/283-obench-ollama-m1-max-fastfetch-header-eval-rates-2025.log": {
        ("generation", 80.32, "run=1"), ("generation", 80.11, "run=2"), ("generation", 80.17, "run=3"),
        ("generation", 80.2, "aggregate=average")},
    "field/108-cua-mlx-lm-safe-shim-guest-json-2026.log": {
        ("prompt", 1665.4670574156448, "aggregate=median"), ("generation", 170.86047723778182, "aggregate=median")},
    "field/202-koboldcpp-ctxlimit-process-generate-ts-line-2024.log": {
        ("prompt", 2.26, None), ("generation", 333.33, None), ("total", 2.25, None)},
    "field/347-llama-simple-cpu-layers-decoded-speed-2026.log": {("decoded", 512.33, None)},
    "field/348-llama-simple-ngl0-cpu-layers-2026.log": {("decoded", 932.13, None)},
    # written from a description (tests/fixtures/wrappers/README.md)
    "wrappers/normiebench-two-models-written.json": {("pp512", 212.4, None), ("tg128", 18.05, None),
                                                     ("pp512", 1489.07, None)},
    "wrappers/mlx-benchmark-samples-no-median-written.json": {
        ("prompt", 2101.875, "sample=1"), ("prompt", 2098.125, "sample=2"), ("generation", 310.5, "sample=1"),
        ("generation", 309.75, "sample=2")},
    "wrappers/obench-plain-five-runs-written.log": {("generation", 41.02, "aggregate=average")},
    "wrappers/obench-markdown-two-runs-written.log": {
        ("generation", 52.4, "run=1"), ("generation", 52.1, "run=2"), ("generation", 52.25, "aggregate=average")},
    "wrappers/llama-batched-readme-decoded.log": {("decoded", 30.26, None), ("prompt", 28.86, None)},
    "wrappers/obench-markdown-three-models-sbc-review.md": {
        ("generation", 17.17, "run=1"), ("generation", 16.23, "run=2"), ("generation", 16.66, "run=3"),
        ("generation", 16.68, "aggregate=average"), ("generation", 11.44, "run=1"), ("generation", 11.27, "run=2"),
        ("generation", 11.47, "run=3"), ("generation", 11.39, "aggregate=average"), ("generation", 3.79, "run=1"),
        ("generation", 4.67, "run=2"), ("generation", 5.0, "run=3"), ("generation", 4.48, "aggregate=average")},
    "wrappers/llama-batched-decoded-written.log": {("decoded", 26.67, None), ("prompt", 75.0, None),
                                                   ("generation", 29.09, None)},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_printed_figures_found(tmp_path, name):
    got = figures(read(tmp_path, fixture(name)))
    assert CASES[name] <= got, sorted(got)


def test_wrapper_figures_are_only_what_was_printed(tmp_path):
    """The warmup of the mlx_lm JSON and normiebench's string 'fast' are no figure; a median supersedes
    its samples (as mlx_lm's Averages line its trials)."""
    got = figures(read(tmp_path, fixture("field/108-cua-mlx-lm-safe-shim-guest-json-2026.log")))
    assert {t for t, _, _ in got} == {"prompt", "generation"} and len(got) == 2, got
    (tmp_path / "n").mkdir()
    got = figures(read(tmp_path / "n", fixture("wrappers/normiebench-two-models-written.json")))
    assert not any(v in (61.3, 99.5) for _, v, _ in got), got


def test_decoded_and_total_never_stand_for_generation(tmp_path):
    """llama-simple's decoded speed counts the prompt's batch, koboldcpp's Total both phases: tests of
    their own, so a generation figure is only what was printed as one."""
    got = figures(read(tmp_path, fixture("field/347-llama-simple-cpu-layers-decoded-speed-2026.log")))
    assert ("generation", 622.07, None) in got and not any(t == "generation" and v == 512.33 for t, v, _ in got)
    (tmp_path / "k").mkdir()
    got = figures(read(tmp_path / "k", fixture("field/202-koboldcpp-ctxlimit-process-generate-ts-line-2024.log")))
    assert [v for t, v, _ in got if t == "generation"] == [333.33]


def test_wrapper_program_named(tmp_path):
    runs = read(tmp_path, fixture("field/283-obench-ollama-m1-max-fastfetch-header-eval-rates-2025.log"))
    assert [r.facts.program for r in runs] == ["obench (ollama)"]


def test_unclosed_wrapper_json_is_bounded(tmp_path):
    """A wrapper JSON that never closes is given up after its budget: the lines after it are read."""
    text = ('{\n  "id": "nb-1",\n  "runs": {\n' + '    "x": 1,\n' * 5000
            + "llama_perf_context_print:        eval time =    1100.00 ms /    32 runs   (   34.38 ms per token,    "
              "29.09 tokens per second)\n")
    got = figures(read(tmp_path, text.encode()))
    assert ("generation", 29.09, None) in got, sorted(got)


def test_impossible_wrapper_figures_are_refused_and_counted(tmp_path):
    """A speed no machine can have is skipped and counted; the document's other figures stand."""
    from analyzer.parsers import Dispatcher
    from analyzer.parsers.scanner import Scanner

    text = ('{\n  "id": "nb-2",\n  "runs": {\n    "m": {\n      "modelLabel": "m",\n      "pp512": 1e300,\n'
            '      "tg128": 12.5\n    }\n  }\n}\n'
            '| 1 | inf tokens/s |\nmain: decoded 16 tokens in 0.00 s, speed: inf t/s\n')
    dispatcher = Dispatcher()
    events = []
    scanner = Scanner(dispatcher, events.extend)
    scanner.feed(text.encode())
    scanner.close()
    figures_events = [e for e in events if e.kind == "wrapper.figures"]
    assert [f[:2] for e in figures_events for f in e.data["figures"]] == [("tg128", 12.5)]
    assert dispatcher.rejected == 3, dispatcher.rejected
