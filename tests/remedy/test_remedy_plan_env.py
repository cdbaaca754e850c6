"""remedy plan (and build_plan for the TUI), remedy env, and the small pieces."""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
import subprocess

import pytest

from analyzer.remedy import family, preflight, transport
from analyzer.remedy import prefix
from analyzer.remedy.plan import build_plan
from analyzer.store.db import open_db
from conftest import FIXTURES, stock_fake_llama_log


def _counts(path) -> dict:
    con = sqlite3.connect(path)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {t: con.execute(f"SELECT COUNT(*) FROM [{t}]").fetchone()[0] for t in tables}


def test_build_plan_is_read_only_and_complete(env, linux_build):
    from analyzer.ingest import ingest
    from analyzer.read.reader import open_input

    log = env.tmp / "stock.log"
    log.write_text(stock_fake_llama_log(linux_build))
    db = open_db(env.db)
    src = open_input(str(log))
    rid = ingest(db, src).run_ids[0]
    src.close()
    before = _counts(env.db)
    p = build_plan(db, rid)
    assert _counts(env.db) == before and before["diagnoses"] == 0   # nothing written, not even the diagnosis
    assert set(p) >= {"run_id", "verdict", "actionable", "refusal", "steps"}
    assert p["run_id"] == rid and p["verdict"] == "capability-downgrade" and p["actionable"] and p["refusal"] is None
    for s in p["steps"]:
        assert set(s) >= {"title", "argv", "shell", "check"} and s["shell"] == shlex.join(s["argv"])
    # off macOS the plan is the guest's: its checks, then remedy run (the guest's store has its own run ids)
    assert p["where"] == "guest" and p["injection"] == "DYLD_INSERT_LIBRARIES"
    assert p["steps"][0]["argv"] == ["sysctl", "-n", "kern.hv_vmm_present"]
    assert p["steps"][-1]["argv"][:5] == ["capscan", "remedy", "run", "--family", "1007"]
    assert not any("LD_PRELOAD" in s["shell"] or s["argv"][0] == "make" for s in p["steps"])
    assert [v["argv"][3:6] for v in p["via"]] == [["--via", name, "--vm"] for name in transport.VIAS]
    # the developer's stand-in only when asked for
    dev = build_plan(db, rid, stand_in=True)
    assert dev["where"] == "stand-in" and dev["injection"] == "LD_PRELOAD"
    assert dev["steps"][0]["argv"][0] == "make" and dev["steps"][0]["argv"][-1] == "linux"
    assert dev["steps"][-1]["argv"][:5] == ["capscan", "remedy", "run", "--run", str(rid)]
    missing = build_plan(db, 999)
    assert missing["actionable"] is False and "no run 999" in missing["refusal"]


def test_plan_on_a_guest_lists_every_check_with_its_command(env, linux_build):
    env.darwin()
    rid = env.ingest_text(stock_fake_llama_log(linux_build))
    doc = json.loads(env.capscan("remedy", "plan", "--json", "--", "llama-bench", "-m", "my model.gguf").stdout)
    assert doc["run_id"] == rid and doc["family"] == "1007" and doc["injection"] == "DYLD_INSERT_LIBRARIES"
    firsts = [s["argv"][0] for s in doc["steps"]]
    assert firsts == ["sysctl", "sysctl", "csrutil", "ls", "codesign", "codesign", "otool", "lipo", "shasum", "capscan"]
    assert doc["steps"][0]["argv"] == ["sysctl", "-n", "kern.hv_vmm_present"]
    # no macos-native build here: the prebuilt library the package ships
    assert doc["steps"][-2]["argv"][-1].endswith("analyzer/_native/darwin/libcapscan_interposer.dylib")
    assert "prebuilt library shipped with capscan" in doc["steps"][-2]["check"]
    assert doc["steps"][-1]["argv"][-3:] == ["llama-bench", "-m", "my model.gguf"]
    assert "'my model.gguf'" in doc["steps"][-1]["shell"]
    text = env.capscan("remedy", "plan").stdout.decode()
    assert "capability-downgrade  (fixable)" in text and "$ csrutil status" in text
    assert "interposer alone sufficient" in text


