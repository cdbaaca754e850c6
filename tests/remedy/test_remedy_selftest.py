"""`capscan remedy selftest` end to end on the Linux stand-in (stock probe, remedied
probe, verdict, JSON, llama-bench speed-up, another shim), and each verdict's
path through the macOS code with stand-in tools."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from conftest import REPO


def _doc(r) -> dict:
    return json.loads(r.stdout)


def test_selftest_end_to_end_on_the_linux_stand_in(env, linux_build):
    fake = str(linux_build / "fake-llama")
    shim = str(linux_build / "libcapscan_interposer.so")     # stands in for Lume's/Tart's shim (LUME_ alias)
    r = env.capscan("remedy", "selftest", "--json", "--llama-bench", fake, "-m", "tiny model.gguf",
                    "--compare-shim", shim)
    assert r.returncode == 0, r.stderr.decode()
    doc = _doc(r)
    assert doc["platform"] == "linux" and doc["stand_in"] is True and doc["verdict"] == "works"
    assert doc["family"] == 1007
    stock, capscan, other = (doc["runs"][k] for k in ("stock", "capscan", "other-shim"))
    assert stock["matrix"]["apple_family"] == 1005 and stock["matrix"]["simdgroup_reduction"] is False
    assert capscan["matrix"]["apple_family"] == 1007 and capscan["matrix"]["simdgroup_mm"] is True
    assert capscan["matrix"]["metal3"] is False and capscan["matrix"]["metal4"] is False   # never claimed
    assert capscan["matrix"]["max_threadgroup_memory"] == 32768                           # stock
    assert other["matrix"]["apple_family"] == 1007
    assert any("from -[_MTLDevice initGPUFamilySupport]" in ln for ln in capscan["interposer_lines"])
    assert stock["interposer_lines"] == []
    bench = doc["llama_bench"]
    assert bench["args"] == ["-m", "tiny model.gguf", "-p", "128", "-n", "32", "-r", "2"]
    assert bench["capscan_speedup"]["tg128"] == {"before": 12.63, "after": 206.6, "ratio": 16.36}
    assert bench["other-shim_speedup"]["pp512"]["ratio"] == 11.08
    # stored: probe runs and bench runs, each remedied run linked to its stock run
    con = sqlite3.connect(env.db)
    links = con.execute("SELECT run_id, stock_run_id, relation FROM run_links ORDER BY run_id").fetchall()
    sid = stock["run_ids"][0]
    assert (capscan["run_ids"][0], sid, "selftest") in links and (other["run_ids"][0], sid, "selftest") in links
    assert (bench["capscan_run_ids"][-1], bench["stock_run_ids"][-1], "selftest") in links
    # the stock and remedied probes, the other shim's, three bench runs, and the kernel check preflight ran
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 7
    # attachable: capscan's own paths are redacted; what the user passed stays
    text = r.stdout.decode()
    assert str(REPO) not in text and "<capscan>/native/interposer" in text
    assert doc["arguments"]["llama_bench"] == fake.replace(str(REPO), "<capscan>")
    assert "send_back" in doc
    human = env.capscan("remedy", "selftest")
    out = human.stdout.decode()
    assert human.returncode == 0
    assert out.startswith("capscan remedy selftest (Linux stand-in: LD_PRELOAD and the fake Metal device")
    assert "Apple5 (1005)" in out and "Apple7 (1007)" in out and "verdict: works:" in out
    # a selftest link has no recorded action: status says what it is, never 'action None'
    status = env.capscan("remedy", "status")
    text = status.stdout.decode()
    assert status.returncode == 0 and "None" not in text
    assert f"run {capscan['run_ids'][0]} <- stock run {sid} (selftest)\n" in text


def test_selftest_says_when_the_library_never_took(env, linux_build):
    """A library that loads but is not capscan's (here the fake Metal itself): no line, stock answers."""
    r = env.capscan("remedy", "selftest", "--json", "--dylib", str(linux_build / "libfakemetal.so"))
    doc = _doc(r)
    assert r.returncode == 1 and doc["verdict"] == "interposing-disabled"
    assert "never loaded the library" in doc["reason"]
    assert doc["runs"]["capscan"]["matrix"]["apple_family"] == 1005


@pytest.mark.parametrize("extra, dylib, verdict, phrase", [
    ({"CAPSCAN_FAKE_BRAND": "Apple M1 Ultra"}, "mac", "not-a-vm", "kern.hv_vmm_present=0"),
    # the cross-built library (no arm64e) with SIP off: the children are a warning, no longer a refusal, so the
    # self-test runs; Linux then ignores DYLD_INSERT_LIBRARIES
    ({"CAPSCAN_FAKE_SIP": "disabled"}, "cross", "interposing-disabled", "never loaded the library"),
    ({"CAPSCAN_FAKE_CODESIGN": "hardened"}, "mac", "refused-by-hardened-runtime", "hardened runtime"),
    ({}, "mac", "interposing-disabled", "never loaded the library"),   # Linux ignores DYLD_INSERT_LIBRARIES
])
def test_selftest_verdicts_through_the_macos_code(env, linux_build, macos_build, mac_library, extra, dylib,
                                                  verdict, phrase):
    env.darwin(**extra)
    lib = mac_library if dylib == "mac" else macos_build / "libcapscan_interposer.universal.dylib"
    r = env.capscan("remedy", "selftest", "--json", "--probe", str(linux_build / "capscan-probe"),
                    "--dylib", str(lib))
    doc = _doc(r)
    assert r.returncode == 1, doc
    assert doc["platform"] == "darwin" and doc["stand_in"] is False
    assert doc["verdict"] == verdict and phrase in doc["reason"], doc["reason"]
    assert doc["runs"]["stock"]["matrix"]["apple_family"] == 1005      # the stock run is always there
    if verdict in ("not-a-vm", "arm64e-missing", "refused-by-hardened-runtime"):
        assert "capscan" not in doc["runs"]                           # nothing injected
    text = env.capscan("remedy", "selftest", "--probe", str(linux_build / "capscan-probe"), "--dylib", str(lib),
                       ).stdout.decode()
    assert f"verdict: {verdict}:" in text and "send back:" in text


