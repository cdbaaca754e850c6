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


# -- (a) a bare-metal brand string, cpu_info or CPU line without "(Virtual)" -------------------------------

BRAND_STRINGS = {
    "sysctl M2 Max": "machdep.cpu.brand_string: Apple M2 Max\n",
    "sysctl M3 Pro": "machdep.cpu.brand_string: Apple M3 Pro\n",
    "sysctl M4 Pro, tab": "machdep.cpu.brand_string:\tApple M4 Pro\n",
    "sysctl M1, CRLF": "machdep.cpu.brand_string: Apple M1\r\n",
}


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("block", sorted(BLOCKS))
@pytest.mark.parametrize("brand", sorted(BRAND_STRINGS))
def test_a_macs_own_brand_string_beside_a_paravirtual_block_is_a_contradiction(brand, block, order):
    runs = diagnose(_around(BRAND_STRINGS[brand], BLOCKS[block], order))
    never_fixable(runs)


PROBE = _without_unified_memory((FIXTURES / "probe" / "capscan-probe-guest.txt").read_text())


@pytest.mark.parametrize("where", ["after the header", "at the end"])
@pytest.mark.parametrize("chip", ["Apple M4", "Apple M2 Max"])
def test_a_probes_cpu_brand_without_virtual_is_no_guests(chip, where):
    """capscan-probe's own output: a guest's cpu_brand always reads '(Virtual)'; a plain one is a Mac's."""
    head, _, rest = PROBE.partition("\n")
    text = (head + f"\ncpu_brand={chip}\n" + rest if where == "after the header" else PROBE + f"cpu_brand={chip}\n")
    runs = diagnose(text)
    never_fixable(runs)


def test_a_probes_cpu_brand_with_virtual_proves_its_host():
    [d] = diagnose(PROBE + "cpu_brand=Apple M1 Ultra (Virtual)\n")
    assert d["fixable"] is True and d["host_chip"] == "Apple M1 Ultra"
    assert {p["provenance"] for p in d["proof"]} == {"guest-process"}


def test_the_brand_string_is_named_as_bare_metal_in_the_contradiction():
    [d] = diagnose(BLOCKS["m4-era"] + "machdep.cpu.brand_string: Apple M2 Max\n" + RESULT)
    assert "contradicts itself" in d["fixable_reason"] and "Apple M2 Max" in d["fixable_reason"]
    contra = next(f for f in d["findings"] if f["rule"] == "contradictory-evidence")
    assert any("machdep.cpu.brand_string: Apple M2 Max" in e["text"] for e in contra["evidence"])


def _bench_json(cpu_info: str, gpu_info: str = "Apple Paravirtual device") -> str:
    row = json.loads((FIXTURES.parents[0] / "rules" / "fixable" / "guest-bench.json").read_text())[0]
    row.update(cpu_info=cpu_info, gpu_info=gpu_info)
    return json.dumps([row], indent=2) + "\n"


BENCH_CPU = {
    "json M2 Max": _bench_json("Accelerate, Apple M2 Max"),
    "json M4": _bench_json("Apple M4"),
    "csv M3 Pro": ("build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,"
                   "model_n_params,n_batch,n_ubatch,n_threads,n_gpu_layers,n_prompt,n_gen,avg_ns,stddev_ns,avg_ts,"
                   "stddev_ts\n"
                   '"ee3d1b54c","10167","Accelerate, Apple M3 Pro","Apple Paravirtual device","MTL,BLAS",'
                   '"/Users/admin/models/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf","llama 1B Q4_K - Medium",'
                   '"667078656","1100048384","2048","512","8","99","0","128","10134665208","970000000","12.63",'
                   '"1.21"\n'),
}


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("bench", sorted(BENCH_CPU))
def test_llama_bench_cpu_info_without_virtual_beside_a_paravirtual_block_is_not_host_proof(bench, order):
    runs = diagnose(_around(BENCH_CPU[bench], BLOCKS["m4-era"], order))
    never_fixable(runs)


def test_the_guests_own_cpu_info_with_virtual_still_proves_its_host():
    """The control: the guest's own llama-bench row ('(Virtual)') is its host's proof, as before."""
    runs = diagnose(BLOCKS["m4-era"] + _bench_json("Accelerate, Apple M1 Ultra (Virtual)"))
    assert any(d["fixable"] for d in runs)
    d = next(d for d in runs if d["fixable"])
    assert d["host_chip"] == "Apple M1 Ultra"
    assert {p["provenance"] for p in d["proof"]} == {"guest-process"}


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_the_guests_own_brand_string_with_virtual_still_proves_its_host(block):
    [d] = diagnose(BLOCKS[block] + "machdep.cpu.brand_string: Apple M3 Pro (Virtual)\n" + RESULT)
    assert d["fixable"] is True and d["actionable"] is True and d["host_chip"] == "Apple M3 Pro"
    assert all(p["provenance"] == "guest-process" for p in d["proof"])


# -- (b) a compare-llama-bench table whose CPU column is a Mac ---------------------------------------------

COMPARE = {
    "M2 Max, two builds": (
        "| CPU                      | Model         | Test   |   t/s master |   t/s gg/metal-fa-f16 |   Speedup |\n"
        "|:-------------------------|:--------------|:-------|-------------:|----------------------:|----------:|\n"
        "| Accelerate, Apple M2 Max | llama 1B Q8_0 | pp512  |      1911.20 |               1930.11 |      1.01 |\n"
        "| Accelerate, Apple M2 Max | llama 1B Q8_0 | tg128  |       169.28 |                170.57 |      1.01 |\n"),
    "M3 Pro with GPU column": (
        "| CPU          | GPU          | Model          | Test  |   t/s b4000 |   t/s b4100 |   Speedup |\n"
        "|:-------------|:-------------|:---------------|:------|------------:|------------:|----------:|\n"
        "| Apple M3 Pro | Apple M3 Pro | qwen2 1.5B Q4_K | tg128 |       61.02 |       63.50 |      1.04 |\n"),
    # a guest's own compare table ('(Virtual)'): still a table, never the guest's process
    "M1 (Virtual)": (
        "| CPU                         | Model         | Test   |   t/s master |   t/s pr |   Speedup |\n"
        "|:----------------------------|:--------------|:-------|-------------:|---------:|----------:|\n"
        "| Accelerate, Apple M1 (Virtual) | llama 1B Q8_0 | tg128  |        12.01 |    12.40 |      1.03 |\n"),
    "M4 Max, flash attention": (
        "| CPU                      | Model                  | FlashAttention | Test   |   t/s master |   t/s pr |"
        "   Speedup |\n"
        "|:-------------------------|:-----------------------|---------------:|:-------|-------------:|---------:|"
        "----------:|\n"
        "| Accelerate, Apple M4 Max | llama 8B Q4_K - Medium |             No | tg128  |        83.10 |    84.00 |"
        "      1.01 |\n"),
}


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("block", sorted(BLOCKS))
@pytest.mark.parametrize("table", sorted(COMPARE))
def test_a_compare_tables_cpu_column_never_proves_the_guests_host(table, block, order):
    runs = diagnose(_around(COMPARE[table], BLOCKS[block], order))
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
