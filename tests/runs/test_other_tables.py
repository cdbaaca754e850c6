"""Issue 22, "Tables of other tools": compare-llama-bench.py and ramalama bench tables, read by their
header names through the real pipeline (ingest into a temp database, diagnose). Each ``t/s <build>``
column of compare-llama-bench is one build's figure, its own configuration (``build=<name>``), never
averaged with the other builds'. The fixtures are in tests/fixtures/bench/ (see their README)."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.parsers import Dispatcher
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db
from tests.ingest_util import FIXTURES, diagnosed, parse_in_memory


def figures(runs) -> list[tuple[str, float, str | None]]:
    return [(t["test"], t["tok_s"], t["config"]) for r in runs for t in r.throughput]


def of_text(text: str) -> list:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "t.db")
        ids = ingest(db, Input("t.md", io.BytesIO(text.encode()))).run_ids
        runs = list(diagnose_runs(db, ids, refresh_peers=True))
        db.conn.close()
    return runs


M, PR = "build=master", "build=gg/metal-fa-depth"

CASES = {
    "bench/compare-gpu-backends-depth.md": [
        ("pp512", 3861.42, M), ("pp512", 3874.05, PR), ("tg32", 171.06, M), ("tg32", 170.88, PR),
        ("pp512 @ d2048", 2410.77, M), ("pp512 @ d2048", 3012.36, PR), ("tg32 @ d2048", 138.21, M),
        ("tg32 @ d2048", 151.90, PR)],
    "bench/compare-show-model-fa.md": [
        ("pp4096", 3857.10, "fa=0 build=master"), ("pp4096", 3862.51, "fa=0 build=gg/metal-fa-f16"),
        ("tg128", 169.28, "fa=0 build=master"), ("tg128", 169.40, "fa=0 build=gg/metal-fa-f16"),
        ("pp4096", 3901.66, "fa=1 build=master"), ("pp4096", 4108.20, "fa=1 build=gg/metal-fa-f16"),
        ("tg128", 168.93, "fa=1 build=master"), ("tg128", 170.57, "fa=1 build=gg/metal-fa-f16")],
    "bench/compare-three-builds-threads.md": [
        ("pp32", 10.03, "threads=1 build=master"), ("pp32", 11.13, "threads=1 build=sl/blas-backend"),
        ("pp32", 11.52, "threads=1 build=sl/blas-blis"), ("pp32", 15.58, "threads=4 build=master"),
        ("pp32", 20.81, "threads=4 build=sl/blas-backend"), ("pp32", 21.37, "threads=4 build=sl/blas-blis"),
        ("tg128", 9.41, "threads=4 build=master"), ("tg128", 9.38, "threads=4 build=sl/blas-backend"),
        ("tg128", 9.40, "threads=4 build=sl/blas-blis")],
    "bench/compare-2024-metal-column.md": [
        ("pp512", 1238.48, "build=b3091"), ("pp512", 1251.02, "build=b3092"), ("tg128", 94.27, "build=b3091"),
        ("tg128", 94.61, "build=b3092"), ("pp512", 151.30, "build=b3091"), ("pp512", 150.87, "build=b3092"),
        ("tg128", 38.92, "build=b3091"), ("tg128", 39.05, "build=b3092")],
    "bench/ramalama-bench-cuda.md": [("pp512", 5822.13, "threads=16 ngl=99"), ("tg128", 127.45, "threads=16 ngl=99")],
    "bench/ramalama-bench-cpu-two-models.md": [
        ("pp512", 934.08, "threads=8 ngl=99"), ("tg128", 58.46, "threads=8 ngl=99"),
        ("pp512", 301.77, "threads=8 ngl=99"), ("tg128", 27.14, "threads=8 ngl=99")],
}


@pytest.mark.parametrize("rel", sorted(CASES))
def test_each_build_and_configuration_is_its_own_figure(tmp_path, rel):
    runs = diagnosed(tmp_path, rel)
    assert figures(runs) == CASES[rel]
    assert all(t["n"] == 1 for r in runs for t in r.throughput)  # nothing averaged


def test_the_device_columns_give_the_device_and_backend(tmp_path):
    [run] = diagnosed(tmp_path, "bench/compare-gpu-backends-depth.md")
    f = run.facts
    assert (f.device.name, f.gpu_info, f.bench_backends, f.model) == ("Apple M3 Max", "Apple M3 Max", "Metal,BLAS",
                                                                       "llama 1B Q8_0")
    assert run.diagnosis.verdict == "healthy"


def test_a_table_that_hides_the_backend_states_none(tmp_path):
    """llama-bench's own default (no backend column: CPU) is not read into a compare table that hides
    the backend because every row had the same one: the CPU column names the host, not the backend."""
    [run] = diagnosed(tmp_path, "bench/compare-three-builds-threads.md")
    assert (run.facts.cpu_info, run.facts.bench_backends) == ("i9-13900K", None)
    assert run.diagnosis.verdict == "unknown"


def test_old_backend_columns_split_the_runs(tmp_path):
    metal, cpu = diagnosed(tmp_path, "bench/compare-2024-metal-column.md")
    assert (metal.facts.bench_backends, cpu.facts.bench_backends) == ("Metal", "CPU")
    assert cpu.diagnosis.verdict == "no-gpu-offload" and metal.diagnosis.verdict != "no-gpu-offload"


def test_the_model_size_in_gib_is_read_in_bytes(tmp_path):
    [run] = diagnosed(tmp_path, "bench/compare-three-builds-threads.md")
    assert run.facts.model_size_bytes == int(3.56 * 1024 ** 3)


HEADER = "| CPU       | Model         | Test   |   t/s master |   t/s pr |   Speedup |"
SEP = "|:----------|:--------------|:-------|-------------:|---------:|----------:|"


def test_a_speed_no_machine_has_is_refused_and_counted_the_rest_stand():
    d = Dispatcher()
    lines = [HEADER, SEP, "| i9-13900K | llama 7B Q4_0 | tg128  |  99999999.00 |    10.00 |      0.00 |",
             "| i9-13900K | llama 7B Q4_0 | pp512  |        50.00 |    52.00 |      1.04 |"]
    events = [e for i, line in enumerate(lines, 1) for e in d.feed(i, line.encode())]
    assert d.rejected == 1
    rows = [(r["test"], r["tok_s"], r["config"]) for e in events if e.kind == "bench.row_list" for r in e.data["rows"]]
    assert rows == [("pp512", 50.0, "build=master"), ("pp512", 52.0, "build=pr")]


def test_the_table_ends_at_its_last_row_and_the_log_goes_on():
    text = "\n".join([HEADER, SEP, "| i9-13900K | llama 7B Q4_0 | pp512  |        50.00 |    52.00 |      1.04 |", "",
                      "| model | size | params | backend | threads | test | t/s |",
                      "| --- | ---: | ---: | --- | ---: | ---: | ---: |",
                      "| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CPU | 8 | tg128 | 9.12 ± 0.02 |"]) + "\n"
    got = figures(of_text(text))
    assert got == [("pp512", 50.0, "build=master"), ("pp512", 52.0, "build=pr"), ("tg128", 9.12, "threads=8")]


@pytest.mark.parametrize("header", [
    "| CPU       | Model         | Speed  |   t/s master |   t/s pr |   Speedup |",  # no Test column
    "| CPU       | Model         | Test   |   t/s my pr  |   t/s pr |   Speedup |",  # a build name that is no token
    "| CPU       | Model         | Test   |   t/s        |   tok/s  |   Speedup |",  # no build named
])
def test_a_header_without_its_names_opens_no_table(header):
    row = "| i9-13900K | llama 7B Q4_0 | pp512  |        50.00 |    52.00 |      1.04 |"
    assert figures(of_text(f"{header}\n{SEP}\n{row}\n")) == []


def test_a_hand_joined_table_with_two_t_s_columns_is_refused():
    """Two columns named t/s (field log 061): which is before and which after is only their position."""
    text = (FIXTURES.parent / "fixtures/field/061-llama-bench-compare-old-metal-apple7-pr-2023.log").read_text()
    assert figures(of_text(text)) == []


def test_a_shown_property_that_is_no_config_field_still_tells_figures_apart():
    """compare-llama-bench shows a property only where its values differ (or -s asks): mmap on and off
    are two figures of each build, as llama-bench's own mmap column names them."""
    text = "\n".join([
        "| Model         | Use mmap | Test   |   t/s master |   t/s pr |   Speedup |",
        "|:--------------|:---------|:-------|-------------:|---------:|----------:|",
        "| llama 7B Q4_0 | No       | pp512  |        50.00 |    52.00 |      1.04 |",
        "| llama 7B Q4_0 | Yes      | pp512  |        49.00 |    53.00 |      1.08 |"]) + "\n"
    assert figures(of_text(text)) == [("pp512", 50.0, "mmap=0 build=master"), ("pp512", 52.0, "mmap=0 build=pr"),
                                      ("pp512", 49.0, "mmap=1 build=master"), ("pp512", 53.0, "mmap=1 build=pr")]


