"""Issue 38, items 4 and the words findings: "CPU-only" only on positive evidence, and words that fit the
platform and the program. Real pipeline (ingest into a real SQLite file, diagnose), realistic logs.

`system_info` lists only the CPU, CUDA (HIP, MUSA), Metal and zDNN backends' features: a default-verbosity
log of a Vulkan, SYCL, OpenCL, CANN or WebGPU build that offloaded everything prints the same line as a
CPU-only build, so that line alone decides nothing."""

from __future__ import annotations

import pytest

from analyzer.output.headline import headline
from tests.ingest_util import diagnosed


def _one(tmp_path, name):
    runs = diagnosed(tmp_path, name)
    assert len(runs) == 1, [r.diagnosis.verdict for r in runs]
    return runs[0]


def _rules(run) -> set[str]:
    return {f["rule"] for f in run.diagnosis.stored()["findings"]}


# system_info with CPU features only, and nothing else about the devices
CPU_FEATURES_ONLY = [
    "rules/cpu-features-only-vulkan-llama-cli-2026.log",  # 2026 llama-cli at its default verbosity (Linux)
    "rules/cpu-features-only-sycl-server-cut-2025.log",  # a server log pasted from system_info on
    "rules/cpu-features-only-opencl-adreno-2025.log",  # Android (arm64 NEON features), OpenCL build
    "rules/cpu-only-build-2025.log",  # weights in CPU_Mapped, but no KV cache line: the load may be cut
]


@pytest.mark.parametrize("name", CPU_FEATURES_ONLY)
def test_cpu_features_alone_are_not_cpu_only(tmp_path, name):
    run = _one(tmp_path, name)
    d = run.diagnosis.stored()
    assert d["verdict"] == "unknown", d["summary"]
    assert "cpu-only-build" not in _rules(run)
    assert "Vulkan" in d["summary"] and "system_info" in d["summary"], d["summary"]
    advice = " ".join(d["next_steps"])
    assert "-lv 4" in advice or "--verbose" in advice, advice
    assert "--list-devices" in advice, advice


@pytest.mark.parametrize("name, rule", [
    ("rules/device-info-cpu-only-2026.log", "no-gpu-device"),  # a device list that names only the CPU
    ("rules/cpu-buffers-only-2025-server.log", "gpu-disabled"),  # weights and KV cache in CPU buffers
    ("field/080-ggml-ci-x86-cpu-no-usable-gpu-pythia-q4-0-2025.log", "gpu-disabled"),  # no usable GPU found
    ("field/052-llama-cli-windows-not-compiled-gpu-offload-2024.log", "gpu-disabled"),  # not compiled with ...
    ("rules/cpu-only-build-bench-cpu-avx2-2024.md", "cpu-only-build"),  # llama-bench's backend column: CPU
    ("backends/cpu-only-system-info-2024-10.log", "zero-layers-offloaded"),  # offloaded 0/N layers
])
def test_positive_evidence_is_still_no_gpu_offload(tmp_path, name, rule):
    run = _one(tmp_path, name)
    assert run.diagnosis.verdict == "no-gpu-offload", run.diagnosis.summary
    assert rule in _rules(run)


LISTINGS = [
    "rules/list-devices-none-linux-2026.log",  # Linux: libggml-cpu-*.so loaded, then an empty list
    "rules/list-devices-none-windows-2025.log",  # Windows: ggml-cpu-*.dll
    "rules/list-devices-none-bare-2026.log",  # nothing says the platform
]


@pytest.mark.parametrize("name", LISTINGS)
def test_an_empty_device_listing_is_a_listing_not_a_run_on_the_cpu(tmp_path, name):
    run = _one(tmp_path, name)
    d = run.diagnosis.stored()
    assert d["verdict"] == "no-gpu-offload"
    assert "no-metal-device" not in _rules(run) and "no-gpu-device" in _rules(run)
    words = " ".join([d["summary"], headline(run.facts.program, run.diagnosis, run.throughput)])
    assert "ran on the CPU" not in words and "Everything ran" not in words, words
    assert "list" in d["summary"], d["summary"]
    assert "Metal" not in d["summary"], d["summary"]


