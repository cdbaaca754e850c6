"""One JSON object per diagnosed run, one per line (``--nl``): what the
OpenTelemetry collector's filelog receiver (``json_parser``), Vector and
Fluent Bit read.

Field names are stable (``EVENT_FIELDS``, documented in docs/fleets.md). The
event is the contract's run object (``diagnose --json``) plus what a log
pipeline needs to file it: ``event``, ``time``, ``host_name``,
``capscan_version``, the source's ``sha256`` and the run's ``summary``. Run
ids and hashes belong here, never in metric labels."""

from __future__ import annotations

import datetime as dt
import json
import socket
from typing import Any

from analyzer import __version__
from analyzer.output.tabular import finite_json
from analyzer.store.queries import source_sha256

EVENT_NAME = "capscan.run"
EVENT_FIELDS = ("event", "time", "capscan_version", "host_name", "sha256", "summary",
                "id", "source", "first_line", "last_line", "program", "backend", "device", "host_chip",
                "environment", "capabilities", "shim", "throughput", "verdict", "fixable", "confidence", "findings")


def run_event(run, *, sha256: str | None = None, host_name: str | None = None) -> dict[str, Any]:
    from analyzer.output.runjson import run_to_json

    diag = run.diagnosis
    event: dict[str, Any] = {
        "event": EVENT_NAME,
        "time": run.created_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "capscan_version": __version__,
        "host_name": host_name if host_name is not None else socket.gethostname(),
        "sha256": sha256,
        "summary": diag and diag.summary,
    }
    event.update(run_to_json(run))
    return {k: event.get(k) for k in EVENT_FIELDS}


def event_line(db, run) -> str:
    """The event as one line of JSON (no raw newlines: control characters are escaped)."""
    return json.dumps(finite_json(run_event(run, sha256=source_sha256(db, run.source_id))), ensure_ascii=True,
                      separators=(",", ":"))
