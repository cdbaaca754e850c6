"""No GPU offload: the advice matches the platform the log shows (issue 25 item 4), never a Mac assumed
on a Linux or Windows log. Real logs through the real pipeline (ingest into SQLite, diagnose)."""

from __future__ import annotations

import pytest

from tests.ingest_util import diagnosed


@pytest.mark.parametrize("fixture, says, never", [
    # Linux x86_64 builds (build: ... for x86_64-linux-gnu): the CUDA/ROCm/Vulkan way
    ("rules/cpu-buffers-only-2025-server.log", "-DGGML_CUDA=ON", "arm64"),
    ("field/080-ggml-ci-x86-cpu-no-usable-gpu-pythia-q4-0-2025.log", "-DGGML_VULKAN=ON", "Metal"),
    # Windows (build target x64, C:\\ paths)
    ("field/052-llama-cli-windows-not-compiled-gpu-offload-2024.log", "-DGGML_CUDA=ON", "arm64"),
    # an x86_64 Mac build: Rosetta or an Intel Mac, both said
    ("metal/no-metal-rosetta-x86.log", "Rosetta", "CUDA"),
    # a device_info block naming an AMD EPYC CPU, which no Mac has (issue 38)
    ("rules/device-info-cpu-only-2026.log", "-DGGML_CUDA=ON", "Metal"),
    # nothing says where it ran: both ways, no assumption
    ("rules/list-devices-none-bare-2026.log", "Metal on a Mac; CUDA, ROCm or Vulkan on Linux", "arm64 build"),
])
def test_no_offload_advice_matches_the_platform(tmp_path, fixture, says, never):
    runs = diagnosed(tmp_path, fixture)
    run = next(r for r in runs if r.diagnosis.verdict == "no-gpu-offload")
    advice = " ".join(run.diagnosis.next_steps)
    assert says in advice and never not in advice, advice


@pytest.mark.parametrize("fixture, says, never", [
    # the GPU found (a Metal build on an M3 Pro host, a CUDA H800) and 0 layers on it: ask for the layers
    ("bench/anka-m3pro-host-cpu.json", "The GPU (Apple M3 Pro) was found, but no layer was put on it: ask for the "
                                       "layers, `-ngl 99`", "Make the GPU visible"),
    ("field/187-main-h800-cuda-found-zero-of-33-offloaded-2024.log", "The GPU (NVIDIA H800) was found", "visible"),
    ("field/218-llava-cublas-2x3090-offloaded-0-of-35-2023.log", "n_gpu_layers=-1 with llama-cpp-python", "visible"),
    # a device list's "CPU" (or ollama's id=cpu) is not a GPU found: the platform's advice, not "-ngl 99"
    ("backends/cpu-only-system-info-2024-10.log", "Make the GPU visible", "The GPU (CPU) was found"),
    ("field/234-ollama-intel-mbp-5300m-inference-compute-cpu-2025.log", "Make the GPU visible", "ollama found"),
    # llama-bench -dev none left the GPU out
    ("field/159-llama-bench-windows-cuda-present-dev-none-2026.log", "drop -dev none", "visible"),
    # a CPU-only build: -ngl changes nothing until the build has a backend; no GPU, nothing to fix
    ("field/330-llama-bench-cpu-md-ngl-0-99-2026.log", "A CPU-only build: where the machine has a GPU", "visible"),
    ("field/213-llama-bench-cix-cp8180-framework13-cpu-table-2026.log", "this is the right build", "visible"),
    # a Metal library that did not load (whisper.cpp on an M4): a packaging fix, not -ngl
    ("field/258-whisper-cli-m4-metal-library-compile-error-blas-fallback-2025.log", "GGML_METAL_EMBED_LIBRARY=ON",
     "-ngl"),
    # whisper.cpp: -ng / --no-gpu, never llama.cpp's -ngl
    ("rules/gpu-disabled-whisper-no-gpu.log", "whisper.cpp ran with its GPU turned off: drop -ng / --no-gpu", "-ngl 99"),
    ("field/111-subtitleedit-whisper-cpp-m4-no-gpu-found-2026.log", "whisper.cpp used no GPU", "-ngl 99"),
    ("field/058-whisper-cli-intel-mbp-no-gpu-flag-2023.log", "do not pass -ng / --no-gpu", "-ngl 99"),
])
def test_no_offload_advice_fits_the_cause(tmp_path, fixture, says, never):
    runs = diagnosed(tmp_path, fixture)
    run = next(r for r in runs if r.diagnosis.verdict == "no-gpu-offload")
    advice = " ".join(run.diagnosis.next_steps)
    assert says in advice and never not in advice, advice
