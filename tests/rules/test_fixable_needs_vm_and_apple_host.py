"""Safety property (issue 9, "Safety of fixable"): blocks of different machines,
concatenated or interleaved line by line and wrapped as people paste them, are
ingested and diagnosed through the real pipeline. For every run: if any of its
lines carries a non-Apple or Intel-host sign, or none of its lines carries
evidence of a VM guest, the run is not fixable and `remedy plan` offers no
injection. Contradictions are never resolved by order."""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.remedy.plan import build_plan
from analyzer.store import open_db


def m4(name: str, families: list[str], red: bool, mm: bool, unified: bool) -> list[str]:
    f = "ggml_metal_device_init"
    return ([f"{f}: GPU name:   {name}"] + [f"{f}: GPU family: {fam}" for fam in families] +
            [f"{f}: simdgroup reduction   = {str(red).lower()}", f"{f}: simdgroup matrix mul. = {str(mm).lower()}",
             f"{f}: has unified memory    = {str(unified).lower()}"])


def legacy(name: str, families: list[str], red: bool, mm: bool, unified: bool) -> list[str]:
    f = "ggml_metal_init"
    return ([f"{f}: allocating", f"{f}: found device: {name}", f"{f}: picking default device: {name}",
             f"{f}: GPU name:   {name}"] + [f"{f}: GPU family: {fam}" for fam in families] +
            [f"{f}: simdgroup reduction support   = {str(red).lower()}",
             f"{f}: simdgroup matrix mul. support = {str(mm).lower()}",
             f"{f}: hasUnifiedMemory              = {str(unified).lower()}"])


def bench_rows(cpu: str, gpu: str, tg: float) -> list[str]:
    return ['{"build_commit": "ee3d1b54c", "build_number": 10167, "cpu_info": "%s", "gpu_info": "%s", '
            '"backends": "MTL,BLAS", "model_type": "llama 1B Q4_K - Medium", "n_gpu_layers": 99, "n_prompt": 0, '
            '"n_gen": 128, "n_depth": 0, "avg_ts": %s, "stddev_ts": 0.4}' % (cpu, gpu, tg)]


APPLE5 = ["MTLGPUFamilyApple5  (1005)", "MTLGPUFamilyCommon3 (3003)"]
ARM64_BUILD = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0"
PARAVIRTUAL = ["MTL0 (Apple Paravirtual device)", "Apple Paravirtual device"]

# What one machine prints (each list keeps its own order when interleaved with others).
MACHINES = {
    "apple-guest-m4": lambda d: m4(d(st.sampled_from(PARAVIRTUAL)), APPLE5, False, False, True),
    "apple-guest-m4-arm64": lambda d: [ARM64_BUILD] + m4(d(st.sampled_from(PARAVIRTUAL)), APPLE5, False, False, True),
    "apple-guest-legacy": lambda d: legacy("Apple Paravirtual device", APPLE5, False, False, True),
    "apple-guest-bench": lambda d: bench_rows("Accelerate, Apple M1 Ultra (Virtual)", "Apple Paravirtual device",
                                              12.63),
    "intel-guest-m4": lambda d: m4("MTL0 (Apple Paravirtual device)", APPLE5, False, False, False),
    "intel-guest-legacy": lambda d: legacy("Apple Paravirtual device", APPLE5, False, False, False),
    "intel-guest-bench": lambda d: bench_rows("Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz (Virtual)",
                                              "Apple Paravirtual device", 2.9),
    "amd-mac": lambda d: legacy(d(st.sampled_from(["AMD Radeon Pro W6800", "AMD Radeon Pro 5500M"])),
                                ["MTLGPUFamilyCommon3 (3003)", "MTLGPUFamilyMetal3  (5001)"], True, False, False),
    "intel-igpu": lambda d: m4("MTL0 (Intel(R) UHD Graphics 630)", ["MTLGPUFamilyCommon3 (3003)"], False, False,
                               True),
    "bare-apple": lambda d: legacy("Apple M2 Max", ["MTLGPUFamilyApple8  (1008)", "MTLGPUFamilyCommon3 (3003)",
                                                    "MTLGPUFamilyMetal3  (5001)"], True, True, True),
    "bare-apple-crash": lambda d: ["ggml_metal_init: found device: Apple M2 Max",
                                   "ggml_metal_graph_compute_block_invoke: error: unsupported op 'MUL_MAT'"],
    "symptoms": lambda d: d(st.lists(st.sampled_from([
        "ggml_metal_op_encode_impl: error: unsupported op 'RMS_NORM'",
        "ggml_metal_init: skipping kernel_soft_max_f32                   (not supported)",
        "whisper_backend_init: Metal GPU does not support family 7 - falling back to CPU",
        "ggml_metal_init: found device: AMD Radeon Pro 5500M",
        "ggml_metal_init: hasUnifiedMemory              = false",
        "main: built with Apple clang version 16.0.0 (clang-1600.0.26.6) for x86_64-apple-darwin23.6.0",
        "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for x86_64-apple-darwin23.4.0",
        "system_info: n_threads = 4 (n_threads_batch = 4) / 4 | CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 |",
        "      Processor Name: 6-Core Intel Core i7",
        "Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz",
        "[LumeMetalCapabilities] Enabled for llama-bench (appleFamilyMax=1009 maxThreadgroupMemory=65536)",
    ]), min_size=1, max_size=4)),
}
WRAPS = [lambda s: s, lambda s: "0.00.012.345 I " + s, lambda s: "> " + s, lambda s: "`" + s + "`",
         lambda s: "Aug 09 12:41:47 mac llama-bench[2738]: " + s, lambda s: "\x1b[34m" + s + "\x1b[0m",
         lambda s: "2026-07-14T09:12:03.4411820Z " + s]

