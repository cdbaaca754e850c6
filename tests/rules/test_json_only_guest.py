"""Issue 38 item 6: a paravirtual guest whose log is llama-bench's JSON alone (stdout only: gpu_info 'Apple
Paravirtual device', cpu_info 'Apple M1 (Virtual)', no capability lines). A stock guest runs its matrix work
on the guest's CPUs, whose speed depends on the configuration (fa, KV types, threads), so the speed band of a
clamped guest is the band measured on stock guests across configurations; a speed a stock guest's CPUs can
reach is never read healthy, and nothing is fixable from the JSON alone.

The three GitHub-runner logs are real (joeyvictorino/edge-inference-bench at 120c52aa, results/
gha-runner-apple-m1-virtual-7gb-macos15.7.9/.../sweep/: the same runner's stderr, field log 100, prints
MTLGPUFamilyApple5 and simdgroup reduction false); the TinyLlama one is written from the issue's description
(TinyLlama on the same runner: at twice the 1.5B run's weight rate, and at three times that)."""

from __future__ import annotations

import pytest

from tests.ingest_util import diagnosed

STOCK_RUNNER = [
    "rules/bench-json-gh-runner-m1-stock-1.5b-t3-fa1-q8-2026.json",  # tg128 4.79: 7.8% of the M1's ceiling
    "rules/bench-json-gh-runner-m1-stock-1.5b-t3-fa0-f16-2026.json",  # tg128 4.44: 7.2%
    "rules/bench-json-gh-runner-m1-stock-3b-t2-fa1-f16-2026.json",  # tg128 3.10: 9.5%
]


def _one(tmp_path, name):
    runs = diagnosed(tmp_path, name)
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize("name", STOCK_RUNNER)
def test_a_stock_runners_json_is_a_downgrade_read_from_its_speed(tmp_path, name):
    d = _one(tmp_path, name).diagnosis.stored()
    assert d["verdict"] == "capability-downgrade", d["summary"]
    assert d["basis"] == "speed" and d["confidence"] == "low"
    assert d["fixable"] is False and "clamp" in d["proof_missing"]
    # the report says which log gives the proof
    words = " ".join([d["summary"], *d["next_steps"]])
    assert "-lv 4" in words and "Metal block" in words, words


def test_a_speed_a_stock_guests_cpus_reach_is_not_read_healthy(tmp_path):
    """16.9 tok/s of a 0.67 GB model is 16.5% of an M1's bandwidth ceiling (read healthy before), but only
    11.3 GB/s of weights: the guest's CPUs stream that much (the runner's 3B model at fa1/q8_0: 16.3%)."""
    d = _one(tmp_path, "rules/bench-json-gh-runner-m1-stock-tinyllama-fast-cpu-2026.json").diagnosis.stored()
    assert d["verdict"] == "capability-downgrade" and d["basis"] == "speed", d["summary"]
    assert d["fixable"] is False


def test_a_speed_both_kinds_of_guest_reach_decides_nothing(tmp_path):
    """50.2 tok/s (49% of the ceiling, 33.5 GB/s of weights): a share no stock guest measured reaches, but a
    weight rate below twice the fastest stock guest's, which the configuration allows: unknown, and the log
    that decides is named."""
    d = _one(tmp_path, "rules/bench-json-gh-runner-m1-tinyllama-undecided-2026.json").diagnosis.stored()
    assert d["verdict"] == "unknown" and d["fixable"] is False, d["summary"]
    assert "stock guest" in d["summary"] and "-lv 4" in d["summary"], d["summary"]


@pytest.mark.parametrize("name, verdict", [
    ("field/015-cua-tinyllama-broad-shim-guest-bench-json.log", "healthy"),  # shim: 16.8%, 138 GB/s of weights
    ("field/017-cua-tinyllama-safe-shim-guest-bench-json.log", "healthy"),
    ("field/026-cua-gemma4-safe-shim-guest-bench-json.log", "healthy"),
    ("field/011-cua-tinyllama-stock-guest-bench-json.log", "capability-downgrade"),
    ("field/023-cua-gemma4-stock-guest-bench-json.log", "capability-downgrade"),
])
def test_the_measured_guests_keep_their_reading(tmp_path, name, verdict):
    d = _one(tmp_path, name).diagnosis.stored()
    assert d["verdict"] == verdict and d["fixable"] is False
