"""Remedy hardening: library paths the loader would split, program names that
look like options, a `defaults` that writes and then fails, a child that traps
Ctrl-C, a child killed by a signal, a child printing a huge line. Real child
processes throughout (Python scripts), real SQLite."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.remedy import dylib, launch, platform as plat, preflight
from analyzer.remedy.runner import Completed, Runner, file_arg
from conftest import REPO, stock_fake_llama_log

DOMAIN, KEY = "com.apple.gpusw.ParavirtualizedGraphics", "ForceUnrestrictedDeviceFeatureLevel"


def _stock(env, linux_build) -> int:
    rid = env.ingest_text(stock_fake_llama_log(linux_build))
    shown = json.loads(env.capscan("show", str(rid), "--json").stdout)
    assert shown["verdict"] == "capability-downgrade" and shown["fixable"] is True
    return rid


def _script(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(body)
    return path


def _actions(env) -> list[tuple]:
    con = sqlite3.connect(env.db)
    return con.execute("SELECT action, result, args FROM remedy_actions WHERE action='remedy-run'").fetchall()


# -- library paths the loader would split -----------------------------------------------------------


@pytest.mark.parametrize("system,path,bad", [
    ("linux", "/opt/my libs/libcapscan_interposer.so", True),
    ("linux", "/opt/a:b/libcapscan_interposer.so", True),
    ("linux", "/opt/tab\there/libcapscan_interposer.so", True),
    ("linux", "/opt/ok/libcapscan_interposer.so", False),
    ("darwin", "/Users/dana/a:b/libcapscan_interposer.universal.dylib", True),
    ("darwin", "/Users/dana/My Projects/libcapscan_interposer.universal.dylib", False),  # dyld splits at ':' only
])
def test_loader_path_check(system, path, bad):
    check = dylib.loader_path_check(plat.injection(system), Path(path))
    assert check.failed is bad
    if bad:
        assert plat.injection(system).env_var in check.reason and "--dylib" in check.instead


def test_remedy_run_refuses_a_library_path_with_a_space(env, linux_build, tmp_path):
    _stock(env, linux_build)
    spaced = tmp_path / "my libs"
    spaced.mkdir()
    lib = spaced / dylib.LINUX_NAME
    shutil.copy2(linux_build / dylib.LINUX_NAME, lib)
    marker = tmp_path / "launched"
    child = _script(tmp_path, "child.py", f"open({str(marker)!r}, 'w').write('x')\n")
    r = env.capscan("remedy", "run", "--family", "1007", "--dylib", str(lib), "--", sys.executable, str(child))
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "dylib path" in err and "' '" in err and "LD_PRELOAD" in err
    assert "nothing was launched" in err and not marker.exists()


def test_remedy_env_refuses_it_too(env, linux_build, tmp_path):
    _stock(env, linux_build)
    spaced = tmp_path / "a:b"
    spaced.mkdir()
    lib = spaced / dylib.LINUX_NAME
    shutil.copy2(linux_build / dylib.LINUX_NAME, lib)
    r = env.capscan("remedy", "env", "--family", "1007", "--dylib", str(lib))
    assert r.returncode == 2 and "export" not in r.stdout.decode()
    assert "dylib path" in r.stderr.decode()


# -- program names that look like options -----------------------------------------------------------


class _Recorder(Runner):
    def __init__(self):
        super().__init__(env={"PATH": ""})
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv, *, timeout=None, cwd=None):
        self.calls.append(tuple(argv))
        return Completed(tuple(argv), 0, "arm64\n", "")


def test_file_arg():
    assert file_arg("-rf") == "./-rf" and file_arg("llama-bench") == "llama-bench" and file_arg("/a/-b") == "/a/-b"


def test_preflight_tools_never_see_a_program_name_as_an_option():
    runner = _Recorder()
    exe = Path("-o")
    preflight.check_codesign("darwin", runner, exe)
    preflight.check_restrict_segment("darwin", runner, exe)
    preflight.check_archs("darwin", runner, exe)
    dylib.library_archs(runner, Path("--help"), tools=True)
    assert {c[0] for c in runner.calls} == {"codesign", "otool", "lipo"}
    for call in runner.calls:
        assert "-o" not in call and "--help" not in call, call
        assert call[-1] in ("./-o", "./--help"), call


def test_plan_steps_never_pass_a_program_name_as_an_option(env, linux_build, monkeypatch):
    from analyzer.ingest import ingest
    from analyzer.read.reader import open_input
    from analyzer.remedy.plan import build_plan
    from analyzer.store.db import open_db

    log = env.tmp / "stock.log"
    log.write_text(stock_fake_llama_log(linux_build))
    db = open_db(env.db)
    src = open_input(str(log))
    rid = ingest(db, src).run_ids[0]
    src.close()
    monkeypatch.setenv("CAPSCAN_PLATFORM", "darwin")
    monkeypatch.setenv("CAPSCAN_MACHINE", "arm64")
    p = build_plan(db, rid, command=["-rf", "--model", "m.gguf"])
    assert p["actionable"], p
    tools = {s["argv"][0]: s["argv"] for s in p["steps"]}
    for tool in ("ls", "codesign", "otool", "lipo"):
        assert tools[tool][-1] == "./-rf", tools[tool]
        assert "-rf" not in tools[tool]


# -- host-default: a write that takes and then fails ------------------------------------------------


def test_host_default_write_that_fails_after_writing_is_recorded_and_undoable(env):
    host = env.darwin(CAPSCAN_FAKE_BRAND="Apple M4 Max", CAPSCAN_FAKE_DEFAULTS_WRITE_FAILS="1")
    value = host.tmp / "pvg-default"
    assert not value.exists()
    r = host.capscan("remedy", "host-default", "--apply")
    out = r.stdout.decode()
    assert r.returncode == 1, out + r.stderr.decode()
    assert "failed (Could not write domain" in out and "now reads 1" in out and "remedy undo --apply" in out
    assert value.read_text().strip() == "1"  # it did write
    status = json.loads(host.capscan("remedy", "status", "--json").stdout)
    (action,) = [a for a in status["actions"] if a["action"] == "host-default"]
    assert action["result"] == "applied" and action["args"]["after"]["value"] == "1"
    assert action["args"]["previous"]["state"] == "missing" and "Could not write" in action["args"]["write_error"]
    assert status["pending_undo"] == [action["id"]]
    r = host.capscan("remedy", "undo", "--apply")
    assert r.returncode == 0, r.stdout.decode()
    assert not value.exists()


def test_host_default_write_that_changes_nothing_is_failed_with_nothing_to_undo(env, tmp_path):
    host = env.darwin(CAPSCAN_FAKE_BRAND="Apple M4 Max")
    # a `defaults` whose write does nothing and fails
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "defaults").write_text("#!/bin/sh\n[ \"$1\" = write ] && { echo 'write refused' >&2; exit 1; }\n"
                                   f"exec {REPO / 'tests/remedy/bin/defaults'} \"$@\"\n")
    (fake / "defaults").chmod(0o755)
    host.vars["PATH"] = f"{fake}{os.pathsep}{host.vars['PATH']}"
    r = host.capscan("remedy", "host-default", "--apply")
    assert r.returncode == 1 and "did not take (write refused)" in r.stdout.decode()
    status = json.loads(host.capscan("remedy", "status", "--json").stdout)
    (action,) = [a for a in status["actions"] if a["action"] == "host-default"]
    assert action["result"].startswith("failed") and status["pending_undo"] == []


# -- a child that traps SIGINT ----------------------------------------------------------------------

TRAPPER = """
import os, signal, sys, time
log = open(sys.argv[1], "a", buffering=1)
log.write(f"pid {os.getpid()}\\n")
def note(sig, frame):
    log.write(f"got {signal.Signals(sig).name}\\n")
