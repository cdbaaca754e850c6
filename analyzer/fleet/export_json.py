"""``capscan export json``: every stored run with its origin, one guest's file for a central store.

The document is the ``diagnose --json`` run objects under a header that says what it is
(``"export": "capscan.runs"``: ``capscan ingest`` recognises it by that, analyzer.parsers.exports),
one run per line so that a file of 100,000 runs is written and read back in bounded memory. Each
run carries its ``origin``: the instance, the log's name and sha256, its id here, the capscan that
diagnosed it. A run this store imported keeps its first origin, so exports can be chained."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from typing import TYPE_CHECKING, TextIO

from analyzer import __version__
from analyzer.output.tabular import finite_json

if TYPE_CHECKING:
    from analyzer.store.db import Database

EXPORT = "capscan.runs"


def _diagnosed(db: Database, run):
    """The run with its diagnosis: the stored one when it claims nothing (not fixable, a settled verdict,
    today's rules), else the rules' in memory (an export writes nothing to the store, and passes on no
    stored claim it did not decide)."""
    from analyzer.pipeline import decide_run

    run.diagnosis = decide_run(db, run, keep_settled=True)
    return run


def run_object(db: Database, run, instance: str, *, decided: bool = False) -> dict:
    """A run as the export holds it; ``decided``: its diagnosis is today's already (``decide_reports``)."""
    from analyzer.output.runjson import run_to_json
    from analyzer.store.queries import source_sha256

    obj = run_to_json(run if decided else _diagnosed(db, run))
    if obj.get("origin") is None:
        obj["origin"] = {"instance": instance, "source": run.source, "sha256": source_sha256(db, run.source_id),
                         "run_id": run.id, "capscan_version": __version__, "diagnosed_at": run.created_at or None}
    return finite_json(obj)


def write_export(db: Database, out: TextIO, *, instance: str, since: str | None) -> int:
    """Write the document; returns how many runs it holds."""
    from analyzer.store.queries import load_run, run_ids_since

    header = {"capscan_version": __version__, "export": EXPORT, "instance": instance,
              "exported_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "since": since}
    head = json.dumps(header, ensure_ascii=True)
    out.write(head[:-1] + ', "runs": [')
    from analyzer.pipeline import decide_reports

    n = 0
    ids = run_ids_since(db, since)
    while batch := list(itertools.islice(ids, 100)):  # a few loaded runs at a time: their claims decided together
        runs = [run for rid in batch if (run := load_run(db, rid)) is not None]
        decide_reports(db, runs)
        for run in runs:
            out.write(",\n" if n else "\n")
            # ASCII with escapes: a log's newline or bidi override stays inside its JSON string
            out.write(json.dumps(run_object(db, run, instance, decided=True), ensure_ascii=True,
                                 separators=(",", ":")))
            n += 1
    out.write("\n]}\n")
    return n


def parse_since(value: str, now: dt.datetime | None = None) -> str:
    """``--since``: an ISO-8601 date or time (UTC unless it says), or an age such as 24h, 7d, 30m;
    returned as the UTC ISO-8601 form the store keeps. Raises ValueError with a one-line reason."""
    now = now or dt.datetime.now(dt.timezone.utc)
    text = value.strip()
    units = {"m": 60, "h": 3600, "d": 86400}
    if text[-1:].lower() in units and text[:-1].replace(".", "", 1).isdigit():
        when = now - dt.timedelta(seconds=float(text[:-1]) * units[text[-1].lower()])
    else:
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{value!r} is neither a date or time (2026-12-01, 2026-12-01T08:00) "
                             "nor an age (30m, 24h, 7d)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds")
