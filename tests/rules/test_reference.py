"""A guest without a stored host run is placed against the bandwidth ceiling of its host chip (issue 22
item 4): token generation reads every weight once per token, so bandwidth / model size bounds it. An
estimate: never a stored baseline and never a reason for "fixable"."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db
from tests.conftest import run_capscan

ROOT = Path(__file__).resolve().parents[2]
GUEST_JSON = ROOT / "examples" / "m1-ultra-guest-stock-json.log"  # llama-bench -o json 2>&1, model_size 667 MB
HOST = ROOT / "examples" / "m1-ultra-host.log"


def diagnose(*texts: bytes) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "r.db")
        ids: list[int] = []
        for i, text in enumerate(texts):
            ids += ingest(db, Input(f"{i}.log", io.BytesIO(text))).run_ids
        out = [r.diagnosis.stored() for r in diagnose_runs(db, ids, refresh_peers=True)]
        db.conn.close()
    return out


def test_a_guest_naming_its_chip_and_model_size_gets_the_bandwidth_ceiling():
    [d] = diagnose(GUEST_JSON.read_bytes())
    [ref] = d["reference"]
    assert ref["test"] == "tg128" and ref["basis"] == "Apple M1 Ultra 819.2 GB/s / model 0.67 GB"
    assert abs(ref["ceiling_tok_s"] - 819.2e9 / 667078656) < 0.1
    json.dumps(d)


def test_the_loaders_model_size_line_counts_too():
    log = ("llm_load_print_meta: model size       = 3.56 GiB (4.54 BPW) \n"
           "machdep.cpu.brand_string: Apple M2 Max (Virtual)\n").encode() + (
        ROOT / "tests/rules/fixable/guest-m4-stock.log").read_bytes() + (
        b"llama_perf_context_print:        eval time =    5000.00 ms /    50 runs   (  100.00 ms per token,    "
        b"10.00 tokens per second)\n")
    [d] = diagnose(log)
    assert [r["test"] for r in d["reference"]] == ["generation"] or [r["test"] for r in d["reference"]] == ["tg"]
    assert "Apple M2 Max 409.6 GB/s / model 3.82 GB" == d["reference"][0]["basis"]


def test_a_stored_host_run_replaces_the_estimate():
    host, guest = diagnose(HOST.read_bytes(), GUEST_JSON.read_bytes())
    assert guest["baseline"]["run"] is not None and guest["reference"] == []


def test_no_reference_without_the_chip_or_on_bare_metal():
    stock = (ROOT / "examples" / "m1-ultra-guest-stock.log").read_bytes()  # no chip named
    assert diagnose(stock)[0]["reference"] == []
    assert diagnose(HOST.read_bytes())[0]["reference"] == []


def llama2_7b_q4_0(text: bytes, size: int = 3825065984) -> bytes:
    """The guest's llama-bench JSON as if it had run llama.cpp's own benchmark model (Llama 2 7B Q4_0)."""
    return (text.replace(b'"llama 1B Q4_K - Medium"', b'"llama 7B Q4_0"')
            .replace(b'"model_size": 667078656', f'"model_size": {size}'.encode()))


def test_llama_cpps_own_benchmark_gets_the_published_bare_metal_result_of_the_chip():
    """#4167's M1 Ultra row for Llama 2 7B Q4_0 beside the guest's pp512 and tg128, then the ceiling."""
    [d] = diagnose(llama2_7b_q4_0(GUEST_JSON.read_bytes()))
    published = [r for r in d["reference"] if r["basis"].startswith("published: ")]
    assert {r["test"]: r["ceiling_tok_s"] for r in published} == {"pp512": 1030.0, "tg128": 83.7}
    assert "Apple M1 Ultra (64-core GPU)" in published[0]["basis"] and "#4167" in published[0]["basis"]
    assert [r["test"] for r in d["reference"] if r not in published] == ["tg128"]  # the ceiling stays
    assert d["fixable"] is False or d["proof"]  # an estimate never makes a run fixable by itself


def test_another_model_or_size_gets_no_published_row():
    for text in (llama2_7b_q4_0(GUEST_JSON.read_bytes(), size=4_080_218_112),  # Mistral 7B Q4_0
                 GUEST_JSON.read_bytes().replace(b'"model_size": 667078656', b'"model_size": 3825065984')):
        [d] = diagnose(text)
        assert not [r for r in d["reference"] if r["basis"].startswith("published: ")]


def test_the_report_prints_the_published_row(tmp_path):
    proc = run_capscan(input=llama2_7b_q4_0(GUEST_JSON.read_bytes()), db=tmp_path / "c.db")
    assert ("tg128 12.63 t/s: 15% of the 83.7 t/s published for Apple M1 Ultra (64-core GPU) on bare metal, Llama 2 7B Q4_0 tg128 "
            "(llama.cpp discussion #4167)") in proc.stdout.decode()
