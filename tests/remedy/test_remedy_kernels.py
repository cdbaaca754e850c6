"""Issue 27 in the remedy: the kernel check runs before anything is injected, refuses on a failure,
is reused for the boot, and `remedy selftest --json` carries it. On the Linux stand-in, whose fake
Metal device computes the kernels on the CPU (CAPSCAN_FAKE_METAL_KERNELS picks the outcome)."""

from __future__ import annotations

import json

import pytest

from analyzer.remedy import kernels as km
from conftest import stock_fake_llama_log


def _selftest(env, **extra: str) -> dict:
    r = env.capscan("remedy", "selftest", "--json", **extra)
    assert b"Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_selftest_json_includes_the_kernel_results(env, linux_build):
    doc = _selftest(env)
    assert doc["verdict"] == "works"
    k = doc["kernels"]
    assert {cap: r["result"] for cap, r in k["results"].items()} == {
        "simdgroup_reduction": "pass", "simdgroup_mm": "pass", "bfloat": "pass"}
    assert k["msl_version"] == "3.2" and isinstance(k["elapsed_ms"], int) and k["cached"] is False
    check = next(c for c in doc["checks"] if c["name"] == "kernel check")
    assert check["status"] == "pass" and "got the right answers" in check["reason"]
    # a second self-test in the same boot reuses the stored check
    assert _selftest(env)["kernels"]["cached"] is True


@pytest.mark.parametrize(("mode", "said"), [
    ("simdgroup_mm=fail", "does not run simdgroup matrix multiply correctly (fail: simdgroup_float8x8"),
    ("capscan_simdgroup_mm_fa=fail", "does not run simdgroup matrix multiply correctly (fail: capscan_simdgroup_mm_fa "
                                     "(half x half -> float, K transposed from device memory, 128 threads"),
    ("compile-error", "refused capscan's simdgroup reduction kernel (compile-error: program_source"),
])
def test_a_failed_kernel_refuses_before_anything_is_injected(env, linux_build, mode, said):
    doc = _selftest(env, CAPSCAN_FAKE_METAL_KERNELS=mode, CAPSCAN_PROBE_KERNEL_TIMEOUT_MS="1500")
    assert doc["verdict"] == "kernels-fail", doc["reason"]
    assert said in doc["reason"] and "capscan" not in doc["runs"]  # the remedied probe never ran
    check = next(c for c in doc["checks"] if c["name"] == "kernel check")
    assert check["status"] == "fail" and said in check["reason"]


@pytest.mark.parametrize(("mode", "said"), [
    ("timeout", "simdgroup reduction timeout: the command buffer did not complete"),
    ("crash", "simdgroup reduction crash: the check died by signal 11 (SIGSEGV) while running this kernel"),
    ("hang", "simdgroup reduction timeout: no result within 1500 ms"),
    ("simdgroup_mm=gpu-timeout", "simdgroup matrix multiply timeout: command buffer error: Caused GPU Timeout"),
])
def test_a_check_that_could_not_run_is_a_warning_not_do_not_force(env, linux_build, mode, said):
    """A crash or a timeout of the check says nothing about the GPU: a warning, the self-test goes on."""
    doc = _selftest(env, CAPSCAN_FAKE_METAL_KERNELS=mode, CAPSCAN_PROBE_KERNEL_TIMEOUT_MS="1500")
    assert doc["verdict"] != "kernels-fail", doc["reason"]
    check = next(c for c in doc["checks"] if c["name"] == "kernel check")
    assert check["status"] == "warn" and "the check could not run" in check["reason"] and said in check["reason"]
    assert "do not force" not in json.dumps(check)


def test_only_a_passing_check_is_reused_for_the_boot(env, linux_build):
    crashed = _selftest(env, CAPSCAN_FAKE_METAL_KERNELS="crash")["kernels"]
    assert crashed["results"]["simdgroup_reduction"]["result"] == "crash" and crashed["cached"] is False
    # the same boot and the same fake selection: a crash is checked again, never reused
    again = _selftest(env, CAPSCAN_FAKE_METAL_KERNELS="crash")["kernels"]
    assert again["cached"] is False
    failed = _selftest(env, CAPSCAN_FAKE_METAL_KERNELS="simdgroup_mm=fail")
    assert failed["verdict"] == "kernels-fail" and failed["kernels"]["cached"] is False
    assert _selftest(env, CAPSCAN_FAKE_METAL_KERNELS="simdgroup_mm=fail")["kernels"]["cached"] is False
    assert _selftest(env)["kernels"]["cached"] is False
    assert _selftest(env)["kernels"]["cached"] is True  # a pass is


def test_remedy_run_checks_the_kernels_again_with_the_library_loaded(env, linux_build):
    """Stock passes; with the library loaded (CAPSCAN_FAKE_METAL_KERNELS_INJECTED) simdgroup_mm fails: refused
    before the workload starts."""
    stock = env.ingest_text(stock_fake_llama_log(linux_build))
    fake = str(linux_build / "fake-llama")
    r = env.capscan("remedy", "run", "--run", str(stock), "--family", "1007", "--", fake,
                    CAPSCAN_FAKE_METAL_KERNELS_INJECTED="simdgroup_mm=fail")
    assert r.returncode != 0
    text = r.stderr.decode()
    assert "kernel check: the paravirtual device ran" in text  # stock passed
    assert ("kernel check (library loaded): the GPU behind this VM does not run simdgroup matrix multiply "
            "correctly") in text
    assert "nothing was launched" in text and "do not force the family" in text
    ok = env.capscan("remedy", "run", "--run", str(stock), "--family", "1007", "--", fake)
    assert ok.returncode == 0, ok.stderr.decode()
    assert "kernel check (library loaded): the paravirtual device ran" in ok.stderr.decode()


