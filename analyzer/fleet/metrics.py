"""The database as a handful of low-cardinality metrics.

Every exporter (Prometheus textfile, OTLP) reads the same ``Snapshot``:

- ``capscan_run_info{verdict,fixable,environment,runtime,backend,host_chip,gpu_family} 1``:
  one series per runtime, backend and environment seen among recent runs,
  carrying the verdict of the latest such run (so a remedied run replaces
  the stock one it fixed);
- ``capscan_run_timestamp_seconds{environment,runtime,backend}``: when that
  latest run was stored (a dashboard ignores guests that went quiet);
- ``capscan_throughput_tokens_per_second{test,model,environment,host_chip,runtime}``:
  the latest measured speed of each test and model, apart for a guest and its
  host (same model, different environment);
- ``capscan_per_token_overhead_seconds{test,model,environment,host_chip,runtime}``:
  for VM runs paired with a bare-metal run of the same model, 1/vm - 1/host;
- ``capscan_remedy_verified``: 1 if the latest finished remedy run was
  verified, 0 if it failed (absent when there is none);
- ``capscan_last_run_timestamp_seconds``: when the newest run was stored.

Every series also carries ``instance`` (the machine: its host name unless
``--instance`` names it), so two guests with equal verdicts stay two series.
Runs older than ``max_age`` are left out (a guest gone quiet drops out of its
textfile). Run ids, hashes and paths never become labels (cardinality); they
are in the ``--nl`` events. Label values come from logs, so they are cleaned: printable
ASCII from a short safe set, at most ``LABEL_MAX`` characters.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from analyzer.store.stored_text import clean_json

if TYPE_CHECKING:
    from analyzer.store.db import Database


LABEL_MAX = 64
RECENT_RUNS = 1000
MAX_AGE_S = 7 * 86400  # runs older than this leave the exports (--max-age)
INFO_LABELS = ("verdict", "fixable", "environment", "runtime", "backend", "host_chip", "gpu_family")
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;/+()\[\]#@=-]")
_SPACES = re.compile(r"\s+")
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")


def label_value(value: object, max_len: int = LABEL_MAX) -> str:
    """A log-derived string made safe as a label value: NFKC, control and
    format characters (escapes, bidi overrides) removed, anything outside a
    small ASCII set replaced by '_', whitespace collapsed, bounded length.
    Missing values are 'unknown'."""
    if value is None:
        return "unknown"
    text = unicodedata.normalize("NFKC", _ESCAPES.sub("", str(value)[: max_len * 4]))
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C")
    text = _SPACES.sub(" ", _UNSAFE.sub("_", text)).strip()
    if len(text) > max_len:
        text = text[: max_len - 3].rstrip() + "..."
    return text or "unknown"


def gpu_family(apple_family: int | None) -> str:
    from analyzer.chips import family_name

    return family_name(apple_family) if apple_family is not None else "unknown"


# the labels a speed carries besides test and model: a guest and its host running one model stay apart
SPEED_LABELS = ("environment", "host_chip", "runtime")
SpeedKey = tuple[str, str, str, str, str]  # test, model, environment, host_chip, runtime


def default_instance() -> str:
    import socket

    return label_value(socket.gethostname())


@dataclass
class Snapshot:
    run_info: list[dict[str, str]] = field(default_factory=list)
    run_time: list[tuple[dict[str, str], float]] = field(default_factory=list)  # (environment, runtime, backend)
    throughput: dict[SpeedKey, float] = field(default_factory=dict)  # -> tok/s
    overhead: dict[SpeedKey, float] = field(default_factory=dict)  # -> seconds per token
    remedy_verified: int | None = None
    last_run_timestamp: float | None = None
    gpu: dict[str, str] = field(default_factory=dict)  # hw.model / hw.vendor of the latest run's device
    runs: int = 0
    instance: str = field(default_factory=default_instance)
    dropped_old: int = 0  # runs past max_age, left out


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


_VENDOR_NAMES = {"apple": "Apple", "paravirtual": "Apple", "amd": "AMD", "intel": "Intel", "nvidia": "NVIDIA"}


def collect(db: Database, recent: int = RECENT_RUNS, *, instance: str | None = None, max_age_s: float | None = MAX_AGE_S,
            now: float | None = None) -> Snapshot:
    import time

    from analyzer.chips import vendor
    from analyzer.store.queries import _throughput as run_throughput
    from analyzer.store.queries import last_remedy_outcome, recent_diagnosed_runs

    snap = Snapshot(instance=label_value(instance)) if instance else Snapshot()
    oldest = None if max_age_s is None else (time.time() if now is None else now) - max_age_s
    from analyzer.rules.today import todays_verdicts

    rows = recent_diagnosed_runs(db, recent)
    groups: set[tuple[str, str, str]] = set()
    # a stored verdict is a claim: each fixable, downgrade or older-rules row is decided again today
    for row, today in todays_verdicts(db, rows, lambda r: r[0], among=[r[0] for r in rows]):
        (rid, program, backend, device, family, model, created, verdict, fixable, env, host_chip, report) = row
        if today is not None:
            verdict, fixable, env, host_chip = (today.get("verdict"), bool(today.get("fixable")),
                                                today.get("environment"), today.get("host_chip"))
            report = json.dumps({"paired": today.get("paired")})
        # newest first: the first of each key wins
        when = _epoch(created)
        if oldest is not None and when is not None and when < oldest:
            snap.dropped_old += 1
            continue
        snap.runs += 1
        if snap.last_run_timestamp is None:
            snap.last_run_timestamp = when
            if device:
                snap.gpu = {"hw.model": label_value(device, 128)}
                kind = vendor(device)
                if kind in _VENDOR_NAMES:
                    snap.gpu["hw.vendor"] = _VENDOR_NAMES[kind]
        key = (label_value(program), label_value(backend), label_value(env))
        chip = label_value(host_chip)
        if key not in groups:
            groups.add(key)
            snap.run_info.append({
                "verdict": label_value(verdict), "fixable": "true" if fixable else "false",
                "environment": key[2], "runtime": key[0], "backend": key[1],
                "host_chip": chip, "gpu_family": label_value(gpu_family(family))})
            if when is not None:
                snap.run_time.append(({"environment": key[2], "runtime": key[0], "backend": key[1]}, when))
        for t in run_throughput(db, rid):  # one entry per test and model (the median of repeated rows)
            tkey = (label_value(t["test"], 32), label_value(t["model"] or model), key[2], chip, key[0])
            tok_s = t["tok_s"]
            if tkey not in snap.throughput and tok_s is not None and 0 <= tok_s != float("inf"):
                snap.throughput[tkey] = float(tok_s)
        try:
            paired = (clean_json(json.loads(report)) or {}).get("paired") if report else None
        except ValueError:
            paired = None
        for t in (paired or {}).get("tests", []):
            okey = (label_value(t.get("test"), 32), label_value(model), key[2], chip, key[0])
            cost = t.get("per_token_s")
            if okey not in snap.overhead and isinstance(cost, (int, float)):
                snap.overhead[okey] = float(cost)
    outcome = last_remedy_outcome(db)
    if outcome is not None:
        snap.remedy_verified = 1 if outcome == "verified" else 0
    return snap


_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED = frozenset(INFO_LABELS) | {"test", "model", "instance"}


def constant_labels(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``--label NAME=VALUE`` (repeatable): a label put on every series (the
    guest's name, so the textfiles of several guests in one folder never
    collide). Raises ValueError with a one-line message."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"--label {pair!r}: expected NAME=VALUE with NAME like guest or site_1")
        if name in RESERVED:
            raise ValueError(f"--label {name}: capscan sets that label itself")
        out[name] = label_value(value)
    return out
