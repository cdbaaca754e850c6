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
    # an Apple-silicon host running llama-bench on the CPU: Metal
    ("bench/anka-m3pro-host-cpu.json", "arm64 build with Metal", "CUDA"),
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