# The oracle reads the raw lines, independently of the parser.
NON_APPLE_SIGN = re.compile(r"AMD|Radeon|Intel|NVIDIA|GeForce|UHD Graphics|hasUnifiedMemory\s*=\s*false"
                            r"|has unified memory\s*=\s*false|x86_64-apple|\b(?:SSE3|AVX2?|F16C) = 1")
VM_EVIDENCE = re.compile(r"Paravirtual|\(Virtual\)|Venus|MetalCapabilities\]|AnkaGpuFamilyBoost|capscan-interposer")
# The guest's own proof of an Apple-silicon host (issue 21): a named Apple chip, or an arm64 macOS process.
HOST_EVIDENCE = re.compile(r"Apple M\d[^\n]*\(Virtual\)|arm64-apple-darwin|NEON = 1|Chip:\s+Apple M")


@st.composite
def pasted_logs(draw) -> str:
    blocks = [MACHINES[name](draw) for name in draw(st.lists(st.sampled_from(sorted(MACHINES)), min_size=1,
                                                             max_size=4))]
    if draw(st.booleans()):  # interleaved line by line, each machine's lines in their own order
        lines, queues = [], [list(b) for b in blocks]
        while any(queues):
            q = draw(st.sampled_from([q for q in queues if q]))
            lines.append(q.pop(0))
    else:
        lines = [line for b in blocks for line in b]
    wrap = draw(st.sampled_from(WRAPS))
    return "\n".join(wrap(line) for line in lines) + "\n"


def check(text: str) -> list[dict]:
    lines = text.splitlines()
    seen = []
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "p.db")
        result = ingest(db, Input("pasted.log", io.BytesIO(text.encode())))
        for run in diagnose_runs(db, result.run_ids, refresh_peers=True):
            mine = lines[run.facts.first_line - 1:run.facts.last_line]
            forbidden = (any(NON_APPLE_SIGN.search(x) for x in mine) or not any(VM_EVIDENCE.search(x) for x in mine)
                         or not any(HOST_EVIDENCE.search(x) for x in mine))
            plan = build_plan(db, run.id)
            if forbidden:
                assert run.diagnosis.fixable is False, (text, run.diagnosis.summary)
                assert plan["actionable"] is False and plan["steps"] == [], plan
            seen.append({"fixable": run.diagnosis.fixable, "actionable": plan["actionable"]})
        db.conn.close()
    return seen


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pasted_logs())
def test_a_run_with_a_non_apple_sign_or_no_vm_evidence_is_never_fixable(text):
    check(text)


def test_the_property_can_fail_a_clean_apple_guest_is_fixable():
    """The oracle is not vacuous: one Apple-hosted guest alone is fixable and gets a plan; without its
    arm64 build line (unified memory alone proves nothing) it is not."""
    block = m4("MTL0 (Apple Paravirtual device)", APPLE5, False, False, True)
    assert check("\n".join([ARM64_BUILD] + block) + "\n") == [{"fixable": True, "actionable": True}]
    assert check("\n".join(block) + "\n") == [{"fixable": False, "actionable": False}]


def test_merged_legacy_blocks_false_then_true_is_not_fixable_and_named():
    text = "\n".join(legacy("Apple Paravirtual device", APPLE5, False, False, False) +
                     legacy("Apple Paravirtual device", APPLE5, False, False, True)) + "\n"
    assert check(text) == [{"fixable": False, "actionable": False}]
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "m.db")
        run = diagnose_runs(db, ingest(db, Input("m.log", io.BytesIO(text.encode()))).run_ids)[0]
        assert "contradicts itself" in run.diagnosis.summary
        assert any(f["rule"] == "contradictory-evidence" for f in run.diagnosis.stored()["findings"])
        db.conn.close()


def test_bare_metal_m2_max_with_an_unsupported_op_is_never_fixable():
    text = ("ggml_metal_init: found device: Apple M2 Max\n"
            "ggml_metal_graph_compute_block_invoke: error: unsupported op 'MUL_MAT'\n")
    assert check(text) == [{"fixable": False, "actionable": False}]
