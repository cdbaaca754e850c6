"""Issue 22, "read every class": the 2026 device_info block, node-llama-cpp's CPU fallback and
text-generation-webui's per-reply speed line, through the real pipeline."""

from __future__ import annotations

import pytest

from tests.ingest_util import diagnosed


def _one(tmp_path, name):
    runs = diagnosed(tmp_path, name)
    assert len(runs) == 1, [r.diagnosis.verdict for r in runs]
    return runs[0]


@pytest.mark.parametrize("name,backend,devices", [
    ("field/117-llama-app-serve-vulkan-rtx5060-device-info-2026.log", "vulkan", ["NVIDIA GeForce RTX 5060"]),
    ("rules/device-info-vulkan-radeon-2026.log", "vulkan", ["AMD Radeon RX 7800 XT"]),
    ("rules/device-info-cuda-two-gpus-2026.log", "cuda", ["NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090"]),
    # listed by ggml_cuda_init first: the device_info entry is the same device, not a second one
    ("rules/device-info-after-cuda-init-2026.log", "cuda", ["NVIDIA GeForce RTX 5060 Laptop GPU"]),
])
def test_device_info_names_the_runs_gpus(tmp_path, name, backend, devices):
    run = _one(tmp_path, name)
    listed = run.facts.vulkan_devices if backend == "vulkan" else run.facts.cuda_devices
    assert [d["name"] for d in listed] == devices
    assert run.facts.device.name == devices[0]
    rules = {f["rule"] for f in run.diagnosis.stored()["findings"]}
    assert "cpu-only-build" not in rules and run.diagnosis.verdict == "healthy"
    assert run.diagnosis.fixable is False


def test_device_info_keeps_the_vulkan_driver_apart(tmp_path):
    run = _one(tmp_path, "rules/device-info-vulkan-radeon-2026.log")
    assert run.facts.vulkan_devices[0].get("driver") == "RADV NAVI32"


def test_a_device_info_block_of_the_cpu_alone_is_a_device_list_with_no_gpu(tmp_path):
    run = _one(tmp_path, "rules/device-info-cpu-only-2026.log")
    assert not run.facts.vulkan_devices and not run.facts.cuda_devices and run.facts.device.name is None
    assert run.diagnosis.verdict == "no-gpu-offload"
    assert "no-gpu-device" in {f["rule"] for f in run.diagnosis.stored()["findings"]}


@pytest.mark.parametrize("name", [
    "field/124-aicoworker-node-llama-cpp-m4-falls-back-to-cpu-2026.log",
    "shapes/node-llama-cpp-gpu-layers-0.log",
    "shapes/node-llama-cpp-gpu-layers-0-only.log",
    "shapes/node-llama-cpp-prebuilt-no-gpu-2025.log",
])
def test_node_llama_cpp_on_the_cpu_is_no_gpu_offload(tmp_path, name):
    run = _one(tmp_path, name)
    assert run.facts.n_gpu_layers == 0
    assert run.diagnosis.verdict == "no-gpu-offload" and run.diagnosis.fixable is False
    zero = [f for f in run.diagnosis.stored()["findings"] if f["rule"] == "zero-layers-offloaded"]
    assert zero and "llama-bench" not in zero[0]["message"]  # the app's line, not a llama-bench row


def test_ollama_style_fallback_wording_is_not_read_as_cpu(tmp_path):
    # only node-llama-cpp's wordings: a runtime falling back for one library may still load another
    path = tmp_path / "ollama.log"
    path.write_text('time=2025-01-01T00:00:00Z level=WARN msg="unable to load cuda library, falling back to CPU"\n')
    from analyzer.parsers import Dispatcher
    events = Dispatcher().feed(1, path.read_bytes().splitlines()[0])
    assert not [e for e in events if e.kind == "wrapper.gpu_layers"]


@pytest.mark.parametrize("name,tok_s", [
    ("field/166-webui-llama-cpp-python-3070ti-offload-timings-2023.log", 0.39),
    ("rules/webui-output-generated-2023.log", 9.17),
    ("rules/webui-output-generated-early-2023.log", 13.90),
    ("rules/webui-output-generated-context-2023.log", 15.34),
])
def test_webui_output_generated_is_a_generation_rate(tmp_path, name, tok_s):
    run = _one(tmp_path, name)
    gen = [t for t in run.throughput if t["test"] == "generation"]
    assert [t["tok_s"] for t in gen] == [pytest.approx(tok_s)]
    assert not [t for t in run.throughput if t["test"] == "prompt"]  # its seconds hold the prompt: no prompt rate
    assert run.diagnosis.fixable is False


@pytest.mark.parametrize("name,prompt,generation,total", [
    ("field/202-koboldcpp-ctxlimit-process-generate-ts-line-2024.log", 2.26, 333.33, 2.25),
    ("rules/koboldcpp-ctxlimit-2025.log", 697.13, 22.54, 19.18),
    ("field/209-koboldcpp-1-97-1-vulkan-7900xtx-benchmark-keys-2025.log", 625.75, 19.89, None),
    ("field/247-koboldcpp-benchmark-csv-3x-p40-cublas-70b-2024.log", 101.50, 6.27, None),
])
def test_koboldcpp_speed_lines_are_its_prompt_and_generation_rates(tmp_path, name, prompt, generation, total):
    """Its per-reply CtxLimit line, its --benchmark summary, and the benchmark's CSV row; the CtxLimit line's
    Total rate (both phases) is printed, so kept, as a test of its own, never as generation."""
    run = _one(tmp_path, name)
    got = {t["test"]: t["tok_s"] for t in run.throughput}
    want = {"prompt": pytest.approx(prompt), "generation": pytest.approx(generation)}
    assert got == (want if total is None else {**want, "total": pytest.approx(total)})
    assert run.diagnosis.fixable is False


def test_a_koboldcpp_benchmark_prints_each_rate_twice_and_they_are_one_figure(tmp_path):
    """The benchmark's CtxLimit line and its summary agree: one prompt and one generation figure."""
    run = _one(tmp_path, "rules/koboldcpp-benchmark-2024.log")
    got = sorted((t["test"], t["tok_s"]) for t in run.throughput if t["test"] != "total")
    assert got in ([("generation", 22.17), ("prompt", 652.58)],
                   [("generation", 22.17), ("generation", 22.17), ("prompt", 652.58), ("prompt", 652.58)])


def test_a_koboldcpp_log_without_device_lines_gets_koboldcpps_advice(tmp_path):
    run = _one(tmp_path, "rules/koboldcpp-ctxlimit-2025.log")
    assert run.facts.program == "koboldcpp"
    steps = " ".join(run.diagnosis.next_steps)
    assert "koboldcpp prints llama.cpp's device lines in its console" in steps and "-lv 4" not in steps