@pytest.mark.parametrize("name", [
    "rules/list-devices-none-linux-2026.log",
    "rules/list-devices-none-windows-2025.log",
    "rules/cpu-features-only-vulkan-llama-cli-2026.log",
    "rules/device-info-cuda-two-gpus-2026.log",
    "backends/cuda-failed-init-vm.log",
    # nothing says which system: nothing says Mac either, so no Metal words in the environment note
    "rules/cpu-features-only-sycl-server-cut-2025.log",
    "rules/list-devices-none-bare-2026.log",
])
def test_no_metal_words_on_a_linux_or_windows_log(tmp_path, name):
    run = _one(tmp_path, name)
    d = run.diagnosis.stored()
    assert "no-metal-device" not in _rules(run)
    shown = [d["summary"], *(d.get("report_lines") or {}).values()]
    if run.facts.listed_devices is None or "bare" not in name:  # (an unknown system's advice names both)
        shown += d["next_steps"]
    assert not any("Metal" in s for s in shown), shown


def test_the_rosetta_listing_keeps_its_mac_words(tmp_path):
    """An x86_64 macOS build's empty list (Rosetta on an M4): there Metal is the missing device."""
    run = _one(tmp_path, "metal/no-metal-rosetta-x86.log")
    assert run.diagnosis.verdict == "no-gpu-offload" and "no-metal-device" in _rules(run)


def test_a_mac_log_without_environment_still_says_what_decides_it(tmp_path):
    run = _one(tmp_path, "metal/m0-2023-06-mps.log")
    env = (run.diagnosis.report_lines or {}).get("environment") or ""
    assert "Metal start-up block" in env, env


@pytest.mark.parametrize("name", [
    "rules/version-vulkan-windows-2026.log",  # `llama-cli --version`: ggml_vulkan lists the GPU, nothing runs
    "rules/vulkan-bench-abort-before-rows-2026.log",  # llama-bench aborts before its first row
])
def test_a_device_list_alone_is_no_healthy_run(tmp_path, name):
    run = _one(tmp_path, name)
    assert run.diagnosis.verdict == "unknown", run.diagnosis.summary


def test_a_metal_failure_that_stopped_everything_is_not_a_run_on_the_cpu(tmp_path):
    """llama.cpp's context fails with its Metal backend: nothing ran, on the GPU or the CPU."""
    run = _one(tmp_path, "rules/metal-context-failed-nothing-ran-2025.log")
    d = run.diagnosis.stored()
    assert d["verdict"] == "unknown" and "metal-failed-nothing-ran" in _rules(run), d["summary"]
    assert "GGML_METAL_EMBED_LIBRARY" in " ".join(d["next_steps"])


def test_a_metal_failure_whisper_ran_past_is_still_no_offload(tmp_path):
    """whisper.cpp falls back to the CPU after the same failure and runs on (field log 258)."""
    run = _one(tmp_path, "field/258-whisper-cli-m4-metal-library-compile-error-blas-fallback-2025.log")
    assert run.diagnosis.verdict == "no-gpu-offload" and "metal-library-failed" in _rules(run)


@pytest.mark.parametrize("name, verdict", [
    ("rules/opencl-adreno-bench-table-2026.md", "healthy"),  # OpenCL rows at ngl 99 (Android, Adreno)
    ("rules/device-info-ryzen-no-usable-gpu-2026.log", "no-gpu-offload"),  # an AMD Ryzen CPU: not a Mac
])
def test_backends_and_cpus_no_mac_has_get_no_metal_words(tmp_path, name, verdict):
    run = _one(tmp_path, name)
    d = run.diagnosis.stored()
    assert d["verdict"] == verdict, d["summary"]
    shown = [d["summary"], *d["next_steps"], *(d.get("report_lines") or {}).values()]
    assert not any("Metal" in s for s in shown), shown


def test_a_cpu_only_builds_rows_are_read_by_the_build_not_their_ngl(tmp_path):
    """A CPU-only llama-bench at -ngl 0,99 (backend CPU): every row ran on the CPU, the ngl 99 ones too."""
    run = _one(tmp_path, "rules/bench-cpu-build-ngl-0-99-2026.json")
    d = run.diagnosis.stored()
    assert d["verdict"] == "no-gpu-offload"
    assert d["findings"][0]["rule"] == "cpu-only-build", d["summary"]