signal.signal(signal.SIGINT, note)
signal.signal(signal.SIGTERM, note)
sys.stderr.write("ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\\n")
sys.stderr.write("child ready\\n")
sys.stderr.flush()
while True:
    time.sleep(0.1)
"""


def _remedy_run(env, err_f, *command: str, family: str = "1007", options: tuple[str, ...] = ()) -> subprocess.Popen:
    """`capscan remedy run -- COMMAND` in the background, its stderr to err_f: the tests signal capscan, not
    its child."""
    return subprocess.Popen([sys.executable, "-m", "analyzer", "remedy", "run", "--family", family, *options, "--",
                             *command], stdout=subprocess.DEVNULL, stderr=err_f, env=env.vars, cwd=REPO)


def _wait_for(path: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}: {path.read_text(errors='replace')[-2000:]}")


def test_ctrl_c_is_forwarded_then_escalated_and_recorded_interrupted(env, linux_build, tmp_path):
    _stock(env, linux_build)
    child = _script(tmp_path, "trapper.py", TRAPPER)
    child_log = tmp_path / "child.log"
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(child), str(child_log))
        _wait_for(err, "child ready")
        child_pid = int(child_log.read_text().split()[1])
        proc.send_signal(signal.SIGINT)  # to capscan only: the child must get it from capscan
        assert proc.wait(timeout=120) == 130, err.read_text()
    text = err.read_text()
    assert "Traceback" not in text and "interrupted" in text.splitlines()[-1]
    got = child_log.read_text()
    assert "got SIGINT" in got and "got SIGTERM" in got  # forwarded, then escalated
    with pytest.raises(ProcessLookupError):  # and finally killed: nothing left running
        os.kill(child_pid, 0)
    ((_, result, args),) = _actions(env)
    assert result == "interrupted: the command killed by SIGKILL after capscan sent SIGKILL", result
    assert json.loads(args)["returncode"] == -9


def test_a_child_that_stops_on_the_forwarded_sigint_is_not_escalated(env, linux_build, tmp_path):
    _stock(env, linux_build)
    child = _script(tmp_path, "polite.py", TRAPPER.replace(
        'signal.signal(signal.SIGINT, note)', 'signal.signal(signal.SIGINT, lambda s, f: (note(s, f), sys.exit(3)))'))
    child_log = tmp_path / "child.log"
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(child), str(child_log))
        _wait_for(err, "child ready")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, err.read_text()
    assert "got SIGINT" in child_log.read_text() and "got SIGTERM" not in child_log.read_text()
    ((_, result, _),) = _actions(env)
    assert result == "interrupted: the command exited with status 3 after capscan sent SIGINT"


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_are_forwarded_recorded_and_leave_nothing_running(env, linux_build, tmp_path, sig, code):
    """timeout(1), a CI cancellation or launchd send SIGTERM, a closed terminal SIGHUP: capscan forwards the
    same signal to the child, records the interruption (never 'running') and exits 128 + the signal."""
    _stock(env, linux_build)
    name = signal.Signals(sig).name
    child = _script(tmp_path, "polite.py", TRAPPER.replace(
        "signal.signal(signal.SIGTERM, note)",
        f"signal.signal(signal.{name}, lambda s, f: (note(s, f), sys.exit(3)))"))
    child_log = tmp_path / "child.log"
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(child), str(child_log))
        _wait_for(err, "child ready")
        child_pid = int(child_log.read_text().split()[1])
        proc.send_signal(sig)  # to capscan only
        assert proc.wait(timeout=120) == code, err.read_text()
    text = err.read_text()
    assert "Traceback" not in text and f"interrupted by {name}" in text.splitlines()[-1]
    assert f"got {name}" in child_log.read_text()
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)
    ((_, result, args),) = _actions(env)
    assert result == f"interrupted by {name}: the command exited with status 3 after capscan sent {name}", result
    assert json.loads(args)["child_pid"] == child_pid


def test_a_record_left_running_by_a_killed_capscan_is_lost_on_the_next_command(env, linux_build, tmp_path):
    """kill -9 of capscan leaves its record at 'running'; the next remedy command finds its pid gone and
    says 'lost', with when it noticed and that the child was still running then."""
    _stock(env, linux_build)
    child = _script(tmp_path, "trapper.py", TRAPPER)
    child_log = tmp_path / "child.log"
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(child), str(child_log))
        _wait_for(err, "child ready")
        child_pid = int(child_log.read_text().split()[1])
        proc.kill()
        proc.wait(timeout=60)
    try:
        ((_, result, _),) = _actions(env)
        assert result == "running"
        status = json.loads(env.capscan("remedy", "status", "--json").stdout)
        ((_, result, args),) = _actions(env)
        assert result.startswith(f"lost: the capscan that ran it (pid {proc.pid}) ended without recording a result")
        assert "its child (pid %d) was still running then" % child_pid in result
        assert json.loads(args)["lost_at"] and json.loads(args)["child_alive"] is True
        assert [a["result"] for a in status["actions"] if a["result"] == "running"] == []
    finally:
        os.kill(child_pid, signal.SIGKILL)


def test_a_running_record_of_a_live_capscan_or_another_host_is_left_alone(env):
    from analyzer.store import open_db, remedy_records as records

    db = open_db(env.db)
    mine = records.record(db, "remedy-run", {"host": launch.this_host(), "capscan_pid": os.getpid()}, "running", None)
    other = records.record(db, "remedy-run", {"host": "another-mac", "capscan_pid": 999_999_999}, "running", None)
    old = records.record(db, "remedy-run", {"argv": ["llama-bench"]}, "running", None)  # an older capscan's: no pid
    assert launch.reconcile(db) == []
    assert [records.get(db, i)["result"] for i in (mine, other, old)] == ["running"] * 3
    gone = records.record(db, "remedy-run", {"host": launch.this_host(), "capscan_pid": 999_999_999}, "running", None)
    assert launch.reconcile(db) == [gone] and records.get(db, gone)["result"].startswith("lost: ")
    db.conn.close()


# -- a child killed by a signal ---------------------------------------------------------------------


def test_describe_exit():
    assert launch.describe_exit(0) == "exited with status 0"
    assert launch.describe_exit(2) == "exited with status 2"
    assert launch.describe_exit(-11) == "killed by SIGSEGV"
    assert launch.describe_exit(-9) == "killed by SIGKILL"
    assert launch.describe_exit(None) == "still running"


def test_a_child_killed_by_sigsegv_is_reported_so(env, linux_build, tmp_path):
    _stock(env, linux_build)
    child = _script(tmp_path, "crash.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    r = env.capscan("remedy", "run", "--family", "1007", "--", sys.executable, str(child))
    out = r.stdout.decode()
    assert r.returncode == 1, out + r.stderr.decode()
    assert "killed by SIGSEGV" in out and "status -11" not in out
    ((_, result, args),) = _actions(env)
    assert json.loads(args)["ended"] == "killed by SIGSEGV"


# -- a child printing a huge line ------------------------------------------------------------------


def _own_peak_rss_mb(proc: subprocess.Popen) -> float:
    """capscan's own high-water RSS (VmHWM), sampled until it exits: wait4's figure would
    include its children (the flooding child, or a compiler if the library is built on demand)."""
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return peak / 1024


def test_a_child_printing_a_huge_line_without_newline_is_bounded(env, linux_build, tmp_path):
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read capscan's own peak memory")
    _stock(env, linux_build)
    child = _script(tmp_path, "flood.py", "import sys\nblock = b'x' * (1 << 20)\n"
                    "for _ in range(128):\n    sys.stdout.buffer.write(block)\n")
    err_path = tmp_path / "err"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "analyzer", "remedy", "run", "--family", "1007", "--",
                                 sys.executable, str(child)], stdout=subprocess.DEVNULL, stderr=err, env=env.vars,
                                cwd=REPO)
        peak = _own_peak_rss_mb(proc)
    assert proc.returncode == 1, err_path.read_text()  # launched, nothing to verify (no device block)
    assert "Traceback" not in err_path.read_text()
    assert 0 < peak < 150, f"peak RSS {peak:.0f} MB for a 128 MiB line"


def test_preflight_refuses_the_official_app_by_its_path(env, linux_build, tmp_path):
    """`ollama` on PATH is a link into the app bundle: refused by name, nothing launched, no record."""
    _stock(env, linux_build)
    bundle = tmp_path / "Applications" / "Ollama.app" / "Contents" / "Resources"
    bundle.mkdir(parents=True)
    real = bundle / "ollama"
    real.write_text("#!/bin/sh\necho should-not-run\n")
    real.chmod(0o755)
    link = tmp_path / "bin" / "ollama"
    link.parent.mkdir()
    os.symlink(real, link)
    r = env.capscan("remedy", "run", "--family", "1007", "--", str(link), "serve")
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "official Ollama.app" in err and "Homebrew" in err and "should-not-run" not in r.stdout.decode() + err
    assert _actions(env) == []


# -- a server: verified while it runs ---------------------------------------------------------------

SERVER = """
import os, subprocess, sys, time
log = open(sys.argv[2], "a", buffering=1)
log.write(f"pid {os.getpid()}\\n")
subprocess.run([sys.argv[1]], check=False)  # the fake llama prints its Metal block (injected: all true)
sys.stderr.write("main: server is listening on http://127.0.0.1:8080\\n")
sys.stderr.flush()
while True:
    time.sleep(0.1)
