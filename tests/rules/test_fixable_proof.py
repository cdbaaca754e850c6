"""Issue 21: "fixable" is proven from every observation, never inferred from the last one.

Each case below was a false "fixable" (or a remedy offered without proof) on main at 53786af, found by
an adversarial review; each is a few pasted lines. The pieces are in tests/rules/fixable/ (see its
README for where each shape comes from). Through the real pipeline: ingest, diagnose, remedy plan."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.remedy.plan import build_plan
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

HERE = Path(__file__).resolve().parent / "fixable"
INTEL_IGPU = (HERE / "intel-igpu-2026.log").read_text()
LIST_DEVICES = (HERE / "guest-list-devices.log").read_text()
GUEST_JSON = (HERE / "guest-bench.json").read_text()
GUEST_M4 = (HERE / "guest-m4-stock.log").read_text()
RESULT = ("llama_perf_context_print:        eval time =    5000.00 ms /    50 runs   (  100.00 ms per token,    "
          "10.00 tokens per second)\n")
X86_BUILD = "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for x86_64-apple-darwin23.4.0\n"
ARM_BUILD = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0\n"
ARM_MAIN = "main: built with Apple clang version 16.0.0 (clang-1600.0.26.6) for arm64-apple-darwin23.6.0\n"


def diagnose(text: str, runner=None) -> list[dict]:
    """Every run's diagnosis, with `remedy plan`'s answer (given this runner) as `actionable`."""
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "f.db")
        result = ingest(db, Input("pasted.log", io.BytesIO(text.encode())))
        out = []
        for run in diagnose_runs(db, result.run_ids, refresh_peers=True):
            diag = run.diagnosis.stored()
            plan = build_plan(db, run.id, runner=runner)
            diag["actionable"], diag["refusal"] = plan["actionable"], plan["refusal"]
            out.append(diag)
        db.conn.close()
    return out


def never_fixable(runs: list[dict]) -> None:
    assert runs
    for d in runs:
        assert d["fixable"] is False and d.get("proof", []) == [] and d["actionable"] is False, d["summary"]
        assert not any("remedy run" in s for s in d["next_steps"]), d["next_steps"]


# -- the Intel Mac's GPU next to a guest's device list ---------------------------------------------------


def test_the_intel_igpu_block_alone_is_a_hardware_limit():
    [d] = diagnose(INTEL_IGPU + RESULT)
    assert d["verdict"] == "hardware-limit" and d["fixable"] is False


@pytest.mark.parametrize("order", ["block first", "list first"])
@pytest.mark.parametrize("guest", ["--list-devices", "llama-bench JSON"])
def test_an_intel_igpu_block_beside_a_guests_lines_is_never_fixable(order, guest):
    other = LIST_DEVICES if guest == "--list-devices" else GUEST_JSON
    text = INTEL_IGPU + other if order == "block first" else other + INTEL_IGPU
    runs = diagnose(text + RESULT)
    never_fixable(runs)


def test_the_paravirtual_name_from_another_line_is_a_contradiction_not_a_pardon():
    """The list calls MTL0 paravirtual; MTL0's own block reports Metal3 and no Apple family."""
    [d] = diagnose(INTEL_IGPU + LIST_DEVICES + RESULT)
    contra = next(f for f in d["findings"] if f["rule"] == "contradictory-evidence")
    assert "the kind of GPU is non-apple" in contra["message"] and "paravirtual" in contra["message"]
    lines = {e["line"] for e in contra["evidence"]}
    assert 6 in lines and 16 in lines  # the Metal3 line of the block and the list's MTL0 line
    assert d["confidence"] == "low"


# -- an x86_64 build forgotten -------------------------------------------------------------------------


@pytest.mark.parametrize("later", [ARM_BUILD, ARM_MAIN], ids=["common_init", "main: built with"])
def test_an_x86_64_build_line_is_not_overwritten_by_a_later_arm64_one(later):
    runs = diagnose(X86_BUILD + GUEST_M4 + later + RESULT)
    never_fixable(runs)
    assert any("x86_64" in (d["fixable_reason"] or "") or "instruction set" in (d["fixable_reason"] or "")
               for d in runs)


