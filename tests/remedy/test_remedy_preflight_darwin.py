"""The macOS code paths, driven on Linux: CAPSCAN_PLATFORM=darwin and stand-in
csrutil/codesign/lipo/otool/sysctl on PATH printing recorded real outputs.
Every refusal is checked case by case: exit 2, the failing check named, one
sentence of why and what to do instead, and nothing launched."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest

from conftest import BIN, FIXTURES, stock_fake_llama_log

LIBRARY: dict = {}


@pytest.fixture(autouse=True)
def _library(mac_library):
    LIBRARY["path"] = mac_library


def _ready(env, linux_build, macos_build, **kw):
    """A stored stock fake-llama run (fixable), in a stand-in M1 Ultra guest (family auto -> 1007)."""
    env.darwin(**kw)
    return env.ingest_text(stock_fake_llama_log(linux_build))


def _run(env, target, *args, options: tuple[str, ...] = (), **kw):
    """remedy run with the arm64+arm64e+x86_64 library (what `make macos-native` builds on a Mac)."""
    return env.capscan("remedy", "run", "--json", "--dylib", str(LIBRARY["path"]), *options, "--", str(target), *args,
                       **kw)


def test_preflight_passes_and_argv_of_every_tool(env, linux_build, macos_build):
    stock = _ready(env, linux_build, macos_build)
    target = linux_build / "fake-llama"
    r = _run(env, target, "--bench")
    doc = json.loads(r.stdout)
    assert not doc["refused"], doc
    pre = {c["name"]: c for c in doc["preflight"]}
    assert pre["family"]["status"] == "pass" and doc["family"] == 1007    # auto: the host's true family
    assert pre["guest"]["status"] == "pass" and pre["SIP"]["status"] == "pass"
    assert pre["hardened runtime"]["status"] == "pass" and pre["__RESTRICT segment"]["status"] == "pass"
    assert pre["architectures"]["data"]["archs"] == ["arm64"]
    # SIP off: children are scrubbed by default, so Apple's arm64e ones never try to load the library
    assert pre["arm64e slice"]["status"] == "pass" and pre["launch chain"]["status"] == "pass"
    assert "the programs the command starts do not inherit it" in pre["arm64e slice"]["reason"]
    assert pre["children"]["status"] == "pass"
    assert pre["dylib architectures"]["data"]["archs"] == ["x86_64", "arm64", "arm64e"]
    assert doc["injection"]["env_var"] == "DYLD_INSERT_LIBRARIES"
    assert doc["injection"]["library"] == str(LIBRARY["path"])
    assert pre["dylib checksum"]["status"] == "pass" and "SHA256SUMS" in pre["dylib checksum"]["reason"]
    # dyld does not exist on Linux, so the banner never shows: verification must say so
    assert r.returncode == 1 and doc["verified"] is False
    banner = next(c for c in doc["verification"] if c["name"] == "banner")
    assert banner["status"] == "fail" and "dyld never loaded the interposer" in banner["reason"]
    exe = str(target)
    calls = env.calls()
    assert ["sysctl", "-n", "machdep.cpu.brand_string"] in calls
    assert ["sysctl", "-n", "kern.hv_vmm_present"] in calls
    assert ["sysctl", "-n", "kern.bootargs"] in calls
    assert ["xcode-select", "-p"] in calls
    assert ["csrutil", "status"] in calls
    assert ["codesign", "-dv", "--verbose=4", exe] in calls
    assert ["otool", "-l", exe] in calls
    assert ["lipo", "-archs", exe] in calls               # an ELF stand-in: the reader says no, lipo answers
    assert ["lipo", "-archs", doc["injection"]["library"]] not in calls   # the library is read in-process
    assert not any(c[:2] == ["codesign", "-d"] and "--entitlements" in c for c in calls)  # not hardened: not asked
    assert doc["stock_run_id"] == stock


def test_apple_arm64e_children_are_a_warning_whatever_the_library_holds(env, linux_build, macos_build):
    """With SIP off and --inject-children, Apple's arm64e children inherit the variable: without an arm64e slice
    they halt (measured), with one reports differ unless the -arm64e_preview_abi boot-arg is set. A warning about
    children, never a refusal (the cross-built universal file, arm64 + x86_64, is not refused); boot-arg and
    slice: a pass; without the flag (the default scrub) there is nothing to warn about."""
    _ready(env, linux_build, macos_build)
    cross = str(macos_build / "libcapscan_interposer.universal.dylib")
    for lib, phrase in ((cross, "has no arm64e slice"), (str(LIBRARY["path"]), "is disputed")):
        doc = json.loads(env.capscan("remedy", "run", "--json", "--dylib", lib, "--inject-children", "--",
                                     str(linux_build / "fake-llama")).stdout)
        assert not doc["refused"], doc
        check = next(c for c in doc["preflight"] if c["name"] == "arm64e slice")
        assert check["status"] == "warn" and phrase in check["reason"] and "exit 134" in check["reason"]
        assert "leave out --inject-children" in check["instead"]
        scrubbed = json.loads(env.capscan("remedy", "run", "--json", "--dylib", lib, "--",
                                          str(linux_build / "fake-llama")).stdout)
        assert next(c for c in scrubbed["preflight"] if c["name"] == "arm64e slice")["status"] == "pass"
    doc = json.loads(env.capscan("remedy", "run", "--json", "--dylib", str(LIBRARY["path"]), "--inject-children", "--",
                                 str(linux_build / "fake-llama"), CAPSCAN_FAKE_BOOTARGS="-v -arm64e_preview_abi").stdout)
    assert next(c for c in doc["preflight"] if c["name"] == "arm64e slice")["status"] == "pass"
    # with SIP enabled, Apple's binaries drop the variable: nothing to warn about
    doc = json.loads(env.capscan("remedy", "run", "--json", "--dylib", cross, "--inject-children", "--",
                                 str(linux_build / "fake-llama"), CAPSCAN_FAKE_SIP="enabled").stdout)
    assert next(c for c in doc["preflight"] if c["name"] == "arm64e slice")["status"] == "pass"
    # "unknown (Custom Configuration)": treated as off for this check
    doc = json.loads(env.capscan("remedy", "run", "--json", "--dylib", cross, "--inject-children", "--",
                                 str(linux_build / "fake-llama"), CAPSCAN_FAKE_SIP="unknown-custom").stdout)
    assert next(c for c in doc["preflight"] if c["name"] == "arm64e slice")["status"] == "warn"


def _refused(r, name: str, phrase: str) -> dict:
    assert r.returncode == 2, r.stdout.decode() + r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["refused"] is True
    failing = [c for c in doc["checks"] if c["status"] == "fail"]
    assert failing, doc
    hit = next((c for c in failing if c["name"] == name), None)
    assert hit is not None, [c["name"] for c in failing]
    assert phrase in hit["reason"], hit["reason"]
    assert hit["instead"], hit
    assert hit["reason"].count(". ") == 0  # one sentence
    return hit


CASES = {
    "hardened runtime": ({"CAPSCAN_FAKE_CODESIGN": "hardened"}, "hardened runtime",
                         "without allow-dyld-environment-variables"),
    "library validation": ({"CAPSCAN_FAKE_CODESIGN": "hardened", "CAPSCAN_FAKE_ENTITLEMENTS": "allow-dyld"},
                           "library validation", "refuses capscan's ad-hoc-signed library"),
    "restrict flag": ({"CAPSCAN_FAKE_CODESIGN": "restrict"}, "hardened runtime", "restrict flag"),
    "__RESTRICT": ({"CAPSCAN_FAKE_OTOOL": "restrict"}, "__RESTRICT segment", "has a __RESTRICT segment"),
    "bare metal": ({"CAPSCAN_FAKE_BRAND": "Apple M1 Ultra"}, "guest", "not a VM guest"),
    "intel": ({"CAPSCAN_FAKE_BRAND": "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", "CAPSCAN_MACHINE": "x86_64"},
              "platform", "hardware limit"),
    "already injected": ({"DYLD_INSERT_LIBRARIES": "/usr/local/lib/TartMetalCapabilities.dylib"},
                         "already injected", "capscan never injects twice"),
    "ours already injected": ({"DYLD_INSERT_LIBRARIES": "/x/libcapscan_interposer.arm64.dylib"},
                              "already injected", "capscan’s interposer is active in this shell"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refusal(env, linux_build, macos_build, case):
    extra, name, phrase = CASES[case]
    _ready(env, linux_build, macos_build)
    r = _run(env, linux_build / "fake-llama", **extra)
    _refused(r, name, phrase)
    con = sqlite3.connect(env.db)
    assert con.execute("SELECT COUNT(*) FROM remedy_actions WHERE action='remedy-run'").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM run_links").fetchone()[0] == 0


def test_hardened_with_both_entitlements_passes(env, linux_build, macos_build):
    _ready(env, linux_build, macos_build)
    r = _run(env, linux_build / "fake-llama", CAPSCAN_FAKE_CODESIGN="hardened",
             CAPSCAN_FAKE_ENTITLEMENTS="allow-dyld+disable-lv")
    doc = json.loads(r.stdout)
    assert not doc["refused"]
    hr = next(c for c in doc["preflight"] if c["name"] == "hardened runtime")
    assert hr["status"] == "pass" and hr["data"]["disable_library_validation"] is True
    assert ["codesign", "-d", "--entitlements", "-", str(linux_build / "fake-llama")] in env.calls()


def test_unsigned_program_passes(env, linux_build, macos_build):
    _ready(env, linux_build, macos_build)
    doc = json.loads(_run(env, linux_build / "fake-llama", CAPSCAN_FAKE_CODESIGN="unsigned").stdout)
    assert next(c for c in doc["preflight"] if c["name"] == "hardened runtime")["reason"].endswith(
        "is not signed, so dyld honours the variable")


def test_sip_protected_program_is_refused_only_with_sip_on(env, linux_build, macos_build):
    _ready(env, linux_build, macos_build)
    env_bin = "/usr/bin/env"  # the one scripts name, not whichever env comes first on this machine's PATH
    assert os.path.exists(env_bin)
    _refused(_run(env, env_bin, CAPSCAN_FAKE_SIP="enabled"), "protected location", "SIP-protected")
    # SIP off: not protected any more; Apple's arm64e env and the library's arm64e slice: disputed, a warning
    # (env is a launcher: its workload is what it runs, so children must inherit)
    doc = json.loads(_run(env, env_bin, "true", options=("--inject-children",), CAPSCAN_FAKE_SIP="disabled").stdout)
    assert not doc["refused"], doc
    assert next(c for c in doc["preflight"] if c["name"] == "protected location")["status"] == "pass"
    chain = next(c for c in doc["preflight"] if c["name"] == "launch chain")
    assert chain["status"] == "warn" and "may refuse third-party arm64e code" in chain["reason"]
    doc = json.loads(_run(env, env_bin, "true", options=("--inject-children",), CAPSCAN_FAKE_SIP="disabled",
                          CAPSCAN_FAKE_BOOTARGS="-arm64e_preview_abi").stdout)
    assert next(c for c in doc["preflight"] if c["name"] == "launch chain")["status"] == "pass"


def test_sip_enabled_alone_is_a_warning(env, linux_build, macos_build):
    _ready(env, linux_build, macos_build)
    doc = json.loads(_run(env, linux_build / "fake-llama", CAPSCAN_FAKE_SIP="enabled").stdout)
    sip = next(c for c in doc["preflight"] if c["name"] == "SIP")
    assert sip["status"] == "warn" and "no published result confirms the shim with SIP on" in sip["reason"]


def test_shebang_script_through_a_protected_interpreter(env, linux_build, macos_build, tmp_path):
    _ready(env, linux_build, macos_build, CAPSCAN_FAKE_SIP="enabled")
    script = tmp_path / "bench.sh"
    script.write_text(f"#!/bin/sh\nexec {linux_build / 'fake-llama'} \"$@\"\n")
    script.chmod(0o755)
    link = tmp_path / "bench"
    link.symlink_to(script)
    hit = _refused(_run(env, link), "protected location", "starts through /")
    assert "purges DYLD_INSERT_LIBRARIES" in hit["reason"]
    # `#!/usr/bin/env python3` is followed through env to the interpreter it names: the python3 of a PATH made
    # here (a binary, not a script), as the machine's own may be a wrapper script (a pyenv shim runs bash)
    interpreters = tmp_path / "interpreters"
    interpreters.mkdir()
    shutil.copy(linux_build / "fake-llama", interpreters / "python3")
    py = tmp_path / "tool.py"
    py.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    py.chmod(0o755)
    r = _run(env, py, PATH=os.pathsep.join((str(BIN), str(interpreters), "/usr/bin", "/bin")))
    doc = json.loads(r.stdout)
    exe = next(c for c in doc["checks"] if c["name"] == "executable")
    walked = exe["data"]["chain"]
    assert any(p.endswith("/env") for p in walked) and walked[-1] == os.path.realpath(interpreters / "python3")
    chain = next(c for c in doc["checks"] if c["name"] == "launch chain")
    assert chain["data"]["binaries"][0] == "/usr/bin/env (SIP-protected: drops the variable)", chain  # SIP is on here


def test_setuid_program_is_refused(env, linux_build, macos_build, tmp_path):
    _ready(env, linux_build, macos_build)
    copy = tmp_path / "llama-bench"
    shutil.copy(linux_build / "fake-llama", copy)
    copy.chmod(0o4755)
    if not os.stat(copy).st_mode & 0o4000:
        pytest.skip("this filesystem drops the setuid bit")
    _refused(_run(env, copy), "setuid/setgid", "is setuid")


def test_family_above_the_host_is_refused(env, linux_build, macos_build):
    _ready(env, linux_build, macos_build)
    r = env.capscan("remedy", "run", "--json", "--family", "1009", "--dylib", str(LIBRARY["path"]), "--",
                    str(linux_build / "fake-llama"))
    hit = _refused(r, "family", "above the host chip's true family 1007")
    assert "--family 1007" in hit["instead"]


def test_dylib_checks(env, linux_build, macos_build, tmp_path):
    _ready(env, linux_build, macos_build)
    d = tmp_path / "lib"
    d.mkdir()
    lib = d / "libcapscan_interposer.dylib"
    shutil.copy(LIBRARY["path"], lib)
    (d / "SHA256SUMS").write_text("0" * 64 + "  libcapscan_interposer.dylib\n")
    r = env.capscan("remedy", "run", "--json", "--dylib", str(lib), "--", str(linux_build / "fake-llama"))
    _refused(r, "dylib checksum", "the file changed after it was built")
    lib.chmod(0o775)
    r = env.capscan("remedy", "run", "--json", "--dylib", str(lib), "--", str(linux_build / "fake-llama"))
    _refused(r, "dylib permissions", "group-writable")


@pytest.mark.parametrize("fixture, verdict, phrase", [
    ("metal/m2-2024-10-amd-egpu-intel-mac.log", "hardware-limit", "do not force capabilities"),
    ("backends/cpu-only-system-info-2024-10.log", "no-gpu-offload", "The GPU is not used at all"),
    ("metal/m4-2026-05-timestamped.log", "healthy", "nothing to fix"),
    ("metal/m0-2023-06-mps.log", "unknown", "capscan never injects on a guess"),
    ("metal/symptoms-only-skipping.log", "unknown", "capscan never injects on a guess"),
    ("rules/contradictory-merged-legacy-blocks.log", "capability-downgrade", "Not marked fixable"),
    ("shims/lume-broad-overclaim.log", None, "LumeMetalCapabilities"),
])
def test_runs_that_are_not_fixable_are_refused(env, fixture, verdict, phrase):
    rid = env.ingest(FIXTURES / fixture)
    r = env.capscan("remedy", "run", "--run", str(rid), "--", "true")
    err = r.stderr.decode()
    assert r.returncode == 2
    assert f"capscan: refusing: run {rid} is {verdict or ''}" in err and phrase in err
    assert env.calls() == []  # nothing probed, nothing launched
    plan = json.loads(env.capscan("remedy", "plan", "--json", "--run", str(rid)).stdout)
    assert plan["actionable"] is False and phrase in plan["refusal"] and plan["steps"] == []
    env_lines = env.capscan("remedy", "env", "--run", str(rid))
    assert env_lines.returncode == 2 and env_lines.stdout == b""


def test_no_stock_run_is_a_usage_error(env):
    r = env.capscan("remedy", "run", "--", "true")
    assert r.returncode == 2
    assert r.stderr.decode().startswith("capscan: no stock run stored yet")


def test_fake_llama_log_family_from_the_guest_cpu(env, linux_build, macos_build):
    """The fake log names no host chip: in a (stand-in) guest, auto reads the CPU brand string."""
    env.darwin(CAPSCAN_FAKE_BRAND="Apple M2 Max (Virtual)")
    env.ingest_text(stock_fake_llama_log(linux_build))
    doc = json.loads(_run(env, linux_build / "fake-llama").stdout)
    assert doc["family"] == 1008
    fam = next(c for c in doc["preflight"] if c["name"] == "family")
    assert "Apple M2 Max (Virtual)" in fam["reason"]


# -- a log that lacks only the host's proof: the live guest is checked (issue 21) ----------------------


def test_a_host_less_log_is_remedied_when_the_live_guest_proves_its_host(env, linux_build, macos_build):
    """The stock llama-bench log names no host chip and no arm64 build: not fixable from the log, but
    `remedy run` runs here, so this guest's own brand string (Apple M1 Ultra (Virtual)) is the proof."""
    env.darwin()
    stock = env.ingest_text(stock_fake_llama_log(linux_build, host_proof=False))
    shown = json.loads(env.capscan("show", str(stock), "--json").stdout)
    assert shown["fixable"] is False and shown["fixable_reason"] == "nothing in the log shows the host chip"
    doc = json.loads(_run(env, linux_build / "fake-llama", "--bench").stdout)
    assert doc["refused"] is False and doc["stock_run_id"] == stock
    assert doc["family"] == 1007  # the brand string's chip: M1 -> Apple7
    # the plan reads the same decision, with the same live check
    plan = json.loads(env.capscan("remedy", "plan", "--run", str(stock), "--json").stdout)
    assert plan["actionable"] is True


