"""The real CLI (subprocess) on the ingest side: pipe mode, ingest, runs,
show, db path/stats, formats, --tee, --json; and bad input, which never
gives a traceback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from analyzer.parsers import FORMATS
from tests.conftest import REPO, run_capscan
from tests.ingest_util import FIXTURES, count
from tests.peak_rss import run_with_peak_rss

GUEST = FIXTURES / "metal/m4-2026-08-guest-stock.log"
HOST = FIXTURES / "metal/m4-2026-08-host-m1-ultra.log"
SHIM = FIXTURES / "metal/m4-2026-08-guest-lume-shim.log"
BAD = FIXTURES / "bad"


def _err_lines(proc) -> list[str]:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line]


def _ids(proc) -> list[int]:
    return [int(x) for x in proc.stdout.decode().split()]


# ---------------------------------------------------------------------------
# pipe mode, ingest, runs, show
# ---------------------------------------------------------------------------

def test_bare_capscan_on_a_pipe_ingests_and_reports(db_path):
    proc = run_capscan(input=GUEST.read_bytes(), db=db_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "Apple Paravirtual device" in out and "431.86" in out
    # a pipe is stored under what it is (program, model, time), never as <stdin> (issue 25)
    assert any(line.startswith("capscan: stdin (llama-bench · llama 1B Q4_K_M · ") and ": 1 run (id " in line
               for line in _err_lines(proc))
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 1
    assert count(db_path, "SELECT COUNT(*) FROM sources WHERE path LIKE 'llama-bench · llama 1B Q4_K_M · %'") == 1
    assert count(db_path, "SELECT COUNT(*) FROM sources WHERE path = '<stdin>'") == 0


def test_bare_capscan_with_json(db_path):
    proc = run_capscan("--json", input=(FIXTURES / "wrapped/two-runs-host-and-guest.log").read_bytes(), db=db_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"capscan_version", "summary", "runs"}
    assert doc["summary"]["runs"] == 2 and len(doc["runs"]) == 2
    assert [r["device"]["name"] for r in doc["runs"]] == ["Apple M1 Ultra", "Apple Paravirtual device"]


def test_ingest_prints_new_run_ids_one_per_line(db_path):
    proc = run_capscan("ingest", str(HOST), str(FIXTURES / "wrapped/three-processes-concatenated.log"), db=db_path)
    assert proc.returncode == 0
    lines = proc.stdout.decode().splitlines()
    assert lines == ["1", "2", "3", "4"]
    err = _err_lines(proc)
    assert len(err) == 6 and all(line.startswith("capscan: ") for line in err)
    assert "1 run (id 1)" in err[0] and "3 runs (ids 2, 3, 4)" in err[1]
    assert [line.split(":")[1] for line in err[2:]] == [" run 1", " run 2", " run 3", " run 4"]  # and verdicts


def test_ingest_json(db_path):
    proc = run_capscan("ingest", "--json", str(GUEST), db=db_path, check=True)
    (entry,) = json.loads(proc.stdout)
    assert entry["run_ids"] == [1] and entry["path"] == str(GUEST) and entry["duplicate_of"] is None
    assert entry["lines"] == 21 and entry["size"] == GUEST.stat().st_size


def test_ingest_from_stdin_dash(db_path):
    proc = run_capscan("ingest", "-", input=HOST.read_bytes(), db=db_path, check=True)
    assert _ids(proc) == [1]


def test_runs_lists_newest_first(db_path):
    run_capscan("ingest", str(HOST), str(GUEST), str(SHIM), db=db_path, check=True)
    proc = run_capscan("runs", "--json", db=db_path, check=True)
    rows = json.loads(proc.stdout)
    assert [r["id"] for r in rows] == [3, 2, 1]
    assert [r["device"] for r in rows] == ["Apple Paravirtual device", "Apple Paravirtual device", "Apple M1 Ultra"]
    assert rows[2]["best_pp"] == 4871.99 and rows[2]["best_tg"] == 286.71
    text = run_capscan("runs", db=db_path, check=True).stdout.decode()
    assert "Apple M1 Ultra" in text and text.index("Apple Paravirtual") < text.index("Apple M1 Ultra")


def test_runs_on_an_empty_database(db_path):
    from analyzer.store import open_db

    open_db(db_path).conn.close()  # exists, holds nothing (a missing --db file is an error: test_cli_first_contact)
    proc = run_capscan("runs", db=db_path)
    assert proc.returncode == 0 and proc.stdout == b""
    assert _err_lines(proc) == [f"No runs stored yet in {db_path}. Pipe a log in: llama-bench ... 2>&1 | capscan"]


def test_show_run_and_show_last(db_path):
    run_capscan("ingest", str(HOST), str(GUEST), db=db_path, check=True)
    one = run_capscan("show", "1", db=db_path, check=True).stdout.decode()
    assert "Apple M1 Ultra" in one and ("4,871.99" in one or "4871.99" in one)
    last = run_capscan("show", "last", db=db_path, check=True).stdout.decode()
    assert "Apple Paravirtual device" in last and "MTLGPUFamilyApple5" in last  # evidence lines


def test_show_json_shape(db_path):
    run_capscan("ingest", str(SHIM), db=db_path, check=True)
    doc = json.loads(run_capscan("show", "last", "--json", db=db_path, check=True).stdout)
    assert set(doc) >= {"id", "source", "first_line", "last_line", "program", "backend", "device", "host_chip",
                        "environment", "capabilities", "shim", "throughput", "verdict", "fixable", "confidence",
                        "findings"}
    assert doc["id"] == 1 and doc["source"] == str(SHIM)
    assert doc["program"] == "llama-bench" and doc["backend"] == "metal"
    assert 1 <= doc["first_line"] < doc["last_line"]
    assert set(doc["device"]) == {"name", "apple_family", "families", "unified_memory", "working_set_mb",
                                  "threadgroup_memory"}
    assert doc["device"] == {"name": "Apple Paravirtual device", "apple_family": 1009, "families": [1009, 3003],
                             "unified_memory": True, "working_set_mb": 11453.25, "threadgroup_memory": None}
    assert set(doc["capabilities"]) == {"simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor"}
    assert doc["shim"] == {"name": "LumeMetalCapabilities", "apple_family_max": 1009}
    assert [(t["test"], t["tok_s"]) for t in doc["throughput"]] == [("pp512", 4786.7), ("tg128", 206.6)]
    assert all(set(t) == {"test", "tok_s", "stddev", "model", "config", "line", "n", "reduced"}
               for t in doc["throughput"])
    assert isinstance(doc["fixable"], bool) and isinstance(doc["findings"], list)
    for f in doc["findings"]:
        assert {"rule", "severity", "message", "evidence"} <= set(f)


@pytest.mark.parametrize("ref", ["99", "abc"])
def test_show_unknown_run_is_a_one_line_error(db_path, ref):
    run_capscan("ingest", str(GUEST), db=db_path, check=True)
    proc = run_capscan("show", ref, db=db_path)
    assert proc.returncode == 2
    err = _err_lines(proc)
    assert len(err) == 1 and err[0].startswith("capscan: ")


# ---------------------------------------------------------------------------
# db path / stats, formats
# ---------------------------------------------------------------------------

def test_db_path_precedence(tmp_path):
    env = {"CAPSCAN_DB": None, "XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}

    def path(*args, extra=None):
        proc = run_capscan(*args, env=dict(env, **(extra or {})))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.decode().strip()

    default = path("db", "path")
    assert default == str(tmp_path / "xdg" / "capscan" / "capscan.db")
    assert path("db", "path", extra={"CAPSCAN_DB": str(tmp_path / "env.db")}) == str(tmp_path / "env.db")
    assert path("--db", str(tmp_path / "opt.db"), "db", "path",
                extra={"CAPSCAN_DB": str(tmp_path / "env.db")}) == str(tmp_path / "opt.db")
    assert path("db", "path", "--db", str(tmp_path / "sub.db"),
                extra={"CAPSCAN_DB": str(tmp_path / "env.db")}) == str(tmp_path / "sub.db")
    # the default location is really used when nothing else is given
    proc = run_capscan("ingest", str(GUEST), env=env)
    assert proc.returncode == 0
    assert Path(default).exists()


def test_db_path_in_process(monkeypatch, tmp_path):
    from analyzer.store.paths import resolve_db_path

    monkeypatch.setenv("CAPSCAN_DB", str(tmp_path / "e.db"))
    assert resolve_db_path(None) == tmp_path / "e.db"
    assert resolve_db_path(str(tmp_path / "o.db")) == tmp_path / "o.db"
    monkeypatch.delenv("CAPSCAN_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert resolve_db_path(None) == tmp_path / "x" / "capscan" / "capscan.db"


def test_db_stats(db_path):
    run_capscan("ingest", "--keep-raw", str(FIXTURES / "wrapped/two-runs-host-and-guest.log"), db=db_path, check=True)
    run_capscan("ingest", str(BAD / "nothing-recognised.log"), db=db_path, check=True)
    s = json.loads(run_capscan("db", "stats", "--json", db=db_path, check=True).stdout)
    assert s["path"] == str(db_path)
    assert (s["sources"], s["runs"], s["throughput_rows"], s["raw_sources_kept"]) == (2, 2, 4, 1)
    assert s["evidence_lines"] > 0 and s["size_bytes"] > 0
    assert s["schema_migrations"][:2] == ["m001_sources_runs", "m002_diagnoses"]
    text = run_capscan("db", "stats", db=db_path, check=True).stdout.decode()
    assert "sources" in text and "runs" in text


def _raw_kept(db_path) -> int:
    return json.loads(run_capscan("db", "stats", "--json", db=db_path, check=True).stdout)["raw_sources_kept"]


@pytest.mark.parametrize("where", ["group", "command"])
def test_force_and_keep_raw_work_before_or_after_the_command(db_path, where):
    """`capscan --keep-raw ingest F` is `capscan ingest --keep-raw F` (the group's flags were dropped)."""
    def args(command: list[str], *flags: str) -> list[str]:
        return [*flags, *command] if where == "group" else [command[0], *flags, *command[1:]]

    assert _ids(run_capscan(*args(["ingest", str(GUEST)], "--keep-raw"), db=db_path, check=True)) == [1]
    assert _raw_kept(db_path) == 1
    again = run_capscan(*args(["ingest", str(GUEST)], "--force"), db=db_path, check=True)
    assert _ids(again) == [2] and "already ingested" not in again.stderr.decode()
    report = run_capscan(*args(["diagnose", "--json", str(GUEST)], "--force", "--keep-raw"), db=db_path,
                         check=True)
    assert [r["id"] for r in json.loads(report.stdout)["runs"]] == [3]
    assert _raw_kept(db_path) == 2
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 3


def test_force_and_keep_raw_in_pipe_mode(db_path):
    run_capscan(input=GUEST.read_bytes(), db=db_path, check=True)
    proc = run_capscan("--force", "--keep-raw", input=GUEST.read_bytes(), db=db_path, check=True)
    assert "already ingested" not in proc.stderr.decode()
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 2 and _raw_kept(db_path) == 1


@pytest.mark.parametrize("command", [["runs"], ["show", "1"], ["compare", "1", "2"], ["db", "stats"], ["formats"],
                                     ["sources"], ["remedy", "status"], ["watch"], ["tui"]])
def test_force_and_keep_raw_before_a_command_that_stores_nothing_are_usage_errors(db_path, command):
    run_capscan("ingest", str(HOST), str(GUEST), db=db_path, check=True)
    for flag in ("--force", "--keep-raw"):
        proc = run_capscan(flag, *command, db=db_path)
        assert proc.returncode == 2, (flag, command, proc.stderr)
        assert proc.stdout == b""
        errors = [line for line in _err_lines(proc) if line.startswith("Error:")]
        assert errors == [f"Error: {flag} has no meaning for `capscan {command[0]}`"]
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 2


def test_formats_lists_each_format_with_a_sample():
    proc = run_capscan("formats", check=True)
    out = proc.stdout.decode()
    for fmt in FORMATS:
        assert f"{fmt.name}: " in out
        assert fmt.samples and any(s.line[:150] in out for s in fmt.samples)
    from analyzer.parsers.exports import SHAPES

    for shape in SHAPES:  # capscan's own output, read back as runs
        assert f"{shape.name}: {shape.description}" in out
    doc = json.loads(run_capscan("formats", "--json", check=True).stdout)
    assert [f["name"] for f in doc] == [f.name for f in FORMATS] + [s.name for s in SHAPES]
    assert all(f["samples"] for f in doc)


# ---------------------------------------------------------------------------
# --tee
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("rel", ["wrapped/crlf.log", "wrapped/invalid-utf8.log", "wrapped/ansi.log",
                                 "bad/good.log.gz", "bad/nothing-recognised.log", "bad/empty.log"])
def test_tee_passes_input_through_byte_for_byte(db_path, rel):
    data = (FIXTURES / rel).read_bytes()
    proc = run_capscan("--tee", input=data, db=db_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == data
    assert "Traceback" not in proc.stderr.decode()
    if rel.startswith("wrapped"):
        assert "Apple Paravirtual device" in proc.stderr.decode()  # the report went to stderr


def test_tee_large_input_with_json_report(db_path, tmp_path):
    data = GUEST.read_bytes() + b"".join(b"filler line %d\n" % i for i in range(300_000))
    proc = run_capscan("--tee", "--json", input=data, db=db_path)
    assert proc.returncode == 0
    assert proc.stdout == data
    err = proc.stderr.decode()
    doc = json.loads(err[err.index("{"):err.rindex("}") + 1])
    assert doc["summary"]["runs"] == 1


def _tee_child(db_path, *args):
    """capscan --tee reading a pipe that stays open (a producer still running), as `llama-bench ... | capscan --tee`."""
    return subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), "--tee", *args], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("args", [(), ("ingest", "-")], ids=["pipe-mode", "ingest"])
