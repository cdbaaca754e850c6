"""End to end on Linux: `capscan remedy run` injects the LD_PRELOAD stand-in
into the unmodified fake llama, and a stored capability-downgrade run becomes
a verified healthy one; failing verifications name the check that failed."""

from __future__ import annotations

import json
import sqlite3

from conftest import stock_fake_llama_log


def _stock(env, linux_build) -> int:
    rid = env.ingest_text(stock_fake_llama_log(linux_build))
    shown = json.loads(env.capscan("show", str(rid), "--json").stdout)
    assert shown["verdict"] == "capability-downgrade" and shown["fixable"] is True, shown
    assert shown["capabilities"]["simdgroup_reduction"] is False
    return rid


def test_remedy_run_turns_the_stock_run_into_a_verified_healthy_one(env, linux_build):
    stock = _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--family", "1007", "--", str(linux_build / "fake-llama"), "--bench")
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, out + err
    # passed through to the terminal: the table on stdout, the banner and Metal block on stderr
    assert "| llama 1B Q4_K - Medium" in out and "4786.70" in out
    assert "[capscan-interposer] enabled for fake-llama (apple_family_max=1007" in err
    assert "simdgroup reduction   = true" in err
    assert "verified:" in out
    assert "speedup: pp512 11.08x, tg128 16.36x" in out
    assert "12.63 t/s" in out and "206.60 t/s" in out
    con = sqlite3.connect(env.db)
    links = con.execute("SELECT run_id, stock_run_id, relation FROM run_links").fetchall()
    assert len(links) == 1 and links[0][1] == stock and links[0][2] == "remedy-run"
    new = links[0][0]
    (action,) = con.execute("SELECT action_id FROM run_links").fetchone()
    assert f"run {new} <- stock run {stock} (remedy-run, action {action})\n" in \
        env.capscan("remedy", "status").stdout.decode()
    shown = json.loads(env.capscan("show", str(new), "--json").stdout)
    assert shown["verdict"] in ("healthy", "virtualization-overhead")
    assert shown["shim"] == {"name": "capscan-interposer", "apple_family_max": 1007}
    assert shown["device"]["apple_family"] == 1007
    assert all(shown["capabilities"][k] for k in ("simdgroup_reduction", "simdgroup_mm", "bfloat"))
    assert {t["test"]: t["tok_s"] for t in shown["throughput"]} == {"pp512": 4786.70, "tg128": 206.60}
    action = con.execute("SELECT action, result, args, undo FROM remedy_actions WHERE action='remedy-run'").fetchone()
    assert action[0] == "remedy-run" and action[1] == "verified"
    args = json.loads(action[2])
    assert args["family"] == 1007 and args["env_var"] == "LD_PRELOAD" and args["run_ids"] == [new]
    assert args["stock_run_id"] == stock and len(args["sha256"]) == 64
    assert "nothing to undo" in json.loads(action[3])["why"]


def test_remedy_run_json(env, linux_build):
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--json", "--family", "1007", "--", str(linux_build / "fake-llama"), "--bench")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)  # the child's stdout went to stderr, so stdout is clean JSON
    assert doc["verified"] is True and doc["family"] == 1007
    assert doc["compare"]["throughput"]["tg128"]["ratio"] == 16.36
    assert doc["compare"]["before"]["verdict"] == "capability-downgrade"
    assert doc["compare"]["after"]["simdgroup_mm"] is True
    assert [c["name"] for c in doc["verification"]] == ["exit status", "banner", "family", "capability flags",
                                                         "verdict"]


