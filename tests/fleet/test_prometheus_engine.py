"""The textfile route checked against the real engines (issue 26): Debian's prometheus-node-exporter reads
two guests' textfiles from one folder, Debian's Prometheus scrapes it on 127.0.0.1, and its HTTP API
answers: one series per guest and environment, the expected values, and every query of the bundled
Grafana dashboard returns data. `promtool check metrics` passes on each textfile. Both servers bind to
loopback, are bounded in time and are stopped by the test."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import run_capscan
from tests.fleet.dbutil import fleet_db
from tests.fleet.test_examples import FLEET, _exprs

BINARIES = ("prometheus", "promtool", "prometheus-node-exporter")
pytestmark = pytest.mark.skipif(any(shutil.which(b) is None for b in BINARIES),
                                reason="Debian's prometheus and prometheus-node-exporter (scripts/install-test-deps)")
DEADLINE_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _server(argv: list[str], log: Path):
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as reply:
        doc = json.load(reply)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def _wait_for(port: int, expr: str, want: int, deadline: float) -> list[dict]:
    result: list[dict] = []
    while time.monotonic() < deadline:
        try:
            result = _query(port, expr)
        except OSError:
            result = []
        if len(result) >= want:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{expr}: {len(result)} series after {DEADLINE_S} s, wanted {want}")


def test_two_guests_stay_two_series_in_prometheus(tmp_path):
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    for guest in ("guest-a", "guest-b"):  # two guests with equal verdicts and equal labels but their names
        db = tmp_path / f"{guest}.db"
        fleet_db(db)
        out = textfiles / f"{guest}.prom"
        run_capscan("export", "prometheus", "--out", str(out), "--instance", guest, db=db, check=True)
        check = subprocess.run(["promtool", "check", "metrics"], input=out.read_bytes(), capture_output=True,
                               timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
    exporter_port, prom_port = _free_port(), _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: capscan\n"
        "    honor_labels: true   # capscan's instance label (the guest) wins over the scrape target's\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter_port}']}}]\n")
    deadline = time.monotonic() + DEADLINE_S
    with _server(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{exporter_port}",
                  "--collector.disable-defaults", "--collector.textfile",
                  f"--collector.textfile.directory={textfiles}"], tmp_path / "node-exporter.log"), \
            _server(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path / "prometheus.log"):
        info = _wait_for(prom_port, "capscan_run_info", 4, deadline)
        assert sorted((s["metric"]["instance"], s["metric"]["environment"]) for s in info) == [
            ("guest-a", "bare-metal"), ("guest-a", "vm"), ("guest-b", "bare-metal"), ("guest-b", "vm")]
        by_verdict = {s["metric"]["verdict"]: s["value"][1] for s in _query(prom_port, "count by (verdict) (capscan_run_info)")}
        assert by_verdict["healthy"] == "2"  # the hosts of both guests: two, not one collapsed series
        speeds = _query(prom_port, 'capscan_throughput_tokens_per_second{instance="guest-a", test="tg128"}')
        assert {s["metric"]["environment"]: float(s["value"][1]) for s in speeds} == {"vm": 206.6,
                                                                                      "bare-metal": 286.71}
        dashboard = json.loads((FLEET / "grafana-dashboard.json").read_text())
        for expr in _exprs(dashboard):
            assert _query(prom_port, expr), f"the dashboard's {expr!r} returns no data"
