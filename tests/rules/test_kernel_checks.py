"""Issue 27: the probe runs the kernels the family only promises, and its results change the diagnosis.

The fixtures in tests/fixtures/kernels/ are the Linux stand-in's own output (native/interposer
build/linux/capscan-probe --kernels with CAPSCAN_FAKE_ARCH=arm64 and each CAPSCAN_FAKE_METAL_KERNELS
mode; see tests/fixtures/README.md): a paravirtual device at Apple5 in a guest whose brand string
names an Apple M1 Ultra, the case a family alone would call fixable."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.parsers.probes import _host_and_kernel_events
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db
from tests.ingest_util import ingest_bytes

KERNELS = Path(__file__).resolve().parents[1] / "fixtures" / "kernels"
BASE = (KERNELS / "guest-kernels-pass.txt").read_text().split("kernel.", 1)[0]  # the probe without --kernels


def diagnose(text: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "k.db")
        result = ingest(db, Input("capscan-probe", io.BytesIO(text.encode())))
        (run,) = diagnose_runs(db, result.run_ids, refresh_peers=True)
        diag = dict(run.diagnosis.stored() if run.diagnosis else {})
        diag["facts"] = run.facts
        db.conn.close()
        return diag


@pytest.mark.parametrize(("line", "kind", "data"), [
    ("kernel.simdgroup_reduction=pass", "probe.kernel", {"capability": "simdgroup_reduction", "result": "pass"}),
    ("kernel.simdgroup_mm=compile-error", "probe.kernel", {"capability": "simdgroup_mm", "result": "compile-error"}),
    ("kernel.bfloat=not-run", "probe.kernel", {"capability": "bfloat", "result": "not-run"}),
    ("kernel.simdgroup_mm=crash", "probe.kernel", {"capability": "simdgroup_mm", "result": "crash"}),
    ("kernel.simdgroup_mm.message=simdgroup_float8x8: expected 21 got 22 at 9", "probe.kernel_message",
     {"capability": "simdgroup_mm", "message": "simdgroup_float8x8: expected 21 got 22 at 9"}),
    ("kernel.msl_version=3.1", "probe.kernel_info", {"msl_version": "3.1"}),
    ("kernel.elapsed_ms=142", "probe.kernel_info", {"elapsed_ms": 142}),
    ("cpu_brand=Apple M1 Ultra (Virtual)", "host.processor", {"name": "Apple M1 Ultra (Virtual)"}),
    ("arch=arm64", "app.arch", {"arch": "arm64"}),
    ("hv_vmm_present=1", "probe.hv_vmm", {"value": True}),
])
def test_each_kernel_and_host_line_is_read(line, kind, data):
    key, _, value = line.partition("=")
    (event,) = _host_and_kernel_events(7, line, key, value)
    assert (event.kind, event.data, event.line) == (kind, data, 7)


def test_without_kernels_the_family_alone_decides():
    d = diagnose(BASE)
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True
    assert not any(f["rule"].startswith("kernel") for f in d["findings"])


def test_passing_kernels_are_the_first_proof_and_confidence_is_high():
    d = diagnose((KERNELS / "guest-kernels-pass.txt").read_text())
    assert d["fixable"] is True and d["confidence"] == "high"
    assert d["proof"][0]["sign"].startswith("the paravirtual device ran simdgroup reduction, simdgroup matrix "
                                            "multiply, bfloat kernels and got the right answers")
    assert d["proof"][0]["text"].startswith("kernel.")
    report = next(f for f in d["findings"] if f["rule"] == "kernel-checks")
    assert "simdgroup reduction pass, simdgroup matrix multiply pass, bfloat pass" in report["message"]
    assert "not how fast" in report["message"]
    assert d["facts"].hv_vmm_present is True and d["facts"].kernel_msl_version == "3.2"


@pytest.mark.parametrize(("fixture", "words"), [
    ("guest-kernels-simdgroup-mm-fail.txt", "does not run simdgroup matrix multiply correctly (fail: simdgroup_"),
    ("guest-kernels-compile-error.txt", "cannot compile the simdgroup reduction kernel (compile-error: program_"),
    ("guest-kernels-bfloat-compile-error.json", "cannot compile the bfloat kernel (compile-error: "),
])
def test_a_failed_kernel_vetoes_fixable_whatever_the_family_says(fixture, words):
    d = diagnose((KERNELS / fixture).read_text())
    # still a downgrade (Apple5 in a guest of a named M1 Ultra), never fixable
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is False and d["proof"] == []
    assert "the GPU behind this VM" in d["fixable_reason"] and "do not force it" in d["fixable_reason"]
    failed = next(f for f in d["findings"] if f["rule"] == "kernel-check-failed")
    assert f"The GPU behind this VM {words}" in failed["message"] and failed["severity"] == "error"
    assert failed["evidence"] and all(e["line"] for e in failed["evidence"])


@pytest.mark.parametrize("text", [
    (KERNELS / "guest-kernels-timeout.txt").read_text(),
    BASE + ("kernel.msl_version=3.2\nkernel.simdgroup_reduction=crash\nkernel.simdgroup_reduction.message=the check "
            "died by signal 11 (SIGSEGV) while running this kernel\nkernel.simdgroup_mm=crash\nkernel.bfloat=crash\n"),
])
def test_a_check_that_could_not_run_is_neither_veto_nor_proof(text):
    """A crash or a timeout of the check process says nothing about the GPU: the run is diagnosed as if no
    kernel ran (the family and the host chip decide), never "do not force it", and never with kernel proof."""
    d = diagnose(text)
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True
    assert "do not force" not in (d["fixable_reason"] or "")
    assert not any(f["rule"] == "kernel-check-failed" for f in d["findings"])
    assert not any("ran simdgroup" in p["sign"] for p in d["proof"])
    report = next(f for f in d["findings"] if f["rule"] == "kernel-checks")
    assert "the check could not run" in report["message"]


def test_bfloat_not_run_below_msl_31_is_no_failure():
    d = diagnose((KERNELS / "guest-kernels-macos13.json").read_text())
    assert d["facts"].kernels["bfloat"]["result"] == "not-run"
    assert d["fixable"] is True and d["confidence"] == "high"
    assert "bfloat" not in d["proof"][0]["sign"]


def test_two_different_results_for_one_kernel_are_a_contradiction_never_fixable():
    text = (KERNELS / "guest-kernels-pass.txt").read_text() + "kernel.simdgroup_mm=fail\n"
    d = diagnose(text)
    assert d["fixable"] is False


def test_an_unknown_result_is_refused_and_counted(tmp_path):
    result = ingest_bytes(tmp_path / "k.db", (BASE + "kernel.simdgroup_mm=maybe\n").encode(), "capscan-probe")
    assert result.rejected == 1