@pytest.mark.parametrize("rel", ["bench/compare-three-builds-threads.md", "bench/ramalama-bench-cuda.md"])
def test_the_rows_do_not_depend_on_chunking_or_line_ends(rel):
    """The collector's table survives any read size (a chunk may end mid-row) and CRLF line ends."""
    data = (FIXTURES / rel).read_bytes()

    def speeds(body: bytes, chunk: int = 1 << 16) -> list[tuple[str, float]]:
        return [(t.test, t.tok_s) for _facts, tps in parse_in_memory(body, chunk) for t in tps]

    want = [(t, v) for t, v, _config in CASES[rel]]
    assert speeds(data) == want
    assert all(speeds(data, chunk) == want for chunk in (1, 7, 64))
    assert speeds(data.replace(b"\n", b"\r\n")) == want


@pytest.mark.parametrize("name,speeds,backend", [
    ("field/219-llama-bench-m2-air-metal-table-no-edge-pipes-2024.log",
     {"pp128": 144.47, "pp256": 142.95, "pp512": 141.36, "tg128": 20.06, "tg256": 20.26, "tg512": 13.96}, "metal"),
    ("shapes/md-no-edge-pipes-cpu-2024.md", {"pp512": 38.71, "tg128": 9.88}, "cpu"),
])
def test_a_llama_bench_table_copied_without_its_edge_pipes_is_read(tmp_path, name, speeds, backend):
    """Copied from a rendered GitHub page, a table loses its edge pipes: the same rows, the same figures."""
    from tests.ingest_util import diagnosed

    [run] = diagnosed(tmp_path, name)
    assert {t["test"]: t["tok_s"] for t in run.throughput} == speeds
    assert (run.facts.backend or "").lower() == backend
