"""How verdicts and numbers look, for the report and the TUI alike.

Imports nothing heavy (no rich, pydantic or sqlite-utils), so the TUI's first
screen can use it without paying for the report's imports."""

from __future__ import annotations

import math
from typing import Any

VERDICT_STYLE = {
    "capability-downgrade": "bold red",
    "hardware-limit": "bold magenta",
    "no-gpu-offload": "bold yellow",
    "virtualization-overhead": "bold cyan",
    "healthy": "bold green",
    "unknown": "dim",
}


def fmt_tps(value: float | None) -> str:
    """Tokens per second as a table cell: 4,871.99; inf; '-' when absent."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    if abs(value) >= 1e9:  # no real speed; a hostile or broken figure (1e308) is not printed as 309 digits
        return f"{value:.3g}"
    return f"{value:,.2f}"


def utc_minutes(created_at: str | None) -> str:
    """'2026-11-29T15:46:13+00:00' -> '2026-11-29 15:46' (as stored, UTC): `capscan runs` and the TUI."""
    return (created_at or "")[:16].replace("T", " ")


def short(text: str | None, n: int, *, keep_end: bool = False) -> str:
    """Text cut to n characters with an ellipsis (a path keeps its end, its file name); '-' when empty."""
    if not text:
        return "-"
    if len(text) <= n:
        return text
    return "…" + text[-(n - 1):] if keep_end else text[: n - 1] + "…"


def cell(value: Any) -> str:
    """A capability-table cell: yes/no for booleans, '-' when absent."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def clean_run(run: Any) -> Any:
    """A copy of a loaded run (``StoredRun``) with every log-derived string
    cleaned for a terminal (``analyzer.safe_text``): source, facts, throughput,
    evidence and diagnosis. For screens that take strings apart before any
    console sees them (the TUI); runs stored by this capscan are clean already,
    older databases may not be."""
    import dataclasses

    from analyzer.diagnosis import Diagnosis
    from analyzer.model import Evidence, FactsError, facts_from_dict
    from analyzer.safe_text import clean, clean_deep

    facts, diagnosis = run.facts, run.diagnosis
    try:
        facts = facts_from_dict(clean_deep(facts.as_dict()))
        diagnosis = diagnosis and Diagnosis.load(clean_deep(diagnosis.stored()))
    except (FactsError, ValueError):
        pass  # cleaning cannot make facts or a diagnosis invalid; keep the loaded ones if it somehow did
    return dataclasses.replace(
        run, source=clean(run.source or ""), facts=facts, throughput=clean_deep(run.throughput),
        evidence=[Evidence(line=e.line, kind=clean(e.kind), text=clean(e.text), inner=e.inner) for e in run.evidence],
        diagnosis=diagnosis)


def source_span(source: str, first: int, last: int, total: int | None = None) -> str:
    """Where a run is: ``guest.log:1-21`` as grep prints it; a piped input's name (``llama-bench · llama 1B
    Q4_K_M · 2026-12-02 11:40``, which holds a time) gets ``, lines 1-21 of 105`` so the numbers stay apart
    (``11:40:1-21`` reads as a time) and the span says how much of the input it is."""
    if " · " in source:
        return f"{source}, lines {first}-{last}" + (f" of {total:,}" if total else "")
    return f"{source}:{first}-{last}"
