"""`capscan diagnose`, the pipe mode's report and the contract's JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_capscan

FIX = Path(__file__).resolve().parent.parent / "fixtures"
STOCK = FIX / "metal/m4-2026-08-guest-stock.log"

RUN_KEYS = {"id", "source", "first_line", "last_line", "program", "ollama_app", "backend", "device", "host_chip", "environment",
            "capabilities", "shim", "throughput", "verdict", "fixable", "confidence", "fixable_reason", "proof",
            "reference", "findings", "baseline", "next", "pairing", "prediction", "origin"}
DEVICE_KEYS = {"name", "apple_family", "families", "unified_memory", "working_set_mb", "threadgroup_memory"}


def test_diagnose_json_matches_the_contract(tmp_path):
    out = run_capscan("diagnose", str(STOCK), "--json", db=tmp_path / "d.db", check=True)
    doc = json.loads(out.stdout)
    assert set(doc) == {"capscan_version", "summary", "runs"}
    # the stock guest's llama-bench log names no host chip and no arm64 build: a downgrade not yet fixable
    assert doc["summary"] == {"verdict": "capability-downgrade", "runs": 1, "fixable": False}
    run = doc["runs"][0]
    assert run["proof"] == [] and run["fixable_reason"] == "nothing in the log shows the host chip"
    assert set(run) == RUN_KEYS
    assert set(run["device"]) == DEVICE_KEYS
    assert run["device"] == {"name": "Apple Paravirtual device", "apple_family": 1005, "families": [1005, 3003],
                             "unified_memory": True, "working_set_mb": 11453.25, "threadgroup_memory": None}
    assert run["capabilities"] == {"simdgroup_reduction": False, "simdgroup_mm": False, "bfloat": False,
                                   "tensor": False}
    assert run["environment"] == "vm" and run["shim"] is None
    assert run["origin"] is None  # stored from a log here, not imported
    # a guest that does not name its host chip has no baseline, and says why
    assert run["baseline"]["run"] is None and "host chip of this guest is unknown" in run["baseline"]["why"]
    assert run["program"] == "llama-bench" and run["backend"] == "metal"
    assert {t["test"]: t["tok_s"] for t in run["throughput"]} == {"pp512": 431.86, "tg128": 12.63}
    assert set(run["throughput"][0]) == {"test", "tok_s", "stddev", "model", "config", "line", "n", "reduced"}
    assert all(t["n"] == 1 and t["reduced"] is None for t in run["throughput"])  # each a row as printed
    f = run["findings"][0]
    assert set(f) >= {"rule", "severity", "message", "evidence"}
    assert f["rule"] == "paravirtual-family-clamp" and f["severity"] == "error"
    assert {"line": 6, "text": "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)"} in f["evidence"]


def test_a_fixable_run_carries_its_proof(tmp_path):
    """llama-bench -o json 2>&1 in the guest: the block shows the clamp, cpu_info names the host chip."""
    out = run_capscan("diagnose", str(FIX / "baselines/guest-stock-block-and-json.log"), "--json",
                      db=tmp_path / "p.db", check=True)
    doc = json.loads(out.stdout)
    assert doc["summary"]["fixable"] is True
    [run] = doc["runs"]
    assert set(run) == RUN_KEYS
    assert [p["sign"].split(",")[0] for p in run["proof"]] == [
        "the paravirtual device's own block reports Apple5 (below the Apple7 llama.cpp's simdgroup kernels need)",
        "the paravirtual device's own block reports simdgroup reduction = false",
        "the guest names its host chip"]
    assert all(set(p) == {"sign", "line", "text", "provenance"} and isinstance(p["line"], int) and p["text"]
               for p in run["proof"])
    assert {p["provenance"] for p in run["proof"]} == {"guest-process"}  # only the guest's own lines prove
    assert run["fixable_reason"] == "the guest names its host chip, Apple M1 Ultra (the guest's cpu_info)"


def test_summary_verdict_is_the_most_severe_run(tmp_path):
    paste = tmp_path / "two.log"
    paste.write_bytes((FIX / "metal/m4-2026-08-host-m1-ultra.log").read_bytes() + STOCK.read_bytes())
    doc = json.loads(run_capscan("diagnose", str(paste), "--json", db=tmp_path / "s.db", check=True).stdout)
    assert [r["verdict"] for r in doc["runs"]] == ["healthy", "capability-downgrade"]
    assert doc["summary"]["verdict"] == "capability-downgrade"


def test_fail_on_exits_1_for_ci_jobs(tmp_path):
    db = tmp_path / "f.db"
    hit = run_capscan("--fail-on", "capability-downgrade", input=STOCK.read_bytes(), db=db)
    assert hit.returncode == 1
    assert b"CAPABILITY-DOWNGRADE" in hit.stdout
    miss = run_capscan("diagnose", str(FIX / "metal/m4-2026-08-host-m1-ultra.log"), "--fail-on",
                       "capability-downgrade,hardware-limit", db=db)
    assert miss.returncode == 0
    bad = run_capscan("diagnose", "--last", "--fail-on", "slow", db=db)
    assert bad.returncode == 2 and b"unknown verdict" in bad.stderr


def test_diagnose_stored_runs_by_id_and_last(tmp_path):
    db = tmp_path / "r.db"
    ids = run_capscan("ingest", str(STOCK), db=db, check=True).stdout.split()
    by_id = json.loads(run_capscan("diagnose", "--run", ids[0].decode(), "--json", db=db, check=True).stdout)
    last = json.loads(run_capscan("diagnose", "--last", "--json", db=db, check=True).stdout)
    assert by_id["runs"][0]["id"] == last["runs"][0]["id"] == int(ids[0])
    missing = run_capscan("diagnose", "--run", "999", db=db)
    assert missing.returncode == 2 and missing.stderr.decode().strip() == "capscan: no run 999"


def test_human_report_leads_with_the_verdict_and_fits_one_screen(tmp_path):
    out = run_capscan(input=STOCK.read_bytes(), db=tmp_path / "h.db", check=True).stdout.decode()
    lines = out.splitlines()
    assert lines[0].startswith("This VM runs llama.cpp") and lines[0].endswith(
        "capscan offers the fix only once the log shows an Apple-silicon host.")  # plain words
    assert lines[1].startswith("run ")
    assert lines[2].strip().startswith("CAPABILITY-DOWNGRADE")
    assert "Apple5" in lines[3]  # one sentence of why
    ev = lines.index("  evidence:")
    assert lines[ev + 1].split()[0].isdigit()  # numbered evidence lines
    assert any("capscan probe" in l for l in lines[ev:])  # how to confirm the host, not a remedy
    assert len(lines) <= 40
    assert "\x1b[" not in out  # not a terminal: no colour


def test_no_color_is_honoured_on_a_terminal(tmp_path):
    import os
    import pty
    import subprocess
    import sys

    db = tmp_path / "t.db"
    run_capscan("ingest", str(STOCK), db=db, check=True)

    def show(extra_env):
        master, slave = pty.openpty()
        env = dict(os.environ, **extra_env)
        proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), "show", "last"], stdout=slave,
                              stderr=subprocess.PIPE, env=env, timeout=60)
        os.close(slave)
        data = b""
        try:
            while chunk := os.read(master, 65536):
                data += chunk
        except OSError:
            pass
        os.close(master)
        assert proc.returncode == 0, proc.stderr
        return data

    env = {"TERM": "xterm-256color", "COLUMNS": "120"}
    assert b"\x1b[" in show(env)
    assert b"\x1b[" not in show({**env, "NO_COLOR": "1"})


def test_runs_and_show_include_the_verdict(tmp_path):
    db = tmp_path / "v.db"
    run_capscan("ingest", str(STOCK), str(FIX / "metal/m2-2024-10-amd-egpu-intel-mac.log"), db=db, check=True)
    rows = json.loads(run_capscan("runs", "--json", db=db, check=True).stdout)
    assert [r["verdict"] for r in rows] == ["hardware-limit", "capability-downgrade"]
    table = run_capscan("runs", db=db, check=True).stdout.decode()
    assert "hardware-limit" in table and "capability-downgrade" in table
    show = run_capscan("show", str(rows[0]["id"]), db=db, check=True).stdout.decode()
    assert "HARDWARE-LIMIT" in show and "Do not force capabilities" in show


def test_a_reader_that_goes_away_is_not_a_fail_on_hit(tmp_path):
    import subprocess
    import sys

    # A report larger than a pipe's buffer (64 KiB): a short one can be written whole before the
    # reader goes away, and then no write fails (exit 0 is right, as for `echo hi | head -c 1`).
    many = tmp_path / "many.log"
    many.write_bytes(STOCK.read_bytes() * 80)
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "p.db")],
                            stdin=many.open("rb"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()  # like `capscan | head -c 10`
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141  # 128 + SIGPIPE, never 1 (a --fail-on hit)
    assert b"Traceback" not in err


def test_report_pairs_a_guest_with_the_bare_metal_run_of_its_model(tmp_path):
    db = tmp_path / "pair.db"
    run_capscan("ingest", str(FIX / "metal/m4-2026-08-host-m1-ultra.log"), db=db, check=True)
    out = run_capscan(input=(FIX / "baselines/guest-stock-block-and-json.log").read_bytes(), db=db,
                      check=True).stdout.decode()
    assert ("baseline   bare-metal run 1: same model and quantization (llama 1B Q4_K - Medium); same hardware "
            "(Apple M1 Ultra, named by the guest's cpu_info)") in out
    assert "vs run 1   pp512 8.9% (+2.11 ms/token), tg128 4.4% (+75.69 ms/token)" in out
    # a guest whose log does not name its host chip is never paired with another machine's run
    out = run_capscan(input=STOCK.read_bytes(), db=db, check=True).stdout.decode()
    assert "baseline   none: the host chip of this guest is unknown" in out and "vs run" not in out