def test_tee_interrupted_while_stdin_is_open_exits_130(db_path, args):
    """Found by exploratory testing: Ctrl-C while the producer was still running aborted the interpreter
    ("Fatal Python error: _enter_buffered_busy ... <stdin>", exit 134): the passthrough thread held
    stdin's buffer lock. It reads and writes the descriptors themselves now."""
    proc = _tee_child(db_path, *args)
    try:
        proc.stdin.write(GUEST.read_bytes())
        proc.stdin.flush()
        assert proc.stdout.readline()  # passing through: the thread is running, blocked on the next read
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
    err = proc.stderr.read().decode()
    assert rc == 130, err
    assert "Fatal Python error" not in err and "Traceback" not in err
    assert "interrupted" in err
    # the source being read is not stored (the database may not even exist yet: capscan was still reading)
    assert run_capscan("runs", "--json", db=db_path).stdout.strip() in (b"[]", b"")


def test_tee_reader_that_goes_away_exits_141_not_a_read_error(db_path):
    """Found by exploratory testing: `capscan --tee | head -1` exited 2, blaming stdin ("read error
    (Broken pipe)"). The passthrough's reader is capscan's stdout: 141, as for any output."""
    proc = _tee_child(db_path)
    try:
        proc.stdin.write(GUEST.read_bytes())
        proc.stdin.flush()
        assert proc.stdout.readline()
        proc.stdout.close()  # the reader goes away while the producer is still writing
        for _ in range(200):  # the next lines find no reader
            proc.stdin.write(b"filler line\n" * 1000)
            proc.stdin.flush()
            if proc.poll() is not None:
                break
    except BrokenPipeError:
        pass  # capscan has exited: our own writes to its stdin fail
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = proc.wait(timeout=30)
    err = proc.stderr.read().decode()
    assert rc == 141, err
    assert "read error" not in err and "Traceback" not in err and "Fatal Python error" not in err


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------

