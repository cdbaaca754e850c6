"""The database as a handful of low-cardinality metrics.

Every exporter (Prometheus textfile, OTLP) reads the same ``Snapshot``:

- ``capscan_run_info{verdict,fixable,environment,runtime,backend,host_chip,gpu_family} 1``:
  one series per runtime, backend and environment seen among recent runs,
  carrying the verdict of the latest such run (so a remedied run replaces
  the stock one it fixed);
- ``capscan_run_timestamp_seconds{environment,runtime,backend}``: when that
  latest run was stored (a dashboard ignores guests that went quiet);
- ``capscan_throughput_tokens_per_second{test,model,environment,host_chip,runtime}``:
  the latest run's speed of each test and model, apart for a guest and its
  host (same model, different environment): the median of the rows it printed for the
  test across its configurations (threads, batch sizes), itself one printed row;
- ``capscan_per_token_overhead_seconds{test,model,environment,host_chip,runtime}``:
  for VM runs paired with a bare-metal run of the same model, 1/vm - 1/host;
- ``capscan_remedy_verified``: 1 if the latest finished remedy run was
  verified, 0 if it failed (absent when there is none);
- ``capscan_last_run_timestamp_seconds``: when the newest run was stored.

Every series also carries ``instance`` (the machine: its host name unless
``--instance`` names it), so two guests with equal verdicts stay two series. A run imported
from another capscan's export carries its origin's instance instead (an aggregator never
passes a guest's runs off as its own), and its labels come from fixed vocabularies only
(``vocabulary``: an unknown verdict, environment, backend, runtime or test becomes "other"),
at most ``MAX_IMPORTED_INSTANCES`` instances and ``MAX_IMPORTED_SPEEDS`` speed series of them:
an export's free text cannot multiply the series.
Runs older than ``max_age`` are left out (a guest gone quiet drops out of its
textfile). Run ids, hashes and paths never become labels (cardinality); they
are in the ``--nl`` events. Label values come from logs, so they are cleaned: printable
ASCII from a short safe set, at most ``LABEL_MAX`` characters.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from analyzer.store.stored_text import clean_json

if TYPE_CHECKING:
    from analyzer.store.db import Database


LABEL_MAX = 64
RECENT_RUNS = 1000
MAX_IMPORTED_INSTANCES = 64
MAX_IMPORTED_SPEEDS = 256
# What an imported run's labels may say (anything else is "other"): capscan's own words.
VERDICT_WORDS = frozenset({"capability-downgrade", "hardware-limit", "no-gpu-offload", "virtualization-overhead",
                           "healthy", "unknown"})
ENVIRONMENT_WORDS = frozenset({"vm", "bare-metal", "unknown"})
BACKEND_WORDS = frozenset({"metal", "cuda", "rocm", "hip", "vulkan", "cpu", "blas", "sycl", "opencl", "rpc", "cann",
                           "musa", "kompute", "webgpu", "unknown"})
RUNTIME_WORDS = frozenset({"llama-bench", "llama-cli", "llama-server", "llama-completion", "llama.cpp", "main",
                           "server", "whisper-cli", "whisper.cpp", "ollama", "koboldcpp", "lm-studio", "jan",
                           "system_profiler", "unknown"})
_TEST_WORD = re.compile(r"(?:pp|tg)\d{1,6}|prompt|generation|pp|tg")
MAX_AGE_S = 7 * 86400  # runs older than this leave the exports (--max-age)
INFO_LABELS = ("verdict", "fixable", "environment", "runtime", "backend", "host_chip", "gpu_family")
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:;/+()\[\]#@=-]")
_SPACES = re.compile(r"\s+")


def label_value(value: object, max_len: int = LABEL_MAX) -> str:
    """A log-derived string made safe as a label value: cleaned as log text
    (analyzer.safe_text.clean: escape sequences whole, 7- or 8-bit), NFKC,
    control and format characters (bidi overrides, U+2060) removed, anything outside a
    small printable ASCII set replaced by '_', whitespace collapsed, bounded length.
    Missing values are 'unknown'. The one label-value function: every exporter
    and every label (``instance``, ``--label``) goes through it."""
    if value is None:
        return "unknown"
    from analyzer.safe_text import clean

    text = unicodedata.normalize("NFKC", clean(str(value)[: max_len * 4]))
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C")
    text = _SPACES.sub(" ", _UNSAFE.sub("_", text)).strip()
    # GitHub takes "##[" anywhere in a line and "::" at its start as a workflow command: stdout's sanitiser
    # would break them with U+2060 (not ASCII), so a label value breaks them first, in ASCII
    text = text.replace("##[", "##_[")
    if text.startswith("::"):
        text = "_" + text[1:]
    if len(text) > max_len:
        text = text[: max_len - 3].rstrip() + "..."
    return text or "unknown"


def vocabulary(value: object, words: frozenset[str]) -> str:
    """An imported run's label value: one of ``words`` (compared as cleaned), else 'other'."""
    text = label_value(value).lower()
    return text if text in words else "other"