def test_an_arm64_build_alone_is_the_hosts_proof():
    [d] = diagnose(ARM_BUILD + GUEST_M4 + RESULT)
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True and d["actionable"] is True
    signs = [p["sign"] for p in d["proof"]]
    assert any("Apple5" in s for s in signs) and any("arm64 macOS build" in s for s in signs)
    assert any("every build target printed is arm64" in s for s in signs)
    assert all(isinstance(p["line"], int) and p["text"] for p in d["proof"])


# -- unified memory settled by order --------------------------------------------------------------------

VULKAN_UMA0 = ("ggml_vulkan: Found 1 Vulkan devices:\n"
               "ggml_vulkan: 0 = Apple Paravirtual device (MoltenVK) | uma: 0 | fp16: 1 | bf16: 0 | warp size: 32 | "
               "shared memory: 32768 | int dot: 0 | matrix cores: none\n")
PROBE_KV = "probe=capscan-probe 1\ndevice=Apple Paravirtual device\nsupports_family.1005=true\n" \
           "supports_family.1007=false\nhas_unified_memory=false\n"
PROBE_JSON = ('{"probe":"capscan-probe","version":1,"device":"Apple Paravirtual device","supports_family":'
              '{"1005":true,"1007":false},"max_threadgroup_memory":32768,'
              '"recommended_max_working_set_size":11453251584,"has_unified_memory":true}\n')


def test_vulkan_uma_0_before_a_metal_block_with_unified_memory_is_a_contradiction():
    runs = diagnose(ARM_BUILD + VULKAN_UMA0 + GUEST_M4 + RESULT)
    never_fixable(runs)
    d = runs[0]
    contra = next(f for f in d["findings"] if f["rule"] == "contradictory-evidence")
    assert "unified memory is false (line 3) and true (line 13)" in contra["message"]


def test_a_probe_saying_false_then_a_probe_json_saying_true_is_never_fixable():
    """Two probe outputs are two processes (two runs); the JSON's unified memory proves no host on its own."""
    runs = diagnose(PROBE_KV + PROBE_JSON)
    never_fixable(runs)
    assert runs[0]["verdict"] == "hardware-limit"  # no unified memory: a VM on an Intel host


def test_one_probes_two_answers_on_unified_memory_are_a_contradiction():
    runs = diagnose(PROBE_KV + "has_unified_memory=true\n")
    never_fixable(runs)
    [d] = runs
    assert any("unified memory is false (line 5) and true (line 6)" in f["message"] for f in d["findings"]
               if f["rule"] == "contradictory-evidence")


# -- the remedy is offered only from the one decision ---------------------------------------------------

WRAPPER = ("llm-app: Metal device looks virtualised (Apple Paravirtual device): running on the CPU\n"
           "llm-app: gpu_layers=0\n")


def _wrapper_lines() -> str:
    shape = Path(__file__).resolve().parents[1] / "fixtures" / "shapes" / "wrapper-virtualised-forced-cpu.log"
    return shape.read_text()


def test_an_app_that_gave_up_on_the_gpu_is_told_to_confirm_the_host_first():
    [d] = diagnose(_wrapper_lines())
    assert d["verdict"] == "no-gpu-offload"
    assert not any("remedy run" in s for s in d["next_steps"]), d["next_steps"]
    assert any("capscan probe" in s for s in d["next_steps"])


def test_an_app_that_gave_up_beside_an_x86_64_build_is_told_not_to_force():
    [d] = diagnose(X86_BUILD + _wrapper_lines())
    assert not any("remedy" in s for s in d["next_steps"]), d["next_steps"]
    assert any("do not force" in s for s in d["next_steps"])


def test_an_app_that_gave_up_on_an_apple_silicon_guest_is_offered_the_remedy():
    [d] = diagnose(ARM_BUILD + _wrapper_lines())
    assert any("capscan remedy run --family 1007" in s for s in d["next_steps"]), d["next_steps"]