def _assert_one_line_error(proc, *words):
    assert proc.returncode == 2
    err = _err_lines(proc)
    errors = [line for line in err if any(w in line for w in words)]
    assert len(errors) == 1, err
    assert errors[0].startswith("capscan: ")
    assert all(line.startswith("capscan: ") for line in err)


def test_binary_file(db_path):
    proc = run_capscan("ingest", str(BAD / "binary.bin"), str(GUEST), db=db_path)
    _assert_one_line_error(proc, "binary")
    assert _ids(proc) == [1]  # the other input is stored
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 1


def test_binary_on_a_pipe(db_path):
    proc = run_capscan(input=(BAD / "binary.bin").read_bytes(), db=db_path)
    _assert_one_line_error(proc, "binary")
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 0


def test_directory_and_missing_file(db_path, tmp_path):
    proc = run_capscan("ingest", str(tmp_path), str(GUEST), str(tmp_path / "nope.log"), db=db_path)
    assert proc.returncode == 2
    err = _err_lines(proc)
    assert any("is a directory" in line for line in err)
    assert any("no such file" in line for line in err)
    assert all(line.startswith("capscan: ") for line in err)
    assert _ids(proc) == [1]


def test_unreadable_file(db_path, tmp_path):
    secret = tmp_path / "secret.log"
    secret.write_bytes(GUEST.read_bytes())
    secret.chmod(0o000)
    cmd = [sys.executable, "-m", "analyzer", "--db", str(db_path), "ingest", str(secret), str(HOST)]
    if os.geteuid() == 0:
        # root reads any file: drop the capabilities that let it (DAC override/read-search) for the child
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: a chmod 000 file stays readable for root")
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, cwd=REPO, timeout=60)
    finally:
        secret.chmod(0o600)
    _assert_one_line_error(proc, "permission denied")
    assert _ids(proc) == [1]


