"""Issue 23 item 1 on a simulated macOS guest: with no `make macos-native` build, capscan injects the
prebuilt library shipped in the package (analyzer/_native/darwin, the SDK-less cross build), checked
against the packaged SHA256SUMS, with no compiler; a macos-native build is preferred when present.

The repository's packaged files are only read here; every test that changes a file changes a copy."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from analyzer.remedy import dylib, macho
from analyzer.remedy import platform as plat
from analyzer.remedy.runner import Runner
from analyzer.store.db import open_db
from conftest import BIN, REPO, stock_fake_llama_log

PACKAGED = REPO / "analyzer" / "_native" / "darwin"
SHIPPED = ("libcapscan_interposer.dylib", "capscan-probe", "SHA256SUMS")


@pytest.fixture
def darwin(monkeypatch, tmp_path):
    """In-process: CAPSCAN_PLATFORM=darwin, stand-ins on PATH, no Command Line Tools, a real database."""
    monkeypatch.setenv(plat.PLATFORM_ENV, "darwin")
    monkeypatch.setenv(plat.MACHINE_ENV, "arm64")
    runner = Runner({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "CAPSCAN_FAKE_CLT": "absent",
                     "CAPSCAN_STANDIN_LOG": str(tmp_path / "standin.log")})
    db = open_db(tmp_path / "capscan.db")
    yield runner, plat.injection("darwin"), db
    db.conn.close()


@pytest.fixture
def packaged_copy(tmp_path) -> Path:
    d = tmp_path / "packaged"
    d.mkdir()
    for name in SHIPPED:
        shutil.copy2(PACKAGED / name, d / name)
    return d


@pytest.fixture
def no_native(tmp_path) -> Path:
    """An empty directory standing in for build/macos-native (whatever this checkout holds)."""
    d = tmp_path / "macos-native"
    d.mkdir()
    return d


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


def test_the_packaged_library_is_chosen_without_a_native_build(darwin, packaged_copy, no_native):
    runner, inj, db = darwin
    lib = dylib.prepare(runner, inj, db, native=no_native, packaged=packaged_copy)
    checks = by_name(lib.checks)
    assert lib.ok, [c.line() for c in lib.checks]
    assert lib.choice.kind == "packaged" and lib.choice.path == packaged_copy / "libcapscan_interposer.dylib"
    why = checks["dylib choice"].reason
    assert "prebuilt library shipped with capscan" in why and "no arm64e" in why and "no compiler needed" in why
    assert f"no macos-native build at {no_native / 'libcapscan_interposer.dylib'}" in why and "macos-native)" in why
    assert "dylib build" not in checks                       # nothing built, no Command Line Tools asked for
    assert lib.archs == ["x86_64", "arm64"]
    assert checks["dylib checksum"].status == "pass" and str(packaged_copy / "SHA256SUMS") in checks["dylib checksum"].reason
    assert lib.sha256 == dylib.sha256_of(PACKAGED / "libcapscan_interposer.dylib")
    assert checks["dylib owner"].status == checks["dylib permissions"].status == "pass"


def test_an_altered_packaged_library_fails_its_checksum(darwin, packaged_copy, no_native):
    runner, inj, db = darwin
    lib_file = packaged_copy / "libcapscan_interposer.dylib"
    data = bytearray(lib_file.read_bytes())
    data[-1] ^= 0xFF                                         # one bit of the signature's padding
    lib_file.write_bytes(bytes(data))
    lib = dylib.prepare(runner, inj, db, native=no_native, packaged=packaged_copy)
    cs = by_name(lib.checks)["dylib checksum"]
    assert not lib.ok and cs.status == "fail" and "the file changed after it was built" in cs.reason
    assert "reinstall capscan" in cs.instead and "make -C native/interposer darwin" in cs.instead
    # and the same file, listed again with its new sum, passes: the check compares with SHA256SUMS, nothing else
    sums = packaged_copy / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(dylib.sha256_of(PACKAGED / "libcapscan_interposer.dylib"),
                                             dylib.sha256_of(lib_file)))
    assert dylib.prepare(runner, inj, db, native=no_native, packaged=packaged_copy).ok


def test_a_packaged_library_missing_from_sha256sums_or_group_writable_is_refused(darwin, packaged_copy, no_native):
    runner, inj, db = darwin
    (packaged_copy / "SHA256SUMS").write_text("")
    cs = by_name(dylib.prepare(runner, inj, db, native=no_native, packaged=packaged_copy).checks)["dylib checksum"]
    assert cs.status == "fail" and "is not listed in" in cs.reason and "reinstall capscan" in cs.instead
    shutil.copy2(PACKAGED / "SHA256SUMS", packaged_copy / "SHA256SUMS")
    (packaged_copy / "libcapscan_interposer.dylib").chmod(0o775)
    perm = by_name(dylib.prepare(runner, inj, db, native=no_native, packaged=packaged_copy).checks)["dylib permissions"]
    assert perm.status == "fail" and "group-writable" in perm.reason


def test_a_macos_native_build_is_preferred_over_the_packaged_library(darwin, mac_library, packaged_copy):
    runner, inj, db = darwin
    lib = dylib.prepare(runner, inj, db, native=mac_library.parent, packaged=packaged_copy)
    assert lib.ok, [c.line() for c in lib.checks]
    assert lib.choice.kind == "native" and lib.choice.path == mac_library
    assert "preferred over the prebuilt library" in lib.choice.why and "arm64e" in lib.choice.why
    assert lib.archs == ["x86_64", "arm64", "arm64e"]


def test_an_explicit_library_wins_and_says_so(darwin, mac_library, packaged_copy, no_native):
    runner, inj, db = darwin
    lib = dylib.prepare(runner, inj, db, explicit=mac_library, native=no_native, packaged=packaged_copy)
    assert lib.choice.kind == "given" and "given with --dylib" in by_name(lib.checks)["dylib choice"].reason


def test_no_library_at_all_and_no_command_line_tools_is_one_clear_line(darwin, tmp_path, no_native):
    """A tree without the packaged files keeps the old way: build on first use, which needs the tools."""
    runner, inj, db = darwin
    empty = tmp_path / "empty"
    empty.mkdir()
    lib = dylib.prepare(runner, inj, db, native=no_native, packaged=empty)
    build = by_name(lib.checks)["dylib build"]
    assert lib.choice is None and build.status == "fail"
    assert "Command Line Tools are not installed" in build.reason and "xcode-select --install" in build.instead
    calls = (tmp_path / "standin.log").read_bytes().split(b"\0") if (tmp_path / "standin.log").exists() else []
    assert b"make" not in calls and b"xcode-select" in calls


def test_the_packaged_probe_is_used_and_verified(darwin, packaged_copy, no_native):
    runner, _inj, _db = darwin
    path, why = dylib.probe_binary(runner, native=no_native, packaged=packaged_copy)
    assert (path, why) == (packaged_copy / "capscan-probe", None)
    assert sorted(macho.read(path).archs) == ["arm64", "x86_64"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    path, why = dylib.probe_binary(runner, native=no_native, packaged=packaged_copy)
    assert why is not None and "the file changed after it was built" in why and "reinstall capscan" in why


def test_remedy_env_in_a_guest_without_the_tools_injects_the_packaged_library(env, linux_build):
    """The whole preflight through the CLI, on the repository's own packaged files (read only): no macos-native
    build and no Command Line Tools, so the prebuilt library shipped in the package, and no make."""
    env.darwin(CAPSCAN_FAKE_CLT="absent", CAPSCAN_FAKE_SIP="enabled")
    env.ingest_text(stock_fake_llama_log(linux_build))
    r = env.capscan("remedy", "env", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc
    checks = {c["name"]: c for c in doc["checks"]}
    shipped = PACKAGED / "libcapscan_interposer.dylib"
    assert checks["dylib choice"]["data"] == {"kind": "packaged", "path": str(shipped)}
    assert "no compiler needed" in checks["dylib choice"]["reason"] and "dylib build" not in checks
    assert checks["dylib checksum"]["status"] == "pass" and str(PACKAGED / "SHA256SUMS") in checks["dylib checksum"]["reason"]
    assert checks["dylib architectures"]["data"]["archs"] == ["x86_64", "arm64"]
    assert f"DYLD_INSERT_LIBRARIES={shipped}" in doc["line"]
    assert checks["arm64e slice"]["status"] == "pass"        # SIP on: Apple's arm64e programs drop the variable
    called = {c[0] for c in env.calls()}
    assert "make" not in called and not called & {"lipo", "otool", "codesign"}
    text = env.capscan("remedy", "env").stderr.decode()
    assert "dylib choice: the prebuilt library shipped with capscan" in text


def test_with_sip_off_the_packaged_library_warns_about_apple_children(env, linux_build):
    """No arm64e slice, SIP off and --inject-children: Apple's arm64e programs the command starts would halt on
    it, a warning (with the default scrub and the arm64e build as the ways out), never a refusal."""
    env.darwin(CAPSCAN_FAKE_CLT="absent")                    # stand-in csrutil: disabled
    env.ingest_text(stock_fake_llama_log(linux_build))
    r = env.capscan("remedy", "env", "--json", "--inject-children")
    assert r.returncode == 0, r.stdout.decode()
    check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "arm64e slice")
    assert check["status"] == "warn" and "has no arm64e slice" in check["reason"] and "exit 134" in check["reason"]
    assert "leave out --inject-children" in check["instead"] and "make macos-native" in check["instead"]
    r = env.capscan("remedy", "env", "--json")
    check = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "arm64e slice")
    assert check["status"] == "pass" and "do not inherit it" in check["reason"]
