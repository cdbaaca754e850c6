"""Issue 11 on Linux: the in-process Mach-O reader (against the cross-built files
and written fixtures), the launch-chain walk, preflight without the Command Line
Tools, kern.hv_vmm_present and csrutil's "Custom Configuration"."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess

import pytest

import machofixtures as mf
from analyzer.remedy import macho, preflight
from conftest import NATIVE, stock_fake_llama_log

FIXTURES = NATIVE / "build" / "macos-fixtures"


@pytest.fixture(scope="session")
def cross(macos_build):
    """The cross build plus its reader fixtures (a build directory older than them gets them made)."""
    if not (FIXTURES / "mixed-signing.universal").exists():
        with open(NATIVE / "build" / ".make.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run(["make", "--no-print-directory", "-C", str(NATIVE), "macos"], capture_output=True,
                               text=True)
        if r.returncode != 0 or not (FIXTURES / "mixed-signing.universal").exists():
            msg = "the cross-built Mach-O fixtures could not be made: " + r.stderr[-300:]
            if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
                pytest.fail(msg)
            pytest.skip(msg)
    return macos_build


# --------------------------------------------------------------------------- the reader, on real linker output


def test_reader_archs_of_the_cross_built_files(cross):
    uni = macho.read(cross / "libcapscan_interposer.universal.dylib")
    assert uni.fat and uni.archs == ["x86_64", "arm64"]
    assert all(s.filetype == macho.MH_DYLIB for s in uni.slices)
    thin = macho.read(cross / "libcapscan_interposer.arm64.dylib")
    assert not thin.fat and thin.archs == ["arm64"]
    probe = macho.read(cross / "capscan-probe")
    assert probe.archs == ["x86_64", "arm64"] and all(s.filetype == macho.MH_EXECUTE for s in probe.slices)
    assert probe.running_slice().arch == "arm64"     # what an Apple-silicon Mac runs


def test_reader_signature_flags_of_linker_signed_slices(cross):
    for sl in macho.read(cross / "libcapscan_interposer.universal.dylib").slices:
        sig = sl.signature
        assert sig is not None and sig.flags == 0x20002, (sl.arch, sig)
        assert sig.adhoc and sig.linker_signed and not sig.hardened_runtime and not sig.library_validation
        assert sig.identifier == f"libcapscan_interposer.{sl.arch}.dylib" and sig.team_id is None
        assert sig.entitlements == {}


def test_reader_restrict_section_present_and_absent(cross):
    assert macho.read(FIXTURES / "restricted.arm64").slices[0].restrict_section is True
    assert macho.read(FIXTURES / "plain.arm64").slices[0].restrict_section is False
    assert not any(s.restrict_section for s in macho.read(cross / "capscan-probe").slices)


def test_reader_fat_file_with_an_unsigned_slice(cross):
    mixed = macho.read(FIXTURES / "mixed-signing.universal")
    by_arch = {s.arch: s for s in mixed.slices}
    assert sorted(by_arch) == ["arm64", "x86_64"]
    assert by_arch["x86_64"].signature is None and by_arch["x86_64"].signature_error is None
    assert by_arch["arm64"].signature is not None and by_arch["arm64"].signature.adhoc


# --------------------------------------------------------------------------- the reader, on written fixtures


def test_reader_hardened_runtime_entitlements_and_restrict_flag(tmp_path):
    ents = {macho.ALLOW_DYLD: True, macho.DISABLE_LV: False, "com.example.name": "x", "ignored": [1]}
    f = mf.write(tmp_path / "tool", mf.thin("arm64", sig=mf.signature(0x10000 | 0x2000, "org.python.python",
                                                                      "BMM5U3QVKW", ents)))
    sig = macho.read(f).slices[0].signature
    assert sig.hardened_runtime and sig.library_validation and not sig.adhoc
    assert sig.identifier == "org.python.python" and sig.team_id == "BMM5U3QVKW"
    assert sig.entitled(macho.ALLOW_DYLD) and not sig.entitled(macho.DISABLE_LV)
    assert "ignored" not in sig.entitlements      # only booleans and strings are kept
    r = macho.read(mf.write(tmp_path / "r", mf.thin("arm64", sig=mf.signature(0x800))))
    assert r.slices[0].signature.restrict
    e = macho.read(mf.write(tmp_path / "e", mf.fat(mf.thin("x86_64"), mf.thin("arm64e"))))
    assert e.archs == ["x86_64", "arm64e"] and e.running_slice().arch == "arm64e"


@pytest.mark.parametrize("data, phrase", [
    (b"\x7fELF" + b"\0" * 60, "not a Mach-O file"),
    (b"#!/bin/sh\necho hi\n", "not a Mach-O file"),
    (b"\xca\xfe\xba\xbe\x00\x00\x00\x34" + b"\0" * 64, "not a universal Mach-O file (52 architectures)"),  # Java
    (b"\xcf\xfa\xed\xfe", "shorter than a header"),
    (struct.pack("<8I", 0xFEEDFACF, 0x0100000C, 0, 2, 5, 4000, 0, 0), "truncated"),
    (struct.pack("<8I", 0xFEEDFACF, 0x0100000C, 0, 2, 1, 16, 0, 0) + struct.pack("<4I", 0x19, 4, 0, 0), "bad size"),
    (struct.pack("<8I", 0xFEEDFACF, 0x0100000C, 0, 2, 99999, 1 << 30, 0, 0), "implausible load commands"),
])
def test_reader_refuses_what_is_not_a_readable_macho_with_one_line(tmp_path, data, phrase):
    p = tmp_path / "x"
    p.write_bytes(data)
    with pytest.raises(macho.MachOError) as err:
        macho.read(p)
    assert phrase in str(err.value) and "\n" not in str(err.value)


def test_reader_keeps_a_broken_signature_as_an_error_of_that_slice(tmp_path):
    data = bytearray(mf.thin("arm64", sig=mf.signature(0x10000)))
    sig_at = data.index(struct.pack(">I", 0xFADE0CC0))
    data[sig_at:sig_at + 4] = b"\0\0\0\0"
    sl = macho.read(mf.write(tmp_path / "b", bytes(data))).slices[0]
    assert sl.signature is None and "not an embedded signature" in sl.signature_error


# --------------------------------------------------------------------------- the launch chain


def _stand_in_dir(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    return d


def _failing(r) -> dict:
    assert r.returncode == 2, r.stdout.decode() + r.stderr.decode()
    doc = json.loads(r.stdout)
    return {c["name"]: c for c in doc["checks"] if c["status"] == "fail"}


def test_launch_chain_shebang_env_to_an_arm64e_only_program_is_refused_with_sip_off(env, linux_build, cross,
                                                                                      mac_library, tmp_path):
    env.darwin()
    env.ingest_text(stock_fake_llama_log(linux_build))
    bin_dir = _stand_in_dir(tmp_path)
    mf.write(bin_dir / "apple-tool", mf.thin("arm64e", sig=mf.signature(0x2)))     # like Apple's own
    script = mf.write(tmp_path / "bench.py", b"#!/usr/bin/env apple-tool\nprint('hi')\n")
    path = f"{bin_dir}{os.pathsep}{env.vars['PATH']}"
    cross_lib = str(cross / "libcapscan_interposer.universal.dylib")            # arm64 + x86_64 only
    failing = _failing(env.capscan("remedy", "env", "--json", "--dylib", cross_lib, "--", str(script), PATH=path))
    chain = failing["launch chain"]
    assert chain["data"]["chain"] == [str(script), os.path.realpath("/usr/bin/env"), str(bin_dir / "apple-tool")]
    assert f"{bin_dir / 'apple-tool'} (arm64e; needs arm64e)" in chain["reason"]
    assert "/usr/bin/env (x86_64 arm64e; needs arm64e)" in chain["reason"].replace(os.path.realpath("/usr/bin/env"),
                                                                                   "/usr/bin/env")
    assert "arm64e slice" not in failing  # a warning about children, never a refusal
    # the universal library with arm64e: whether Apple's arm64e programs load it without the boot-arg is
    # disputed, so a warning...
    doubt = json.loads(env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--", str(script),
                                   PATH=path).stdout)
    walk = next(c for c in doubt["checks"] if c["name"] == "launch chain")
    assert walk["status"] == "warn" and "may refuse third-party arm64e code" in walk["reason"]
    # ... and with the boot-arg it passes the same chain
    ok = env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--", str(script), PATH=path,
                     CAPSCAN_FAKE_BOOTARGS="-arm64e_preview_abi")
    doc = json.loads(ok.stdout)
    assert ok.returncode == 0, doc
    walk = next(c for c in doc["checks"] if c["name"] == "launch chain")
    assert walk["status"] == "pass" and walk["data"]["binaries"][-1] == f"{bin_dir / 'apple-tool'} arm64e"
    assert doc["line"].endswith(str(script)) and doc["line"].startswith("/usr/bin/env DYLD_INSERT_LIBRARIES=")


# --------------------------------------------------------------------------- without the Command Line Tools


def test_preflight_without_the_command_line_tools_reads_in_process(env, linux_build, mac_library, tmp_path):
    env.darwin(CAPSCAN_FAKE_CLT="absent")
    env.ingest_text(stock_fake_llama_log(linux_build))
    restricted = mf.write(tmp_path / "llama-bench", mf.thin("arm64", restrict=True, sig=mf.signature(0x20002)))
    failing = _failing(env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--", str(restricted)))
    assert "has a __RESTRICT,__restrict section (arm64)" in failing["__RESTRICT segment"]["reason"]
    hardened = mf.write(tmp_path / "ollama", mf.thin("arm64", sig=mf.signature(0x10000)))
    failing = _failing(env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--", str(hardened)))
    assert "hardened runtime (flags=0x10000)" in failing["hardened runtime"]["reason"]
    plain = mf.write(tmp_path / "llama-cli", mf.thin("arm64", sig=mf.signature(0x20002)))
    doc = json.loads(env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--", str(plain)).stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["__RESTRICT segment"]["status"] == "pass" and "read in-process" in checks["__RESTRICT segment"]["reason"]
    assert checks["architectures"]["data"]["read"] == "in-process"
    # an unreadable program without the tools: never a "none" pass
    doc = json.loads(env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--",
                                 str(linux_build / "fake-llama")).stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["__RESTRICT segment"]["status"] == "warn" and "not checked" in checks["__RESTRICT segment"]["reason"]
    assert checks["hardened runtime"]["status"] == "warn"
    # and no xcrun shim was ever called (they open an install dialog)
    called = {c[0] for c in env.calls()}
    assert "xcode-select" in called and not called & {"lipo", "otool", "codesign"}


# --------------------------------------------------------------------------- guest detection, SIP


@pytest.mark.parametrize("hv, brand, status, phrase", [
    ("1", "Apple M1 Ultra (Virtual)", "pass", "kern.hv_vmm_present=1"),
    ("1", "Apple M2 Max", "pass", "kern.hv_vmm_present=1"),              # a guest whose brand lacks the tag
    ("0", "Apple M1 Ultra (Virtual)", "fail", "kern.hv_vmm_present=0"),  # the sysctl wins over the brand
    ("missing", "Apple M1 Ultra (Virtual)", "pass", "CPU brand string"),  # older macOS: the brand is the fallback
    ("missing", "Apple M1 Ultra", "fail", "CPU brand string"),
])
def test_guest_detection_reads_kern_hv_vmm_present_first(env, linux_build, mac_library, hv, brand, status, phrase):
    env.darwin(CAPSCAN_FAKE_HV_VMM=hv, CAPSCAN_FAKE_BRAND=brand)
    env.ingest_text(stock_fake_llama_log(linux_build))
    doc = json.loads(env.capscan("remedy", "env", "--json", "--family", "1007", "--dylib", str(mac_library)).stdout)
    guest = next(c for c in doc["checks"] if c["name"] == "guest")
    assert guest["status"] == status and phrase in guest["reason"], guest


@pytest.mark.parametrize("fake, state", [
    ("disabled", "disabled"), ("enabled", "enabled"), ("custom", "custom"), ("unknown-custom", "custom"),
])
def test_csrutil_states_including_unknown_custom_configuration(tmp_path, fake, state):
    from analyzer.remedy.runner import Runner
    from conftest import BIN

    runner = Runner({"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "CAPSCAN_FAKE_SIP": fake})
    got, line = preflight.sip_state(runner)
    assert got == state
    check = preflight.check_sip("darwin", got, line)
    if fake == "unknown-custom":
        assert line == "System Integrity Protection status: unknown (Custom Configuration)"
        assert check.status == "warn" and "custom configuration" in check.reason
    assert preflight.sip_lets_apple_binaries_load(got) is (state != "enabled")


# --------------------------------------------------------------------------- first contact: the Pythons people have

@pytest.mark.parametrize("who, flags, team, ents, verdict, phrase", [
    # Homebrew's python3: linker-signed ad hoc, no hardened runtime: dyld honours the variable
    ("homebrew", 0x20002, None, None, "pass", ""),
    # a python.org build (Developer ID, hardened runtime) that carries both entitlements: allowed
    ("python.org", 0x10000, "BMM5U3QVKW", {macho.ALLOW_DYLD: True, macho.DISABLE_LV: True}, "pass", ""),
    # the same signature without them: dyld drops the variable, refused before anything runs, with why
    ("python.org-bare", 0x10000, "BMM5U3QVKW", {}, "fail", "hardened runtime (flags=0x10000)"),
])
def test_the_pythons_people_have(env, linux_build, mac_library, tmp_path, who, flags, team, ents, verdict, phrase):
    """Issue 23 item 7: llama-cpp-python and MLX users run a Python the remedy must judge from its own
    signature (read in-process: no codesign needed). Only a Mac can confirm python.org's real entitlements."""
    env.darwin(CAPSCAN_FAKE_CLT="absent")
    env.ingest_text(stock_fake_llama_log(linux_build))
    (tmp_path / who).mkdir()
    python = mf.write(tmp_path / who / "python3", mf.thin("arm64", sig=mf.signature(flags, "org.python.python",
                                                                                        team, ents)))
    r = env.capscan("remedy", "env", "--json", "--dylib", str(mac_library), "--", str(python), "-c", "import llama_cpp")
    doc = json.loads(r.stdout)
    hardened = next(c for c in doc["checks"] if c["name"] == "hardened runtime")
    assert hardened["status"] == verdict and phrase in hardened["reason"], hardened
    assert r.returncode == (0 if verdict == "pass" else 2)
    children = next(c for c in doc["checks"] if c["name"] == "children")
    assert children["status"] == "pass"    # a Python does its GPU work itself: the default scrub is right
