"""Shared helpers for the remedy tests: stand-in tools on PATH, the native
Linux stand-ins, and the capscan CLI (in-process unless a test asks for a process)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_capscan

REPO = Path(__file__).resolve().parents[2]
BIN = Path(__file__).resolve().parent / "bin"
FIXTURES = REPO / "tests" / "fixtures"
NATIVE = REPO / "native" / "interposer"
LINUX = NATIVE / "build" / "linux"
MACOS = NATIVE / "build" / "macos"
SHIM_VARS = ("DYLD_INSERT_LIBRARIES", "LD_PRELOAD", "CAPSCAN_METAL_APPLE_FAMILY_MAX", "LUME_METAL_APPLE_FAMILY_MAX",
             "TART_METAL_APPLE_FAMILY_MAX", "CAPSCAN_METAL_MAX_THREADGROUP_MEMORY", "CAPSCAN_FAKE_METAL_DEVICE",
             "CAPSCAN_PLATFORM", "CAPSCAN_MACHINE")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def linux_build() -> Path:
    """native/interposer/build/linux (make linux), or skip/fail without the toolchain."""
    need = ["make", "gcc"]
    missing = [t for t in need if shutil.which(t) is None]
    if not missing:
        (NATIVE / "build").mkdir(exist_ok=True)
        with open(NATIVE / "build" / ".make.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run(["make", "--no-print-directory", "-C", str(NATIVE), "linux"], capture_output=True,
                               text=True, env={k: v for k, v in os.environ.items() if k not in SHIM_VARS})
        if r.returncode != 0:
            missing.append("a working gcc + gobjc build (" + (r.stderr.strip().splitlines() or ["?"])[-1] + ")")
    if missing:
        msg = "native toolchain missing: " + ", ".join(missing)
        if _in_ci():
            pytest.fail(msg + " (CI is set)")
        pytest.skip(msg)
    return LINUX


@pytest.fixture(scope="session")
def macos_build() -> Path:
    if not (MACOS / "libcapscan_interposer.universal.dylib").exists() or not (MACOS / "SHA256SUMS").exists():
        with open(NATIVE / "build" / ".make.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run(["make", "--no-print-directory", "-C", str(NATIVE), "macos"], capture_output=True,
                               text=True)
        if r.returncode != 0:
            if _in_ci():
                pytest.fail("macOS cross build failed: " + r.stderr[-500:])
            pytest.skip("macOS cross build unavailable (clang/lld/llvm)")
    return MACOS


@pytest.fixture(scope="session")
def mac_library(macos_build, tmp_path_factory) -> Path:
    """A universal library with arm64, arm64e and x86_64 slices and its SHA256SUMS, as preflight sees
    `make macos-native`'s output (the arm64e slice is the arm64 one relabelled: for reading only)."""
    from machofixtures import universal_library_with_arm64e

    return universal_library_with_arm64e(macos_build / "libcapscan_interposer.universal.dylib",
                                         tmp_path_factory.mktemp("macos-native"))


def stand_in_calls(log: Path) -> list[list[str]]:
    """The calls a stand-in logged (each: its argc, then its argv, NUL-separated), as argv lists."""
    if not log.exists():
        return []
    data = log.read_bytes().split(b"\0")
    out, i = [], 0
    while i < len(data) - 1:
        n = int(data[i])
        out.append([x.decode() for x in data[i + 1:i + 2 + n]])
        i += 2 + n
    return out


class Env:
    """The environment of one test: a db, stand-ins on PATH, their argv log."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.db = tmp / "capscan.db"
        self.log = tmp / "standin.log"
        self.vars = {k: v for k, v in os.environ.items() if k not in SHIM_VARS}
        self.vars.update({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "CAPSCAN_DB": str(self.db),
                          "CAPSCAN_STANDIN_LOG": str(self.log), "CAPSCAN_FAKE_DEFAULTS_FILE": str(tmp / "pvg-default"),
                          "NO_COLOR": "1"})

    def darwin(self, **kw: str) -> "Env":
        self.vars.update({"CAPSCAN_PLATFORM": "darwin", "CAPSCAN_MACHINE": "arm64"})
        self.vars.update(kw)
        return self

    def capscan(self, *args: str, input: bytes | str | None = None, process: bool = False,
                **extra: str) -> subprocess.CompletedProcess:
        """capscan in-process with this environment (the tools it starts inherit it), or with ``process=True``
        a real process (tests.conftest.run_capscan)."""
        # the shim variables of the environment pytest was started in are unset, not inherited
        env = {**{k: None for k in SHIM_VARS}, **self.vars, **extra}
        return run_capscan(*args, input=input, env=env, process=process)

    def ingest(self, path: Path | str) -> int:
        r = self.capscan("ingest", "--force", str(path))
        assert r.returncode == 0, r.stderr.decode()
        return int(r.stdout.split()[-1])

    def ingest_text(self, text: str, name: str = "stock.log") -> int:
        p = self.tmp / name
        p.write_text(text)
        return self.ingest(p)

    def calls(self) -> list[list[str]]:
        """Every stand-in call, as its argv (name first)."""
        return stand_in_calls(self.log)


@pytest.fixture
def env(tmp_path) -> Env:
    return Env(tmp_path)


# The guest's own proof of an Apple-silicon host that a fixable run needs (issue 21): common_init's build line
# of an arm64 macOS build (llama-cli prints it first; unified memory alone proves nothing). It names no chip,
# so `--family auto` still needs the live brand string.
ARM64_BUILD_LINE = ("build: 10167 (ee3d1b54c) with Apple clang version 17.0.0 (clang-1700.0.13.5) for "
                    "arm64-apple-darwin25.0.0\n")


def stock_fake_llama_log(linux: Path, host_proof: bool = True) -> str:
    """A stock fake-llama --bench log, stderr then stdout as `2>&1` in a pipe shows it, after the build line
    that proves an arm64 macOS guest (``host_proof``)."""
    e = {k: v for k, v in os.environ.items() if k not in SHIM_VARS}
    r = subprocess.run([str(linux / "fake-llama"), "--bench"], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    return (ARM64_BUILD_LINE if host_proof else "") + r.stderr + r.stdout
