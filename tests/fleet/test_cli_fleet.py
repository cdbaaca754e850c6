"""The fleet commands through the real CLI (python -m analyzer): sources,
ingest --discover, watch, export prometheus|otlp, db serve."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from analyzer.fleet.prometheus import METRIC_NAMES
from tests.conftest import REPO, run_capscan
from tests.fleet.dbutil import fleet_db, samples
from tests.loopback import OtlpReceiver
from tests.read.test_sources import _write

EXAMPLES = REPO / "examples"
GUEST_LOG = EXAMPLES / "m1-ultra-guest-stock.log"
GUEST = GUEST_LOG.read_bytes()
HOST = (EXAMPLES / "m1-ultra-host.log").read_bytes()


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def _read_until(proc: subprocess.Popen, needle: bytes, timeout: float = 60) -> bytes:
    os.set_blocking(proc.stdout.fileno(), False)
    got = b""
    deadline = time.monotonic() + timeout
    while needle not in got and time.monotonic() < deadline and proc.poll() is None:
        chunk = proc.stdout.read()
        if chunk:
            got += chunk
        time.sleep(0.05)
    return got


def test_cli_sources_json_and_ingest_discover(tmp_path, db_path):
    home = tmp_path / "home"
    _write(home / ".ollama/logs/server.log", GUEST_LOG.read_text())
    env = {"HOME": str(home)}
    proc = run_capscan("sources", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    server = next(r for r in rows if r["path"] == str(home / ".ollama/logs/server.log"))
    assert server["exists"] is True and server["size_bytes"] == GUEST_LOG.stat().st_size
    assert server["age_seconds"] is not None and server["runtime"] == "ollama"
    assert set(server) == {"runtime", "path", "via", "exists", "size_bytes", "modified", "age_seconds"}
    text = run_capscan("sources", env=env)
    assert text.returncode == 0 and b"server.log" in text.stdout and b"ollama" in text.stdout
    proc = run_capscan("ingest", "--discover", db=db_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [b"1"], "ingest --discover stored the discovered ollama log's run"
    again = run_capscan("ingest", "--discover", db=db_path, env=env)
    assert again.returncode == 0 and again.stdout == b""  # nothing new: nothing stored twice
    append(home / ".ollama/logs/server.log", HOST)  # the runtime's log grows
    grown = run_capscan("ingest", "--discover", db=db_path, env=env)
    assert grown.returncode == 0 and grown.stdout.split() == [b"2"]  # only the new run


def test_cli_sources_all_filters_json_and_text_alike(tmp_path):
    """Without --all only the locations that exist, in text and in --json; --all adds the rest to both."""
    home = tmp_path / "home"
    log = home / ".ollama/logs/server.log"
    _write(log, GUEST_LOG.read_text())
    env = {"HOME": str(home)}

    def listed(*args: str) -> tuple[list[dict], list[str]]:
        doc = run_capscan("sources", "--json", *args, env=env, check=True)
        text = run_capscan("sources", *args, env=env, check=True).stdout.decode().splitlines()
        return json.loads(doc.stdout), text

    rows, lines = listed()
    assert [(r["path"], r["exists"]) for r in rows] == [(str(log), True)]
    assert len(lines) == 1 and str(log) in lines[0]
    every, every_line = listed("--all")
    assert len(every) == len(every_line) > 1
    assert [r["path"] for r in every if r["exists"]] == [str(log)]
    assert any(not r["exists"] for r in every)
    nothing = tmp_path / "empty-home"
    nothing.mkdir()
    proc = run_capscan("sources", "--json", env={"HOME": str(nothing)}, check=True)
    assert json.loads(proc.stdout) == []


def test_cli_ingest_discover_nothing_found(tmp_path, db_path):
    home = tmp_path / "nothing"
    home.mkdir()
    proc = run_capscan("ingest", "--discover", db=db_path, env={"HOME": str(home)})
    assert proc.returncode == 0
    assert b"no runtime logs found" in proc.stderr


def test_cli_watch_once_prints_one_line_per_verdict(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(GUEST + HOST)
    proc = run_capscan("watch", "--once", str(log), db=db_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 2
    assert "capability-downgrade" in lines[0] and "server.log:1-21" in lines[0]
    assert "fixable" not in lines[0]  # the stock llama-bench log shows no host chip (issue 21)
    assert "healthy" in lines[1]
    again = run_capscan("watch", "--once", str(log), db=db_path)
    assert again.returncode == 0 and again.stdout == b""


def test_cli_watch_once_says_what_it_reads_on_stderr_and_quiet_silences_it(tmp_path, db_path):
    """Issue 25: watch printed nothing until a run completed. It names each log it follows on
    stderr first (stdout stays the runs); --quiet says nothing."""
    log, later = tmp_path / "server.log", tmp_path / "not-yet.log"
    log.write_bytes(GUEST)
    proc = run_capscan("watch", "--once", str(log), str(later), db=db_path)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.decode().splitlines()
    assert err[:3] == ["capscan: reading 2 log(s) once, storing every complete run:", f"capscan:   {log}",
                       f"capscan:   {later}"]
    assert "Ctrl-C" not in proc.stderr.decode()  # --once stops by itself
    assert len(proc.stdout.decode().splitlines()) == 1 and "capability-downgrade" in proc.stdout.decode()
    log.write_bytes(GUEST + HOST)
    quiet = run_capscan("watch", "--once", "--quiet", str(log), db=db_path)
    assert quiet.returncode == 0 and "healthy" in quiet.stdout.decode()
    assert str(log) not in quiet.stderr.decode() and "reading" not in quiet.stderr.decode()


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a child")
def test_cli_watch_says_what_it_follows_and_how_to_stop_before_any_run(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), "watch", "--interval", "0.05",
                             str(log)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = [proc.stderr.readline().decode() for _ in range(3)]  # written at once, with no run yet
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lines[0].startswith("capscan: watching 1 log(s); a run is stored once its log has been quiet 5 s")
    assert lines[1] == f"capscan:   {log}\n"
    assert lines[2] == "capscan: press Ctrl-C to stop (a restart resumes where it stopped)\n"
    assert rc == 130 and proc.stdout.read() == b""


@pytest.mark.skipif(sys.platform == "win32", reason="signals to a child")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "launchd-stop"])
def test_cli_watch_follows_and_exits_130_on_sigint(tmp_path, db_path, sig):
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), "watch", "--interval", "0.05",
                             "--settle", "0.3", str(log)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        append(log, GUEST)  # written while it follows
        assert b"capability-downgrade" in _read_until(proc, b"\n")
        proc.send_signal(sig)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130
    err = proc.stderr.read().decode()
    assert "Traceback" not in err and "stopped" in err


def test_cli_export_prometheus(tmp_path, db_path):
    fleet_db(db_path)
    out = tmp_path / "node" / "capscan.prom"
    out.parent.mkdir()
    proc = run_capscan("export", "prometheus", "--out", str(out), db=db_path)
    assert proc.returncode == 0, proc.stderr
    assert set(samples(out.read_text())) == set(METRIC_NAMES)
    # a missing folder is a one-line error, exit 2
    bad = run_capscan("export", "prometheus", "--out", str(tmp_path / "nope" / "x.prom"), db=db_path)
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    # without --out: the textfile on stdout
    std = run_capscan("export", "prometheus", db=db_path)
    assert std.returncode == 0 and set(samples(std.stdout.decode())) == set(METRIC_NAMES)


def test_cli_export_otlp(tmp_path, db_path):
    fleet_db(db_path)
    with OtlpReceiver() as rx:
        proc = run_capscan("export", "otlp", db=db_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
    assert proc.returncode == 0, proc.stderr
    assert len(rx.metrics) == 1 and "pushed" in proc.stderr.decode()
    none = run_capscan("export", "otlp", db=db_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""})
    assert none.returncode == 2 and b"OTEL_EXPORTER_OTLP_ENDPOINT" in none.stderr and b"Traceback" not in none.stderr


def test_cli_export_otlp_without_the_extra(tmp_path, db_path):
    """The SDK missing: one line naming the extra, exit 2 (a process: what it can import is its own)."""
    blocker = tmp_path / "blocker" / "opentelemetry"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('opentelemetry is not installed here')\n")
    fleet_db(db_path)
    proc = run_capscan("export", "otlp", db=db_path,
                       env={"PYTHONPATH": os.pathsep.join((str(blocker.parent), str(REPO))),
                            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, process=True)
    assert proc.returncode == 2
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "pip install 'capscan[otel]'" in err[0]
    # a pipx install (the README's) is told pipx's way beside pip's (issue 41)
    assert "pipx inject capscan opentelemetry-sdk opentelemetry-exporter-otlp-proto-http" in err[0]


def test_cli_db_serve_without_the_extra(tmp_path, db_path):
    blocker = tmp_path / "blocker" / "datasette"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('datasette is not installed here')\n")
    fleet_db(db_path)
    proc = run_capscan("db", "serve", db=db_path, env={"PYTHONPATH": os.pathsep.join((str(blocker.parent), str(REPO)))},
                       process=True)
    assert proc.returncode == 2
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "pip install 'capscan[datasette]'" in err[0]
    assert "pipx inject capscan datasette (installed with pipx)" in err[0]


def test_cli_db_serve_missing_database(tmp_path):
    proc = run_capscan("db", "serve", db=tmp_path / "none.db")
    assert proc.returncode == 2 and b"no database" in proc.stderr and not (tmp_path / "none.db").exists()


def test_cli_watch_nl_events_and_prometheus_textfile(tmp_path, db_path):
    from tests.fleet.dbutil import GUEST_NAMING_HOST

    log = tmp_path / "server.log"
    log.write_bytes(GUEST_NAMING_HOST.read_bytes() + HOST)  # a guest that names its host: paired, so every metric
    prom = tmp_path / "guest.prom"
    proc = run_capscan("watch", "--once", "--nl", "--prometheus", str(prom), "--label", "guest=tart-1", str(log),
                       db=db_path)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [e["verdict"] for e in events] == ["capability-downgrade", "healthy"]
    assert all(e["event"] == "capscan.run" and e["sha256"] for e in events)
    got = samples(prom.read_text())
    assert set(got) == set(METRIC_NAMES) - {"capscan_remedy_verified"}  # no remedy run yet
    assert all(labels.get("guest") == "tart-1" for series in got.values() for labels, _ in series)


def test_cli_watch_fail_on_stops_at_the_first_such_verdict(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(GUEST)
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db_path), "watch", "--interval", "0.05",
                           "--settle", "0.1", "--fail-on", "capability-downgrade", str(log)], cwd=REPO,
                          capture_output=True, timeout=120)
    assert proc.returncode == 1 and b"capability-downgrade" in proc.stdout


def test_cli_watch_bad_label_is_a_usage_error(tmp_path, db_path):
    proc = run_capscan("watch", "--once", "--label", "9bad", str(tmp_path / "x.log"), db=db_path)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr


def test_cli_export_never_creates_a_database(tmp_path):
    out = tmp_path / "empty.prom"
    db = tmp_path / "typo" / "never.db"
    proc = run_capscan("export", "prometheus", "--out", str(out), db=db)
    assert proc.returncode == 2 and b"nothing was created" in proc.stderr  # a mistyped --db, as for `runs`
    assert not out.exists() and not (tmp_path / "typo").exists()


def test_cli_db_serve_real_server_on_loopback(tmp_path, db_path):
    pytest.importorskip("datasette")
    fleet_db(db_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), "db", "serve", "--port",
                             str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        body = None
        deadline = time.monotonic() + 60
        while body is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/{db_path.stem}/verdicts.json?_shape=array", timeout=5) as r:
                    body = json.loads(r.read())
            except OSError:
                time.sleep(0.2)
        assert body is not None, proc.stderr.read() if proc.poll() is not None else "no answer"
        assert sum(row["runs"] for row in body) == 3
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