# -- shapes that survived mutation of the fixable path on main (issue 21 item 7) ---------------------------


def test_a_guests_chip_beside_an_intel_macs_memory_and_a_crash_is_not_fixable():
    text = ("      Chip: Apple M2 Max (Virtual)\n"
            "ggml_metal_init: hasUnifiedMemory              = false\n"
            "ggml_metal_op_encode_impl: error: unsupported op 'RMS_NORM'\n")
    never_fixable(diagnose(text))


def test_a_guest_block_beside_a_bare_metal_agx_error_is_not_fixable():
    agx = ("ggml_metal_init: error: Error Domain=AGXMetalG16X Code=3 \"Compiler encountered an internal error\" "
           "UserInfo={NSLocalizedDescription=Compiler encountered an internal error}\n")
    never_fixable(diagnose(ARM_BUILD + GUEST_M4 + agx + RESULT))


def test_a_stock_guest_with_zero_layers_offloaded_is_no_gpu_offload():
    offload = "load_tensors: offloaded 0/23 layers to GPU\n"
    [d] = diagnose(ARM_BUILD + GUEST_M4 + offload + RESULT)
    assert d["verdict"] == "no-gpu-offload" and d["fixable"] is False


# -- what --json carries ------------------------------------------------------------------------------------


def test_a_host_less_guest_is_a_downgrade_that_says_what_is_missing():
    [d] = diagnose(GUEST_M4 + RESULT)
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is False and d["proof"] == []
    assert d["fixable_reason"] == "nothing in the log shows the host chip"
    assert d["proof_missing"] == ["host"]
    assert any("capscan probe" in s and "llama-bench -o json" in s for s in d["next_steps"])
    json.dumps(d)


def test_unified_memory_alone_never_proves_the_host():
    """QEMU's reims-vgpu gives macOS guests on non-Apple hosts the same 'Apple Paravirtual device'."""
    [d] = diagnose(GUEST_M4 + RESULT)
    assert "unified memory" not in (d["fixable_reason"] or "")
    assert d["fixable"] is False


def test_a_named_host_chip_and_the_block_together_are_the_proof():
    block_then_json = GUEST_M4 + GUEST_JSON  # llama-bench -o json 2>&1
    runs = diagnose(block_then_json)
    assert [d["fixable"] for d in runs] == [True]
    signs = [p["sign"] for p in runs[0]["proof"]]
    assert any("Apple M1 Ultra" in s for s in signs) and any("Apple5" in s for s in signs)


def test_the_cmake_form_of_the_build_target_counts_both_ways():
    """llama-cli --version of 2026 prints CMake's 'for Darwin x86_64': an x86_64 build beside a guest vetoes,
    'for Darwin arm64' is an arm64 macOS build, the host's proof."""
    x86 = "built with AppleClang 17.0.0.17000319 for Darwin x86_64\n"
    never_fixable(diagnose(x86 + GUEST_M4 + RESULT))
    arm = "built with AppleClang 17.0.0.17000319 for Darwin arm64\n"
    assert [d["fixable"] for d in diagnose(arm + GUEST_M4 + RESULT)] == [True]


# -- issue 38: a shim banner beside the stock Apple5 lines no longer counts as remedied, so the clamp rule can
# fire on a bannered run: it must still need the guest's own proof of an Apple-silicon host ------------------

TART_BANNER = "[TartMetalCapabilities] Enabled for llama-bench (appleFamilyMax=1009 maxThreadgroupMemory=65536)\n"
APPLE5 = ("ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n"
          "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)\n"
          "ggml_metal_device_init: simdgroup reduction   = false\n"
          "ggml_metal_device_init: simdgroup matrix mul. = false\n")


@pytest.mark.parametrize("extra", ["", X86_BUILD, "machdep.cpu.brand_string: Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz\n"])
def test_a_banner_with_apple5_lines_is_never_fixable_without_the_guests_host_proof(extra):
    never_fixable(diagnose(TART_BANNER + extra + APPLE5 + RESULT))