def test_plan_refuses_hardware_limit_plainly(env):
    rid = env.ingest(FIXTURES / "metal/m2-2024-10-amd-egpu-intel-mac.log")
    text = env.capscan("remedy", "plan", "--run", str(rid)).stdout.decode()
    assert "hardware-limit" in text and "nothing to do" in text and "do not force capabilities" in text


def test_env_prints_a_per_command_prefix_never_an_export(env, linux_build):
    env.ingest_text(stock_fake_llama_log(linux_build))
    so = str(linux_build / "libcapscan_interposer.so")
    r = env.capscan("remedy", "env", "--family", "1007")
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert out.splitlines() == [f"/usr/bin/env LD_PRELOAD={so} CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 "
                                "CAPSCAN_INTERPOSER_SCRUB=1"]
    assert "export" not in out and "set -gx" not in out
    assert "never your shell" in r.stderr.decode()
    for shell in ("zsh", "fish"):
        same = env.capscan("remedy", "env", "--family", "1007", "--shell", shell)
        assert same.returncode == 0 and same.stdout.decode() == out   # nothing to quote here
    # with a command: the whole line, which works as printed and leaves the calling shell alone
    r = env.capscan("remedy", "env", "--family", "1007", "--", str(linux_build / "fake-llama"), "--bench")
    line = r.stdout.decode().strip()
    assert line == (f"/usr/bin/env LD_PRELOAD={so} CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_SCRUB=1 "
                    f"{linux_build / 'fake-llama'} --bench")
    run = subprocess.run(["sh", "-c", line + '\necho "after: [$LD_PRELOAD]" >&2'], capture_output=True, text=True)
    assert "simdgroup reduction   = true" in run.stderr and "after: []" in run.stderr
    doc = json.loads(env.capscan("remedy", "env", "--json", "--family", "1007").stdout)
    assert doc["prefix"] == ["/usr/bin/env", f"LD_PRELOAD={so}", "CAPSCAN_METAL_APPLE_FAMILY_MAX=1007",
                             "CAPSCAN_INTERPOSER_SCRUB=1"]     # children scrubbed by default
    assert doc["env"]["CAPSCAN_INTERPOSER_SCRUB"] == "1" and doc["command"] is None
    doc = json.loads(env.capscan("remedy", "env", "--json", "--family", "1007", "--inject-children").stdout)
    assert doc["prefix"] == ["/usr/bin/env", f"LD_PRELOAD={so}", "CAPSCAN_METAL_APPLE_FAMILY_MAX=1007"]
    refused = env.capscan("remedy", "env", "--family", "1007", LD_PRELOAD=so)
    assert refused.returncode == 2 and "already injected" in refused.stderr.decode() and refused.stdout == b""


@pytest.mark.parametrize("shell", ["sh", "zsh", "fish"])
def test_prefix_quoting_round_trips_through_each_shell(shell):
    value = "/Volumes/My Shared Files/it's $(here)/lib;x\n.dylib"
    argv = ["/usr/bin/env", f"DYLD_INSERT_LIBRARIES={value}", "printenv", "DYLD_INSERT_LIBRARIES"]
    line = prefix.quote(shell, argv)
    exe = shutil.which(shell)
    if exe is None:
        assert shell != "sh"
        if shell == "fish":
            assert line.startswith("/usr/bin/env 'DYLD_INSERT_LIBRARIES=/Volumes/My Shared Files/it\\'s")
        pytest.skip(f"{shell} is not installed here")
    out = subprocess.run([exe, "-c", line], capture_output=True, text=True)
    assert out.stdout == value + "\n"


@pytest.mark.parametrize("spec, host, brand, want, status", [
    ("auto", 1007, None, 1007, "pass"),
    ("auto", None, "Apple M3 Max (Virtual)", 1009, "pass"),
    ("auto", 1009, "Apple M1 (Virtual)", 1007, "pass"),      # never above either
    ("auto", None, None, None, "fail"),
    ("1007", 1009, None, 1007, "pass"),
    ("0x3ef", 1007, None, 1007, "pass"),
    ("1009", 1007, None, None, "fail"),
    ("1006", 1007, None, 1006, "warn"),
    ("1007", None, None, 1007, "warn"),
    ("01007", None, None, None, "fail"),
    ("2001", None, None, None, "fail"),
    ("1011", None, None, 1011, "warn"),   # Apple11: the highest family Apple documents, vouched for
    ("1012", None, None, None, "fail"),   # no GPU has Apple12 or above: never a cap, vouched or not
    ("1999", None, None, None, "fail"),
    ("0x7cf", None, None, None, "fail"),
    ("abc", None, None, None, "fail"),
])
def test_family_resolution(spec, host, brand, want, status):
    got, check = family.resolve(spec, host, brand)
    assert (got, check.status) == (want, status), check.reason