def test_truncated_gzip(db_path):
    proc = run_capscan("ingest", str(BAD / "truncated.log.gz"), str(HOST), db=db_path)
    _assert_one_line_error(proc, "truncated gzip")
    # the complete lines before the cut are stored (and said so), and so is the other input
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 2
    assert count(db_path, "SELECT COUNT(*) FROM runs WHERE apple_family = 1005") == 1
    assert count(db_path, "SELECT COUNT(*) FROM runs WHERE apple_family = 1007") == 1


def test_truncated_gzip_on_a_pipe(db_path):
    proc = run_capscan(input=(BAD / "truncated.log.gz").read_bytes(), db=db_path)
    _assert_one_line_error(proc, "truncated gzip")


def test_gzip_cut_inside_its_header(db_path, tmp_path):
    cut = tmp_path / "cut.gz"
    cut.write_bytes((BAD / "good.log.gz").read_bytes()[:12])
    proc = run_capscan("ingest", str(cut), db=db_path)
    _assert_one_line_error(proc, "gzip")
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 0


def test_corrupt_gzip(db_path, tmp_path):
    data = bytearray((BAD / "good.log.gz").read_bytes())
    data[30:60] = b"\xff" * 30
    bad = tmp_path / "corrupt.gz"
    bad.write_bytes(bytes(data))
    proc = run_capscan("ingest", str(bad), db=db_path)
    _assert_one_line_error(proc, "gzip")


