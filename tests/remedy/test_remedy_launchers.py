"""Launchers that exec the workload (issue 40, item 1) on the Linux stand-in: framework Python's
bin/python3.x re-execs Resources/Python.app/Contents/MacOS/Python, and `uv/poetry/pipenv/conda/pixi run`
start the program they are given. With the scrub at load the launcher drops the library and the program
runs stock; preflight recognises the launcher by what the file is and sets CAPSCAN_INTERPOSER_SCRUB=device,
so the library reaches the process that asks Metal for a device."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from conftest import stock_fake_llama_log


def framework(tmp: Path, linux: Path) -> Path:
    """python.org's layout: Versions/3.12/bin/python3.12 (the launcher, a binary) beside
    Versions/3.12/Resources/Python.app/Contents/MacOS/Python (here: the fake llama)."""
    v = tmp / "Library" / "Frameworks" / "Python.framework" / "Versions" / "3.12"
    (v / "bin").mkdir(parents=True)
    app = v / "Resources" / "Python.app" / "Contents" / "MacOS"
    app.mkdir(parents=True)
    shutil.copy2(linux / "fake-launcher", v / "bin" / "python3.12")
    (app / "Python").symlink_to(linux / "fake-llama")
    return v / "bin" / "python3.12"


def _stock(env, linux_build) -> int:
    return env.ingest_text(stock_fake_llama_log(linux_build))


def test_remedy_run_reaches_the_interpreter_behind_a_framework_launcher(env, linux_build):
    launcher = framework(env.tmp, linux_build)
    venv = env.tmp / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(launcher)   # a venv's bin/python is a link to the framework's launcher
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--json", "--family", "1007", "--", str(venv / "python"), "--bench")
    err = r.stderr.decode()
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["verified"] is True, err
    # the banner comes from the interpreter the launcher exec'd (argv[0] is its path, as pythonw.c sets it)
    assert "[capscan-interposer] enabled for Python (apple_family_max=1007 threadgroup_memory=stock)" in err
    assert "simdgroup reduction   = true" in err
    (check,) = [c for c in doc["preflight"] if c["name"] == "launcher"]
    assert check["status"] == "pass" and check["data"]["kind"] == "framework-python"
    assert check["data"]["execs"] == str((linux_build / "fake-llama").resolve())
    assert check["data"]["scrub"] == "device" and "CAPSCAN_INTERPOSER_SCRUB=device" in check["reason"]
    (chain,) = [c for c in doc["preflight"] if c["name"] == "executable"]
    assert chain["data"]["chain"][-1] == str(launcher)


def test_the_same_launcher_with_the_scrub_at_load_loses_the_library(env, linux_build):
    """What c5d2e23 did (CAPSCAN_INTERPOSER_SCRUB=1 for every command): the launcher loads the library and
    drops it, the interpreter it execs runs stock, and verification says so from the log."""
    from analyzer.remedy import launch as L
    from analyzer.remedy import platform as plat
    from analyzer.remedy.prefix import SCRUB_AT_LOAD

    launcher = framework(env.tmp, linux_build)
    inj = plat.injection("linux")
    assert inj is not None
    library = str(linux_build / "libcapscan_interposer.so")
    base = {"PATH": "/usr/bin:/bin"}
    import subprocess

    def run(scrub: str) -> str:
        e = L.child_env(base, inj, library, 1007, scrub=scrub)
        return subprocess.run([str(launcher), "--bench"], env=e, capture_output=True, text=True, timeout=60).stderr

    assert "MTLGPUFamilyApple5  (1005)" in run(SCRUB_AT_LOAD) and "enabled for" not in run(SCRUB_AT_LOAD)
    assert "MTLGPUFamilyApple7  (1007)" in run("device") and "enabled for Python" in run("device")


def test_remedy_run_through_a_run_wrapper(env, linux_build):
    """`WRAPPER run PROGRAM ...` (uv, poetry, pipenv, conda, pixi): the wrapper starts the program as a child."""
    wrapper = env.tmp / "wrapper"
    wrapper.write_text(f"#!{sys.executable}\n"
                       "import subprocess, sys\n"
                       "# WRAPPER run PROGRAM ARGS: the program as a child, with this environment (as uv run does)\n"
                       "sys.exit(subprocess.call(sys.argv[2:]) if sys.argv[1] == 'run' else 2)\n")
    wrapper.chmod(0o755)
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--json", "--family", "1007", "--", str(wrapper), "run",
                    str(linux_build / "fake-llama"), "--bench")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["verified"] is True, r.stderr.decode()
    (check,) = [c for c in doc["preflight"] if c["name"] == "launcher"]
    assert check["data"]["kind"] == "run-wrapper" and check["data"]["scrub"] == "device"


def test_remedy_env_names_the_scrub_mode(env, linux_build):
    launcher = framework(env.tmp, linux_build)
    r = env.capscan("remedy", "env", "--json", "--family", "1007", "--", str(launcher))
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["env"]["CAPSCAN_INTERPOSER_SCRUB"] == "device"
    r = env.capscan("remedy", "env", "--json", "--family", "1007", "--", str(linux_build / "fake-llama"))
    assert json.loads(r.stdout)["env"]["CAPSCAN_INTERPOSER_SCRUB"] == "1"
    r = env.capscan("remedy", "env", "--json", "--family", "1007", "--inject-children", "--", str(launcher))
    assert "CAPSCAN_INTERPOSER_SCRUB" not in json.loads(r.stdout)["env"]


def test_a_binary_named_like_python_is_not_taken_for_a_launcher(tmp_path, linux_build):
    """By what the file is: a python3.12 in a bin/ with no framework interpreter beside it is the program."""
    from analyzer.remedy.preflight import find_launcher, resolve_target

    b = tmp_path / "bin"
    b.mkdir()
    shutil.copy2(linux_build / "fake-llama", b / "python3.12")
    target, _ = resolve_target(str(b / "python3.12"), {"PATH": "/usr/bin"})
    assert find_launcher(target, [str(b / "python3.12"), "x.py"], "linux") is None
    launcher = framework(tmp_path / "fw", linux_build)
    target, _ = resolve_target(str(launcher), {"PATH": "/usr/bin"})
    found = find_launcher(target, [str(launcher)], "linux")
    assert found is not None and found.kind == "framework-python" and found.path == launcher


def test_a_still_patched_note_is_never_blamed():
    """The verbose self-check line that says devices are still patched is not why a banner is missing."""
    from types import SimpleNamespace as NS

    from analyzer.diagnosis import Diagnosis
    from analyzer.remedy import launch as L
    from analyzer.remedy import platform as plat

    flags = {"simdgroup_reduction": False, "simdgroup_mm": False, "bfloat": False}
    caps = NS(simdgroup_reduction=False, as_dict=lambda: flags)
    run = NS(id=2, facts=NS(device=NS(name="Apple Paravirtual device", apple_family=1005), capabilities=caps,
                            shim=None), diagnosis=Diagnosis.load(
        {"verdict": "capability-downgrade", "fixable": False, "capabilities": flags}))
    note = ("[capscan-interposer] interposing is disabled in python3.12: MTLCreateSystemDefaultDevice is not "
            "capscan's wrapper (the loader did not apply __interpose); devices are still patched through "
            "-[_MTLDevice initGPUFamilySupport]")
    checks = L.verify(L.Outcome(returncode=0, shim_trouble=[note]), [run], 1007, plat.injection("darwin"))
    banner = next(c for c in checks if c.name == "banner")
    assert banner.failed and "did not apply its interposing" not in banner.reason
    assert "no [capscan-interposer] banner" in banner.reason and "launcher" in banner.reason


def test_a_framework_launcher_on_macos_is_told_by_the_framework_it_links(tmp_path):
    """On macOS the launcher is a Mach-O that links Python.framework/Versions/X/Python; its interpreter is
    that framework's Resources/Python.app/Contents/MacOS/Python (pythonw.c's own rule), so a venv's copy
    of the launcher is found too. A program in a framework bin/ that does not link it is not a launcher."""
    import machofixtures as mf

    from analyzer.remedy.preflight import find_launcher, resolve_target

    v = tmp_path / "Library" / "Frameworks" / "Python.framework" / "Versions" / "3.12"
    app = v / "Resources" / "Python.app" / "Contents" / "MacOS"
    app.mkdir(parents=True)
    (v / "bin").mkdir()
    mf.write(app / "Python", mf.thin(dylibs=(str(v / "Python"), "/usr/lib/libSystem.B.dylib")))
    launcher = mf.thin(dylibs=(str(v / "Python"), "/usr/lib/libSystem.B.dylib"))
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    for exe in (mf.write(v / "bin" / "python3.12", launcher), mf.write(venv / "python", launcher)):
        target, _ = resolve_target(str(exe), {"PATH": "/usr/bin"})
        found = find_launcher(target, [str(exe), "-c", "import llama_cpp"], "darwin")
        assert found is not None and found.kind == "framework-python", exe
        assert found.execs == (app / "Python").resolve() and "links the Python framework" in found.how
    # the interpreter itself links the framework too, but it is what runs: not a launcher
    target, _ = resolve_target(str(app / "Python"), {"PATH": "/usr/bin"})
    assert find_launcher(target, [str(app / "Python")], "darwin") is None
    # a program in that bin/ linking only libSystem (a llama-bench copied there) is the program
    other = mf.write(v / "bin" / "llama-bench", mf.thin(dylibs=("/usr/lib/libSystem.B.dylib",)))
    target, _ = resolve_target(str(other), {"PATH": "/usr/bin"})
    assert find_launcher(target, [str(other), "-m", "x.gguf"], "darwin") is None


def test_the_mach_o_reader_lists_linked_libraries(macos_build):
    """Real lld output: the cross-built library links Metal, libobjc and libSystem, in the order
    `llvm-otool -L` lists them (its own install name, LC_ID_DYLIB, is not a link)."""
    from analyzer.remedy import macho

    got = macho.read(macos_build / "libcapscan_interposer.arm64.dylib").running_slice().dylibs
    assert got == ("/System/Library/Frameworks/Metal.framework/Versions/A/Metal", "/usr/lib/libobjc.A.dylib",
                   "/usr/lib/libSystem.B.dylib")


def test_the_selftest_reads_the_banner_and_family_not_the_note():
    """A probe whose answers did not change, with only the verbose 'devices are still patched' note, is not
    'interposing-disabled' (on c5d2e23 any 'interposing is disabled' line decided that)."""
    from analyzer.remedy import platform as plat
    from analyzer.remedy.selftest import INCONCLUSIVE, OFF, WORKS, ProbeRun, Report, decide

    note = ("[capscan-interposer] interposing is disabled in capscan-probe: MTLCreateSystemDefaultDevice is not "
            "capscan's wrapper (the loader did not apply __interpose); devices are still patched through "
            "-[_MTLDevice initGPUFamilySupport]")
    stock_line = ("[capscan-interposer] interposing is disabled in capscan-probe: MTLCreateSystemDefaultDevice is "
                  "not capscan's wrapper (the loader did not apply __interpose) and there is no -[_MTLDevice "
                  "initGPUFamilySupport] to hook; Metal answers stay stock")
    banner = "[capscan-interposer] enabled for capscan-probe (apple_family_max=1007 threadgroup_memory=stock)"
    inj = plat.injection("darwin")
    assert inj is not None
    stock = ProbeRun("stock", 0, "supports_family.1007=false\n", "")

    def verdict(stdout: str, *lines: str) -> tuple[str, str]:
        r = Report("darwin", False)
        decide(r, stock, ProbeRun("remedied", 0, stdout, "\n".join(lines) + "\n"), 1007, inj)
        return r.verdict, r.reason

    assert verdict("supports_family.1007=false\n", note)[0] == INCONCLUSIVE
    assert verdict("supports_family.1007=false\n", stock_line) == (OFF, stock_line)
    assert verdict("supports_family.1007=true\n", note, banner)[0] == WORKS
    assert verdict("supports_family.1007=true\n", banner)[0] == WORKS
