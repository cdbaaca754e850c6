"""capscan's native interposer (native/interposer), driven from pytest.

Builds the Linux stand-ins and the SDK-less macOS cross build with make,
runs the native suites (`make check`), checks the Mach-O artifacts, exercises
the LD_PRELOAD injection path, and finally feeds stock and injected
fake-llama logs through capscan's own CLI to see the flags flip.

Without the toolchain (gcc + gobjc, clang + lld + llvm) these tests skip
locally; with CI set they fail instead, so a missing apt line cannot turn CI
green.  Nothing here touches the real home directory or a real database.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "native" / "interposer"
LINUX = NATIVE / "build" / "linux"
MACOS = NATIVE / "build" / "macos"
LLVM_BIN = Path(os.environ.get("LLVM_BIN", "/usr/lib/llvm-14/bin"))

sys.path.insert(0, str(NATIVE / "tests"))
import macho  # noqa: E402

FAMILIES = [*range(1001, 1011), 2001, 2002, 3001, 3002, 3003, 4001, 4002, 5001, 5002]  # Apple's header
PARAVIRTUAL_TRUE = {1001, 1002, 1003, 1004, 1005, 2002, 3001, 3002, 3003}
BANNER = "[capscan-interposer] enabled for {proc} (apple_family_max={fam} threadgroup_memory={tg})"
SHIM_ENV_PREFIXES = ("CAPSCAN_", "LUME_", "TART_", "LD_PRELOAD", "GGML_")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _missing_toolchain() -> list[str]:
    missing = [t for t in ("make", "gcc", "sha256sum") if shutil.which(t) is None]
    for tool in ("clang", "ld64.lld", "llvm-lipo", "llvm-objdump"):
        if not (LLVM_BIN / tool).exists():
            missing.append(str(LLVM_BIN / tool))
    if shutil.which("gcc"):
        for name in ("include/objc/runtime.h", "libobjc.so"):
            found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
            if not os.path.isabs(found) or not os.path.exists(found):
                missing.append(f"GCC libobjc ({name}; Debian package gobjc)")
    return missing


def _require_toolchain() -> None:
    missing = _missing_toolchain()
    if missing:
        msg = ("native toolchain missing: " + ", ".join(missing) +
               " (apt-get install -y --no-install-recommends clang lld llvm gobjc file make)")
        if _in_ci():
            pytest.fail(msg + " -- CI is set, so this is a failure, not a skip")
        pytest.skip(msg)


def _make(*targets: str) -> subprocess.CompletedProcess:
    """make in native/interposer, serialised across concurrent pytest workers."""
    (NATIVE / "build").mkdir(exist_ok=True)
    with open(NATIVE / "build" / ".make.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # --no-print-directory: with -C, GNU make would otherwise end its output
        # with "make: Leaving directory ..." after the summary line.
        return subprocess.run(["make", "--no-print-directory", "-C", str(NATIVE), f"LLVM_BIN={LLVM_BIN}", *targets],
                              capture_output=True, text=True, env=_clean_env())


def _clean_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SHIM_ENV_PREFIXES)}
    env.pop("CAPSCAN_DB", None)
    if home is not None:
        env["HOME"] = str(home)
        env["XDG_DATA_HOME"] = str(home / "data")
        env["XDG_CONFIG_HOME"] = str(home / "config")
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def built() -> Path:
    _require_toolchain()
    result = _make("all", "tests")
    assert result.returncode == 0, result.stdout + result.stderr
    return NATIVE / "build"


def run_linux(program: str, *args: str, preload: bool = False, **env: str) -> subprocess.CompletedProcess:
    e = _clean_env(**env)
    if preload:
        e["LD_PRELOAD"] = str(LINUX / "libcapscan_interposer.so")
    return subprocess.run([str(LINUX / program), *args], capture_output=True, text=True, env=e, timeout=60)


def parse_probe(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# --------------------------------------------------------------------------- make check


def test_make_check_passes_and_summarises(built):
    result = _make("check")
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    m = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1])
    assert m, lines[-1]
    assert int(m.group(2)) == 0 and int(m.group(1)) >= 400
    for suite in ("policy core", "runtime layer on GCC libobjc (ASan+UBSan)", "LD_PRELOAD", "Mach-O"):
        assert any(suite in line for line in lines), suite


def test_linux_target_builds_the_stand_ins(built):
    assert _make("linux").returncode == 0
    for name in ("libcapscan_interposer.so", "libfakemetal.so", "fake-llama", "capscan-probe"):
        assert (LINUX / name).is_file(), name


# --------------------------------------------------------------------------- probe


_ARCH = {"aarch64": "arm64", "arm64": "arm64"}.get(__import__("platform").machine(), "x86_64")


def test_probe_key_value_format_is_exact(built):
    r = run_linux("capscan-probe")
    assert r.returncode == 0 and r.stderr == ""
    expected = ["probe=capscan-probe 1", "device=Apple Paravirtual device"]
    expected += [f"supports_family.{f}={'true' if f in PARAVIRTUAL_TRUE else 'false'}" for f in FAMILIES]
    expected += ["max_threadgroup_memory=32768", "recommended_max_working_set_size=11453251584",
                 "has_unified_memory=true", "cpu_brand=Apple M1 Ultra (Virtual)", f"arch={_ARCH}", "hv_vmm_present=1"]
    assert r.stdout.splitlines() == expected


def test_probe_json_is_one_object(built):
    r = run_linux("capscan-probe", "--json")
    assert r.returncode == 0
    assert len(r.stdout.splitlines()) == 1
    d = json.loads(r.stdout)
    assert list(d) == ["probe", "version", "device", "supports_family", "max_threadgroup_memory",
                       "recommended_max_working_set_size", "has_unified_memory", "cpu_brand", "arch", "hv_vmm_present"]
    assert (d["cpu_brand"], d["arch"], d["hv_vmm_present"]) == ("Apple M1 Ultra (Virtual)", _ARCH, True)
    assert d["probe"] == "capscan-probe" and d["version"] == 1
    assert d["device"] == "Apple Paravirtual device"
    assert d["supports_family"] == {str(f): f in PARAVIRTUAL_TRUE for f in FAMILIES}
    assert d["max_threadgroup_memory"] == 32768
    assert d["recommended_max_working_set_size"] == 11453251584
    assert d["has_unified_memory"] is True


def test_probe_without_device_exits_1(built):
    r = run_linux("capscan-probe", CAPSCAN_FAKE_METAL_DEVICE="none")
    assert r.returncode == 1 and r.stdout == "" and r.stderr == "Metal device unavailable\n"


def test_probe_with_interposer_preloaded(built):
    r = run_linux("capscan-probe", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX="1007")
    values = parse_probe(r.stdout)
    assert r.returncode == 0
    assert all(values[f"supports_family.{f}"] == "true" for f in range(1001, 1008))
    assert values["supports_family.1008"] == "false"
    assert values["supports_family.5001"] == "false" and values["supports_family.5002"] == "false"
    assert values["supports_family.2002"] == "true" and values["supports_family.4001"] == "false"
    assert values["max_threadgroup_memory"] == "32768"
    assert r.stderr == BANNER.format(proc="capscan-probe", fam=1007, tg="stock") + "\n"


def test_threadgroup_floor(built):
    r = run_linux("capscan-probe", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX="1007",
                  CAPSCAN_METAL_MAX_THREADGROUP_MEMORY="65536")
    assert parse_probe(r.stdout)["max_threadgroup_memory"] == "65536"
    assert r.stderr == BANNER.format(proc="capscan-probe", fam=1007, tg=65536) + "\n"


# --------------------------------------------------------------------------- policy through the real shim


@pytest.mark.parametrize("value", ["", "abc", "1000", "2000", "1007junk", "99999999999999999999999", "0x", " 1007"])
def test_malformed_family_is_inert(built, value):
    stock = run_linux("capscan-probe")
    r = run_linux("capscan-probe", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX=value)
    assert (r.returncode, r.stdout, r.stderr) == (0, stock.stdout, "")
    verbose = run_linux("capscan-probe", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX=value,
                        CAPSCAN_INTERPOSER_VERBOSE="1")
    assert verbose.stdout == stock.stdout
    assert verbose.stderr.startswith("[capscan-interposer] inactive in capscan-probe: CAPSCAN_METAL_APPLE_FAMILY_MAX")


def test_hex_value_is_accepted(built):
    r = run_linux("capscan-probe", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX="0x3e9")
    values = parse_probe(r.stdout)
    assert values["supports_family.1001"] == "true" and values["supports_family.1006"] == "false"
    assert "apple_family_max=1001" in r.stderr


@pytest.mark.parametrize("env, expected", [
    ({"LUME_METAL_APPLE_FAMILY_MAX": "1008"}, 1008),
    ({"TART_METAL_APPLE_FAMILY_MAX": "1009"}, 1009),
    ({"TART_METAL_APPLE_FAMILY_MAX": "1009", "LUME_METAL_APPLE_FAMILY_MAX": "1008"}, 1008),
    ({"TART_METAL_APPLE_FAMILY_MAX": "1009", "LUME_METAL_APPLE_FAMILY_MAX": "1008",
      "CAPSCAN_METAL_APPLE_FAMILY_MAX": "1007"}, 1007),
])
def test_aliases_and_precedence(built, env, expected):
    r = run_linux("capscan-probe", preload=True, **env)
    values = parse_probe(r.stdout)
    assert values[f"supports_family.{expected}"] == "true"
    assert values[f"supports_family.{expected + 1}"] == "false"
    assert f"apple_family_max={expected} " in r.stderr


def test_never_claims_metal3_or_metal4(built):
    for cap in ("1007", "1012", "1999"):
        values = parse_probe(run_linux("capscan-probe", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX=cap).stdout)
        assert values["supports_family.5001"] == "false" and values["supports_family.5002"] == "false"


def test_partial_hook_failure_rolls_back(built):
    stock = run_linux("capscan-probe", CAPSCAN_FAKE_METAL_DEVICE="incomplete")
    r = run_linux("capscan-probe", preload=True, CAPSCAN_FAKE_METAL_DEVICE="incomplete",
                  CAPSCAN_METAL_APPLE_FAMILY_MAX="1007", CAPSCAN_METAL_MAX_THREADGROUP_MEMORY="65536")
    assert r.stdout == stock.stdout
    assert parse_probe(r.stdout)["supports_family.1007"] == "false"
    assert "enabled for" not in r.stderr
    assert r.stderr.startswith("[capscan-interposer] disabled for capscan-probe: device class has no "
                               "maxThreadgroupMemoryLength")


# --------------------------------------------------------------------------- macOS artifacts

DYLIBS = {arch: MACOS / f"libcapscan_interposer.{arch}.dylib" for arch in ("arm64", "x86_64")}


@pytest.mark.parametrize("arch", sorted(DYLIBS))
def test_thin_dylib(built, arch):
    (sl,) = macho.parse(DYLIBS[arch])
    assert sl.arch == arch and sl.filetype == macho.MH_DYLIB
    assert sl.install_name == "@rpath/libcapscan_interposer.dylib"
    assert sl.minos == "13.0" and sl.platform == macho.PLATFORM_MACOS
    init = sl.section("__DATA_CONST", "__mod_init_func") or sl.section("__DATA", "__mod_init_func")
    assert init is not None and init.size == 8                       # one constructor
    interpose = sl.section("__DATA", "__interpose")
    assert interpose is not None and interpose.type == macho.S_INTERPOSING and interpose.size == 32
    metal = "/System/Library/Frameworks/Metal.framework/Versions/A/Metal"
    assert sl.imports["_MTLCreateSystemDefaultDevice"] == metal
    assert sl.imports["_MTLCopyAllDevices"] == metal
    assert sl.imports["_method_setImplementation"] == "/usr/lib/libobjc.A.dylib"
    assert sl.imports["_class_addMethod"] == "/usr/lib/libobjc.A.dylib"
    assert sl.exports == []
    if arch == "arm64":
        ok, info = macho.verify_adhoc_signature(sl)
        assert ok, info
    binds = subprocess.run([str(LLVM_BIN / "llvm-objdump"), "--macho", "--bind", str(DYLIBS[arch])],
                           capture_output=True, text=True).stdout
    interposed = [line.split()[-1] for line in binds.splitlines() if "__interpose" in line and "Metal" in line]
    assert sorted(interposed) == ["_MTLCopyAllDevices", "_MTLCreateSystemDefaultDevice"]


def test_universal_dylib_and_probe(built):
    uni = MACOS / "libcapscan_interposer.universal.dylib"
    assert macho.is_fat(uni)
    slices = {s.arch: s for s in macho.parse(uni)}
    assert sorted(slices) == ["arm64", "x86_64"]
    for arch, sl in slices.items():
        assert sl.data == DYLIBS[arch].read_bytes()
    probe = {s.arch: s for s in macho.parse(MACOS / "capscan-probe")}
    assert sorted(probe) == ["arm64", "x86_64"]
    assert all(s.filetype == macho.MH_EXECUTE and s.has_main for s in probe.values())
    assert any("CoreGraphics" in d for d in probe["arm64"].dylibs)


def test_cross_build_never_mislabels_arm64e(built):
    """Debian's LLVM cannot emit Apple's arm64e ABI, so the cross build must
    not ship a file that claims it (see README, "arm64e"); the native build
    writes to its own directory (build/macos-native)."""
    assert not (MACOS / "libcapscan_interposer.arm64e.dylib").exists()
    for path in MACOS.glob("*.dylib"):
        assert all(s.cpusubtype != macho.CPU_SUBTYPE_ARM64E for s in macho.parse(path))


def test_checksums_cover_every_artifact(built):
    listed = dict(reversed(line.split("  ", 1)) for line in (MACOS / "SHA256SUMS").read_text().splitlines())
    assert sorted(listed) == sorted(["capscan-probe", "libcapscan_interposer.arm64.dylib",
                                     "libcapscan_interposer.universal.dylib", "libcapscan_interposer.x86_64.dylib"])
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=MACOS, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


# --------------------------------------------------------------------------- end to end through capscan's CLI


def _capscan(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "x.db"), *args],
                          capture_output=True, text=True, cwd=ROOT, env=_clean_env(home=tmp_path), timeout=120)


def _ingest_one(tmp_path: Path, log: Path) -> dict:
    r = _capscan(tmp_path, "ingest", str(log))
    assert r.returncode == 0, r.stderr
    run_ids = r.stdout.split()
    assert len(run_ids) == 1, r.stdout
    shown = _capscan(tmp_path, "show", run_ids[0], "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_end_to_end_flags_flip_through_capscan(built, tmp_path):
    stock = run_linux("fake-llama", "--bench")
    injected = run_linux("fake-llama", "--bench", preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX="1007")
    assert stock.returncode == injected.returncode == 0
    (tmp_path / "stock.log").write_text(stock.stderr + stock.stdout)
    (tmp_path / "injected.log").write_text(injected.stderr + injected.stdout)

    before = _ingest_one(tmp_path, tmp_path / "stock.log")
    after = _ingest_one(tmp_path, tmp_path / "injected.log")

    for flag in ("simdgroup_reduction", "simdgroup_mm", "bfloat"):
        assert before["capabilities"][flag] is False, flag
        assert after["capabilities"][flag] is True, flag
    assert before["device"]["apple_family"] == 1005
    assert after["device"]["apple_family"] == 1007
    assert not before.get("shim")
    assert after["shim"]["name"] == "capscan-interposer"
    assert after["shim"]["apple_family_max"] == 1007


@pytest.mark.parametrize("flag", [None, "--json"])
def test_probe_output_is_ingested_by_capscan(built, tmp_path, flag):
    args = [flag] if flag else []
    stock = run_linux("capscan-probe", *args)
    injected = run_linux("capscan-probe", *args, preload=True, CAPSCAN_METAL_APPLE_FAMILY_MAX="1007")
    (tmp_path / "stock.txt").write_text(stock.stdout)
    (tmp_path / "injected.txt").write_text(injected.stdout)

    before = _ingest_one(tmp_path, tmp_path / "stock.txt")
    after = _ingest_one(tmp_path, tmp_path / "injected.txt")

    assert before["device"]["name"] == after["device"]["name"] == "Apple Paravirtual device"
    assert before["device"]["apple_family"] == 1005
    assert after["device"]["apple_family"] == 1007
    assert before["device"]["threadgroup_memory"] == after["device"]["threadgroup_memory"] == 32768


# --------------------------------------------------------------------------- the shipped prebuilt files
# analyzer/_native/darwin: `make darwin`'s universal library and probe (committed; the wheel carries them).

SHIPPED = ROOT / "analyzer" / "_native" / "darwin"
SHIPPED_FILES = ("libcapscan_interposer.dylib", "capscan-probe", "SHA256SUMS")


def test_shipped_files_are_what_a_fresh_make_darwin_builds(tmp_path):
    """Byte for byte, from a copy of the sources at another path: the build is reproducible and the
    committed files are current. Rebuild them with `make -C native/interposer darwin`."""
    _require_toolchain()
    src = tmp_path / "elsewhere" / "interposer"
    shutil.copytree(NATIVE, src, ignore=shutil.ignore_patterns("build"))
    out = tmp_path / "out"
    r = subprocess.run(["make", "--no-print-directory", "-C", str(src), f"LLVM_BIN={LLVM_BIN}",
                        f"DARWIN_OUT={out}", "darwin"], capture_output=True, text=True, env=_clean_env(), timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(SHIPPED_FILES)
    for name in SHIPPED_FILES:
        assert (out / name).read_bytes() == (SHIPPED / name).read_bytes(), (
            f"analyzer/_native/darwin/{name} differs from a fresh build: run make -C native/interposer darwin "
            "and commit the result")
    assert all(os.access(out / n, os.X_OK) for n in SHIPPED_FILES[:2])


def test_shipped_files_are_small_and_have_their_checksums():
    listed = dict(reversed(line.split("  ", 1)) for line in (SHIPPED / "SHA256SUMS").read_text().splitlines())
    assert sorted(listed) == ["capscan-probe", "libcapscan_interposer.dylib"]
    for name, digest in listed.items():
        assert hashlib.sha256((SHIPPED / name).read_bytes()).hexdigest() == digest, name
        assert (SHIPPED / name).stat().st_size < 256 * 1024, name
    assert sorted(p.name for p in SHIPPED.iterdir()) == sorted(SHIPPED_FILES)


def test_shipped_library_read_by_capscans_own_reader():
    """What preflight sees (analyzer/remedy/macho.py, not the test reader): arm64 and x86_64 dylib slices, each
    ad-hoc signed by the linker and holding the two __DATA,__interpose tuples; no arm64e (see README)."""
    from analyzer.remedy import macho as reader

    lib = reader.read(SHIPPED / "libcapscan_interposer.dylib")
    assert lib.fat and sorted(lib.archs) == ["arm64", "x86_64"]
    for sl in lib.slices:
        assert sl.filetype == reader.MH_DYLIB and sl.cpusubtype & reader.CPU_SUBTYPE_MASK != reader.CPU_SUBTYPE_ARM64E
        assert sl.signature is not None and sl.signature_error is None, sl.arch
        assert sl.signature.adhoc and sl.signature.linker_signed and not sl.signature.hardened_runtime, sl.arch
        interpose = sl.section("__DATA", "__interpose")
        assert interpose is not None, sl.arch
        assert interpose.type == reader.S_INTERPOSING and interpose.size == 2 * 16, (sl.arch, interpose)
        assert not sl.restrict_section
    probe = reader.read(SHIPPED / "capscan-probe")
    assert probe.fat and sorted(probe.archs) == ["arm64", "x86_64"]
    for sl in probe.slices:
        assert sl.filetype == reader.MH_EXECUTE and sl.signature is not None and sl.signature.adhoc, sl.arch
        assert sl.section("__DATA", "__interpose") is None


def test_shipped_library_slices_pass_the_test_readers_checks():
    """The test reader's deeper checks on the shipped file: install name, one constructor, the imports,
    and every slice's ad-hoc page hashes."""
    slices = {s.arch: s for s in macho.parse(SHIPPED / "libcapscan_interposer.dylib")}
    for arch, sl in slices.items():
        assert sl.install_name == "@rpath/libcapscan_interposer.dylib" and sl.minos == "13.0", arch
        init = sl.section("__DATA_CONST", "__mod_init_func") or sl.section("__DATA", "__mod_init_func")
        assert init is not None and init.size == 8, arch
        assert sl.imports["_MTLCreateSystemDefaultDevice"].endswith("/Metal") and sl.exports == [], arch
        ok, info = macho.verify_adhoc_signature(sl)
        assert ok, (arch, info)


