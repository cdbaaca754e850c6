"""The proof (analyzer/rules/proof.py): the one decision every remedy offer reads, ``remedy_decision``,
and the pieces it is made of (vetoes, the clamp, the host, the kernels, the build), read on real logs
through the real pipeline (ingest into a SQLite file, load the run, view it). The fixable cases the
reviews found live beside this file (test_fixable_proof.py, test_provenance.py, test_kernel_checks.py,
test_mutation_kills.py); these pin the decision's own shape."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import view_of
from analyzer.rules.proof import ProofView
from analyzer.rules.view import RunView
from analyzer.store import open_db
from analyzer.store.queries import load_run
from analyzer.verdicts import NO_HOST_CHIP

HERE = Path(__file__).resolve().parent
GUEST_M4 = (HERE / "fixable" / "guest-m4-stock.log").read_text()  # a stock guest's Metal block: Apple5, flags false
GUEST_JSON = (HERE / "fixable" / "guest-bench.json").read_text()  # llama-bench JSON: cpu_info names M1 Ultra (Virtual)
KERNELS_PASS = (HERE.parent / "fixtures" / "kernels" / "guest-kernels-pass.txt").read_text()
ARM_BUILD = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0\n"
X86_BUILD = "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for x86_64-apple-darwin23.4.0\n"
# the same block as a Mac's own GPU prints it: a named Apple chip at its real family
BARE_METAL = GUEST_M4.replace("MTL0 (Apple Paravirtual device)", "Apple M2 Max").replace(
    "MTLGPUFamilyApple5  (1005)", "MTLGPUFamilyApple8  (1008)")


def view(tmp_path: Path, text: str) -> RunView:
    db = open_db(tmp_path / "proof.db")
    [rid, *_] = ingest(db, Input("guest.log", io.BytesIO(text.encode()))).run_ids
    run = load_run(db, rid)
    db.conn.close()
    assert run is not None
    return view_of(run)


@pytest.mark.parametrize("text", [GUEST_M4 + GUEST_JSON, ARM_BUILD + GUEST_M4 + GUEST_JSON, KERNELS_PASS],
                         ids=["cpu_info", "build-and-cpu_info", "kernels"])
def test_the_proof_is_kernels_then_clamp_then_host_then_build_each_on_a_line_of_the_log(tmp_path, text):
    v = view(tmp_path, text)
    proof, why, missing = v.remedy_decision
    assert why is None and missing == []
    assert proof == v.kernel_proof + v.clamp_proof + v.host_proof + v.build_proof
    assert v.clamp_proof and v.host_proof
    log = text.splitlines()
    for item in proof:  # each sign cites a line of the log, with its text (a JSON row's in words)
        assert item["sign"] and item["text"] and 1 <= item["line"] <= len(log)
        assert item["text"] in log[item["line"] - 1] or item["text"].startswith("llama-bench json row")


def test_a_veto_refuses_even_with_every_proof_item_present(tmp_path):
    """An x86_64 build line beside a stock guest that names its host: the clamp and the host are both
    proven, and the contrary sign still refuses, in its own words."""
    v = view(tmp_path, X86_BUILD + GUEST_M4 + GUEST_JSON)
    assert v.clamp_proof and v.host_proof
    proof, why, missing = v.remedy_decision
    assert proof == [] and missing == ["no-contrary-sign"]
    assert why == v.vetoes and "x86_64 build (x86_64-apple-darwin23.4.0)" in why


def test_a_guest_that_does_not_name_its_host_is_missing_only_the_host(tmp_path):
    v = view(tmp_path, GUEST_M4)
    assert v.environment == "vm" and v.vetoes is None and v.clamp_proof
    assert v.remedy_decision == ([], NO_HOST_CHIP, ["host"])


def test_bare_metal_is_never_a_guest_to_remedy(tmp_path):
    v = view(tmp_path, BARE_METAL)
    assert v.environment == "bare-metal" and v.vetoes is None
    assert v.host_proof == [] and v.clamp_proof == []
    proof, why, missing = v.remedy_decision
    assert proof == [] and missing == ["vm-guest"] and "bare metal" in why


@pytest.mark.parametrize("text", [GUEST_M4 + GUEST_JSON, X86_BUILD + GUEST_M4 + GUEST_JSON, GUEST_M4, BARE_METAL,
                                  KERNELS_PASS], ids=["fixable", "vetoed", "no-host", "bare-metal", "kernels"])
def test_the_proof_module_decides_on_its_own(tmp_path, text):
    """ProofView reads only the facts, the environment and the lines (rules/view.py's docstring: each
    concern reads what is below it): the decision is the same without the capabilities or the speeds."""
    v = view(tmp_path, text)
    alone = ProofView(**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)})
    assert alone.remedy_decision == v.remedy_decision
    assert (alone.vetoes, alone.contradictions, alone.contrary_signs) == (v.vetoes, v.contradictions, v.contrary_signs)