def test_rolled_back_interposer_fails_the_banner_check(env, linux_build):
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--family", "1007", "--", str(linux_build / "fake-llama"), "--bench",
                    CAPSCAN_FAKE_METAL_DEVICE="incomplete", CAPSCAN_METAL_MAX_THREADGROUP_MEMORY="65536")
    out = r.stdout.decode()
    assert r.returncode == 1, out + r.stderr.decode()
    assert "NOT verified: banner failed: the interposer loaded but did not apply" in out
    assert "all hooks rolled back" in out
    assert "FAIL  capability flags" in out
    con = sqlite3.connect(env.db)
    assert con.execute("SELECT result FROM remedy_actions WHERE action='remedy-run'").fetchone()[0].startswith(
        "failed: banner")
    assert con.execute("SELECT COUNT(*) FROM run_links").fetchone()[0] == 1  # stored and linked all the same


def test_wrapper_that_drops_the_variable_is_reported(env, linux_build, tmp_path):
    _stock(env, linux_build)
    wrapper = tmp_path / "launcher"
    wrapper.write_text(f"#!/bin/sh\nunset LD_PRELOAD\nexec {linux_build / 'fake-llama'} \"$@\"\n")
    wrapper.chmod(0o755)
    r = env.capscan("remedy", "run", "--family", "1007", "--inject-children", "--", str(wrapper), "--bench")
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "NOT verified: banner failed: no [capscan-interposer] banner" in out
    assert "launcher that resets the environment" in out


def test_a_failing_command_fails_the_exit_check(env, linux_build):
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--family", "1007", "--inject-children", "--", "sh", "-c", "echo oops >&2; exit 3")
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "FAIL  exit status: the command exited with status 3" in out
    assert "FAIL  new run: nothing capscan recognises was printed" in out


def test_family_auto_is_refused_when_the_host_is_unknown(env, linux_build):
    _stock(env, linux_build)
    r = env.capscan("remedy", "run", "--", str(linux_build / "fake-llama"), "--bench")
    err = r.stderr.decode()
    assert r.returncode == 2
    assert "FAIL  family: the host chip's true family is unknown" in err
    assert "nothing was launched" in err


def test_a_family_no_gpu_has_is_refused_and_nothing_launched(env, linux_build):
    """Found by exploratory testing: --family 1999 was launched and 'verified' (the new run then over-claimed)."""
    _stock(env, linux_build)
    for code in ("1012", "1999"):
        r = env.capscan("remedy", "run", "--run", "1", "--family", code, "--", str(linux_build / "fake-llama"),
                        "--bench")
        err = r.stderr.decode()
        assert r.returncode == 2, err
        assert f"FAIL  family: '{code}' is not the code of an Apple family that exists (1001-1011" in err
        assert "nothing was launched" in err


def test_probe_stores_the_fake_probe_and_prints_the_diagnosis(env, linux_build):
    r = env.capscan("probe", "--probe", str(linux_build / "capscan-probe"))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, err
    assert "CAPABILITY-DOWNGRADE" in out and "Apple Paravirtual device" in out
    assert "capscan-probe: 1 run (id " in err
    doc = json.loads(env.capscan("probe", "--probe", str(linux_build / "capscan-probe"), "--force", "--json",
                                 "--", "--json").stdout)
    run = doc["runs"][0]
    assert run["source"] == "capscan-probe" and run["device"]["apple_family"] == 1005
    assert run["device"]["threadgroup_memory"] == 32768


def test_probe_under_injection_is_remedied(env, linux_build):
    r = env.capscan("probe", "--json", "--probe", str(linux_build / "capscan-probe"),
                    LD_PRELOAD=str(linux_build / "libcapscan_interposer.so"), CAPSCAN_METAL_APPLE_FAMILY_MAX="1007")
    run = json.loads(r.stdout)["runs"][0]
    assert run["device"]["apple_family"] == 1007
    assert run["shim"]["name"] == "capscan-interposer"


def test_probe_failures(env, linux_build):
    r = env.capscan("probe")
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1 and "pass --probe PATH" in r.stderr.decode()
    r = env.capscan("probe", "--probe", str(linux_build / "capscan-probe"), CAPSCAN_FAKE_METAL_DEVICE="none")
    assert r.returncode == 2 and "Metal device unavailable" in r.stderr.decode()