def _mac_link(llvm_bin: Path) -> str:
    """MAC_LINK as the Makefile expands it with this LLVM_BIN (nothing is built)."""
    r = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(NATIVE), f"LLVM_BIN={llvm_bin}",
                        "--eval", "print-mac-link: ; @echo 'MAC_LINK=$(MAC_LINK)'", "print-mac-link"],
                       capture_output=True, text=True, env=_clean_env())
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_makefile_passes_fixup_chains_exactly_when_the_linker_lists_it(tmp_path):
    """The Makefile's comment says -fixup_chains is passed where ld64.lld lists it; on c5d2e23 MAC_LINK
    (`:=`) was expanded before CHAINED_FIXUPS was defined, so it was never passed by any linker."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    newer = tmp_path / "llvm16"
    newer.mkdir()
    (newer / "ld64.lld").write_text("#!/bin/sh\necho '  -fixup_chains   Emit chained fixups'\n")
    (newer / "ld64.lld").chmod(0o755)
    older = tmp_path / "llvm14"
    older.mkdir()
    (older / "ld64.lld").write_text("#!/bin/sh\necho '  -adhoc_codesign  Write an ad-hoc code signature'\n")
    (older / "ld64.lld").chmod(0o755)
    assert _mac_link(newer).split() == ["MAC_LINK=-fuse-ld=lld", "-nostdlib", "-Wl,-adhoc_codesign",
                                        "-Wl,-fixup_chains"]
    assert _mac_link(older).split() == ["MAC_LINK=-fuse-ld=lld", "-nostdlib", "-Wl,-adhoc_codesign"]
