"""Issue 37: only the guest's own lines prove its host.

A paravirtual block without its unified-memory line is what an Intel-hosted GitHub runner's excerpt
looks like (tests/fixtures/field/ holds real ones): the block alone proves nothing about the host. Beside
it, another machine's lines in the same paste (a Mac's own brand string, a compare-llama-bench table
run on a Mac, an echoed prompt that quotes system_profiler) must never stand for the guest's host.
Each variant takes a different chip, a different line shape, and the foreign line before or after the
guest's block. Through the real pipeline: ingest, diagnose, `remedy plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.rules.test_fixable_proof import RESULT, diagnose, never_fixable

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _without_unified_memory(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if "unified memory" not in line)


def _lines(path: Path, first: int, last: int) -> str:
    return "".join(path.read_text().splitlines(keepends=True)[first - 1:last])


# Three real shapes of a clamped paravirtual block, each cut of its unified-memory line
BLOCKS = {
    # ggml_metal_device_init (2025 on), a CUA guest on an M1 Ultra
    "m4-era": _without_unified_memory((FIXTURES.parents[0] / "rules" / "fixable" / "guest-m4-stock.log").read_text()),
    # a GitHub-hosted macos-15 runner's stderr (field 100), the same era
    "gh-runner": _without_unified_memory(_lines(FIXTURES / "field" / "100-llama-bench-gh-runner-macos15-apple5-"
                                                "stderr-tail-2026.log", 26, 36)),
    # ggml_metal_init (2024), a llama-server in a macOS VM (field 109)
    "legacy": _lines(FIXTURES / "field" / "109-llama-server-macos-vm-paravirtual-apple5-2025.log", 17, 25),
}


def _around(foreign: str, block: str, order: str) -> str:
    return foreign + block + RESULT if order == "before" else block + foreign + RESULT


def test_the_blocks_alone_are_clamped_guests_with_no_host_proof():
    """The premise: each block is a clamped paravirtual guest that names no host (so not fixable alone)."""
    for name, block in BLOCKS.items():
        runs = diagnose(block + RESULT)
        assert runs[0]["verdict"] == "capability-downgrade", name
        assert runs[0]["proof_missing"] == ["host"], name
        never_fixable(runs)


# -- (c) "cpu_type" anywhere in a line --------------------------------------------------------------------

ECHOES = {
    "chat transcript": 'user: my Mac prints "cpu_type": "Apple M2 Max", is that fast enough for a 7B model?\n',
    "prompt log": "INFO [main] prompt: 'summarise {\"cpu_type\": \"Apple M4 Pro\", \"memory\": \"24 GB\"}'\n",
    "one-line JSON": '{"SPHardwareDataType":[{"_name":"hardware_overview","cpu_type":"Apple M3 Max"}]}\n',
    "markdown": '> `"cpu_type" : "Apple M1 Max",` is what system_profiler printed on the host\n',
}


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("block", sorted(BLOCKS))
@pytest.mark.parametrize("echo", sorted(ECHOES))
def test_cpu_type_quoted_in_a_line_is_no_host(echo, block, order):
    runs = diagnose(_around(ECHOES[echo], BLOCKS[block], order))
    never_fixable(runs)