def test_codesign_and_entitlement_parsing():
    assert preflight.parse_codesign_flags("x: code object is not signed at all") == (0, False)
    assert preflight.parse_codesign_flags("CodeDirectory v=20500 size=1 flags=0x10000(runtime) hashes=1")[0] == 0x10000
    xml = ("<plist><dict><key>com.apple.security.cs.allow-dyld-environment-variables</key><true/>"
           "<key>com.apple.security.cs.disable-library-validation</key><false/></dict></plist>")
    assert preflight.entitlement(xml, preflight.ALLOW_DYLD) is True
    assert preflight.entitlement(xml, preflight.DISABLE_LV) is False
    assert preflight.entitlement("", preflight.ALLOW_DYLD) is False


def test_tart_dylib_and_alias_variables(tmp_path):
    tart = tmp_path / "TartMetalCapabilities.dylib"
    tart.write_bytes(b"x")
    checks = preflight.check_already_injected({"TART_METAL_APPLE_FAMILY_MAX": "1009"}, None, tart_dylib=tart)
    assert [c.status for c in checks] == ["pass", "warn"] and "TART_METAL_APPLE_FAMILY_MAX=0" in checks[1].instead
    checks = preflight.check_already_injected({}, None, tart_dylib=tart)
    assert checks[-1].reason.endswith("is installed but not injected here")
    checks = preflight.check_already_injected({"LUME_METAL_APPLE_FAMILY_MAX": "1009"}, None,
                                              tart_dylib=tmp_path / "none")
    assert checks[-1].status == "warn" and "ignored" in checks[-1].reason


def test_transport_refuses_unknown_via():
    with pytest.raises(transport.TransportError):
        transport.wrap("telnet", "vm", ["true"])


def test_a_plan_without_a_command_names_a_placeholder_never_a_label(env, linux_build):
    """The log names a program (or only 'llama.cpp'), not its command line: the launch line says so plainly
    (`-- '<your llama.cpp command>'`) instead of a label that would be refused when pasted."""
    env.darwin()
    log = stock_fake_llama_log(linux_build)
    rid = env.ingest_text(log)
    doc = json.loads(env.capscan("remedy", "plan", "--json").stdout)
    launch = doc["steps"][-1]
    program = json.loads(env.capscan("show", str(rid), "--json").stdout)["program"] or "llama.cpp"
    assert launch["argv"][-1] == f"<your {program} command>"
    assert launch["shell"].endswith(f"-- '<your {program} command>'")
    assert "llama.cpp" not in launch["argv"][:-1]
    assert "--inject-children" not in launch["argv"] and "CAPSCAN_INTERPOSER_SCRUB=1" in launch["check"]


def test_a_plan_for_an_ollama_log_lets_the_runner_inherit(env):
    """ollama's runner child does the GPU work: the plan's launch line carries --inject-children, and its
    by-hand line leaves out the scrub switch that every other plan's carries."""
    rid = env.ingest(FIXTURES / "rules/ollama-homebrew-guest-stock-2025.log")
    launch = json.loads(env.capscan("remedy", "plan", "--run", str(rid), "--json").stdout)["steps"][-1]
    assert launch["argv"][:3] == ["capscan", "remedy", "run"] and "--inject-children" in launch["argv"]
    assert launch["argv"][-1] == "<your ollama command>" and "CAPSCAN_INTERPOSER_SCRUB" not in launch["check"]


def test_env_says_which_stored_run_it_used(env, linux_build):
    rid = env.ingest_text(stock_fake_llama_log(linux_build))
    r = env.capscan("remedy", "env", "--family", "1007")
    assert f"for stock run {rid} (capability-downgrade), the newest stored run not made by capscan remedy" in \
        r.stderr.decode()
    r = env.capscan("remedy", "env", "--family", "1007", "--run", str(rid))
    assert f"for stock run {rid} (capability-downgrade), as asked (--run)" in r.stderr.decode()