def test_empty_input(db_path):
    proc = run_capscan("ingest", str(BAD / "empty.log"), db=db_path)
    assert proc.returncode == 0 and proc.stdout == b""
    assert any("empty input" in line for line in _err_lines(proc))
    pipe = run_capscan(input=b"", db=db_path)
    assert pipe.returncode == 0
    _err_lines(pipe)
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 0


def test_nothing_recognised_exits_0_and_stores_a_source_without_runs(db_path):
    proc = run_capscan("ingest", str(BAD / "nothing-recognised.log"), db=db_path)
    assert proc.returncode == 0 and proc.stdout == b""
    _err_lines(proc)
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 1
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 0
    conn = sqlite3.connect(str(db_path))
    lines, recognised = conn.execute("SELECT lines, recognised_lines FROM sources").fetchone()
    conn.close()
    assert lines == 12 and recognised == 0
    pipe = run_capscan("--json", input=(BAD / "nothing-recognised.log").read_bytes(), db=db_path)
    assert pipe.returncode == 0
    doc = json.loads(pipe.stdout)
    assert doc["summary"] == {"verdict": "unknown", "runs": 0, "fixable": False}


def _maxrss_kib(cmd: list[str], report: Path) -> tuple[int, bytes]:
    with tempfile.TemporaryFile() as err:
        proc, rss_mb = run_with_peak_rss(cmd, report=report, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
        err.seek(0)
        out = err.read()
    assert proc.returncode == 0, out
    return int(rss_mb * 1024), out


def test_a_50_mb_line_without_newline_is_skipped_and_counted_in_bounded_memory(db_path, tmp_path):
    small = tmp_path / "small.log"
    small.write_bytes(GUEST.read_bytes())
    huge = tmp_path / "huge.log"
    with open(huge, "wb") as fh:
        fh.write(HOST.read_bytes())
        block = b"ggml_metal_device_init: has tensor = true " * 1000  # recognisable text, but no newline
        for _ in range(50 * (1 << 20) // len(block) + 1):
            fh.write(block)
    assert huge.stat().st_size > 50 << 20
    base = [sys.executable, "-m", "analyzer", "--db", str(db_path), "ingest"]
    rss_small, _ = _maxrss_kib(base + [str(small)], tmp_path / "small.rss")
    rss_huge, err = _maxrss_kib(base + [str(huge)], tmp_path / "huge.rss")
    assert b"Traceback" not in err and b"1 overlong line(s) skipped" in err
    # streaming: the 50 MB line never sits in memory (a whole read would cost 50+ MiB more)
    assert rss_huge - rss_small < 30 * 1024, (rss_small, rss_huge)
    conn = sqlite3.connect(str(db_path))
    overlong, facts = conn.execute(
        "SELECT s.overlong_lines, r.facts FROM sources s JOIN runs r ON r.source_id = s.id WHERE s.path = ?",
        (str(huge),)).fetchone()
    conn.close()
    assert overlong == 1
    assert json.loads(facts)["capabilities"]["tensor"] is False  # the line's 'has tensor = true' was not read


def test_overlong_line_in_the_middle(db_path, tmp_path):
    p = tmp_path / "mid.log"
    p.write_bytes(HOST.read_bytes() + b"ggml_metal_device_init: " + b"x" * (3 << 20) + b"\n" + GUEST.read_bytes())
    proc = run_capscan("ingest", str(p), db=db_path, check=True)
    assert len(_ids(proc)) == 2
    assert b"1 overlong line(s) skipped" in proc.stderr


def test_overlong_line_without_any_literal_is_counted(db_path, tmp_path):
    p = tmp_path / "mid.log"
    p.write_bytes(HOST.read_bytes() + b"x" * (3 << 20) + b"\n" + GUEST.read_bytes())
    proc = run_capscan("ingest", str(p), db=db_path, check=True)
    assert len(_ids(proc)) == 2
    assert b"1 overlong line(s) skipped" in proc.stderr
