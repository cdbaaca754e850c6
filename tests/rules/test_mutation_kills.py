"""Shortest realistic logs that tell the fixable path's mutants (scripts/mutate.py, `make mutate`) from the
real code: each test kills the mutants its docstring names, which survived every other guard. Through the
real pipeline (ingest into a temp database, diagnose, remedy plan), like tests/rules/test_fixable_proof.py."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.remedy.plan import build_plan
from analyzer.remedy.runner import Runner
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "remedy" / "bin"  # sysctl's stand-in answers CAPSCAN_FAKE_BRAND
GUEST_M4 = (Path(__file__).resolve().parent / "fixable" / "guest-m4-stock.log").read_text()
RESULT = ("llama_perf_context_print:        eval time =    5000.00 ms /    50 runs   (  100.00 ms per token,    "
          "10.00 tokens per second)\n")
ARM_BUILD = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0\n"


def diagnose(text: str, runner: Runner | None = None) -> list[dict]:
    """Every run's diagnosis, with `remedy plan`'s answer (given this runner) as `actionable`."""
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "k.db")
        result = ingest(db, Input("pasted.log", io.BytesIO(text.encode())))
        out = []
        for run in diagnose_runs(db, result.run_ids, refresh_peers=True):
            diag = dict(run.diagnosis)
            plan = build_plan(db, run.id, runner=runner)
            diag["actionable"], diag["refusal"] = plan["actionable"], plan["refusal"]
            out.append(diag)
        db.conn.close()
    return out


def never_fixable(runs: list[dict]) -> None:
    assert runs
    for d in runs:
        assert d["fixable"] is False and d.get("proof", []) == [] and d["actionable"] is False, d["summary"]
        assert not any("remedy run" in s for s in d["next_steps"]), d["next_steps"]


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


# -- real bugs found while reading the survivors (analyzer/ not changed here: reported) ----------------------

LINUX_ARM_BUILD = "build: 6500 (0320ac526) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for aarch64-linux-gnu\n"


@pytest.mark.xfail(strict=True, reason="bug: view.host_proof reads any arm64 build target as 'an arm64 macOS build' "
                   "(chips.isa_of_target drops the OS), so an aarch64 Linux machine's build line pasted beside a "
                   "macOS guest's block proves an Apple-silicon host; Linux arm64 runs on any Arm server, and Metal "
                   "output beside a Linux build is two machines' lines")
def test_an_aarch64_linux_build_line_is_no_proof_of_an_apple_silicon_host():
    never_fixable(diagnose(LINUX_ARM_BUILD + GUEST_M4 + RESULT))


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
