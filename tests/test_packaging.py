"""capscan installed from its wheel (not editable, away from the checkout): the
LICENSE travels with it, `--version` works, and `remedy plan` points at the
interposer's sources that the package ships (staged into the user's cache dir,
where make can build them), not at a site-packages/native folder that does not exist;
and the wheel carries the prebuilt macOS library and probe (analyzer/_native/darwin)
that an installed capscan injects in a guest without the Command Line Tools."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from analyzer import __version__
from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy of what the sdist holds, so the checkout gets no build/ or egg-info
    src = tmp_path_factory.mktemp("src")
    skip = shutil.ignore_patterns("build", "__pycache__", "*.egg-info", "*.o", "*.so", "*.dylib")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "constraints-test.txt",
                 "constraints-min.txt"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "analyzer", src / "analyzer", ignore=skip)
    shutil.copytree(REPO / "analyzer" / "_native" / "darwin", src / "analyzer" / "_native" / "darwin",
                    dirs_exist_ok=True)                      # the prebuilt files (the skip above drops *.dylib)
    shutil.copytree(REPO / "native" / "interposer", src / "native" / "interposer", ignore=skip)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                    str(src), "-w", str(out)], check=True, capture_output=True, timeout=600)
    (whl,) = out.glob("capscan-*.whl")
    return whl


def test_the_wheel_ships_the_license_and_the_interposer_sources(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
    native = {n.split("analyzer/_native/interposer/", 1)[1] for n in names if "analyzer/_native/interposer/" in n}
    assert {"Makefile", "src/policy.c", "src/linux_preload.c", "src/macos_entry.c",
            "include/capscan/policy.h"} <= native
    assert not any(n.startswith("build/") or n.endswith((".so", ".dylib", ".o")) for n in native)


DARWIN = REPO / "analyzer" / "_native" / "darwin"


def test_the_wheel_ships_the_prebuilt_macos_library_probe_and_their_checksums(wheel):
    z = zipfile.ZipFile(wheel)
    darwin = {i.filename.split("analyzer/_native/darwin/", 1)[1]: i for i in z.infolist()
              if i.filename.startswith("analyzer/_native/darwin/")}
    assert sorted(darwin) == ["SHA256SUMS", "capscan-probe", "libcapscan_interposer.dylib"]
    for name, info in darwin.items():
        assert z.read(info) == (DARWIN / name).read_bytes(), name
    sums = dict(reversed(line.split("  ", 1)) for line in z.read(darwin["SHA256SUMS"]).decode().splitlines())
    assert sorted(sums) == ["capscan-probe", "libcapscan_interposer.dylib"]
    for name, digest in sums.items():
        assert hashlib.sha256(z.read(darwin[name])).hexdigest() == digest, name
    assert (darwin["capscan-probe"].external_attr >> 16) & 0o111     # installed executable
    record = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))).decode()
    assert "analyzer/_native/darwin/libcapscan_interposer.dylib," in record


def test_installed_capscan_plans_a_build_it_can_run(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                    "--target", str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "CAPSCAN_DB": str(tmp_path / "c.db")}
    work = tmp_path / "elsewhere"  # not the checkout: `analyzer` must come from the installed copy
    work.mkdir()

    def capscan(*args, **kw):
        return subprocess.run([str(site / "bin" / "capscan"), *args], env=env, cwd=work, capture_output=True,
                              timeout=120, **kw)

    where = subprocess.run([sys.executable, "-c", "import analyzer; print(analyzer.__file__)"], env=env, cwd=work,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(site))
    version = capscan("--version")
    assert version.returncode == 0 and version.stdout.decode().strip() == f"capscan, version {__version__}"
    log = (REPO / "tests" / "fixtures" / "baselines" / "guest-stock-block-and-json.log").read_bytes()  # fixable
    assert capscan(input=log).returncode == 0
    plan = json.loads(capscan("remedy", "plan", "--json", "--stand-in").stdout)  # the Linux stand-in's build
    make = next(s["argv"] for s in plan["steps"] if s["argv"][:1] == ["make"])
    sources = Path(make[make.index("-C") + 1])
    assert sources == tmp_path / "cache" / "capscan" / f"interposer-{__version__}"
    assert (sources / "Makefile").is_file() and (sources / "src" / "policy.c").is_file()
    assert "site-packages/native" not in json.dumps(plan)
    if shutil.which("make"):
        dry = subprocess.run(["make", "-n", "-C", str(sources), make[-1]], capture_output=True, timeout=60)
        assert dry.returncode == 0, dry.stderr.decode()

    # in a (simulated) macOS guest without the Command Line Tools: the packaged library, verified, no make
    standins = REPO / "tests" / "remedy" / "bin"              # csrutil, sysctl, xcode-select ... (recorded outputs)
    guest = {"CAPSCAN_PLATFORM": "darwin", "CAPSCAN_MACHINE": "arm64", "CAPSCAN_FAKE_CLT": "absent",
             "CAPSCAN_FAKE_SIP": "enabled", "CAPSCAN_FAKE_DEFAULTS_FILE": str(tmp_path / "pvg"),
             "PATH": f"{standins}{os.pathsep}{os.environ.get('PATH', '')}"}
    r = subprocess.run([str(site / "bin" / "capscan"), "remedy", "env", "--json"], env={**env, **guest}, cwd=work,
                       capture_output=True, timeout=120)
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc
    checks = {c["name"]: c for c in doc["checks"]}
    shipped = site / "analyzer" / "_native" / "darwin"
    assert checks["dylib choice"]["data"] == {"kind": "packaged", "path": str(shipped / "libcapscan_interposer.dylib")}
    assert checks["dylib checksum"]["status"] == "pass" and str(shipped / "SHA256SUMS") in checks["dylib checksum"]["reason"]
    assert "dylib build" not in checks