@pytest.mark.parametrize("brand,machine", [("Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz (Virtual)", "x86_64"),
                                           ("QEMU Virtual CPU version 2.5+", "x86_64")],
                         ids=["intel brand", "no chip named, x86_64"])
def test_a_host_less_log_is_refused_when_the_live_guest_does_not_prove_it(env, linux_build, macos_build, brand,
                                                                          machine):
    env.darwin(CAPSCAN_FAKE_BRAND=brand, CAPSCAN_MACHINE=machine)
    env.ingest_text(stock_fake_llama_log(linux_build, host_proof=False))
    r = _run(env, linux_build / "fake-llama", "--bench")
    assert r.returncode == 2, r.stdout.decode() + r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["refused"] is True and "nothing in the log shows the host chip" in doc["reason"]
    assert not any(c[:1] == [str(linux_build / "fake-llama")] for c in env.calls())


def test_on_linux_a_host_less_log_is_refused(env, linux_build):
    """Off macOS nothing live can prove the host: only the log's own proof counts."""
    env.ingest_text(stock_fake_llama_log(linux_build, host_proof=False))
    r = env.capscan("remedy", "run", "--json", "--", str(linux_build / "fake-llama"), "--bench")
    assert r.returncode == 2 and json.loads(r.stdout)["refused"] is True
