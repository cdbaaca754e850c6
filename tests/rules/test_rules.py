"""Each rule against its own fixtures: real logs of several eras, wrapped and
prefixed, ingested into a real SQLite file and diagnosed through the real
pipeline (ingest -> store -> rules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.rules.catalog import RULES
from analyzer.store import open_db
from tests.ingest_util import diagnosed

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def fired(run) -> set[str]:
    return {f["rule"] for f in run.diagnosis.stored()["findings"]}


# rule id -> [(files (baselines first), verdict, fixable)]; the rule must fire on every run of the last file.
CASES: dict[str, list[tuple[tuple[str, ...], str, bool]]] = {
    # Fixable needs the guest's own proof of an Apple-silicon host (a named chip, an arm64 build); a log
    # without one is a downgrade still to confirm (issue 21: unified memory alone proves nothing).
    "environment": [
        (("metal/m4-2026-08-guest-stock.log",), "capability-downgrade", False),
        (("metal/m4-2026-08-host-m1-ultra.log",), "healthy", False),
    ],
    "capabilities-inferred": [
        (("metal/m1-2023-11-mib.log",), "healthy", False),
        (("bench/host-m1-ultra.json",), "healthy", False),
    ],
    "amd-intel-gpu": [
        (("metal/m2-2024-10-amd-egpu-intel-mac.log",), "hardware-limit", False),
        (("metal/m3-2025-03-intel-iris.log",), "hardware-limit", False),
        (("probe/system-profiler-intel-amd.txt",), "hardware-limit", False),
        (("rules/nvidia-kepler-imac.log",), "hardware-limit", False),
    ],
    "old-apple-gpu": [
        (("rules/old-apple-a12z-dtk.log",), "hardware-limit", False),
    ],
    "intel-host-vm": [
        (("rules/intel-host-vm-paravirtual.log",), "hardware-limit", False),
        (("rules/intel-host-vm-bench.jsonl",), "hardware-limit", False),
    ],
    # an x86_64 build with an AMD or Intel Metal device: an Intel Mac, not Rosetta (tests/rules/test_x86_builds.py)
    "x86-build": [
        (("metal/m2-2024-10-amd-egpu-intel-mac.log",), "hardware-limit", False),
        (("metal/m3-2025-03-intel-iris.log",), "hardware-limit", False),
    ],
    "no-metal-device": [  # a Mac's log (here an x86_64 macOS build under Rosetta)
        (("metal/no-metal-rosetta-x86.log",), "no-gpu-offload", False),
    ],
    # no GPU where the log does not show a Mac: Linux/Windows words (issue 38)
    "no-gpu-device": [
        (("backends/cuda-failed-init-vm.log",), "no-gpu-offload", False),
        (("backends/vulkan-llvmpipe-cpu-warning.log",), "no-gpu-offload", False),
        (("rules/device-info-cpu-only-2026.log",), "no-gpu-offload", False),  # a device_info block of the CPU only
        (("rules/list-devices-none-linux-2026.log",), "no-gpu-offload", False),
        (("rules/list-devices-none-windows-2025.log",), "no-gpu-offload", False),
    ],
    "device-listing": [  # --list-devices ran nothing: what llama.cpp would use
        (("rules/list-devices-none-bare-2026.log",), "no-gpu-offload", False),
    ],
    "zero-layers-offloaded": [
        (("backends/cpu-only-system-info-2024-10.log",), "no-gpu-offload", False),
        (("bench/anka-m3pro-guest-cpu.json",), "no-gpu-offload", False),
        (("timings/ollama-server-cpu.log",), "no-gpu-offload", False),
        # llama-bench -dev none: the dev column says no GPU device ran the rows, whatever backend and ngl say
        (("field/159-llama-bench-windows-cuda-present-dev-none-2026.log",), "no-gpu-offload", False),
        (("rules/bench-dev-none-vulkan-2025.md",), "no-gpu-offload", False),
        (("rules/bench-dev-none-cuda-threads-2026.md",), "no-gpu-offload", False),
        # node-llama-cpp: camelCase gpuLayers=0 and its CPU-fallback lines (issue 22)
        (("field/124-aicoworker-node-llama-cpp-m4-falls-back-to-cpu-2026.log",), "no-gpu-offload", False),
        (("shapes/node-llama-cpp-gpu-layers-0.log",), "no-gpu-offload", False),
        (("shapes/node-llama-cpp-gpu-layers-0-only.log",), "no-gpu-offload", False),
        (("shapes/node-llama-cpp-prebuilt-no-gpu-2025.log",), "no-gpu-offload", False),
    ],
    "metal-failed-nothing-ran": [  # llama.cpp's context failed with its Metal backend: nothing ran (issue 38)
        (("rules/metal-context-failed-nothing-ran-2025.log",), "unknown", False),
        (("field/240-koboldcpp-m2-ultra-metal-library-not-found-2024.log",), "unknown", False),
        (("shapes/metal-library-null-2024.log",), "unknown", False),
        (("shapes/metal-library-create-failed-2025.log",), "unknown", False),
    ],
    "metal-library-failed": [  # whisper.cpp falls back to the CPU and runs on
        (("field/258-whisper-cli-m4-metal-library-compile-error-blas-fallback-2025.log",), "no-gpu-offload", False),
    ],
    "kernel-checks": [  # capscan-probe --kernels on the Linux stand-in (tests/fixtures/kernels/)
        (("kernels/guest-kernels-pass.txt",), "capability-downgrade", True),
        (("kernels/guest-kernels-macos13.json",), "capability-downgrade", True),
        (("kernels/guest-kernels-timeout.txt",), "capability-downgrade", True),  # could not run: no veto
    ],
    "kernel-check-failed": [  # a kernel the GPU got wrong vetoes fixable whatever the family says
        (("kernels/guest-kernels-simdgroup-mm-fail.txt",), "capability-downgrade", False),
        (("kernels/guest-kernels-compile-error.txt",), "capability-downgrade", False),
    ],
    "device-probe": [  # no model ran: the verdict is what llama.cpp would make of the device
        (("kernels/guest-kernels-pass.txt",), "capability-downgrade", True),
        (("probe/capscan-probe-host-m1-ultra.txt",), "healthy", False),
        (("probe/anka-probe.json",), "capability-downgrade", False),
        (("probe/system-profiler-intel-amd.txt",), "hardware-limit", False),
    ],
    "crashed": [  # the verdict stays what the rest of the log says; the finding says it stopped
        (("field/197-crispasr-gh-runner-paravirtual-apple5-mul-mat-abort-2026.log",), "capability-downgrade", False),
        (("shapes/crash-mul-mat-no-block.log",), "unknown", False),
    ],
    "wrapper-disabled-gpu": [
        (("shapes/wrapper-virtualised-forced-cpu.log",), "no-gpu-offload", False),
    ],
    "ollama-app-hardened": [
        (("rules/ollama-app-guest-stock-2025.log",), "capability-downgrade", True),  # fixable: the routes say how
        (("timings/ollama-server-metal.log",), "healthy", False),
    ],
    "macos14-mmap": [
        (("shapes/macos14-guest-mmap.log",), "healthy", False),
    ],
    "cpu-features-only": [  # system_info alone is no evidence of a CPU-only build (issue 38)
        (("rules/cpu-only-build-2025.log",), "unknown", False),
        (("rules/cpu-features-only-vulkan-llama-cli-2026.log",), "unknown", False),
    ],
    "cpu-only-build": [
        # a hand-edited llama-bench backend cell naming the CPU build by its instruction set (field/142's rows)
        (("rules/cpu-only-build-bench-cpu-avx2-2024.md",), "no-gpu-offload", False),
        (("rules/cpu-only-build-bench-cpu-avx512-2024.md",), "no-gpu-offload", False),
    ],
    "gpu-disabled": [
        (("rules/gpu-disabled-2023-main.log",), "no-gpu-offload", False),
        (("field/052-llama-cli-windows-not-compiled-gpu-offload-2024.log",), "no-gpu-offload", False),
        (("field/080-ggml-ci-x86-cpu-no-usable-gpu-pythia-q4-0-2025.log",), "no-gpu-offload", False),
        (("rules/gpu-disabled-whisper-no-gpu.log",), "no-gpu-offload", False),
        (("rules/gpu-disabled-whisper-no-gpu-found.log",), "no-gpu-offload", False),
        (("field/058-whisper-cli-intel-mbp-no-gpu-flag-2023.log",), "no-gpu-offload", False),
        # weights and KV cache in CPU buffers only, no offload line: the 2024 loader's and the 2025 server's
        (("field/210-llama-cpp-python-colab-t4-cpu-wheel-cpu-buffer-2024.log",), "no-gpu-offload", False),
        (("rules/cpu-buffers-only-2025-server.log",), "no-gpu-offload", False),
    ],
    "paravirtual-family-clamp": [
        (("metal/m4-2026-08-guest-stock.log",), "capability-downgrade", False),
        (("metal/m2-2024-07-gh-runner-paravirtual.log",), "capability-downgrade", True),  # arm64 build line
        (("metal/m3-2025-06-paravirtual-apple5.log",), "capability-downgrade", True),
        (("wrapped/journald.log",), "capability-downgrade", False),
        (("wrapped/jsonl-callback.log",), "capability-downgrade", False),
        (("metal/m4-2026-05-timestamped.log", "wrapped/nslog.log"), "capability-downgrade", False),
        (("probe/capscan-probe-guest.txt",), "capability-downgrade", False),
        (("probe/lume-probe-stock.txt",), "capability-downgrade", False),
        (("metal/whisper-family-fallback.log",), "capability-downgrade", True),
    ],
    "downgrade-symptoms": [
        (("rules/unsupported-op-paravirtual-listed.log",), "capability-downgrade", False),
    ],
    # the same symptoms without evidence of a VM decide nothing (AMD/Intel and pre-M1 GPUs show them too)
    "symptoms-without-vm": [
        (("metal/m2-2024-05-instructlab-unsupported-op.log",), "unknown", False),
        (("metal/symptoms-only-skipping.log",), "unknown", False),
        (("rules/whisper-fallback-only.log",), "unknown", False),
        (("rules/bare-metal-m2max-unsupported-op.log",), "unknown", False),
    ],
    "contradictory-evidence": [
        (("rules/contradictory-merged-legacy-blocks.log",), "capability-downgrade", False),
    ],
    "metal-slower-than-cpu": [
        # JSON alone: the clamp is inferred, not shown by the device's own block, so not fixable yet
        (("bench/anka-m3pro-guest-cpu.json", "bench/anka-m3pro-stock.json"), "capability-downgrade", False),
    ],
    "gap-to-bare-metal": [
        (("bench/host-m1-ultra.json", "bench/guest-stock.json"), "capability-downgrade", False),
        (("bench/gemma-12b-host.jsonl", "bench/gemma-12b-stock.jsonl"), "capability-downgrade", False),
    ],
    # llama-bench JSON alone of a guest (no capability block, no stored host run): its tg against the host
    # chip's bandwidth ceiling, field logs of cua's Lume guests on an M1 Ultra
    "speed-of-fallback-kernels": [
        (("field/011-cua-tinyllama-stock-guest-bench-json.log",), "capability-downgrade", False),
        (("field/023-cua-gemma4-stock-guest-bench-json.log",), "capability-downgrade", False),
        (("field/028-cua-muse30b-stock-guest-tg-json.log",), "capability-downgrade", False),
        (("bench/guest-stock.json",), "capability-downgrade", False),
        # a GitHub M1 runner's JSON (issue 38): 9.5% of the ceiling, a stock guest's CPUs
        (("rules/bench-json-gh-runner-m1-stock-3b-t2-fa1-f16-2026.json",), "capability-downgrade", False),
    ],
    "speed-of-full-kernels": [
        (("field/015-cua-tinyllama-broad-shim-guest-bench-json.log",), "healthy", False),
        (("field/026-cua-gemma4-safe-shim-guest-bench-json.log",), "healthy", False),
        (("bench/guest-shim.json",), "healthy", False),
    ],
    # a speed a stock guest's CPUs reach (issue 38): neither band
    "speed-undecided": [
        (("rules/bench-json-gh-runner-m1-tinyllama-undecided-2026.json",), "unknown", False),
    ],
    "near-bare-metal": [
        (("bench/host-m1-ultra.json", "bench/guest-shim.json"), "unknown", False),
    ],
    "already-remedied": [
        (("metal/m4-2026-08-guest-lume-shim.log",), "healthy", False),
        (("shims/capscan-interposer.log",), "healthy", False),
        (("shims/tart-banner.log",), "healthy", False),
        (("shims/anka-banner.log",), "healthy", False),
    ],
    "capability-overclaim": [
        (("shims/lume-broad-overclaim.log",), "healthy", False),
        (("shims/lume-shim-apple9-on-m1.log",), "healthy", False),
    ],
    "mlx-unaffected": [
        (("timings/mlx-lm-generate.log",), "unknown", False),
        (("timings/mlx-lm-benchmark.log",), "unknown", False),
        (("shapes/ollama-030-mlx-runner-guest.log",), "unknown", False),
    ],
    # a Tart image's banner beside the stock Apple5 lines: the lines decide
    "shim-not-in-effect": [
        (("shapes/tart-banner-apple5-guest.log",), "capability-downgrade", False),
    ],
    "training-aborts": [
        (("shapes/train-opt-step-adamw-guest.log",), "capability-downgrade", True),
        (("shapes/train-opt-step-sgd-no-block.log",), "unknown", False),
    ],
    "venus-guest": [
        (("backends/vulkan-2025-07-venus-guest.log",), "healthy", False),
        (("backends/vulkan-2024-02-found.log",), "healthy", False),
    ],
    "virtualization-overhead": [
        (("metal/m4-2026-08-host-m1-ultra.log", "shims/lume-shim-apple9-on-m1.log"),
         "virtualization-overhead", False),
        (("bench/host-m1-ultra.json", "shims/lume-shim-apple9-on-m1.log"), "virtualization-overhead", False),
    ],
    "full-capabilities": [
        # llama-bench tables of Vulkan/ROCm builds at ngl 99 with no device line in the cut
        (("field/231-llama-bench-vulkan-rx9070xt-pi5-retest-table-2025.log",), "healthy", False),
        (("field/230-llama-bench-vulkan-pr-vs-master-vs-rocm-5700xt-2024.log",), "healthy", False),
        (("metal/m2-2024-03-m2max.log",), "healthy", False),
        (("metal/m4-2026-09-m5-max.log",), "healthy", False),
        (("backends/cuda-2026-03-vram.log",), "healthy", False),
        (("backends/rocm-2025-01-wave.log",), "healthy", False),
        # the 2026 device_info block names the GPU where system_info lists no GPU backend (issue 22)
        (("field/117-llama-app-serve-vulkan-rtx5060-device-info-2026.log",), "healthy", False),
        (("rules/device-info-vulkan-radeon-2026.log",), "healthy", False),
        (("rules/device-info-cuda-two-gpus-2026.log",), "healthy", False),
        (("rules/device-info-after-cuda-init-2026.log",), "healthy", False),
    ],
}

PARAMS = [(rule, files, verdict, fixable) for rule, cases in CASES.items() for files, verdict, fixable in cases]


@pytest.mark.parametrize("rule,files,verdict,fixable", PARAMS,
                         ids=[f"{r}:{'+'.join(Path(f).stem for f in fs)}" for r, fs, _, _ in PARAMS])
def test_rule_on_its_fixtures(tmp_path, rule, files, verdict, fixable):
    runs = diagnosed(tmp_path, *files)
    assert runs, "no run recognised"
    for run in runs:
        assert rule in fired(run), (rule, run.diagnosis.stored()["findings"])
        if verdict is not None:
            assert run.diagnosis.verdict == verdict, run.diagnosis.summary
        assert run.diagnosis.fixable is fixable
        for f in run.diagnosis.stored()["findings"]:
            assert f["message"]
            for ev in f["evidence"]:
                assert isinstance(ev["line"], int) and ev["text"]


def test_every_rule_has_fixtures():
    assert {r.id for r in RULES} <= set(CASES), {r.id for r in RULES} - set(CASES)


def test_hardware_limit_says_not_to_force(tmp_path):
    run = diagnosed(tmp_path, "metal/m2-2024-10-amd-egpu-intel-mac.log")[0]
    text = run.diagnosis.summary + " ".join(run.diagnosis.next_steps)
    assert "Do not force capabilities" in text or "do not force capabilities" in text
    assert not any("remedy run" in s for s in run.diagnosis.next_steps)


def test_fixable_downgrade_names_the_remedy_with_the_host_family(tmp_path):
    # llama-bench -o json 2>&1 in the guest: the M4 block (stderr) and the JSON naming the host chip (stdout)
    block = (FIX / "metal/m4-2026-08-guest-stock.log").read_bytes().split(b"| model")[0]
    (FIX_TMP := tmp_path / "in").mkdir()
    (FIX_TMP / "guest.log").write_bytes(block + (FIX / "bench/guest-stock.json").read_bytes())
    run = diagnosed(tmp_path, "bench/host-m1-ultra.json", str(FIX_TMP / "guest.log"))[-1]
    assert run.diagnosis.fixable is True
    assert run.diagnosis.host_chip == "Apple M1 Ultra"
    assert run.diagnosis.host_family == 1007
    assert any("capscan remedy run --family 1007" in s for s in run.diagnosis.next_steps)


def test_evidence_lines_point_at_the_input(tmp_path):
    run = diagnosed(tmp_path, "metal/m4-2026-08-guest-stock.log")[0]
    lines = (FIX / "metal/m4-2026-08-guest-stock.log").read_text().splitlines()
    decisive = run.diagnosis.stored()["findings"][0]
    assert decisive["rule"] == "paravirtual-family-clamp"
    for ev in decisive["evidence"]:
        assert lines[ev["line"] - 1].strip() == ev["text"].strip()


def test_inferred_capabilities_follow_llama_cpp_logic(tmp_path):
    run = diagnosed(tmp_path, "metal/m1-2023-11-mib.log")[0]  # Apple7, no flag lines in that era
    caps = run.diagnosis.capabilities
    assert caps["simdgroup_reduction"] is True and caps["simdgroup_mm"] is True
    assert "simdgroup_mm" in run.diagnosis.capabilities_inferred
    assert run.facts.capabilities.simdgroup_mm is None  # stored facts stay as printed


def test_a_later_host_log_becomes_the_baseline_of_an_earlier_guest(tmp_path):
    db = open_db(tmp_path / "late.db")
    for name in ("bench/guest-shim.json", "bench/host-m1-ultra.json"):
        src = open_input(str(FIX / name))
        diagnose_runs(db, ingest(db, src).run_ids, refresh_peers=True)
        src.close()
    guest = db.conn.execute("SELECT report FROM diagnoses d JOIN runs r ON r.id = d.run_id "
                            "JOIN sources s ON s.id = r.source_id WHERE s.path LIKE '%guest-shim.json'").fetchone()
    assert '"near-bare-metal"' in guest[0]


def test_offload_warning_opens_the_process_it_was_printed_by(tmp_path):
    """llama.cpp prints 'not compiled with GPU offload support' before 'main: build =': pasted after a Metal
    run, it starts the next process's run (and does not make that Metal run CPU-only), and the build line
    after it stays in the same run."""
    runs = diagnosed(tmp_path, "rules/gpu-disabled-pasted-after-metal.log")
    assert [r.diagnosis.verdict for r in runs] == ["healthy", "no-gpu-offload"]
    assert "gpu-disabled" not in fired(runs[0])
    assert runs[1].facts.build_commit == "226255b"


def test_a_gpu_the_run_initialises_outweighs_weights_on_the_cpu(tmp_path):
    """whisper.cpp on a paravirtual GPU falls back to the CPU for lack of family 7 and puts its weights there:
    that is the downgrade, not a CPU-only build."""
    run = diagnosed(tmp_path, "field/003-audio-whisper-r-gh-runner-paravirtual-2024.log")[0]
    assert "gpu-disabled" not in fired(run)
    assert run.diagnosis.verdict != "no-gpu-offload"


@pytest.mark.parametrize("name", ["rules/cpu-buffers-and-metal-2024.log", "rules/cpu-buffers-cut-before-kv-2024.log"])
def test_cpu_buffers_beside_a_gpu_buffer_or_before_the_kv_cache_are_not_cpu_only(tmp_path, name):
    """The CPU buffer beside a Metal one is the token table; a cut that ends before the KV cache has not shown
    where the cache went."""
    run = diagnosed(tmp_path, name)[0]
    assert "gpu-disabled" not in fired(run)
    assert run.diagnosis.verdict != "no-gpu-offload"


def test_weights_on_the_cpu_after_a_family_fallback_are_not_a_cpu_only_build(tmp_path):
    run = diagnosed(tmp_path, "rules/whisper-fallback-only.log")[0]
    assert "gpu-disabled" not in fired(run)
