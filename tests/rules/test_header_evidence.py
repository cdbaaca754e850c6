"""Issue 38 item 5: the environment and the offload read from lines outside the GPU's own: a Go benchmark's
`cpu:` header (the brand string: `Apple M1 (Virtual)` in a guest), system_profiler's model identifier
(`VirtualMac2,1`), `ollama ps`'s PROCESSOR column, an app's `No GPU detected`. Written from the forms the
issue names; the real `ollama ps` of a SYCL box is field log 289's shape."""

from __future__ import annotations

import pytest

from tests.ingest_util import diagnosed


def _one(tmp_path, name):
    runs = diagnosed(tmp_path, name)
    assert len(runs) == 1, [r.diagnosis.summary for r in runs]
    return runs[0]


@pytest.mark.parametrize("name", ["rules/ollama-ps-100-cpu-2025.log", "rules/ollama-ps-100-cpu-sycl-2025.log"])
def test_ollama_ps_100_percent_cpu_is_no_offload(tmp_path, name):
    run = _one(tmp_path, name)
    assert run.facts.program == "ollama"
    assert run.diagnosis.verdict == "no-gpu-offload", run.diagnosis.summary
    assert "ollama ps" in run.diagnosis.summary


def test_ollama_ps_100_percent_gpu_names_no_device_and_decides_nothing(tmp_path):
    run = _one(tmp_path, "rules/ollama-ps-100-gpu-2025.log")
    assert run.diagnosis.verdict == "unknown" and run.facts.n_gpu_layers is None


def test_a_go_benchmarks_cpu_line_names_the_host_chip(tmp_path):
    """Go's `cpu:` line is the brand string sysctl gives; in the guest it names the host and says (Virtual)."""
    run = _one(tmp_path, "rules/go-bench-cpu-apple-m1-virtual-2025.log")
    d = run.diagnosis.stored()
    assert d["environment"] == "vm" and d["host_chip"] == "Apple M1"
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True
    assert any("brand string" in p["sign"] for p in d["proof"])


def test_a_go_benchmarks_plain_apple_cpu_is_bare_metal(tmp_path):
    d = _one(tmp_path, "rules/go-bench-cpu-apple-m2-pro-2025.log").diagnosis.stored()
    assert d["environment"] == "bare-metal" and d["verdict"] == "healthy"


def test_a_virtual_model_identifier_is_a_guest(tmp_path):
    """system_profiler's `Model Identifier: VirtualMac2,1` alone, over a Metal table: a VM, never fixable."""
    d = _one(tmp_path, "rules/system-profiler-virtualmac-id-only-2026.log").diagnosis.stored()
    assert d["environment"] == "vm", d["findings"]
    assert d["fixable"] is False
