"""`--list-devices` output (`Available devices:`, then one `  %s: %s (%zu MiB, %zu MiB free)` line per
device, or `  (none)`, or nothing): only device lines are listed devices. The first line that is not
one ends the list and is parsed as usual, so a timing line or the Metal block that follows an empty
list keeps its meaning. Each shape is written in the ways people paste it (plain, CRLF, GitHub
Actions timestamps, the common logger's prefix, markdown quoting, collapsed spaces) and goes through
the real pipeline: ingest into a real SQLite file, then diagnose."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.parsers import Dispatcher
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

TIMING = ("llama_perf_context_print:        eval time =    5000.00 ms /    50 runs   "
          "(  100.00 ms per token,    10.00 tokens per second)")

METAL_BLOCK = [
    "ggml_metal_device_init: tensor API disabled for pre-M5 and pre-A19 devices",
    "ggml_metal_library_init: using embedded metal library",
    "ggml_metal_library_init: loaded in 8.412 sec",
    "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)",
    "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)",
    "ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)",
    "ggml_metal_device_init: simdgroup reduction   = false",
    "ggml_metal_device_init: simdgroup matrix mul. = false",
    "ggml_metal_device_init: has unified memory    = true",
    "ggml_metal_device_init: has bfloat            = false",
    "ggml_metal_device_init: has tensor            = false",
    "ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB",
]
MD_TABLE = [
    "| model                          |       size |     params | backend    | threads |          test |"
    "                  t/s |",
    "| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: |"
    " -------------------: |",
    "| qwen2 1.5B Q4_K - Medium       |   1.04 GiB |     1.78 B | MTL,BLAS   |       8 |         pp512 |"
    "        210.44 ± 3.10 |",
    "| qwen2 1.5B Q4_K - Medium       |   1.04 GiB |     1.78 B | MTL,BLAS   |       8 |         tg128 |"
    "          9.87 ± 0.12 |",
    "",
    "build: 9a8b7c6d (10240)",
]
PARAVIRTUAL = "  MTL0: Apple Paravirtual device (11453 MiB, 11453 MiB free)"

# name -> (lines, expected verdict, expected listed devices, expected throughput rows)
SHAPES = {
    # the README's Rosetta shape: no device, then a timing line that must still count
    "none-then-timing": (["Available devices:", "  (none)", TIMING], "no-gpu-offload", [],
                         [("generation", 10.0)]),
    "empty-then-timing": (["Available devices:", TIMING], "no-gpu-offload", [], [("generation", 10.0)]),
    "none-blank-then-timing": (["Available devices:", "  (none)", "", TIMING], "no-gpu-offload", [],
                               [("generation", 10.0)]),
    # `llama-cli --list-devices; llama-bench ...`: the Metal block right after the list
    "empty-then-block": (["Available devices:", *METAL_BLOCK, *MD_TABLE], "capability-downgrade", [],
                         [("pp512", 210.44), ("tg128", 9.87)]),
    "none-then-block": (["Available devices:", "  (none)", *METAL_BLOCK, *MD_TABLE], "capability-downgrade", [],
                        [("pp512", 210.44), ("tg128", 9.87)]),
    "listed-then-block": (["Available devices:", PARAVIRTUAL, *METAL_BLOCK, *MD_TABLE], "capability-downgrade",
                          ["MTL0: Apple Paravirtual device"], [("pp512", 210.44), ("tg128", 9.87)]),
    "listed-blank-then-block": (["Available devices:", PARAVIRTUAL, "", *METAL_BLOCK, *MD_TABLE],
                                "capability-downgrade", ["MTL0: Apple Paravirtual device"],
                                [("pp512", 210.44), ("tg128", 9.87)]),
}


def _plain(lines: list[str]) -> bytes:
    return "\n".join(lines).encode() + b"\n"


def _crlf(lines: list[str]) -> bytes:
    return "\r\n".join(lines).encode() + b"\r\n"


def _gh_actions(lines: list[str]) -> bytes:
    return "".join(f"2026-07-14T09:12:{i % 60:02d}.4411820Z {line}\n" for i, line in enumerate(lines)).encode()


def _common_log(lines: list[str]) -> bytes:
    return "".join(f"0.00.{i:03d}.117 I {line}\n" for i, line in enumerate(lines)).encode()


def _quoted(lines: list[str]) -> bytes:
    return "".join(f"> {line}\n" for line in lines).encode()


def _collapsed(lines: list[str]) -> bytes:
    return "".join(re.sub(r" {2,}", " ", line).strip() + "\n" for line in lines).encode()


WRAPS = {"plain": _plain, "crlf": _crlf, "gh-actions": _gh_actions, "common-log": _common_log,
         "quoted": _quoted, "collapsed": _collapsed}


def _diagnosed(tmp_path: Path, data: bytes):
    db = open_db(tmp_path / "devices.db")
    try:
        import io

        ids = ingest(db, Input("guest.log", io.BytesIO(data))).run_ids
        runs = diagnose_runs(db, ids, refresh_peers=True)
        rows = [(t, round(s, 2)) for t, s in db.conn.execute(
            "SELECT test, tok_s FROM throughput ORDER BY line, rowid")]
    finally:
        db.conn.close()
    return runs, rows


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_line_after_the_list_keeps_its_meaning(tmp_path, shape, wrap):
    lines, verdict, listed, throughput = SHAPES[shape]
    runs, rows = _diagnosed(tmp_path, WRAPS[wrap](lines))
    assert len(runs) == 1, [r.diagnosis.summary for r in runs]
    run = runs[0]
    assert run.facts.listed_devices == listed
    assert run.diagnosis.verdict == verdict, run.diagnosis.summary
    assert rows == throughput
    if "block" in shape:
        assert run.facts.device.name == "Apple Paravirtual device"
        assert run.facts.device.families == [1005, 3003]


def _kinds(lines: list[str]) -> list[str]:
    dispatcher = Dispatcher()
    events = []
    for i, line in enumerate(lines, 1):
        events += dispatcher.feed(i, line.encode())
    events += dispatcher.finish()
    return [e.kind for e in events]


def test_only_device_lines_are_items_and_the_line_that_ends_the_list_is_parsed():
    assert _kinds(["Available devices:", "  (none)", TIMING]) == ["devices.header", "devices.none", "timing"]
    assert _kinds(["Available devices:", TIMING]) == ["devices.header", "devices.none", "timing"]
    kinds = _kinds(["Available devices:", PARAVIRTUAL,
                    "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23512 MiB free)", METAL_BLOCK[3]])
    assert kinds == ["devices.header", "devices.item", "devices.item", "metal.device"]


def test_a_line_after_none_is_never_a_device():
    # even a line shaped like a device: after '(none)' the list is over
    kinds = _kinds(["Available devices:", "(none)", PARAVIRTUAL])
    assert kinds == ["devices.header", "devices.none"]
