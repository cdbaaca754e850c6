"""The parser boundary's speed check: a measured tokens-per-second value becomes a Throughput
only if a machine can have it; the ceilings it is held to are ``analyzer.plausible``'s (the rules
read them too, for stored rows, so they live below both)."""

from __future__ import annotations

import math

from analyzer.parsers.base import Rejected
from analyzer.plausible import MAX_GEN_TOK_S, MAX_PROMPT_TOK_S, ceilings

__all__ = ["MAX_GEN_TOK_S", "MAX_PROMPT_TOK_S", "ceilings", "check"]


def check(tok_s: float | None, tokens: int | None, ceiling: float, what: str = "speed") -> float | None:
    """The one check: ``tok_s`` as a measurement, or None when there is none (no rate printed, or
    a rate of 0 tokens); ``Rejected`` when the value is no speed a machine can have (negative,
    zero for tokens processed, NaN, infinite, above ``ceiling``)."""
    if tok_s is None:
        return None
    if 0.0 < tok_s <= ceiling:
        return tok_s
    if tokens == 0:  # '0 tokens (nan tokens per second)': nothing was measured
        return None
    if math.isnan(tok_s) or math.isinf(tok_s):
        raise Rejected(f"{what} {tok_s} t/s is not a measurement")
    if tok_s <= 0:
        raise Rejected(f"{what} {tok_s} t/s for {'some' if tokens is None else tokens} tokens")
    raise Rejected(f"{what} {tok_s:g} t/s is above the physical ceiling of {ceiling:,.0f} t/s")
