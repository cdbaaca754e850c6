"""The six verdicts, most severe first (the order that ranks a whole input)."""

from __future__ import annotations

VERDICTS: tuple[str, ...] = (
    "capability-downgrade",
    "hardware-limit",
    "no-gpu-offload",
    "virtualization-overhead",
    "healthy",
    "unknown",
)


def summary_verdict(verdicts: list[str]) -> str:
    ranked = [v for v in VERDICTS if v in verdicts]
    return ranked[0] if ranked else "unknown"
