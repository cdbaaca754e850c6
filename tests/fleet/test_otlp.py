"""capscan export otlp: pushed to a local OTLP/HTTP receiver that decodes the
protobuf with opentelemetry-proto and checks every metric and attribute."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest  # noqa: E402

from analyzer.fleet.metrics import collect  # noqa: E402
from analyzer.fleet.otlp import METRICS, OtlpError, push  # noqa: E402
from analyzer.store.db import open_db  # noqa: E402
from tests.fleet.dbutil import fleet_db  # noqa: E402
from tests.loopback import OtlpReceiver  # noqa: E402


def _attrs(kvs) -> dict:
    out = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which)
    return out


def decode(req: ExportMetricsServiceRequest) -> tuple[dict, dict[str, list[tuple[dict, float, str]]]]:
    (rm,) = req.resource_metrics
    metrics: dict[str, list] = {}
    for sm in rm.scope_metrics:
        assert sm.scope.name == "capscan"
        for m in sm.metrics:
            assert m.WhichOneof("data") == "gauge"
            for p in m.gauge.data_points:
                value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                metrics.setdefault(m.name, []).append((_attrs(p.attributes), value, m.unit))
    return _attrs(rm.resource.attributes), metrics


def test_push_sends_every_metric_and_attribute(tmp_path, db_path, monkeypatch):
    ids = fleet_db(db_path)
    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "host.image.name=ghcr.io/cirruslabs/macos-sequoia-base")
        points = push(collect(open_db(db_path), instance="guest-1"))
    assert rx.paths == ["/v1/metrics"]
    resource, metrics = decode(rx.metrics[0])
    assert resource["service.name"] == "capscan" and resource["host.name"]
    assert resource["service.instance.id"] == "guest-1"   # the Collector's instance label comes from it
    assert resource["host.arch"] in ("amd64", "arm64") and resource["os.type"] in ("linux", "darwin")
    assert resource["os.version"]
    assert resource["host.image.name"] == "ghcr.io/cirruslabs/macos-sequoia-base"  # from OTEL_RESOURCE_ATTRIBUTES
    assert resource["hw.type"] == "gpu" and resource["hw.model"] == "Apple Paravirtual device"
    assert resource["hw.vendor"] == "Apple"
    assert set(metrics) == {name for name, *_ in METRICS}
    assert points == sum(len(v) for v in metrics.values())
    info = metrics["capscan.run.info"]
    assert all(v == 1 for _, v, _ in info)
    assert {a["environment"]: a["verdict"] for a, _, _ in info} == {"vm": info[0][0]["verdict"],
                                                                     "bare-metal": "healthy"}
    assert all(set(a) == {"verdict", "fixable", "environment", "runtime", "backend", "host_chip", "gpu_family"}
               for a, _, _ in info)
    tps = {(a["test"], a["environment"]): (v, unit) for a, v, unit in metrics["capscan.throughput.tokens"]}
    assert tps == {("pp512", "vm"): (4786.7, "{token}/s"), ("tg128", "vm"): (206.6, "{token}/s"),
                   ("pp512", "bare-metal"): (4871.99, "{token}/s"), ("tg128", "bare-metal"): (286.71, "{token}/s")}
    assert all(a["host_chip"] == "Apple M1 Ultra" and a["runtime"] == "llama-bench"
               for a, _, _ in metrics["capscan.throughput.tokens"])
    cost = {a["test"]: (v, unit) for a, v, unit in metrics["capscan.per_token_overhead"]}
    assert abs(cost["tg128"][0] - (1 / 206.6 - 1 / 286.71)) < 1e-9 and cost["tg128"][1] == "s"
    assert [v for _, v, _ in metrics["capscan.remedy.verified"]] == [1]
    assert metrics["capscan.last_run.timestamp"][0][1] > 1.7e9
    # run ids and hashes are never attributes
    every = [str(v) for a, _, _ in sum(metrics.values(), []) for v in a.values()] + [str(v) for v in resource.values()]
    assert not any(k for a, _, _ in sum(metrics.values(), []) for k in a if "id" in k or "sha" in k)
    assert not any(len(v) == 64 and all(c in "0123456789abcdef" for c in v) for v in every)
    assert str(ids["stock"]) not in {a.get("run") for a, _, _ in sum(metrics.values(), [])}


def test_push_without_endpoint_is_an_error(db_path, monkeypatch):
    fleet_db(db_path)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", raising=False)
    with pytest.raises(OtlpError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        push(collect(open_db(db_path)))


def test_rejected_push_is_one_line(db_path, monkeypatch):
    fleet_db(db_path)
    with OtlpReceiver(status=400) as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        with pytest.raises(OtlpError, match="did not accept"):
            push(collect(open_db(db_path)), timeout_s=5)