def test_model_without_llama_bench_is_a_usage_error(env):
    r = env.capscan("remedy", "selftest", "-m", "x.gguf")
    assert r.returncode == 2 and b"-m/--model goes with --llama-bench PATH" in r.stderr


def test_remedy_run_names_the_interposing_disabled_line():
    """`remedy run` reads the constructor's self-check line and says what it means."""
    from types import SimpleNamespace as NS

    from analyzer.diagnosis import Diagnosis
    from analyzer.remedy import launch as L
    from analyzer.remedy import platform as plat

    flags = {"simdgroup_reduction": False, "simdgroup_mm": False, "bfloat": False}
    caps = NS(simdgroup_reduction=False, as_dict=lambda: flags)
    run = NS(id=2, facts=NS(device=NS(name="Apple Paravirtual device", apple_family=1005), capabilities=caps,
                            shim=None), diagnosis=Diagnosis.load(
        {"verdict": "capability-downgrade", "fixable": False, "capabilities": flags}))
    line = ("[capscan-interposer] interposing is disabled in llama-bench: MTLCreateSystemDefaultDevice is not "
            "capscan's wrapper (the loader did not apply __interpose) and there is no -[_MTLDevice "
            "initGPUFamilySupport] to hook; Metal answers stay stock")
    assert L.SHIM_TROUBLE.search(line)
    checks = L.verify(L.Outcome(returncode=0, shim_trouble=[line]), [run], 1007, plat.injection("darwin"))
    banner = next(c for c in checks if c.name == "banner")
    assert banner.failed and "did not apply its interposing" in banner.reason
    assert "capscan remedy selftest --json" in banner.instead


def test_an_apple_child_that_halts_on_the_library_is_reported(tmp_path):
    """With SIP not fully on, the self-test runs an Apple arm64e program (/usr/bin/true) with the injection:
    dyld's 'terminating because inserted dylib' and exit 134 mean the workload's shells would halt too."""
    from analyzer.remedy.selftest import apple_child

    halts = tmp_path / "true"
    halts.write_text("#!/bin/sh\necho \"dyld[4185]: terminating because inserted dylib 'x.dylib' could not be "
                     "loaded: (mach-o file, but is an incompatible architecture (have 'arm64', need 'arm64e'))\" >&2\n"
                     "exit 134\n")
    halts.chmod(0o755)
    fine = tmp_path / "fine"
    fine.write_text("#!/bin/sh\nexit 0\n")
    fine.chmod(0o755)
    env = dict(os.environ)
    got = apple_child(env, "disabled", str(halts))
    assert got["halted"] is True and got["returncode"] == 134 and "terminating because inserted dylib" in got["loader_said"]
    assert apple_child(env, "disabled", str(fine)) == {"program": str(fine), "returncode": 0, "halted": False,
                                                       "loader_said": None}
    assert "skipped" in apple_child(env, "enabled", str(halts))


def test_the_darwin_selftest_reports_its_apple_child(env, linux_build, mac_library):
    env.darwin()
    r = env.capscan("remedy", "selftest", "--json", "--probe", str(linux_build / "capscan-probe"),
                    "--dylib", str(mac_library))
    child = _doc(r)["facts"]["apple_child"]
    assert child["program"] == "/usr/bin/true" and child["halted"] is False  # Linux ignores DYLD_INSERT_LIBRARIES


def test_an_abort_without_dyld_words_is_not_a_missing_arm64e_slice(linux_build):
    """Exit 134 is any SIGABRT (a Metal assertion, a crash): only dyld's arm64e line makes it arm64e-missing."""
    import subprocess

    from analyzer.remedy import platform as plat
    from analyzer.remedy.selftest import ProbeRun, Report, decide

    clean = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES")}
    out = subprocess.run([str(linux_build / "capscan-probe")], capture_output=True, text=True, env=clean).stdout
    stock = ProbeRun("stock", 0, out, "")
    crash = "-[MTLDebugDevice newBufferWithLength:]: failed assertion `length must be > 0'\n"
    halt = ("dyld[4185]: terminating because inserted dylib 'x.dylib' could not be loaded: (mach-o file, but is an "
            "incompatible architecture (have 'arm64', need 'arm64e'))\n")
    for code in (134, -6):
        report = Report("darwin", False)
        decide(report, stock, ProbeRun("capscan", code, "", crash), 1007, plat.injection("darwin"))
        assert report.verdict == "inconclusive", report.reason
        assert f"aborted (exit {code}, SIGABRT) without dyld's arm64e line" in report.reason
        assert "failed assertion" in report.reason
    report = Report("darwin", False)
    decide(report, stock, ProbeRun("capscan", 134, "", halt), 1007, plat.injection("darwin"))
    assert report.verdict == "arm64e-missing" and "need 'arm64e'" in report.reason


def test_an_apple_child_that_aborts_for_another_reason_is_not_halted_by_the_library(tmp_path):
    from analyzer.remedy.selftest import apple_child

    aborts = tmp_path / "true"
    aborts.write_text("#!/bin/sh\necho 'Assertion failed: (x), function main' >&2\nexit 134\n")
    aborts.chmod(0o755)
    got = apple_child(dict(os.environ), "disabled", str(aborts))
    assert got["returncode"] == 134 and got["halted"] is False and got["loader_said"] is None
