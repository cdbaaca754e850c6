"""The name a piped input is stored under: what it is, not where it came from.

Every pipe used to be stored as ``<stdin>``, so a list of piped runs was a list of
identical sources. A piped source is named after parsing, from its first run's
facts: the program, the model and when it was stored
(``llama-bench · llama 1B Q4_K_M · 2026-12-02 11:40``); ``--name`` names it
explicitly instead. The time is the one the runs list shows (UTC, to the minute).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING

from analyzer.safe_text import clean

if TYPE_CHECKING:
    from analyzer.model import RunFacts

PIPED = "<stdin>"  # what the reader calls stdin, until it is named
MAX_MODEL = 48  # characters of a model name kept in a source name
MAX_NAME = 200  # an explicit --name is cut to this

# llama.cpp prints a k-quant's file type as "Q4_K - Medium"; its file names say Q4_K_M
_KQUANT = re.compile(r"\b(Q\d_K) - (Small|Medium|Large)\b")


def _tidy(text: str) -> str:
    return " ".join(_KQUANT.sub(lambda m: f"{m.group(1)}_{m.group(2)[0]}", clean(text)).split())


def _model(facts: RunFacts) -> str | None:
    if not facts.model:
        # the file the program names, when the log prints no model name: its base name without .gguf
        if not facts.model_file:
            return None
        base = re.split(r"[\\/]", facts.model_file)[-1]
        name = _tidy(base[:-5] if base.lower().endswith(".gguf") else base)
        return (name if len(name) <= MAX_MODEL else name[:MAX_MODEL - 1] + "…") or None
    model = _tidy(facts.model)
    quant = _tidy(facts.quant) if facts.quant else ""
    if quant and quant not in model:
        model = f"{model} {quant}"
    return model if len(model) <= MAX_MODEL else model[:MAX_MODEL - 1] + "…"


def _listing(facts: RunFacts) -> bool:
    """`--list-devices` alone: a device list, and no model, Metal block or buffers (it ran nothing)."""
    return (facts.listed_devices is not None and facts.model is None and facts.metal_era is None
            and not facts.weight_buffers and facts.offload is None)


def piped_source_name(first: RunFacts | None, runs: int = 1, when: dt.datetime | None = None) -> str:
    """``program · model · YYYY-MM-DD HH:MM`` of the first run, at the time the log printed (llama-bench's
    test_time) or else now (a part the log did not show is
    left out; a `--list-devices` output is a "device listing"; no run at all is "piped log"), and how many
    runs when there are several."""
    if when is None and first is not None and first.log_time:
        try:
            when = dt.datetime.fromisoformat(first.log_time)  # the log's own time (llama-bench's test_time)
        except ValueError:  # (facts from elsewhere: an import) not a time: the time it was read
            when = None
    when = when or dt.datetime.now(dt.timezone.utc)
    program = clean(first.program) if first is not None and first.program else None
    if first is not None and _listing(first):
        # a listing ran nothing: say so, with the program that printed it when a pasted command named it
        parts = [f"{program} device listing" if program else "device listing"]
    else:
        parts = [program or "piped log"]
    model = _model(first) if first is not None else None
    if model:
        parts.append(model)
    parts.append(when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"))
    name = " · ".join(parts)
    return f"{name} ({runs:,} runs)" if runs > 1 else name


def explicit_name(name: str) -> str | None:
    """``--name``'s value as stored: one clean line, or None when nothing is left of it."""
    name = " ".join(clean(name).split())
    if not name:
        return None
    return name if len(name) <= MAX_NAME else name[:MAX_NAME - 1] + "…"
