"""Issue 22.4: a guest's speed against its host chip's bandwidth ceiling stands in for the capability block
only where it can: a paravirtual guest of llama.cpp, every layer on the GPU, a model large enough to be
bandwidth-bound, no stored bare-metal run, no capability block. Each guard is one variant of the real
llama-bench JSON of a Lume guest on an M1 Ultra (bench/guest-shim.json, bench/guest-stock.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ingest_util import FIXTURES, diagnosed


def _variant(tmp_path: Path, base: str, **changes) -> str:
    rows = json.loads((FIXTURES / base).read_text())
    for row in rows:
        row.update(changes)
    out = tmp_path / "in" / f"variant-{len(list(tmp_path.glob('in/*')))}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    return str(out)


def _diag(tmp_path: Path, *files: str) -> dict:
    run = diagnosed(tmp_path, *files)[-1]
    return run.diagnosis.stored()


def _rules(diag: dict) -> set[str]:
    return {f["rule"] for f in diag["findings"]}


def test_the_stock_guest_alone_is_a_low_confidence_downgrade_never_fixable(tmp_path):
    d = _diag(tmp_path, "bench/guest-stock.json")
    assert (d["verdict"], d["confidence"], d["fixable"]) == ("capability-downgrade", "low", False)
    assert "clamp" in d["proof_missing"]
    assert any("2>&1" in s for s in d["next_steps"])  # ask for the capability block, not a remedy
    assert not any("remedy run" in s for s in d["next_steps"])


def test_the_shimmed_guest_alone_is_healthy_at_low_confidence(tmp_path):
    d = _diag(tmp_path, "bench/guest-shim.json")
    assert (d["verdict"], d["confidence"]) == ("healthy", "low")
    assert "speed-of-full-kernels" in _rules(d)


@pytest.mark.parametrize("base", ["bench/guest-stock.json", "bench/guest-shim.json"])
def test_some_layers_on_the_cpu_say_nothing_of_the_kernels(tmp_path, base):
    d = _diag(tmp_path, _variant(tmp_path, base, n_gpu_layers=12))
    assert not _rules(d) & {"speed-of-fallback-kernels", "speed-of-full-kernels"}


@pytest.mark.parametrize("base", ["bench/guest-stock.json", "bench/guest-shim.json"])
def test_a_model_too_small_to_be_bandwidth_bound_is_not_judged(tmp_path, base):
    d = _diag(tmp_path, _variant(tmp_path, base, model_size=400 * 2**20))
    assert not _rules(d) & {"speed-of-fallback-kernels", "speed-of-full-kernels"}


def test_a_mixture_of_experts_model_is_never_called_healthy_by_its_speed(tmp_path):
    # its ceiling counts every expert, so its share is inflated: a clamped MoE guest could pass 15%
    d = _diag(tmp_path, _variant(tmp_path, "bench/guest-shim.json", model_type="qwen3moe 30B.A3B Q4_K - Medium"))
    assert "speed-of-full-kernels" not in _rules(d)
    assert d["verdict"] == "unknown"


def test_a_mixture_of_experts_model_can_still_be_slow_as_clamped(tmp_path):
    d = _diag(tmp_path, _variant(tmp_path, "bench/guest-stock.json", model_type="qwen3moe 30B.A3B Q4_K - Medium"))
    assert d["verdict"] == "capability-downgrade"


def test_an_intel_host_guest_is_a_hardware_limit_whatever_its_speed(tmp_path):
    d = _diag(tmp_path, _variant(tmp_path, "bench/guest-stock.json",
                                 cpu_info="Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz (Virtual)"))
    assert d["verdict"] != "capability-downgrade" or not d["fixable"]
    assert "speed-of-fallback-kernels" not in _rules(d)  # no Apple chip, no bandwidth ceiling


def test_a_stored_host_run_outranks_the_ceiling(tmp_path):
    d = _diag(tmp_path, "bench/host-m1-ultra.json", "bench/guest-shim.json")
    assert not _rules(d) & {"speed-of-fallback-kernels", "speed-of-full-kernels"}


def test_bare_metal_has_no_ceiling_verdict(tmp_path):
    d = _diag(tmp_path, "bench/host-m1-ultra.json")
    assert not _rules(d) & {"speed-of-fallback-kernels", "speed-of-full-kernels"}
    assert d["verdict"] == "healthy"