"""


def test_a_server_is_verified_while_it_runs_and_stored_when_stopped(env, linux_build, tmp_path):
    """A server never exits: the block it prints at start-up is judged at once (printed, and the record
    moves from 'running'), the server keeps running; stopped with Ctrl-C, its log is stored and the record
    keeps what was seen."""
    stock = _stock(env, linux_build)
    server = _script(tmp_path, "server.py", SERVER)
    server_log = tmp_path / "server.log"
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(server), str(linux_build / "fake-llama"), str(server_log),
                           options=("--inject-children",))     # its child does the GPU work, as ollama's runner
        try:
            _wait_for(err, "capscan: verified while it runs: the interposer's banner, and simdgroup reduction")
            assert proc.poll() is None  # still serving
            ((_, result, _),) = _actions(env)
            assert result == "running: verified while it runs"
            server_pid = int(server_log.read_text().split()[1])
        finally:
            proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, err.read_text()
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)
    ((_, result, args),) = _actions(env)
    assert result.startswith("interrupted: the command ") and result.endswith("; verified while it ran"), result
    new = json.loads(args)["run_ids"]
    assert len(new) >= 1  # what it printed is stored, and linked to the stock run
    con = sqlite3.connect(env.db)
    assert {r[0] for r in con.execute("SELECT stock_run_id FROM run_links")} == {stock}
    shown = json.loads(env.capscan("show", str(new[0]), "--json").stdout)
    assert shown["capabilities"]["simdgroup_reduction"] is True


def test_a_block_still_clamped_is_reported_at_once_too(env, linux_build, tmp_path):
    """The stock fake llama under a family cap below Apple7: the flags stay false, said while it runs."""
    _stock(env, linux_build)
    server = _script(tmp_path, "server.py", SERVER)
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(server), str(linux_build / "fake-llama"),
                           str(tmp_path / "server.log"), family="1006")
        try:
            _wait_for(err, "capscan: NOT verified while it runs: ")
        finally:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 143, err.read_text()
    ((_, result, _),) = _actions(env)
    assert result.startswith("interrupted by SIGTERM: ") and "; not verified while it ran (" in result, result


def test_children_are_scrubbed_by_default(env, linux_build, tmp_path):
    """By default the direct target (here a Python server) loads the library and drops it from the variable,
    so the fake llama it starts answers stock (said while it runs); --inject-children (the verified-while-it-runs
    test) lets it inherit."""
    _stock(env, linux_build)
    server = _script(tmp_path, "server.py", SERVER)
    err = tmp_path / "capscan.err"
    with open(err, "wb") as err_f:
        proc = _remedy_run(env, err_f, sys.executable, str(server), str(linux_build / "fake-llama"),
                           str(tmp_path / "server.log"))
        try:
            _wait_for(err, "capscan: NOT verified while it runs: no [capscan-interposer] banner")
        finally:
            proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, err.read_text()
    ((_, result, args),) = _actions(env)
    assert "not verified while it ran (no [capscan-interposer] banner" in result, result


def test_a_self_built_ollama_needs_inject_children_and_then_verifies(env, linux_build, tmp_path):
    """ollama's GPU work runs in its runner child: without --inject-children the default scrub would leave the
    runner stock, so preflight refuses before anything runs and names the flag; with it, the runner inherits
    the library and the remedy is verified while the server runs."""
    _stock(env, linux_build)
    ollama = tmp_path / "bin" / "ollama"        # a self-built ollama stand-in: a server whose child uses Metal
    ollama.parent.mkdir()
    ollama.write_text(f"#!{sys.executable}\n" + SERVER)
    ollama.chmod(0o755)
    server_log = tmp_path / "server.log"
    r = env.capscan("remedy", "run", "--family", "1007", "--", str(ollama), str(linux_build / "fake-llama"),
                    str(server_log))
    err = r.stderr.decode()
    assert r.returncode == 2 and "FAIL  children: ollama does its GPU work in an `ollama runner` child" in err, err
    assert "pass --inject-children" in err and not server_log.exists() and _actions(env) == []
    out = tmp_path / "capscan.err"
    with open(out, "wb") as err_f:
        proc = _remedy_run(env, err_f, str(ollama), str(linux_build / "fake-llama"), str(server_log),
                           options=("--inject-children",))
        try:
            _wait_for(out, "capscan: verified while it runs: the interposer's banner")
        finally:
            proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, out.read_text()
    assert "ok    children: --inject-children" in out.read_text()


def test_a_shell_as_the_command_is_refused_unless_children_inherit(env, linux_build):
    """`remedy run -- sh -c 'llama-bench ...'`: the workload is the shell's child, which the default scrub
    leaves stock; refused before it runs, with the two ways that work."""
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--family", "1007", "--", "sh", "-c", f"{linux_build / 'fake-llama'} --bench")
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "FAIL  children: " in err and "is a shell: the workload is a program it starts" in err
    assert "run the program itself" in err and "--inject-children" in err and _actions(env) == []
    ok = env.capscan("remedy", "run", "--family", "1007", "--inject-children", "--", "sh", "-c",
                     f"exec {linux_build / 'fake-llama'} --bench")
    assert ok.returncode == 0 and "verified:" in ok.stdout.decode(), ok.stdout.decode() + ok.stderr.decode()
