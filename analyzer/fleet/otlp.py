"""Push the snapshot to an OpenTelemetry endpoint (OTLP over HTTP/protobuf).

Needs the optional extra ``capscan[otel]`` (opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http). The standard switches apply:
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._METRICS_ENDPOINT``), ``..._HEADERS``,
``..._TIMEOUT``, ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``.

The metrics are the Prometheus textfile's, named in the ``capscan.*``
namespace with units chosen so that a collector's Prometheus exporter turns
them back into exactly the textfile's names (``capscan.throughput.tokens`` in
``{token}/s`` -> ``capscan_throughput_tokens_per_second``), with the same
attribute keys: one Grafana dashboard serves both routes. The resource carries the
OpenTelemetry host/os conventions and the GPU of the newest run
(``hw.type=gpu``, ``hw.model``, ``hw.vendor``); run ids and hashes never
become attributes.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys

from analyzer import __version__
from analyzer.fleet.metrics import SPEED_LABELS, Snapshot

SPEED = ("test", "model", *SPEED_LABELS, "instance")


class OtlpError(Exception):
    """One line: why nothing was pushed."""


# (OTLP name, unit, description, Prometheus name the collector derives from it)
METRICS = (
    ("capscan.run.info", "", "Verdict of the latest run per runtime, backend and environment (always 1).",
     "capscan_run_info"),
    ("capscan.run.timestamp", "s", "When the latest run per runtime, backend and environment was stored.",
     "capscan_run_timestamp_seconds"),
    ("capscan.throughput.tokens", "{token}/s", "Speed of the latest run per test, model, environment, host "
     "chip and runtime: the median of the rows it printed for the test across all its configurations "
     "(threads, batch sizes), itself one printed row, not the best.",
     "capscan_throughput_tokens_per_second"),
    ("capscan.per_token_overhead", "s", "Seconds per token a VM run pays over bare metal (1/vm - 1/host).",
     "capscan_per_token_overhead_seconds"),
    ("capscan.remedy.verified", "", "1 if the latest remedy run was verified, 0 if it failed.",
     "capscan_remedy_verified"),
    ("capscan.last_run.timestamp", "s", "When the newest run was stored (Unix time).",
     "capscan_last_run_timestamp_seconds"),
)

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "arm64": "arm64", "aarch64": "arm64", "i386": "x86", "i686": "x86",
         "ppc64le": "ppc64", "s390x": "s390x", "armv7l": "arm32"}
_OS = {"darwin": "darwin", "linux": "linux", "win32": "windows", "freebsd": "freebsd"}


def endpoint_configured() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def host_attributes() -> dict[str, str]:
    """Resource attributes from the OpenTelemetry host and os conventions."""
    attrs = {"service.name": "capscan", "service.version": __version__, "host.name": socket.gethostname()}
    arch = _ARCH.get(platform.machine().lower())
    if arch:
        attrs["host.arch"] = arch
    os_type = _OS.get(sys.platform) or next((v for k, v in _OS.items() if sys.platform.startswith(k)), None)
    if os_type:
        attrs["os.type"] = os_type
    version = platform.mac_ver()[0] if sys.platform == "darwin" else platform.release()
    if version:
        attrs["os.version"] = version
    return attrs


def resource_attributes(snap: Snapshot) -> dict[str, str]:
    """The host attributes, and ``service.instance.id``: a Collector's Prometheus exporter builds the
    ``instance`` label from it, so two guests stay two series."""
    attrs = {**host_attributes(), "service.instance.id": snap.instance}
    if snap.gpu:
        attrs["hw.type"] = "gpu"
        attrs.update(snap.gpu)
    return attrs


def push(snap: Snapshot, *, timeout_s: float = 10.0) -> int:
    """Export once; returns the number of data points sent. Raises
    ``ImportError`` without the extra, ``OtlpError`` when the push fails. Imported runs' series
    carry their origin's instance: each instance is pushed under its own resource
    (``service.instance.id``), as that guest would have pushed them."""
    total = 0
    for part in _by_instance(snap):
        total += _push_one(part, timeout_s=timeout_s)
    return total


def _by_instance(snap: Snapshot) -> list[Snapshot]:
    """The snapshot split by the ``instance`` of its series (the machine's own first, with the
    machine-wide series); each part without the ``instance`` key, which its resource carries."""
    import dataclasses

    def own(labels: dict[str, str]) -> str:
        return labels.get("instance", snap.instance)

    names = dict.fromkeys([snap.instance, *(own(x) for x in snap.run_info), *(own(x) for x, _ in snap.run_time),
                           *(k[-1] for k in snap.throughput), *(k[-1] for k in snap.overhead)])
    parts = []
    for name in names:
        local = name == snap.instance
        part = dataclasses.replace(
            snap, instance=name,
            run_info=[{k: v for k, v in x.items() if k != "instance"} for x in snap.run_info if own(x) == name],
            run_time=[({k: v for k, v in x.items() if k != "instance"}, t) for x, t in snap.run_time if own(x) == name],
            throughput={k[:-1] + (name,): v for k, v in snap.throughput.items() if k[-1] == name},
            overhead={k[:-1] + (name,): v for k, v in snap.overhead.items() if k[-1] == name},
            remedy_verified=snap.remedy_verified if local else None,
            last_run_timestamp=snap.last_run_timestamp if local else None,
            gpu=snap.gpu if local else {})
        if local or part.run_info or part.throughput:
            parts.append(part)
    return parts


def _push_one(snap: Snapshot, *, timeout_s: float) -> int:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter,
    )
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        InMemoryMetricReader,
        MetricExportResult,
    )
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    if not endpoint_configured():
        raise OtlpError("set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318) to say where to push")
    # OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME win over ours (that is where host.image.name is given)
    resource = Resource.create(resource_attributes(snap)).merge(OTELResourceDetector().detect())
    reader = InMemoryMetricReader()
    provider = MeterProvider(resource=resource, metric_readers=[reader])
    meter = provider.get_meter("capscan", __version__)
    series: dict[str, list[tuple[float, dict[str, str]]]] = {
        "capscan.run.info": [(1, labels) for labels in snap.run_info],
        "capscan.run.timestamp": [(v, labels) for labels, v in snap.run_time],
        "capscan.throughput.tokens": [(v, dict(zip(SPEED[:-1], k[:-1], strict=True))) for k, v in snap.throughput.items()],
        "capscan.per_token_overhead": [(v, dict(zip(SPEED[:-1], k[:-1], strict=True))) for k, v in snap.overhead.items()],
        "capscan.remedy.verified": [] if snap.remedy_verified is None else [(snap.remedy_verified, {})],
        "capscan.last_run.timestamp": [] if snap.last_run_timestamp is None else [(snap.last_run_timestamp, {})],
    }

    def callback_for(points):
        def callback(options: CallbackOptions):
            return [Observation(value, attrs) for value, attrs in points]
        return callback

    for name, unit, description, _ in METRICS:
        if series[name]:
            meter.create_observable_gauge(name, callbacks=[callback_for(series[name])], unit=unit,
                                          description=description)
    data = reader.get_metrics_data()
    provider.shutdown()
    points = sum(len(m.data.data_points) for rm in (data.resource_metrics if data else [])
                 for sm in rm.scope_metrics for m in sm.metrics)
    # the exporter logs its own warnings (with the collector's reply); the one-line error is ours
    logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)
    logging.getLogger("opentelemetry.exporter.otlp.proto.http.metric_exporter").setLevel(logging.CRITICAL)
    exporter = OTLPMetricExporter(timeout=timeout_s)
    try:
        result = exporter.export(data, timeout_millis=timeout_s * 1000) if data else MetricExportResult.SUCCESS
    except Exception as exc:  # noqa: BLE001 - any transport failure becomes one line
        raise OtlpError(f"push failed ({type(exc).__name__}: {exc})") from None
    finally:
        exporter.shutdown()
    if result is not MetricExportResult.SUCCESS:
        where = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        raise OtlpError(f"the OTLP endpoint {where} did not accept the metrics")
    return points
