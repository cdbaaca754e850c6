"""Issue 22: an app's own 'key: value' diagnostics (ToshLLM's header, a bug-report template) name the GPU
and the process's architecture. They are evidence of the machine, never a device's own block: they can
only make a run less fixable (an AMD GPU, an x86_64 process), never more. Each case pastes such a header
above a real log of tests/fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ingest_util import FIXTURES, diagnosed

GUEST = "metal/m2-2024-07-gh-runner-paravirtual.log"  # fixable alone (its arm64 build line proves the host)

HEADERS = {
    "template": "OS: macOS 14.6.1\nArch: x86_64\n",
    "indented": "  Architecture: x86_64\n  GPU: Apple Paravirtual device\n",
    "toshllm-like": "=== bench ===\nmodel:  tinyllama.gguf\nArch:   x86_64\n=========================\n",
}


def _with_header(tmp_path: Path, header: str, log: str) -> str:
    out = tmp_path / "in" / "pasted.log"
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(header.encode() + (FIXTURES / log).read_bytes())
    return str(out)


def test_the_guest_alone_is_fixable(tmp_path):
    assert diagnosed(tmp_path, GUEST)[0].diagnosis.fixable is True


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_an_app_reporting_x86_64_takes_the_fix_away(tmp_path, name):
    runs = diagnosed(tmp_path, _with_header(tmp_path, HEADERS[name], GUEST))
    assert len(runs) == 1  # the header is the process's (printed before its 'main: build =')
    run = runs[0]
    assert run.diagnosis.verdict == "capability-downgrade" and run.diagnosis.fixable is False
    assert "x86_64" in (run.diagnosis.fixable_reason or "")


@pytest.mark.parametrize("header", ["GPU: AMD Radeon HD - FirePro D700\n", "GPU:    AMD Radeon Pro 5500M\n"])
def test_an_app_naming_an_amd_gpu_is_a_hardware_limit_for_an_unnamed_metal_device(tmp_path, header):
    # a 2026 block of an Intel Mac that names its device only 'MTL0'
    runs = diagnosed(tmp_path, _with_header(tmp_path, header, "metal/m4-2026-03-mtl0-only-name.log"))
    assert len(runs) == 1
    run = runs[0]
    assert run.diagnosis.fixable is False
    assert run.diagnosis.verdict == "hardware-limit"
    assert any("AMD" in n for n in run.facts.seen_devices)


def test_an_arm64_app_adds_nothing_to_a_fix(tmp_path):
    alone = diagnosed(tmp_path / "a", "metal/m4-2026-08-guest-stock.log")[0].diagnosis.stored()
    run = diagnosed(tmp_path / "b", _with_header(tmp_path, "Arch: arm64\n", "metal/m4-2026-08-guest-stock.log"))[0]
    assert run.diagnosis.fixable is alone["fixable"] is False  # no host proof in either


@pytest.mark.parametrize("line", ["GPU: 2", "GPU: yes", "Arch: unknown", "GPU: none (CPU only)"])
def test_a_value_that_names_nothing_is_not_read(tmp_path, line):
    runs = diagnosed(tmp_path, _with_header(tmp_path, line + "\n", GUEST))
    assert runs[-1].diagnosis.fixable is True
