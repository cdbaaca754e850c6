"""Run events over OTLP (issue 26 item 3): `export otlp --logs` and `watch --otlp` push each stored run as an
OTLP log record to a real OTLP/HTTP receiver on 127.0.0.1, which decodes logs and metrics with
opentelemetry-proto: the --nl event's fields as attributes, the verdict's severity, the run's time, and
service.instance.id naming the guest, so two guests stay two."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: E402

from analyzer.fleet.events import EVENT_FIELDS  # noqa: E402
from tests.conftest import REPO, run_capscan  # noqa: E402
from tests.fleet.dbutil import fleet_db  # noqa: E402
from tests.loopback import OtlpReceiver  # noqa: E402


def _value(v):
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


def _records(req: ExportLogsServiceRequest) -> tuple[dict, list[dict]]:
    (rl,) = req.resource_logs
    resource = {kv.key: _value(kv.value) for kv in rl.resource.attributes}
    out = []
    for sl in rl.scope_logs:
        assert sl.scope.name == "capscan"
        for r in sl.log_records:
            out.append({"attrs": {kv.key: _value(kv.value) for kv in r.attributes}, "body": _value(r.body),
                        "severity": (r.severity_number, r.severity_text), "time": r.time_unix_nano})
    return resource, out


def test_two_guests_push_their_runs_as_log_records(tmp_path):
    with OtlpReceiver() as rx:
        for guest in ("guest-a", "guest-b"):
            db = tmp_path / f"{guest}.db"
            fleet_db(db)
            r = run_capscan("export", "otlp", "--logs", "--instance", guest, db=db,
                            env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
            assert r.returncode == 0, r.stderr.decode()
            assert "pushed 3 run event(s) as OTLP log records" in r.stderr.decode()
    assert len(rx.logs) == 2 and len(rx.metrics) == 2
    seen = {}
    for req in rx.logs:
        resource, records = _records(req)
        assert resource["service.name"] == "capscan"
        seen[resource["service.instance.id"]] = records
    assert set(seen) == {"guest-a", "guest-b"}   # two guests, never one
    records = seen["guest-a"]
    assert len(records) == 3
    for rec in records:
        attrs = rec["attrs"]
        assert attrs["event.name"] == "capscan.run"
        assert set(attrs) - {"event.name"} <= set(EVENT_FIELDS)
        assert {"verdict", "environment", "program", "sha256", "id"} <= set(attrs)
        assert rec["body"] == attrs["summary"] and rec["time"] > 1.7e18
        assert json.loads(attrs["capabilities"]) is not None   # nested fields: JSON text
        expected = {"capability-downgrade": (17, "ERROR"), "healthy": (9, "INFO")}.get(attrs["verdict"], (13, "WARN"))
        assert rec["severity"] == expected
    assert {r["attrs"]["environment"] for r in records} == {"vm", "bare-metal"}


def test_watch_otlp_pushes_each_run_as_it_is_stored(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes((REPO / "examples" / "m1-ultra-guest-stock.log").read_bytes())
    with OtlpReceiver() as rx:
        r = run_capscan("watch", "--once", "--otlp", "--instance", "ci-guest-7", str(log), db=tmp_path / "w.db",
                        env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        assert r.returncode == 0, r.stderr.decode()
    (req,) = rx.logs
    resource, (record,) = _records(req)
    assert resource["service.instance.id"] == "ci-guest-7"
    assert record["attrs"]["verdict"] == "capability-downgrade" and record["severity"] == (17, "ERROR")
    assert rx.metrics  # the metrics went with it


def test_logs_without_an_endpoint_or_the_extra_are_one_line(tmp_path):
    db = tmp_path / "c.db"
    fleet_db(db)
    r = run_capscan("export", "otlp", "--logs", db=db, env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""})
    err = r.stderr.decode()
    assert r.returncode == 2 and "OTEL_EXPORTER_OTLP_ENDPOINT" in err and len(err.strip().splitlines()) == 1