def test_bfloat_alone_advises_bf16_disable_and_then_verifies_bfloat_false(env, linux_build):
    stock = env.ingest_text(stock_fake_llama_log(linux_build))
    fake = str(linux_build / "fake-llama")
    r = env.capscan("remedy", "run", "--run", str(stock), "--family", "1007", "--", fake,
                    CAPSCAN_FAKE_METAL_KERNELS="bfloat=compile-error")
    assert r.returncode != 0
    text = r.stderr.decode()
    assert "could not compile the bfloat kernel" in text and "bfloat only" in text
    assert "GGML_METAL_BF16_DISABLE=1 capscan remedy run -- CMD" in text and "do not force" not in text
    ok = env.capscan("remedy", "run", "--json", "--run", str(stock), "--family", "1007", "--", fake,
                     CAPSCAN_FAKE_METAL_KERNELS="bfloat=compile-error", GGML_METAL_BF16_DISABLE="1")
    assert ok.returncode == 0, ok.stderr.decode()
    doc = json.loads(ok.stdout)
    assert doc["verified"] is True and doc["compare"]["after"]["bfloat"] is False
    flags = next(c for c in doc["verification"] if c["name"] == "capability flags")
    assert flags["status"] == "pass" and "GGML_METAL_BF16_DISABLE is set" in flags["reason"]
    assert "bfloat false (GGML_METAL_BF16_DISABLE is set)" in ok.stderr.decode()  # while it runs, too
    # without the switch, a bfloat false is still a failure to verify
    assert km.bf16_disabled({"GGML_METAL_BF16_DISABLE": ""}) is True  # llama.cpp: getenv != NULL
    assert km.bf16_disabled({}) is False


def test_remedy_run_refuses_a_gpu_that_fails_the_kernels(env, linux_build):
    stock = env.ingest_text(stock_fake_llama_log(linux_build))
    fake = str(linux_build / "fake-llama")
    r = env.capscan("remedy", "run", "--run", str(stock), "--family", "1007", "--", fake,
                    CAPSCAN_FAKE_METAL_KERNELS="simdgroup_mm=fail")
    assert r.returncode != 0
    text = r.stderr.decode()
    assert "kernel check: the GPU behind this VM does not run simdgroup matrix multiply correctly" in text
    assert "nothing was launched" in text and "do not force the family" in text
    ok = env.capscan("remedy", "run", "--run", str(stock), "--family", "1007", "--", fake)
    assert ok.returncode == 0, ok.stderr.decode()
    assert "kernel check: the paravirtual device ran" in ok.stderr.decode()


def test_a_cap_never_claims_what_the_kernels_did_not_pass():
    matrix = {"simdgroup_reduction": True, "simdgroup_mm": True, "bfloat": True}
    passing = km.KernelCheck({c: {"result": "pass"} for c in km.CAPABILITIES})
    assert km.claims_beyond_kernels(matrix, passing) == []
    no_bf16 = km.KernelCheck({"simdgroup_reduction": {"result": "pass"}, "simdgroup_mm": {"result": "pass"},
                              "bfloat": {"result": "not-run"}})
    assert km.claims_beyond_kernels(matrix, no_bf16) == []  # MSL < 3.1: llama.cpp has no bfloat there either
    mm_failed = km.KernelCheck({"simdgroup_reduction": {"result": "pass"}, "simdgroup_mm": {"result": "fail"}})
    assert km.claims_beyond_kernels(matrix, mm_failed) == ["simdgroup matrix multiply (kernel check: fail)",
                                                           "bfloat (kernel check: not run)"]
    assert km.claims_beyond_kernels({"simdgroup_mm": False}, mm_failed) == []


def test_an_older_probe_without_kernels_is_a_warning_not_a_pass():
    kc = km.KernelCheck(error="capscan-probe printed no kernel results (a probe older than --kernels)")
    c = km.check(kc)
    assert c.status == "warn" and "capscan probe --kernels" in c.instead


def test_probe_kernels_on_the_stand_in_in_both_forms(env, linux_build):
    probe = str(linux_build / "capscan-probe")
    human = env.capscan("probe", "--probe", probe, "--kernels", CAPSCAN_FAKE_ARCH="arm64",
                        CAPSCAN_FAKE_METAL_KERNELS="bfloat=fail")
    out = human.stdout.decode()
    assert human.returncode == 0, human.stderr.decode()
    assert "kernel.bfloat=fail" in out  # the evidence lines
    assert "does not run bfloat correctly" in out
    doc = json.loads(env.capscan("probe", "--probe", probe, "--kernels", "--json", CAPSCAN_FAKE_ARCH="arm64").stdout)
    run = doc["runs"][0]
    assert run["fixable"] is True and run["confidence"] == "high"
    assert run["proof"][0]["sign"].startswith("the paravirtual device ran simdgroup reduction")
    raw = env.capscan("probe", "--probe", probe, "--json", "--", "--json", "--kernels", CAPSCAN_FAKE_ARCH="arm64")
    assert json.loads(raw.stdout)["runs"][0]["fixable"] is True  # the probe's own --json form reads the same
