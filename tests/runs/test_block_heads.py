"""A Metal block's head (the lines before its GPU name line) waits for that line, which alone says whose
run the block is. Which lines may sit in a head is declared by the formats (``Pattern.heads``), and the
assembler reads only that declaration: a new head line needs no hidden list to join."""

from __future__ import annotations

from collections import defaultdict

from analyzer.parsers import FORMATS, head_kinds
from analyzer.parsers.base import LEGACY_HEAD, M4_HEAD
from analyzer.runs import assembler
from tests.runs.test_boundaries import LEGACY_M1, LEGACY_M2, M4_BLOCK, PERF, assemble


def test_every_pattern_of_a_kind_declares_the_same_heads():
    # an event carries only its kind: two patterns of one kind that disagree would make the head depend on
    # which of them matched
    declared: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for fmt in FORMATS:
        for pattern in fmt.patterns:
            assert set(pattern.heads) <= {M4_HEAD, LEGACY_HEAD}, (fmt.name, pattern.kind, pattern.heads)
            declared[pattern.kind].add(tuple(sorted(pattern.heads)))
    mixed = {kind: heads for kind, heads in declared.items() if len(heads) > 1}
    assert not mixed, f"patterns of one kind declare different heads: {mixed}"


def test_the_assembler_waits_on_the_declared_kinds_only():
    assert assembler._GATE_KINDS == head_kinds(M4_HEAD)
    assert assembler._HOLD_KINDS == head_kinds(LEGACY_HEAD)
    # non-vacuity: each head has its opening line and the GPU name line that ends it
    assert {"metal.tensor_gate", "metal.device"} <= head_kinds(M4_HEAD)
    assert {"metal.found_device", "metal.device"} <= head_kinds(LEGACY_HEAD)


M4_M2 = M4_BLOCK.replace("MTL0 (Apple Paravirtual device)", "MTL0 (Apple M2 Max)").replace(
    "Apple5  (1005)", "Apple8  (1008)").replace("= false", "= true")
M4_HEAD_LINES = ("ggml_metal_device_init: tensor API disabled for pre-M5 and pre-A19 devices\n"
                 "ggml_metal_library_init: loaded in 0.012 sec\n")


def test_an_m4_head_joins_the_run_its_gpu_name_line_opens():
    # the second process's head (its tensor-gate and library lines) is printed after the first one's results:
    # it waits for the GPU name line and goes with it, never left in the finished run
    text = M4_HEAD_LINES + M4_M2 + PERF + M4_HEAD_LINES.replace("0.012", "0.345") + M4_BLOCK + PERF
    first, second = assemble(text)
    lines = text.splitlines()
    gate_line = lines.index(M4_HEAD_LINES.splitlines()[0], 1) + 1
    assert (first.facts.device.name, second.facts.device.name) == ("Apple M2 Max", "Apple Paravirtual device")
    assert first.span.last_line is not None and first.span.last_line < gate_line
    assert second.span.first_line == gate_line
    assert (first.facts.library_load_s, second.facts.library_load_s) == (0.012, 0.345)


def test_a_reopened_legacy_head_lends_no_gpu_to_the_run_before_it():
    # two contexts' blocks with no result between them: 'found device: Apple M1 Pro' is the next block's
    # enumeration, held with it until its GPU name line, and never names a GPU of the M2 Max run
    second_block = LEGACY_M1.replace("ggml_metal_init: using MPS\n", "")
    first, second = assemble(LEGACY_M2 + second_block)
    assert first.facts.seen_devices == ["Apple M2 Max"]
    assert first.span.last_line == len(LEGACY_M2.splitlines())
    assert (second.facts.device.name, second.span.first_line) == ("Apple M1 Pro", first.span.last_line + 1)
