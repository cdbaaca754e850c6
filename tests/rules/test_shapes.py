"""Shapes of real logs that were misread (issue 10, section 2): each fixture in
tests/fixtures/shapes/ (written as people paste them: prefixes dropped, wrappers,
quotes, jq reformatting) ingested into a real SQLite file and diagnosed through
the real pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.store import open_db

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "shapes"

TINY_HOST = {"pp512": 4871.99, "tg128": 286.71}

# file -> expected: verdict, fixable, environment, and optional: rule (a finding that must fire),
# device, host_chip, throughput {test: tok_s} (every row, in order), next (a phrase of the next steps)
CASES: dict[str, dict] = {
    # capability lines pasted without their ggml_metal_*: prefix
    # (no host chip or arm64 build pasted: a downgrade to confirm, issue 21)
    "pasted-block-no-prefix.md": dict(verdict="capability-downgrade", fixable=False, environment="vm",
                                      device="Apple Paravirtual device", families=[1005, 3003],
                                      throughput=[("pp512", 431.86), ("tg128", 12.63)]),
    "pasted-block-no-prefix-quoted-legacy.txt": dict(verdict="capability-downgrade", fixable=False, environment="vm",
                                                     device="Apple Paravirtual device", families=[3003]),
    "pasted-block-no-prefix-collapsed.log": dict(verdict="capability-downgrade", fixable=False, environment="vm",
                                                 device="Apple Paravirtual device", families=[1005, 3003]),
    # 2026 --version on an Intel Mac: only 'MTL0', Common3 + Metal3, mm false, no unified memory, x86_64
    "intel-mac-version-2026.log": dict(verdict="hardware-limit", fixable=False, environment="bare-metal",
                                       rule="amd-intel-gpu"),
    # a crash with no device block at all
    "crash-mul-mat-no-block.log": dict(verdict="unknown", fixable=False, environment=None, rule="symptoms-without-vm",
                                       next="start-up block"),
    "crash-mul-mat-no-block-timestamped.log": dict(verdict="unknown", fixable=False, environment=None,
                                                   rule="symptoms-without-vm", next="start-up block"),
    # the Metal library failing to load: never healthy, its own next step; llama.cpp's context fails with it,
    # so nothing ran at all: unknown, not "ran on the CPU" (issue 38)
    "metal-library-null-2024.log": dict(verdict="unknown", fixable=False, environment="bare-metal",
                                        rule="metal-failed-nothing-ran", next="GGML_METAL_PATH_RESOURCES"),
    "metal-library-create-failed-2025.log": dict(verdict="unknown", fixable=False, environment="bare-metal",
                                                 rule="metal-failed-nothing-ran", next="GGML_METAL_EMBED_LIBRARY"),
    # ollama's server.go offload lines, 2024 ('offload to cpu') and 2025 (msg=offload library=cpu)
    "ollama-offload-cpu-2024.log": dict(verdict="no-gpu-offload", fixable=False, environment=None,
                                        rule="zero-layers-offloaded"),
    "ollama-offload-cpu-2025.log": dict(verdict="no-gpu-offload", fixable=False, environment=None,
                                        rule="zero-layers-offloaded"),
    # an app that says it gave up on the virtualised device
    "wrapper-virtualised-forced-cpu.log": dict(verdict="no-gpu-offload", fixable=False, environment="vm",
                                               rule="wrapper-disabled-gpu", next="capscan probe"),
    # GGML_METAL_DEVICES=4 on one bare-metal Mac: one GPU, healthy
    "memory-breakdown-m2-ultra-4-devices.log": dict(verdict="healthy", fixable=False, environment="bare-metal",
                                                    host_chip="Apple M2 Ultra", gpus=["Apple M2 Ultra"]),
    # llama-bench markdown: the first layout, and hand-edited backend labels
    "md-2023-08-first-layout.md": dict(verdict="unknown", fixable=False, environment=None,
                                       throughput=[("pp512", 537.21), ("tg128", 61.33)]),
    # the same table copied from a rendered page, without its edge pipes
    "md-no-edge-pipes-cpu-2024.md": dict(verdict="no-gpu-offload", fixable=False, environment=None, backend="cpu",
                                         throughput=[("pp512", 38.71), ("tg128", 9.88)]),
    "md-hand-edited-vulkan-master-pr.md": dict(verdict="healthy", fixable=False, environment=None, backend="vulkan",
                                               throughput=[("pp512", 112.64), ("pp512", 164.2), ("tg128", 14.03),
                                                           ("tg128", 14.11)]),
    # llama-bench -o json reformatted by jq
    "bench-json-jq-pretty.json": dict(verdict="healthy", fixable=False, environment="bare-metal",
                                      host_chip="Apple M1 Ultra", throughput=list(TINY_HOST.items())),
    "bench-json-jq-compact-array.json": dict(verdict="healthy", fixable=False, environment="bare-metal",
                                             host_chip="Apple M1 Ultra", throughput=list(TINY_HOST.items())),
    "bench-json-jq-sorted-objects.jsonl": dict(verdict="healthy", fixable=False, environment="bare-metal",
                                               host_chip="Apple M1 Ultra", throughput=list(TINY_HOST.items())),
    # a Hardware Overview as host evidence, then repeated timing blocks: every block's rates stored
    "sphardware-repeated-timings.log": dict(verdict="unknown", fixable=False, environment="bare-metal",
                                            host_chip="Apple M2 Max",
                                            throughput=[("prompt", 236.21), ("generation", 40.7), ("prompt", 238.23),
                                                        ("generation", 40.94), ("prompt", 236.89),
                                                        ("generation", 40.82)]),
    # environment evidence: Apple's own driver's error domain, a GPU named by its driver, a shim banner alone
    "agx-error-domain.log": dict(verdict="healthy", fixable=False, environment="bare-metal"),
    "radv-navi10-vulkan.log": dict(verdict="healthy", fixable=False, environment="bare-metal"),
    # node-llama-cpp on the CPU (issue 22): its camelCase gpuLayers=0 and its own fallback lines
    "node-llama-cpp-gpu-layers-0.log": dict(verdict="no-gpu-offload", fixable=False, environment=None,
                                            rule="zero-layers-offloaded"),
    "node-llama-cpp-gpu-layers-0-only.log": dict(verdict="no-gpu-offload", fixable=False, environment=None,
                                                 rule="zero-layers-offloaded"),
    "node-llama-cpp-prebuilt-no-gpu-2025.log": dict(verdict="no-gpu-offload", fixable=False, environment=None,
                                                    rule="zero-layers-offloaded"),
    "shim-banner-only.log": dict(verdict="unknown", fixable=False, environment="vm"),
    # MLX in a VM: healthy, never offered the remedy
    "mlx-in-vm.log": dict(verdict="healthy", fixable=False, environment="vm", no_remedy=True),
    # a macOS 14 guest reading weights through mmap'd buffers
    "macos14-guest-mmap.log": dict(verdict="healthy", fixable=False, environment="vm", rule="macos14-mmap",
                                   next="--no-mmap"),
    # today's programs (issue 38, item 3): written from field-2026.md's quoted lines and the upstream format strings
    "version-semver-homebrew-2026.log": dict(verdict="unknown", fixable=False, environment=None,
                                             program="llama-server", next="-lv 4"),
    "llama-serve-guest-lv4-2026.log": dict(verdict="capability-downgrade", fixable=True, environment="vm",
                                           program="llama-server", rule="paravirtual-family-clamp",
                                           throughput=[("prompt", 6.61), ("generation", 0.1)]),
    "llama-macos-app-unified-log.log": dict(verdict="unknown", fixable=False, environment=None, program="llama-server",
                                            next="extraServerArgs", not_next="No GPU"),
    "llama-macos-app-ps-command.log": dict(verdict="unknown", fixable=False, environment=None, program="llama-server",
                                           next="extraServerArgs", not_next="No GPU"),
    "ollama-030-llama-server-guest.log": dict(verdict="capability-downgrade", fixable=False, environment="vm",
                                              program="ollama", rule="paravirtual-family-clamp"),
    "ollama-030-mlx-runner-guest.log": dict(verdict="unknown", fixable=False, environment="vm", program="ollama",
                                            rule="mlx-unaffected", backend="mlx", next="Nothing to remedy for MLX"),
    "tart-banner-apple5-guest.log": dict(verdict="capability-downgrade", fixable=False, environment="vm",
                                         rule="shim-not-in-effect", program="llama-bench"),
    "tart-banner-apple9-guest.log": dict(verdict="healthy", fixable=False, environment="vm", rule="already-remedied",
                                         program="llama-bench"),
    "whisper-2024-11-mtl0-backend.log": dict(verdict="healthy", fixable=False, environment="bare-metal",
                                             program="whisper.cpp", backend="metal"),
    "whisper-family7-amd-intel-mac.log": dict(verdict="hardware-limit", fixable=False, environment="bare-metal",
                                              program="whisper.cpp", rule="amd-intel-gpu"),
    "train-opt-step-adamw-guest.log": dict(verdict="capability-downgrade", fixable=True, environment="vm",
                                           rule="training-aborts", next="GGML_METAL_DEVICES=0"),
    "train-opt-step-sgd-no-block.log": dict(verdict="unknown", fixable=False, environment=None,
                                            rule="training-aborts", next="GGML_METAL_DEVICES=0",
                                            program="llama-finetune"),
    "a18-pro-neo-guest.log": dict(verdict="capability-downgrade", fixable=True, environment="vm",
                                  host_chip="Apple A18 Pro", next="--family 1009"),
}


def diagnosed(tmp_path: Path, name: str):
    db = open_db(tmp_path / "shapes.db")
    src = open_input(str(FIX / name))
    try:
        ids = ingest(db, src).run_ids
    finally:
        src.close()
    runs = diagnose_runs(db, ids, refresh_peers=True)
    rows = {rid: [(t, s) for t, s in db.conn.execute(
        "SELECT test, tok_s FROM throughput WHERE run_id = ? ORDER BY line, rowid", (rid,))] for rid in ids}
    return runs, rows


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape(tmp_path, name):
    exp = CASES[name]
    runs, rows = diagnosed(tmp_path, name)
    assert len(runs) == 1, [r.diagnosis.summary for r in runs]
    run = runs[0]
    d = run.diagnosis.stored()
    assert d["verdict"] == exp["verdict"], d["summary"]
    assert d["fixable"] is exp["fixable"]
    assert d["environment"] == exp["environment"], [f["message"] for f in d["findings"]]
    rules = {f["rule"] for f in d["findings"]}
    if "rule" in exp:
        assert exp["rule"] in rules, rules
    if "device" in exp:
        assert run.facts.device.name == exp["device"]
    if "families" in exp:
        assert run.facts.device.families == exp["families"]
    if "host_chip" in exp:
        assert d["host_chip"] == exp["host_chip"]
    if "backend" in exp:
        assert run.facts.backend == exp["backend"]
    if "throughput" in exp:
        assert [(t, round(s, 2)) for t, s in rows[run.id]] == exp["throughput"]
    if "next" in exp:
        assert any(exp["next"] in step for step in d["next_steps"]), d["next_steps"]
    if "not_next" in exp:
        assert not any(exp["not_next"] in step for step in d["next_steps"]), d["next_steps"]
    if "program" in exp:
        assert run.facts.program == exp["program"]
    if exp.get("no_remedy"):
        assert not any("remedy" in step for step in d["next_steps"]), d["next_steps"]
    if d["environment"] is None and not any(f["rule"] == "contradictory-evidence" for f in d["findings"]):
        # section 3: a run whose environment is not shown says what would decide it
        env = next(f for f in d["findings"] if f["rule"] == "environment")
        assert "would decide it" in env["message"]


def test_four_virtual_devices_of_one_mac_are_one_gpu(tmp_path):
    from analyzer.rules.diagnose import view_of

    runs, _ = diagnosed(tmp_path, "memory-breakdown-m2-ultra-4-devices.log")
    assert view_of(runs[0]).physical_gpus == ["Apple M2 Ultra"]


def test_every_shape_fixture_has_a_case():
    assert {p.name for p in FIX.iterdir() if p.is_file() and p.name != "README.md"} == set(CASES)


def test_the_report_says_what_would_decide_an_unknown_environment(tmp_path):
    from tests.conftest import run_capscan

    out = run_capscan("diagnose", str(FIX / "md-2023-08-first-layout.md"), db=tmp_path / "e.db", check=True)
    text = out.stdout.decode()
    assert "llama-bench / metal\n" in text  # no environment claimed
    assert "environment: Whether this ran in a VM or on bare metal is not shown; the Metal start-up block" in text
