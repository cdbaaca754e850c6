"""A run that crashed says so (issue 25 item 4): its headline says it crashed instead of "slow fallback
paths", and the crash line is evidence. Real logs (a GitHub runner guest, a pasted server session) and
variants of the crash lines llama.cpp and the shells print, through the real pipeline."""

from __future__ import annotations

import pytest

from analyzer.output.headline import headline
from tests.ingest_util import diagnosed, ingest_bytes, stored_runs

BLOCK = ("ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n"
         "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)\n"
         "ggml_metal_device_init: simdgroup reduction   = false\n"
         "ggml_metal_device_init: simdgroup matrix mul. = false\n"
         "ggml_metal_op_encode_impl: error: unsupported op 'MUL_MAT'\n")


def _crash(run):
    return next((f for f in run.diagnosis.stored()["findings"] if f["rule"] == "crashed"), None)


def test_a_guest_that_crashed_on_an_unsupported_op_says_it_crashed(tmp_path):
    [run] = diagnosed(tmp_path, "field/197-crispasr-gh-runner-paravirtual-apple5-mul-mat-abort-2026.log")
    d = run.diagnosis.stored()
    assert d["verdict"] == "capability-downgrade"
    text = headline(run.facts.program, run.diagnosis, run.throughput)
    assert "crashed" in text and "slow fallback paths" not in text
    crash = _crash(run)
    assert crash and "ggml-metal-ops.cpp:204: unsupported op" in crash["message"]
    assert any("ggml-metal-ops.cpp:204" in e["text"] for e in crash["evidence"])
    assert any(e.line == 6 and e.kind == "run.crash" for e in run.evidence)


def test_a_crash_without_the_block_says_it_first(tmp_path):
    [run] = diagnosed(tmp_path, "shapes/crash-mul-mat-no-block.log")
    text = headline(run.facts.program, run.diagnosis, run.throughput)
    assert text.startswith("The program crashed before it finished")
    lines = [e["text"] for e in _crash(run)["evidence"]]
    assert any("GGML_ASSERT(ok) failed" in t for t in lines) and any("zsh: abort" in t for t in lines)


@pytest.mark.parametrize("tail, what", [
    ("/Users/ci/llama.cpp/ggml/src/ggml-metal/ggml-metal-ops.cpp:204: GGML_ASSERT(ok) failed\nAbort trap: 6\n",
     "GGML_ASSERT(ok) failed"),
    ("ggml/src/ggml-metal/ggml-metal-ops.cpp:204: unsupported op\nbash: line 1: 4242 Abort trap: 6  ./llama-cli\n",
     "unsupported op"),
    ("Segmentation fault (core dumped)\n", "Segmentation fault"),
    ("libc++abi: terminating due to uncaught exception of type std::runtime_error: Metal\nzsh: abort  ./llama-cli\n",
     "libc++abi: terminating"),
])
def test_crash_line_variants(tmp_path, tail, what):
    result = ingest_bytes(tmp_path / "c.db", (BLOCK + tail).encode())
    [stored] = stored_runs(tmp_path / "c.db", result.run_ids)
    assert what in (stored["facts"].crash or "")
    assert any(e.kind == "run.crash" for e in stored["evidence"])


def test_words_that_are_no_crash(tmp_path):
    text = BLOCK + "main: abort after 3 retries is disabled\nsrv  log: request aborted by client\n"
    result = ingest_bytes(tmp_path / "c.db", text.encode())
    [stored] = stored_runs(tmp_path / "c.db", result.run_ids)
    assert stored["facts"].crash is None
