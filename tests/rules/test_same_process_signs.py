"""Safety: a sign of an Intel Mac or a non-Apple GPU printed by the same process as a paravirtual
Metal block vetoes 'fixable', wherever it stands and however the log is wrapped.

Found by exploratory testing: the device enumeration before a legacy block (``found device:``,
``picking default device:``) named another GPU and was split into a run of its own; a Vulkan
device list registered beside a Metal block became another run; and four shapes that say "x86"
were not read at all: common_init's ``build: N (commit) with ... for x86_64-...`` line, x86 CPU
features in ``system_info``, a Hardware Overview's ``Processor Name: ... Intel ...``, and
``sysctl machdep.cpu.brand_string`` naming an Intel CPU."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.remedy.plan import build_plan
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

LEGACY = ["ggml_metal_init: allocating",
          "ggml_metal_init: found device: Apple Paravirtual device",
          "ggml_metal_init: picking default device: Apple Paravirtual device",
          "ggml_metal_init: GPU name:   Apple Paravirtual device",
          "ggml_metal_init: GPU family: MTLGPUFamilyApple5  (1005)",
          "ggml_metal_init: GPU family: MTLGPUFamilyCommon3 (3003)",
          "ggml_metal_init: simdgroup reduction support   = false",
          "ggml_metal_init: simdgroup matrix mul. support = false",
          "ggml_metal_init: hasUnifiedMemory              = true",
          "ggml_metal_init: recommendedMaxWorkingSetSize  =  5010.80 MB"]
M4 = ["ggml_metal_device_init: tensor API disabled for pre-M5 and pre-A19 devices",
      "ggml_metal_library_init: using embedded metal library",
      "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)",
      "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)",
      "ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)",
      "ggml_metal_device_init: simdgroup reduction   = false",
      "ggml_metal_device_init: simdgroup matrix mul. = false",
      "ggml_metal_device_init: has unified memory    = true",
      "ggml_metal_device_init: has bfloat            = false"]
# The guest's own proof of an Apple-silicon host (issue 21: unified memory alone proves nothing): common_init's
# build line of an arm64 macOS build, which runs only on Apple-silicon hosts.
HOST = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0"
RESULT = "llama_perf_context_print:        eval time =    5000.00 ms /    50 runs   (  100.00 ms per token,    10.00 tokens per second)"

# One process's lines that say "not an Apple-silicon arm64 process on an Apple GPU".
CONTRARY = {
    "build line, x86_64 macOS (common_init)":
        "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for x86_64-apple-darwin23.4.0",
    "build line, x86_64 debug build":
        "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for x86_64-apple-darwin24.6.0 (debug)",
    "build line, old main: form":
        "main: built with Apple clang version 16.0.0 (clang-1600.0.26.6) for x86_64-apple-darwin23.6.0",
    "system_info, per-backend layout with x86 features":
        "system_info: n_threads = 4 (n_threads_batch = 4) / 4 | Metal : EMBED_LIBRARY = 1 | BF16 = 1 | CPU : SSE3 = 1 | "
        "SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | ACCELERATE = 1 | REPACK = 1 |",
    "system_info, the fixed list of 2024 on an x86 CPU":
        "system_info: n_threads = 4 (n_threads_batch = 4) / 4 | AVX = 1 | AVX_VNNI = 0 | AVX2 = 1 | AVX512 = 0 | "
        "AVX512_VBMI = 0 | AVX512_VNNI = 0 | AVX512_BF16 = 0 | AMX_INT8 = 0 | FMA = 1 | NEON = 0 | SVE = 0 | "
        "ARM_FMA = 0 | F16C = 1 | FP16_VA = 0 | RISCV_VECT = 0 | WASM_SIMD = 0 | BLAS = 1 | SSE3 = 1 | SSSE3 = 1 | "
        "VSX = 0 | MATMUL_INT8 = 0 | LLAMAFILE = 1 | ",
    "Hardware Overview of an Intel Mac": "      Processor Name: 6-Core Intel Core i7",
    "system_profiler -json of an Intel Mac": '        "cpu_type" : "Quad-Core Intel Core i7",',
    "sysctl with the name": "machdep.cpu.brand_string: Intel(R) Core(TM) i7-8700B CPU @ 3.20GHz",
    "sysctl -n, the bare brand string": "Intel(R) Xeon(R) W-3245 CPU @ 3.20GHz",
    "the enumeration names an AMD GPU": "ggml_metal_init: found device: AMD Radeon Pro 5500M",
    "the default device is an Intel GPU": "ggml_metal_init: picking default device: Intel(R) Iris(TM) Plus Graphics",
    "a Vulkan device list (the same build's other backend)":
        "ggml_vulkan: Found 1 Vulkan devices:\n"
        "ggml_vulkan: 0 = AMD Radeon Pro 5500M (MoltenVK) | uma: 0 | fp16: 1 | bf16: 0 | warp size: 64 | "
        "shared memory: 32768 | int dot: 0 | matrix cores: none",
}
WRAPS = {
    "plain": lambda s: s,
    "common logger": lambda s: "0.00.012.345 I " + s,
    "quoted in an issue": lambda s: "> " + s,
    "journald": lambda s: "Aug 09 12:41:47 mac llama-cli[2738]: " + s,
    "GitHub Actions": lambda s: "2026-07-14T09:12:03.4411820Z " + s,
    "CRLF": lambda s: s + "\r",
}


def diagnose(text: str) -> list[tuple[bool, bool, str]]:
    """(fixable, remedy plan actionable, verdict) of every run, through the real pipeline."""
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "s.db")
        result = ingest(db, Input("s.log", io.BytesIO(text.encode())))
        out = [(run.diagnosis.fixable, build_plan(db, run.id)["actionable"], run.diagnosis.verdict)
               for run in diagnose_runs(db, result.run_ids, refresh_peers=True)]
        db.conn.close()
    return out


def _log(lines: list[str], wrap) -> str:
    return "\n".join(wrap(x) for line in lines for x in line.split("\n")) + "\n"


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("block", ["legacy", "m4"])
def test_the_clean_guest_is_fixable_so_each_veto_below_can_fail(block, wrap):
    lines = [HOST] + (LEGACY if block == "legacy" else M4) + [RESULT]
    assert diagnose(_log(lines, WRAPS[wrap])) == [(True, True, "capability-downgrade")]
    # without it the same guest is a downgrade that is not (yet) fixable
    assert diagnose(_log(lines[1:], WRAPS[wrap])) == [(False, False, "capability-downgrade")]


VULKAN = "a Vulkan device list (the same build's other backend)"
NEXT_PROCESS = {VULKAN, "build line, x86_64 macOS (common_init)", "build line, x86_64 debug build"}
PLACES = ["before the block", "inside the block", "after the block, before the result", "after the result"]


def _next_process(sign: str, where: str, block: str) -> bool:
    """Where a line is structurally the next process's first: a device list or common_init's build line
    after a result, and the build line after a legacy block too (a legacy block is printed at context
    creation, after common_init). test_two_processes_separated_by_a_result,
    test_concatenated_logs_keep_their_own_preambles and test_common_init_after_a_legacy_block_... cover them."""
    if sign not in NEXT_PROCESS:
        return False
    return where == "after the result" or (sign != VULKAN and block == "legacy" and where.startswith("after"))


@pytest.mark.parametrize(("sign", "where", "block"), [
    (sign, where, block) for sign in sorted(CONTRARY) for where in PLACES for block in ("legacy", "m4")
    if not _next_process(sign, where, block)])
def test_a_contrary_sign_of_the_same_process_vetoes_fixable(sign, block, where):
    body = [HOST] + (LEGACY if block == "legacy" else M4)
    at = {"before the block": 1, "inside the block": 4, "after the block, before the result": len(body),
          "after the result": len(body) + 1}[where]
    lines = body + [RESULT]
    lines = lines[:at] + [CONTRARY[sign]] + lines[at:]
    for wrap in WRAPS.values():
        runs = diagnose(_log(lines, wrap))
        assert runs and all(not fixable and not actionable for fixable, actionable, _ in runs), (sign, where, runs)


def test_an_arm64_build_and_arm_features_are_no_veto():
    """The same shapes from a native arm64 process (features printed 0 do not count) keep the guest fixable."""
    arm = ["build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0",
           "system_info: n_threads = 8 (n_threads_batch = 8) / 8 | AVX = 0 | AVX_VNNI = 0 | AVX2 = 0 | AVX512 = 0 | "
           "FMA = 0 | NEON = 1 | ARM_FMA = 1 | F16C = 0 | FP16_VA = 1 | SSE3 = 0 | SSSE3 = 0 | MATMUL_INT8 = 1 | ",
           "      Chip: Apple M1 Ultra (Virtual)"]
    assert diagnose(_log(arm + M4 + [RESULT], WRAPS["plain"])) == [(True, True, "capability-downgrade")]


def test_an_intel_processor_makes_the_guest_a_vm_on_an_intel_host():
    lines = ["      Processor Name: 8-Core Intel Core i9"] + LEGACY + [RESULT]
    assert diagnose(_log(lines, WRAPS["plain"])) == [(False, False, "hardware-limit")]


def test_the_enumeration_before_a_legacy_block_stays_in_its_run():
    """An eGPU Mac enumerates both GPUs, then picks one: one process, one run."""
    lines = ["ggml_metal_init: allocating",
             "ggml_metal_init: found device: Intel(R) UHD Graphics 630",
             "ggml_metal_init: found device: AMD Radeon RX 6800 XT",
             "ggml_metal_init: picking default device: AMD Radeon RX 6800 XT",
             "ggml_metal_init: GPU name:   AMD Radeon RX 6800 XT",
             "ggml_metal_init: GPU family: MTLGPUFamilyCommon3 (3003)",
             "ggml_metal_init: GPU family: MTLGPUFamilyMetal3  (5001)",
             "ggml_metal_init: simdgroup reduction support   = true",
             "ggml_metal_init: hasUnifiedMemory              = false", RESULT]
    assert diagnose(_log(lines, WRAPS["plain"])) == [(False, False, "hardware-limit")]


def test_two_processes_separated_by_a_result_stay_two_runs():
    """A Vulkan list after the Metal run's result is another process: the guest's run keeps its verdict."""
    lines = [HOST] + M4 + [RESULT] + CONTRARY[VULKAN].split("\n")
    runs = diagnose(_log(lines, WRAPS["plain"]))
    assert len(runs) == 2 and runs[0] == (True, True, "capability-downgrade")


def test_concatenated_logs_keep_their_own_preambles():
    """The next log's first lines (common_init's build line, the loader naming its GPU) start its own run:
    a finished bare-metal run is not called an Intel Mac's because an AMD Mac's log follows it."""
    host = (Path(__file__).resolve().parents[2] / "examples" / "m1-ultra-host.log").read_text()
    amd = (Path(__file__).resolve().parents[1] / "fixtures" / "metal" / "m2-2024-10-amd-egpu-intel-mac.log").read_text()
    assert amd.startswith("build: 3912 (edc26566) with Apple clang")
    assert diagnose(host + amd) == [(False, False, "healthy"), (False, False, "hardware-limit")]
    guest = HOST + "\n" + (Path(__file__).resolve().parents[2] / "examples" / "m1-ultra-guest-stock.log").read_text()
    assert diagnose(guest + amd)[0] == (True, True, "capability-downgrade")
    assert diagnose(amd + guest) == [(False, False, "hardware-limit"), (True, True, "capability-downgrade")]


def _legacy(name: str, fam: str, red: str, mm: str, unified: str, found: tuple[str, ...] = ()) -> list[str]:
    return (["ggml_metal_init: allocating"] + [f"ggml_metal_init: found device: {n}" for n in found or (name,)]
            + [f"ggml_metal_init: picking default device: {name}", "ggml_metal_init: using embedded metal library",
               f"ggml_metal_init: GPU name:   {name}", f"ggml_metal_init: GPU family: {fam}",
               "ggml_metal_init: GPU family: MTLGPUFamilyCommon3 (3003)",
               f"ggml_metal_init: simdgroup reduction support   = {red}",
               f"ggml_metal_init: simdgroup matrix mul. support = {mm}",
               f"ggml_metal_init: hasUnifiedMemory              = {unified}"])


M2 = _legacy("Apple M2", "MTLGPUFamilyApple8  (1008)", "true", "true", "true")
IRIS = _legacy("Intel(R) Iris(TM) Plus Graphics", "MTLGPUFamilyMetal3  (5001)", "true", "false", "true")


def test_the_next_machines_enumeration_is_not_lent_to_a_finished_block():
    """Two logs without results or a process-start line between them (LM Studio sessions): the second
    block's 'found device' and 'picking default device' lines wait for its GPU name line, so the Intel
    Mac's GPU is not named in the Apple M2's run."""
    assert diagnose(_log(M2 + IRIS, WRAPS["plain"])) == [(False, False, "healthy"), (False, False, "hardware-limit")]
    guest = [HOST] + LEGACY
    assert diagnose(_log(guest + IRIS, WRAPS["plain"]))[0] == (True, True, "capability-downgrade")


def test_a_second_context_on_the_same_device_stays_in_the_run():
    """A process that creates two contexts (a draft model and the main one) prints two blocks naming one
    device: one run, and what either block's enumeration names counts for it."""
    second = _legacy("Apple Paravirtual device", "MTLGPUFamilyApple5  (1005)", "false", "false", "true",
                     found=("AMD Radeon Pro 5500M", "Apple Paravirtual device"))
    runs = diagnose(_log(LEGACY + second + [RESULT], WRAPS["plain"]))
    assert len(runs) == 1 and runs[0][0] is False  # the AMD GPU enumerated by the second context vetoes


def test_common_init_after_a_legacy_block_starts_the_next_process():
    """Legacy blocks are printed at context creation, after common_init's build line: a build line after
    one is the next process's first line (an M4-era block may come before it: test_a_contrary_sign...)."""
    nxt = ["build: 4920 (9ffcc9e3) with Apple clang version 16.0.0 (clang-1600.0.26.6) for x86_64-apple-darwin24.3.0"]
    assert diagnose(_log(M2 + nxt + IRIS, WRAPS["plain"])) == [(False, False, "healthy"),
                                                               (False, False, "hardware-limit")]
