"""An imported fixable claim against the run's own facts (analyzer.ingest.exports.claim_refusal):
each fact that contradicts the clamp capscan fixes refuses the claim, one at a time (issue 37)."""

from __future__ import annotations

import pytest

from analyzer.ingest.exports import ExportedRun, claim_refusal, claimed

GENUINE = {
    "first_line": 1, "last_line": 62, "program": "llama-bench", "backend": "metal",
    "device": {"name": "Apple Paravirtual device", "apple_family": 1005, "families": [1005, 3003],
               "unified_memory": True},
    "host_chip": "Apple M1 Ultra", "environment": "vm", "verdict": "capability-downgrade", "fixable": True,
    "fixable_reason": "the guest names its host chip, Apple M1 Ultra (the guest's cpu_info)",
    "proof": [{"sign": "Apple5", "line": 6, "text": "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)"},
              {"sign": "host", "line": 18, "text": "cpu_info 'Accelerate, Apple M1 Ultra (Virtual)'"}],
}


def _run(**over) -> ExportedRun:
    return ExportedRun.model_validate({**GENUINE, **over})


def test_a_genuine_claim_is_accepted():
    assert claim_refusal(_run()) is None


@pytest.mark.parametrize("over,why", [
    ({"device": {"name": "AMD Radeon Pro 5500M", "apple_family": 1005, "families": [1005]}}, "not the paravirtual"),
    ({"device": {"name": None, "apple_family": 1005}}, "names no GPU"),
    ({"device": {"name": "Apple M2 Max", "apple_family": 1005}}, "not the paravirtual"),
    ({"device": {"name": "Apple Paravirtual device", "families": [3003]}}, "Metal3 without an Apple family"),
    ({"device": {"name": "Apple Paravirtual device", "apple_family": 1009, "families": [1009]}}, "Apple7 or above"),
    ({"device": {"name": "Apple Paravirtual device", "apple_family": 1005, "unified_memory": False}},
     "no unified memory"),
    ({"host_chip": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"}, "Intel"),
    ({"host_chip": "Intel Xeon W"}, "Intel"),
    ({"backend": "metal (x86_64)"}, "x86_64"),
    ({"proof": [{"sign": "s", "line": 3, "text": "built for x86_64-apple-darwin23"},
                *GENUINE["proof"]]}, "x86_64"),
    ({"environment": "bare-metal"}, "not a VM guest"),
    ({"environment": None}, "not a VM guest"),
    ({"proof": [{"sign": "host", "line": 18, "text": "cpu_info 'Apple M1 Ultra (Virtual)'"}]}, "no clamp item"),
])
def test_a_fact_against_the_claim_refuses_it(over, why):
    assert why in (claim_refusal(_run(**over)) or "")


def test_an_aggregators_export_carries_the_claim_as_reported():
    chained = _run(fixable=False, origin={"instance": "guest-a", "reported_fixable": True})
    assert claimed(chained) and claim_refusal(chained) is None
    assert not claimed(_run(fixable=False, origin={"instance": "guest-a", "reported_fixable": None}))
