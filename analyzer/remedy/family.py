"""The family cap: the host chip's true MTLGPUFamilyApple, never above it."""

from __future__ import annotations

from analyzer import chips
from analyzer.remedy.check import Check, failed, passed, warned

# The codes a cap may name: Apple1 to the highest family Apple's documentation has (a code above it is
# one no GPU has: llama.cpp would be told of features nothing implements).
MIN, MAX = 1001, chips.HIGHEST_KNOWN_APPLE
GATE = chips.APPLE7  # llama.cpp's simdgroup reduction / matrix multiply need Apple7


def parse_family(text: str) -> int | None:
    t = text.strip().lower()
    try:
        value = int(t, 16) if t.startswith("0x") else int(t, 10)
    except ValueError:
        return None
    if t.startswith(("0", "+", "-")) and not t.startswith("0x"):
        return None  # the interposer refuses octal-looking and signed values; so do we
    return value if MIN <= value <= MAX else None


def resolve(spec: str, host_family: int | None, brand: str | None) -> tuple[int | None, Check]:
    """spec is 'auto' or a family code. host_family comes from the diagnosis, brand from sysctl (guest)."""
    brand_family = chips.chip_family(brand) if brand else None
    known = [f for f in (host_family, brand_family) if f is not None]
    true_family = min(known) if known else None
    parts = (["the diagnosis"] if host_family is not None else []) + (
        [f"this guest's CPU ({brand})"] if brand_family is not None else [])
    source = " and ".join(parts)
    if spec == "auto":
        if true_family is None:
            return None, failed("family", "the host chip's true family is unknown (the log does not name it and "
                                "this is not a macOS guest whose CPU brand string does)",
                                "run `capscan probe` or `llama-bench -o json` in the guest and ingest it, or pass "
                                "--family N with the host's real family (M1 1007, M2 1008, M3/M4 1009)")
        msg = f"{true_family} ({chips.family_name(true_family)}), the host's true family, from {source}"
        return true_family, (passed if true_family >= GATE else warned)("family", msg)
    value = parse_family(spec)
    if value is None:
        return None, failed("family", f"{spec!r} is not the code of an Apple family that exists ({MIN}-{MAX}, "
                            f"{chips.family_name(MIN)}-{chips.family_name(MAX)})",
                            "pass --family auto, or the host's real family (M1 1007, M2 1008, M3/M4 1009, M5 1010)")
    if true_family is not None and value > true_family:
        return None, failed("family", f"{value} ({chips.family_name(value)}) is above the host chip's true family "
                            f"{true_family} ({chips.family_name(true_family)}); claiming more than the hardware has "
                            "invites kernels it cannot run", f"use --family {true_family} (or auto)")
    if value < GATE:
        return value, warned("family", f"{value} ({chips.family_name(value)}) is below Apple7, so llama.cpp's "
                             "simdgroup flags will stay false", f"use --family {true_family or GATE}")
    if true_family is None:
        return value, warned("family", f"{value} ({chips.family_name(value)}) as given; the host chip is not known "
                             "here, so you vouch that the host's GPU really is at least this family")
    return value, passed("family", f"{value} ({chips.family_name(value)}), at or below the host's true family "
                         f"{true_family}")
