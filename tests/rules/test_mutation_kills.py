"""Shortest realistic logs that tell the fixable path's mutants (scripts/mutate.py, `make mutate`) from the
real code: each test kills the mutants its docstring names, which survived every other guard. Through the
real pipeline (ingest into a temp database, diagnose, remedy plan), like tests/rules/test_fixable_proof.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analyzer.remedy.runner import Runner

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "remedy" / "bin"  # sysctl's stand-in answers CAPSCAN_FAKE_BRAND
GUEST_M4 = (Path(__file__).resolve().parent / "fixable" / "guest-m4-stock.log").read_text()
RESULT = ("llama_perf_context_print:        eval time =    5000.00 ms /    50 runs   (  100.00 ms per token,    "
          "10.00 tokens per second)\n")
ARM_BUILD = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0\n"


# the pipeline helpers are test_fixable_proof's: the same ingest, diagnosis and plan
from tests.rules.test_fixable_proof import diagnose, never_fixable  # noqa: E402


# -- remedy plan on the live guest (remedy/plan.py: refusal_for, live_host_proof) -------------------------------


@pytest.fixture
def live(monkeypatch):
    """The macOS code paths on Linux (the platform module's own test hook), with the sysctl stand-in on PATH."""
    def make(machine: str, brand: str) -> Runner:
        monkeypatch.setenv("CAPSCAN_PLATFORM", "darwin")
        monkeypatch.setenv("CAPSCAN_MACHINE", machine)
        env = {k: v for k, v in os.environ.items()}
        env.update({"PATH": f"{STANDINS}:{env.get('PATH', '')}", "CAPSCAN_FAKE_BRAND": brand,
                    "CAPSCAN_STANDIN_LOG": "/dev/null"})
        return Runner(env)
    return make


def test_a_host_less_guest_is_planned_on_an_apple_silicon_guest_and_refused_on_an_intel_one(live):
    """The log lacks only the host; the live machine decides (the real code's design)."""
    [d] = diagnose(GUEST_M4 + RESULT, live("arm64", "Apple M2 Max (Virtual)"))
    assert d["proof_missing"] == ["host"] and d["actionable"] is True
    [d] = diagnose(GUEST_M4 + RESULT, live("x86_64", "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"))
    assert d["actionable"] is False and "Not marked fixable" in d["refusal"]


def test_arm64_beside_an_intel_brand_string_is_no_live_proof(live):
    """Kills plan-live-arm-any-brand: `uname -m` says arm64 but the brand string names an Intel CPU."""
    [d] = diagnose(GUEST_M4 + RESULT, live("arm64", "Intel(R) Xeon(R) W-3245 CPU @ 3.20GHz"))
    assert d["actionable"] is False, d["refusal"]


def test_the_live_machine_never_stands_in_for_a_missing_clamp_block(live):
    """Kills plan-live-despite-veto: a guest's crash on an unsupported op, with no start-up block, is a
    downgrade missing the clamp's proof as well as the host's: an Apple-silicon live guest proves the host,
    never the clamp, so nothing is planned."""
    text = ("Available devices:\n  MTL0: Apple Paravirtual device (11453 MiB, 11453 MiB free)\n"
            "ggml_metal_op_encode_impl: error: unsupported op 'RMS_NORM'\n")
    [d] = diagnose(text, live("arm64", "Apple M2 Max (Virtual)"))
    assert d["verdict"] == "capability-downgrade" and "clamp" in d["proof_missing"]
    assert d["actionable"] is False


# -- real bugs found while reading the survivors, fixed --------------------------------------------------------

LINUX_ARM_BUILD = "build: 6500 (0320ac526) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for aarch64-linux-gnu\n"
LINUX_ARM_SYSINFO = ("system_info: n_threads = 8 (n_threads_batch = 8) / 8 | CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | "
                     "DOTPROD = 1 | LLAMAFILE = 1 | REPACK = 1 |\n")


def test_an_aarch64_linux_build_line_is_no_proof_of_an_apple_silicon_host():
    """Linux arm64 runs on any Arm server, and Metal output beside a Linux build is two machines' lines
    (found by mutation testing: chips.isa_of_target drops the OS)."""
    never_fixable(diagnose(LINUX_ARM_BUILD + GUEST_M4 + RESULT))


def test_arm_features_without_accelerate_or_metal_prove_no_macos_process():
    """NEON and ARM_FMA alone could be any Arm machine's system_info."""
    assert [d["fixable"] for d in diagnose(LINUX_ARM_SYSINFO + GUEST_M4 + RESULT)] == [False]


# -- rules/observed.py: COMPATIBLE's kinds of GPU ------------------------------------------------------------


def test_a_guests_block_then_an_apple_gpus_name_line_is_two_machines():
    """Kills obs-kind-groups-paravirtual-with-apple: the paste ends on the second block's (GGML_METAL_DEVICES'
    MTL1) GPU name line, naming an Apple chip, so no family or flag of it contradicts the guest's: only the
    kinds of GPU (paravirtual and apple in one process) tell two machines' blocks."""
    host_block = "ggml_metal_device_init: GPU name:   MTL1 (Apple M2 Max)\n"
    never_fixable(diagnose(ARM_BUILD + GUEST_M4 + host_block + RESULT))


def test_two_apple_host_chips_are_two_machines_not_a_family_to_pick():
    """Kills obs-no-host-chip-contradiction: a guest's llama-bench JSON names an M1 Ultra host, a Hardware
    Overview pasted with it an M2 Max: whichever is picked, `--family` may claim Apple8 on an Apple7 host."""
    guest_json = (Path(__file__).resolve().parent / "fixable" / "guest-bench.json").read_text()
    overview = "Hardware:\n\n    Hardware Overview:\n\n      Model Name: Apple Virtual Machine 1\n" \
               "      Chip: Apple M2 Max (Virtual)\n"
    never_fixable(diagnose(GUEST_M4 + guest_json + overview))


# -- rules/engine.py: the decision ------------------------------------------------------------------------


def test_mlx_output_after_a_clamped_block_is_not_fixable():
    """Kills engine-mlx-not-gated: the run is mlx_lm's (its generate lines follow the block and the build
    line), and MLX tunes from the architecture name, never supportsFamily: forcing the family fixes nothing."""
    mlx = ("==========\nHello! How can I assist you today?\n==========\n"
           "Prompt: 30 tokens, 212.771 tokens-per-sec\nGeneration: 10 tokens, 98.114 tokens-per-sec\n"
           "Peak memory: 0.412 GB\n")
    [d] = diagnose(GUEST_M4 + ARM_BUILD + mlx)
    assert d["verdict"] == "capability-downgrade" and d["proof_missing"] == ["gates-on-family"]
    never_fixable([d])


def test_an_apple5_block_that_also_claims_metal3_is_never_fixable():
    """Kills obs-apple5-metal3-threshold: no GPU reports Apple5 and Metal3 (Metal3 needs Apple7 silicon, or an
    AMD/Intel GPU, which has no Apple family): an Intel Mac's family line inside a guest's block, or a shim
    over-claiming Metal3, and either way the block's family is not the device's."""
    block = GUEST_M4.replace("(1005)\n", "(1005)\nggml_metal_device_init: GPU family: MTLGPUFamilyMetal3  (5001)\n")
    assert block != GUEST_M4
    never_fixable(diagnose(ARM_BUILD + block + RESULT))


# -- rules/proof.py: contrary signs ------------------------------------------------------------------------

GUEST_JSON = (Path(__file__).resolve().parent / "fixable" / "guest-bench.json").read_text()
X86_SYSTEM_INFO = ("system_info: n_threads = 8 (n_threads_batch = 8) / 8 | Metal : EMBED_LIBRARY = 1 | CPU : SSE3 = 1 | "
                   "SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | ACCELERATE = 1 | REPACK = 1 |\n")


def test_an_x86_64_build_line_beside_a_guest_naming_its_apple_host_is_not_fixable():
    """Kills view-contrary-no-x86-target: the only build line is x86_64 (no arm64 one to contradict it) and
    llama-bench's cpu_info names an Apple host, so only the x86_64 target itself refuses (Rosetta)."""
    x86 = "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for x86_64-apple-darwin23.4.0\n"
    never_fixable(diagnose(x86 + GUEST_M4 + GUEST_JSON))


def test_a_guest_block_beside_a_macs_own_hardware_overview_is_not_fixable():
    """Kills view-bare-no-hardware-overview and view-environment-vm-wins: a plain 'Chip: Apple M2 Max' (no
    '(Virtual)') is a Mac's own Hardware Overview, so the run shows a guest and bare metal: not a VM whose
    host is proven, whatever the chip."""
    overview = "Hardware:\n\n    Hardware Overview:\n\n      Model Name: MacBook Pro\n      Chip: Apple M2 Max\n"
    never_fixable(diagnose(ARM_BUILD + GUEST_M4 + RESULT + overview))


def test_a_guest_brand_string_and_bench_cpu_info_naming_two_chips_are_two_machines():
    """Kills runs-context-no-processor-obs: the brand string (a named processor) says M2 Max, llama-bench's
    cpu_info M1 Ultra: two hosts, never a family picked by order."""
    brand = "machdep.cpu.brand_string: Apple M2 Max (Virtual)\n"
    never_fixable(diagnose(brand + GUEST_M4 + GUEST_JSON))


# -- the decision needs the clamp's own block, and offload --------------------------------------------------


def test_a_crash_in_an_arm64_guest_without_its_block_is_not_fixable():
    """Kills view-decision-no-clamp-needed: the host is proven (an arm64 macOS build) and the crash is a
    clamp's symptom, but without the paravirtual device's own block nothing shows which family it reports."""
    text = (ARM_BUILD + "Available devices:\n  MTL0: Apple Paravirtual device (11453 MiB, 11453 MiB free)\n"
            "ggml_metal_op_encode_impl: error: unsupported op 'RMS_NORM'\n")
    [d] = diagnose(text)
    assert d["verdict"] == "capability-downgrade" and d["proof_missing"] == ["clamp"]
    never_fixable([d])


def test_a_clamped_guests_bench_with_zero_gpu_layers_is_no_gpu_offload():
    """Kills catalog-ngl0-off: llama-bench -ngl 0 in a stock guest prints the clamped block too, but ran
    on the CPU: no capability to restore (no-gpu-offload), never a fixable downgrade."""
    rows = GUEST_JSON.replace('"n_gpu_layers": 99', '"n_gpu_layers": 0')
    assert rows != GUEST_JSON
    [d] = diagnose(GUEST_M4 + rows)
    assert d["verdict"] == "no-gpu-offload"
    never_fixable([d])


def test_arm_cpu_features_outside_a_metal_process_are_no_host_proof():
    """Kills view-host-proof-arm-features-anywhere: an app that gave up on the GPU, beside a system_info of
    Arm features with no Metal (or Accelerate) in it: an arm64 process, but not shown to be macOS (Linux
    arm64 runs on any Arm server), so the remedy is not offered; the next step asks for the host first."""
    arm_linux_info = ("system_info: n_threads = 8 (n_threads_batch = 8) / 8 | CPU : NEON = 1 | ARM_FMA = 1 | "
                      "FP16_VA = 1 | DOTPROD = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |\n")
    wrapper = (REPO / "tests" / "fixtures" / "shapes" / "wrapper-virtualised-forced-cpu.log").read_text()
    [d] = diagnose(arm_linux_info + wrapper)
    assert d["verdict"] == "no-gpu-offload"
    never_fixable([d])
    assert any("capscan probe" in s for s in d["next_steps"]), d["next_steps"]


def test_a_block_that_names_no_paravirtual_device_is_not_the_clamps_proof():
    """Kills view-clamp-any-block: the guest is shown (llama-bench's row names the paravirtual device and an
    M1 Ultra host), but the block names only 'MTL0' (2026 builds print just the id), and no device list says
    which GPU MTL0 is: the clamp must be read from the paravirtual device's own block."""
    block = GUEST_M4.replace("MTL0 (Apple Paravirtual device)", "MTL0")
    assert block != GUEST_M4
    runs = diagnose(block + GUEST_JSON)
    never_fixable(runs)


def test_a_build_line_for_another_architecture_is_no_host_proof():
    """Kills view-host-proof-any-build: only an arm64 target shows an arm64 guest; a riscv64 Linux machine's
    build line pasted beside a host-less guest's block proves nothing about the guest's host."""
    riscv = "build: 6500 (0320ac526) with cc (GCC) 14.2.0 for riscv64-unknown-linux-gnu\n"
    [d] = diagnose(riscv + GUEST_M4 + RESULT)
    assert d["proof_missing"]  # no host proof, and a Linux build beside Metal output is a veto too
    never_fixable([d])


def test_an_app_that_gave_up_beside_x86_features_is_not_offered_the_remedy_despite_an_arm64_build_line():
    """Kills engine-wrapper-remedy-despite-veto: the arm64 build line is the host's proof, but system_info's
    x86 features (an x86_64 process: two builds' lines) veto; the gave-up app is told not to force."""
    wrapper = (REPO / "tests" / "fixtures" / "shapes" / "wrapper-virtualised-forced-cpu.log").read_text()
    [d] = diagnose(ARM_BUILD + X86_SYSTEM_INFO + wrapper)
    assert not any("remedy" in s for s in d["next_steps"]), d["next_steps"]


def test_a_build_target_of_no_known_system_is_no_host_proof():
    """Kills view-host-proof-any-os and view-host-proof-any-build: only an arm64 *macOS* target shows the guest's
    host; a FreeBSD arm64 or ppc64 build line (no Linux veto applies) pasted beside a guest proves nothing."""
    for target in ("aarch64-unknown-freebsd14.1", "powerpc64-unknown-freebsd13.2"):
        build = f"build: 6500 (0320ac526) with FreeBSD clang version 18.1.6 for {target}\n"
        [d] = diagnose(build + GUEST_M4 + RESULT)
        assert d["fixable"] is False and "host" in d["proof_missing"], (target, d["proof_missing"])


# -- only the guest's own lines prove its host (issue 37) ------------------------------------------------------

NO_UMA = "".join(line for line in GUEST_M4.splitlines(keepends=True) if "unified memory" not in line)


def test_a_macs_own_brand_string_beside_a_block_without_its_unified_memory_line_is_not_fixable():
    """Kills view-bare-no-plain-apple-cpu: 'Apple M2 Max' without '(Virtual)' is a Mac's own brand string
    (a guest's always reads '(Virtual)'), so beside a paravirtual block it is a second machine, not the
    guest's host."""
    never_fixable(diagnose(NO_UMA + "machdep.cpu.brand_string: Apple M2 Max\n" + RESULT))


def test_a_compare_tables_virtual_cpu_column_is_no_host_proof():
    """Kills view-host-chip-any-provenance and runs-bench-compare-guest: a compare-llama-bench table is a
    script's summary of results gathered anywhere; its CPU column, '(Virtual)' or not, never names the
    guest's host."""
    table = ("| CPU                            | Model         | Test   |   t/s master |   t/s pr |   Speedup |\n"
             "|:-------------------------------|:--------------|:-------|-------------:|---------:|----------:|\n"
             "| Accelerate, Apple M1 (Virtual) | llama 1B Q8_0 | tg128  |        12.01 |    12.40 |      1.03 |\n")
    never_fixable(diagnose(NO_UMA + table + RESULT))


# -- a real guest's block naming its Apple-silicon host, and one line more (issue 39) ------------------------
# Two stock guests' Metal blocks from the field corpus, neither printing its unified memory line: kronk's Tart
# guest on an M4 Max (its README's "Measured in the guest" block) and llama.cpp issue 14829's llama-server
# excerpt. Each is fixable once the guest names its host (its Hardware Overview, or its CPU brand string), so the
# line added after it is the only thing that may refuse: each test first shows the run fixable without it.

FIELD = REPO / "tests" / "fixtures" / "field"
REAL_BLOCKS = {"kronk-tart": FIELD / "198-kronk-tart-guest-stock-paravirtual-apple5-2026.log",
               "llama-server-cut": FIELD / "109-llama-server-macos-vm-paravirtual-apple5-2025.log"}
HOST_LINES = {"hardware-overview": ("Hardware:\n\n    Hardware Overview:\n\n      Model Name: Apple Virtual Machine 1\n"
                                    "      Chip: Apple M4 Max (Virtual)\n"),
              "brand-string": "machdep.cpu.brand_string: Apple M4 Max (Virtual)\n"}
GUESTS = [pytest.param(block, host, id=f"{block}-{host}") for block in REAL_BLOCKS for host in HOST_LINES]


def guest_naming_its_host(block: str, host: str) -> str:
    """The guest's host line, then its real Metal block: fixable as it stands (asserted)."""
    text = HOST_LINES[host] + REAL_BLOCKS[block].read_text()
    [d] = diagnose(text)
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True, d["fixable_reason"]
    return text


@pytest.mark.parametrize("block,host", GUESTS)
def test_x86_cpu_features_in_system_info_refuse_a_guest_naming_its_apple_host(block, host):
    """Kills view-contrary-no-x86-features: an x86_64 llama.cpp (Homebrew's /usr/local one, say) runs under
    Rosetta in the guest, and the excerpt starts after its build line: only system_info's x86 features show
    the x86_64 process, which is never fixable."""
    rosetta = ("system_info: n_threads = 8 (n_threads_batch = 8) / 8 | Metal : EMBED_LIBRARY = 1 | CPU : SSE3 = 1 | "
               "SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | ACCELERATE = 1 | REPACK = 1 |\n")
    [d] = diagnose(guest_naming_its_host(block, host) + rosetta)
    never_fixable([d])
    assert "x86 CPU features" in d["fixable_reason"], d["fixable_reason"]


# llama.cpp's server of 2023-24 logs system_info in its own forms (issue 8775's text log, ollama issue 719's JSON
# runner), here an x86_64 build's: AVX, FMA, F16C, SSE3 on, NEON off
SERVER_X86_SYSTEM_INFO = {
    "text-log": ('INFO [                    main] system info | tid="0x105428580" timestamp=1722350460 n_threads=4 '
                 'n_threads_batch=-1 total_threads=8 system_info="AVX = 1 | AVX_VNNI = 0 | AVX2 = 1 | AVX512 = 0 | '
                 'AVX512_VBMI = 0 | AVX512_VNNI = 0 | AVX512_BF16 = 0 | FMA = 1 | NEON = 0 | SVE = 0 | ARM_FMA = 0 | '
                 'F16C = 1 | FP16_VA = 0 | WASM_SIMD = 0 | BLAS = 1 | SSE3 = 1 | SSSE3 = 1 | VSX = 0 | '
                 'MATMUL_INT8 = 0 | LLAMAFILE = 1 | "\n'),
    "json-log": ('{"timestamp":1696624423,"level":"INFO","function":"main","line":1196,"message":"system info",'
                 '"n_threads":8,"total_threads":10,"system_info":"AVX = 1 | AVX2 = 1 | AVX512 = 0 | AVX512_VBMI = 0 | '
                 'AVX512_VNNI = 0 | FMA = 1 | NEON = 0 | ARM_FMA = 0 | F16C = 1 | FP16_VA = 0 | WASM_SIMD = 0 | '
                 'BLAS = 1 | SSE3 = 1 | VSX = 0 | "}\n'),
}


@pytest.mark.parametrize("form", SERVER_X86_SYSTEM_INFO)
def test_x86_cpu_features_in_a_servers_system_info_log_line_refuse_a_guest_naming_its_apple_host(form):
    """Found while killing view-contrary-no-x86-features: the same x86_64 process under Rosetta, as a 2023-24
    llama-server (or ollama runner) logs it, was called fixable: its 'system info' log line was not read."""
    [d] = diagnose(guest_naming_its_host("kronk-tart", "hardware-overview") + SERVER_X86_SYSTEM_INFO[form])
    never_fixable([d])


@pytest.mark.parametrize("block,host", GUESTS)
def test_a_paravirtual_device_listed_without_unified_memory_refuses_a_guest_naming_its_apple_host(block, host):
    """Kills view-contrary-no-unified-memory and view-contrary-no-unified-memory-obs: a paravirtual device
    without unified memory is an Intel-hosted guest's (field 003: a GitHub Intel runner's hasUnifiedMemory =
    false), so MoltenVK's list saying uma: 0 after the block is another machine's lines, or the host chip is not
    the GPU's. The list comes after the block, so it does not set the device's unified memory (no intel_host)
    and, the block printing no unified memory line, no two values contradict: only the contrary sign refuses."""
    vulkan = ("ggml_vulkan: Found 1 Vulkan devices:\n"
              "ggml_vulkan: 0 = Apple Paravirtual device (MoltenVK) | uma: 0 | fp16: 1 | bf16: 0 | warp size: 32 | "
              "shared memory: 32768 | int dot: 0 | matrix cores: none\n")
    [d] = diagnose(guest_naming_its_host(block, host) + vulkan)
    never_fixable([d])
    assert "no unified memory" in d["fixable_reason"], d["fixable_reason"]


@pytest.mark.parametrize("chip", ["Apple M6 Max", "Apple A20 Pro"])
@pytest.mark.parametrize("block,host", GUESTS)
def test_a_host_chip_capscan_cannot_place_is_no_host_proof(block, host, chip):
    """Kills view-host-proof-intel-chip: only a chip whose true family capscan knows proves the host. A chip
    newer than its table (an M6, a MacBook Neo's A20), a misspelt or a made-up brand string is named but not
    placed: the remedy caps --family at the host's real family, and without one it would fall back to Apple7,
    "the lowest of any Apple-silicon host", which capscan cannot say of a chip it does not know. The run stays a
    downgrade whose host is still to be shown."""
    text = guest_naming_its_host(block, host).replace("Apple M4 Max", chip)
    [d] = diagnose(text)
    assert d["verdict"] == "capability-downgrade" and d["proof_missing"] == ["host"], d["proof_missing"]
    never_fixable([d])


def test_an_x86_64_probe_then_an_arm64_build_line_is_two_processes_not_a_proof():
    """Kills runs-system-no-isa-obs: capscan-probe's JSON (the paravirtual device answering supportsFamily(Apple7)
    = false, the clamp) says arch x86_64, a Rosetta or Intel-hosted guest's probe, and the arm64 build line after
    it lands in the same run: one process cannot be both, so only the build line's instruction set, contradicting
    the probe's, refuses what its arm64 target would otherwise prove (an arm64 probe is fixable, asserted)."""
    probe = ('{"probe":"capscan-probe","version":1,"device":"Apple Paravirtual device","supports_family":{"1005":true,'
             '"1007":false},"max_threadgroup_memory":32768,"recommended_max_working_set_size":11453251584,'
             '"has_unified_memory":true,"arch":"ARCH","hv_vmm_present":true}\n')
    [d] = diagnose(probe.replace("ARCH", "arm64") + ARM_BUILD)
    assert d["fixable"] is True, d["fixable_reason"]
    [d] = diagnose(probe.replace("ARCH", "x86_64") + ARM_BUILD)
    never_fixable([d])
    assert "instruction set" in d["fixable_reason"], d["fixable_reason"]
