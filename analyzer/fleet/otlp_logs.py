"""Run events as OTLP log records, pushed over OTLP/HTTP (protobuf): an ephemeral CI guest needs no
collector of its own to ship them (issue 26).

Each stored run becomes one record: its body the run's one-sentence summary, its attributes the
``--nl`` event's fields (``analyzer.fleet.events``; nested ones as JSON text), its severity from the
verdict (the mapping of the bundled Collector's filelog receiver), its time the run's. The resource
is the metrics' (``service.name``, ``service.instance.id``, host and os). The request is built
with opentelemetry-proto (which the ``otel`` extra installs) and sent with urllib: the SDK's logs API
is still experimental and changes between the versions capscan accepts. ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``
(or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/logs``) and ``OTEL_EXPORTER_OTLP_HEADERS`` apply.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterable

from analyzer.fleet.otlp import OtlpError

# severity numbers of the OpenTelemetry log data model: INFO 9, WARN 13, ERROR 17
SEVERITY = {"capability-downgrade": (17, "ERROR"), "hardware-limit": (13, "WARN"), "no-gpu-offload": (13, "WARN"),
            "virtualization-overhead": (13, "WARN")}
INFO = (9, "INFO")


def logs_endpoint() -> str | None:
    full = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")
    if full:
        return full
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return base.rstrip("/") + "/v1/logs" if base else None


def _headers() -> dict[str, str]:
    out = {"Content-Type": "application/x-protobuf"}
    raw = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    for pair in raw.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            out[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    return out


def _any_value(value: Any):
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int) and -(1 << 63) <= value < (1 << 63):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    return AnyValue(string_value=json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str))


def _time_ns(iso: str | None) -> int:
    try:
        when = dt.datetime.fromisoformat(iso) if iso else None
    except ValueError:
        when = None
    if when is None:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1e9)


def request_for(events: Iterable[dict[str, Any]], resource: dict[str, str]) -> tuple[bytes, int]:
    """The serialized ExportLogsServiceRequest and the number of records in it."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs, SeverityNumber
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    from analyzer import __version__

    records = []
    for event in events:
        number, text = SEVERITY.get(event.get("verdict") or "", INFO)
        attrs = [KeyValue(key="event.name", value=_any_value(event.get("event")))]
        attrs += [KeyValue(key=k, value=_any_value(v)) for k, v in event.items() if k != "event" and v is not None]
        records.append(LogRecord(time_unix_nano=_time_ns(event.get("time")), severity_number=SeverityNumber.ValueType(number),
                                 severity_text=text, body=_any_value(event.get("summary") or event.get("verdict")),
                                 attributes=attrs))
    req = ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource=Resource(attributes=[KeyValue(key=k, value=_any_value(v)) for k, v in resource.items()]),
        scope_logs=[ScopeLogs(scope=InstrumentationScope(name="capscan", version=__version__),
                              log_records=records)])])
    return req.SerializeToString(), len(records)


def push_events(events: list[dict[str, Any]], resource: dict[str, str], *, timeout_s: float = 10.0) -> int:
    """POST the events; returns how many records were accepted. Raises OtlpError with one line."""
    where = logs_endpoint()
    if not where:
        raise OtlpError("set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318) to say where to push")
    if not events:
        return 0
    body, n = request_for(events, resource)
    req = urllib.request.Request(where, data=body, headers=_headers(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as reply:
            reply.read()
    except urllib.error.HTTPError as exc:
        raise OtlpError(f"the OTLP endpoint {where} did not accept the logs (HTTP {exc.code})") from None
    except (OSError, ValueError) as exc:
        raise OtlpError(f"push failed ({type(exc).__name__}: {exc})") from None
    return n
