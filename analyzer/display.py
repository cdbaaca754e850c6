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
    return f"{value:,.2f}"


def cell(value: Any) -> str:
    """A capability-table cell: yes/no for booleans, '-' when absent."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
