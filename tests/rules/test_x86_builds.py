"""Issue 22: an x86_64 build is not always Rosetta. One that registers an AMD or Intel Metal device runs
on an Intel Mac (or a Hackintosh): a hardware limit, never "no offload under Rosetta". One that names no
machine at all is either, and capscan says so (unknown) instead of guessing Rosetta.

Through the real pipeline; the logs are in x86/ (see its README for their sources). The variants join
their build lines (three forms: 2023-24 `main: built with`, common_init's `build: N (commit) with`, the
2026 CMake `built with AppleClang ... for Darwin x86_64`) to their device blocks (legacy `ggml_metal_init`,
2026 `ggml_metal_device_init`, an Intel Iris block), each line as printed."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

HERE = Path(__file__).resolve().parent / "x86"
FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _lines(name: str, first: int, last: int) -> str:
    path = next(HERE.glob(name)) if "*" in name else FIX / name
    return "".join(path.read_text().splitlines(keepends=True)[first - 1:last])


BUILDS = {
    "main-built-with-2024": _lines("071-*.log", 3, 4),
    "common-init-build": "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for "
                         "x86_64-apple-darwin23.4.0\n",
    "cmake-darwin-x86_64-2026": _lines("056-*.log", 17, 18),
}
BLOCKS = {
    "legacy-amd-radeon-vii": _lines("002-*.log", 13, 23),
    "2026-mtl0-amd": _lines("056-*.log", 2, 16),
    "legacy-intel-iris": _lines("metal/m3-2025-03-intel-iris.log", 58, 70),
}


def diagnosed(text: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "x.db")
        result = ingest(db, Input("pasted.log", io.BytesIO(text.encode())))
        out = [r.diagnosis.stored() for r in diagnose_runs(db, result.run_ids, refresh_peers=True)]
        db.conn.close()
    return out


def rules(d: dict) -> set[str]:
    return {f["rule"] for f in d["findings"]}


def assert_intel_mac(d: dict) -> None:
    assert d["verdict"] == "hardware-limit", d["summary"]
    assert "amd-intel-gpu" in rules(d) and "x86-build" in rules(d)
    assert not rules(d) & {"no-metal-device", "cpu-only-build"}
    assert "Rosetta" not in d["summary"]
    [x86] = [f for f in d["findings"] if f["rule"] == "x86-build"]
    assert "Intel Mac" in x86["message"] and "not Rosetta" in x86["message"]


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("block", BLOCKS)
def test_an_x86_build_with_an_amd_or_intel_metal_device_is_a_hardware_limit(build, block):
    [d] = diagnosed(BUILDS[build] + BLOCKS[block])
    assert_intel_mac(d)


def test_the_2026_version_block_as_printed():
    """llama-cli --version: the device block, then `version:` and the CMake build line."""
    [d] = diagnosed((HERE / "056-llama-cli-intel-mac-amd-mtl0-name-2026.log").read_text())
    assert_intel_mac(d)


@pytest.mark.parametrize("name", ["071-main-intel-imac-amd-5700xt-x86-build-2024.log",
                                  "084-main-intel-mbp-2017-x86-build-1311-2023.log"])
def test_an_x86_build_that_names_no_machine_is_not_called_rosetta(name):
    [d] = diagnosed((HERE / name).read_text())
    assert d["verdict"] == "unknown", d["summary"]
    assert "no-metal-device" not in rules(d)
    assert "Intel Mac" in d["summary"] and "Rosetta" in d["summary"]  # both, as possibilities
    assert "machdep.cpu.brand_string" in d["summary"]


@pytest.mark.parametrize("build", BUILDS)
def test_a_lone_x86_build_line_in_every_form(build):
    [d] = diagnosed(BUILDS[build])
    assert d["verdict"] == "unknown" and "x86-build" in rules(d)


def test_an_x86_build_that_lists_no_device_ran_on_the_cpu():
    """The Homebrew x86_64 build on an M4 (Rosetta): --list-devices lists none."""
    [d] = diagnosed((HERE / "038-llama-cli-x86-64-homebrew-on-m4-2025.log").read_text())
    assert d["verdict"] == "no-gpu-offload" and "no-metal-device" in rules(d)
