"""Bookkeeping that grows with the input is bounded (issue 24 item 3): of 40,000 distinct NSLog process names or
system_profiler chipsets a run keeps the first 16. That they cost ten times what 4,000 do, not a hundred (each
line was a set rebuilt or a list searched), is measured by bench/linearity.py (``distinct names`` cases): a
timing ratio fails on a busy machine (issue 39)."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.runs.builder import MAX_NAMES
from analyzer.store import open_db
from analyzer.store.queries import load_run

KINDS = {
    "nslog": lambda i: f"2026-07-30 11:02:14.552 proc{i}[123:456] ggml_metal_init: GPU name:   Apple M2 Max\n",
    "chipset": lambda i: f"      Chipset Model: Apple Paravirtual device {i}\n",
}


def _ingest(text: bytes) -> list:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "b.db")
        ids = ingest(db, Input("big.log", io.BytesIO(text))).run_ids
        runs = [load_run(db, i) for i in ids]
        db.conn.close()
    return runs


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_distinct_names_keep_the_first_few(kind):
    line = KINDS[kind]
    runs = _ingest("".join(line(i) for i in range(40_000)).encode())
    names = runs[0].facts.processes if kind == "nslog" else runs[0].facts.sysprof_chipsets
    assert len(names) == MAX_NAMES and names[0].endswith("0")


def test_one_chipset_names_the_device_and_two_name_none():
    [one] = _ingest(b"      Chipset Model: Apple M2 Max\n" * 3)
    assert one.facts.device.name == "Apple M2 Max"
    [two] = _ingest(b"      Chipset Model: Intel Iris Plus Graphics\n      Chipset Model: AMD Radeon Pro 5500M\n"
                       b"      Chipset Model: Intel Iris Plus Graphics\n")
    assert two.facts.device.name is None and two.facts.sysprof_chipsets[:2] == ["Intel Iris Plus Graphics",
                                                                                 "AMD Radeon Pro 5500M"]


REPEATED = {
    "metal errors": lambda i: f"ggml_metal_init: error: load pipeline error {i} " + "x" * 2000 + "\n",
    "shim messages": lambda i: f"[LumeMetalCapabilities] message number {i} " + "y" * 2000 + "\n",
    "vulkan devices": lambda i: f"ggml_vulkan: {i % 10} = AMD Radeon RX 7800 XT (RADV NAVI32) | uma: 0 | fp16: 1 | "
                                "warp size: 64\n",
    "listed devices": lambda i: f"  MTL{i}: Apple Paravirtual device (11453 MiB, 11453 MiB free)\n",
}


@pytest.mark.parametrize("kind", sorted(REPEATED))
def test_stored_facts_stay_small_whatever_a_log_repeats(kind):
    """20,000 repetitions of one kind of line: the run keeps the first few, each cut short, so its facts are a
    few kilobytes (3.5 M Metal error lines used to take 1.18 GB)."""
    from analyzer.model import facts_json

    head = "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n"
    if kind == "listed devices":
        head = "Available devices:\n"
    text = (head + "".join(REPEATED[kind](i) for i in range(20_000))).encode()
    runs = _ingest(text)
    assert runs and sum(len(facts_json(r.facts)) for r in runs) < 64_000, kind