def gpu_family(apple_family: int | None) -> str:
    from analyzer.chips import family_name

    return family_name(apple_family) if apple_family is not None else "unknown"


# the labels a speed carries besides test and model: a guest and its host running one model stay apart
SPEED_LABELS = ("environment", "host_chip", "runtime")
# test, model, environment, host_chip, runtime, and the instance (an imported run's origin's)
SpeedKey = tuple[str, str, str, str, str, str]


def chip_name(host_chip: object) -> str:
    """An imported run's host chip as a label: an Apple chip's name, else 'other' (or 'unknown')."""
    from analyzer.chips import apple_chip

    if host_chip is None:
        return "unknown"
    return apple_chip(str(host_chip)[:200]) or "other"


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
    dropped_imported: int = 0  # imported runs past MAX_IMPORTED_INSTANCES / MAX_IMPORTED_SPEEDS, left out


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
    from analyzer.pipeline import decide_listing
    from analyzer.store.origins import origin_instances
    from analyzer.store.queries import _throughput as run_throughput
    from analyzer.store.queries import last_remedy_outcome, recent_diagnosed_runs

    snap = Snapshot(instance=label_value(instance)) if instance else Snapshot()
    oldest = None if max_age_s is None else (time.time() if now is None else now) - max_age_s
    rows = recent_diagnosed_runs(db, recent)
    origins = origin_instances(db, [r[0] for r in rows])
    groups: set[tuple[str, str, str, str]] = set()
    instances: set[str] = set()
    imported_speeds = 0
    # a stored verdict is a claim: each fixable, downgrade or older-rules row is decided again today
    for row, today in decide_listing(db, rows, lambda r: r[0], among=[r[0] for r in rows]):
        (rid, program, backend, device, family, model, created, verdict, fixable, env, host_chip, report) = row
        if today is not None:
            verdict, fixable, env, host_chip = today.verdict, today.fixable, today.environment, today.host_chip
            report = json.dumps({"paired": today.paired.as_dict() if today.paired else None})
        # newest first: the first of each key wins
        when = _epoch(created)
        if oldest is not None and when is not None and when < oldest:
            snap.dropped_old += 1
            continue
        imported = rid in origins
        if imported:  # a report: its origin's instance, capscan's own words, never fixable here
            where = label_value(origins[rid])
            if where not in instances and len(instances) >= MAX_IMPORTED_INSTANCES:
                snap.dropped_imported += 1
                continue
            instances.add(where)
            key = (vocabulary(program, RUNTIME_WORDS), vocabulary(backend, BACKEND_WORDS),
                   vocabulary(env, ENVIRONMENT_WORDS))
            chip = label_value(chip_name(host_chip))
            verdict_label, fixable = vocabulary(verdict, VERDICT_WORDS), False
        else:
            where = snap.instance
            key = (label_value(program), label_value(backend), label_value(env))
            chip = label_value(host_chip)
            verdict_label = label_value(verdict)
        snap.runs += 1
        if snap.last_run_timestamp is None:
            snap.last_run_timestamp = when
        if not snap.gpu and not imported:  # this machine's GPU: never an imported run's device text
            if device:
                snap.gpu = {"hw.model": label_value(device, 128)}
                kind = vendor(device)
                if kind in _VENDOR_NAMES:
                    snap.gpu["hw.vendor"] = _VENDOR_NAMES[kind]
        if (where, *key) not in groups:
            groups.add((where, *key))
            snap.run_info.append({
                "verdict": verdict_label, "fixable": "true" if fixable else "false",
                "environment": key[2], "runtime": key[0], "backend": key[1],
                "host_chip": chip, "gpu_family": label_value(gpu_family(family)), "instance": where})
            if when is not None:
                snap.run_time.append(({"environment": key[2], "runtime": key[0], "backend": key[1],
                                       "instance": where}, when))
        # one gauge per test and model: the median of the run's printed rows, itself one of them (median_low,
        # never the mean of the middle two); a figure printed nowhere is never exported
        figures: dict[tuple, list[float]] = {}
        for t in run_throughput(db, rid):
            test = label_value(t["test"], 32)
            if imported:
                test = test if _TEST_WORD.fullmatch(test) else "other"
            tkey = (test, label_value(t["model"] or model), key[2], chip, key[0], where)
            tok_s = t["tok_s"]
            if tkey not in snap.throughput and tok_s is not None and 0 <= tok_s != float("inf"):
                figures.setdefault(tkey, []).append(float(tok_s))
        for tkey, values in figures.items():
            if imported:
                if imported_speeds >= MAX_IMPORTED_SPEEDS:
                    snap.dropped_imported += 1
                    continue
                imported_speeds += 1
            snap.throughput[tkey] = statistics.median_low(values)
        if imported:
            continue  # a report's pairing is its origin's: no overhead series from it here
        try:
            paired = (clean_json(json.loads(report)) or {}).get("paired") if report else None
        except ValueError:
            paired = None
        for t in (paired or {}).get("tests", []):
            okey = (label_value(t.get("test"), 32), label_value(model), key[2], chip, key[0], where)
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
