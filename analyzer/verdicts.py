"""The six verdicts, most severe first (the order that ranks a whole input), and the two reasons a
downgrade is not (yet) fixable that mean "not shown", not "shown otherwise"."""

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


# Why a capability-downgrade is not fixable when the log is silent (the report asks for more evidence);
# any other reason is a contrary sign or a contradiction the log shows (the report names it).
NO_HOST_CHIP = "nothing in the log shows the host chip"
NO_VM_GUEST = "nothing in the log shows a VM guest"
NO_CLAMP_BLOCK = "the log does not show the paravirtual device's own capability block (its GPU family and flags)"
