"""Which bare-metal run a guest is measured against.

A baseline matches the guest's model and quantization, shares a test with it
(pp512 with pp512), and ran on the same hardware: a bare-metal run on the host
chip the guest's own evidence names (its `cpu_info` "Apple M1 Ultra (Virtual)",
its Venus device "(Apple M2)"). Never another chip, never another vendor; when
the guest does not show its host chip there is no baseline, and the diagnosis
says so. Among several matches the same llama.cpp build wins, then the run
nearest in time, then the newest.

Because only runs of the guest's own hardware can match, storing runs of other
hardware never changes a verdict (tests/rules/test_baselines.py).

A baseline's speeds are real ones only: a speed that is not finite and positive, or is above
the physical ceiling of its hardware and model (analyzer.plausible), is left out of
the peer before it is compared (a row an older capscan stored before speeds were checked at
the parser boundary); a peer left with no speed of the guest's tests is no baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

from analyzer.model import figure_parts, like_pairs
from analyzer.plausible import stored_ceiling
from analyzer.rules.view import Peer, RunView

HOW_TO_NAME_THE_HOST = ("llama-bench -o json in the guest names it in cpu_info, e.g. 'Apple M1 Ultra (Virtual)'; "
                        "`sysctl -n machdep.cpu.brand_string` shows the same")


@dataclass(frozen=True)
class Baseline:
    peer: Peer | None  # None: no run qualifies, and `why` says why not
    why: str
    candidates: int = 0

    def as_dict(self, view: RunView) -> dict:
        return {"run": self.peer.id if self.peer else None, "why": self.why, "host_chip": view.host_chip,
                "candidates": self.candidates}


def model_label(view: RunView) -> str:
    f = view.facts
    return f"{f.model} {f.quant}" if f.quant and f.quant not in (f.model or "") else (f.model or "?")


def _when(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def matches(view: RunView, peer: Peer) -> bool:
    """Same model and quantization, same hardware, a bare-metal run that used its GPU fully."""
    f = view.facts
    return (peer.environment == "bare-metal" and peer.full_caps is not False and peer.gpu_offload
            and peer.host_chip is not None and peer.host_chip == view.host_chip
            and peer.model == f.model and peer.quant == f.quant)


def _real_speeds(peer: Peer) -> Peer:
    """``peer`` with only the speeds its hardware can have (see the module's docstring)."""
    kept = {t: v for t, v in peer.throughput.items()
            if isinstance(v, (int, float)) and math.isfinite(v)
            and 0 < v <= stored_ceiling(figure_parts(t)[0], peer.host_chip, peer.model)}
    return peer if len(kept) == len(peer.throughput) else replace(peer, throughput=kept)


def choose(view: RunView) -> Baseline | None:
    """The baseline of a VM run (None for runs that are not guests)."""
    if view.environment != "vm":
        return None
    f = view.facts
    if not f.model:
        return Baseline(None, "the log does not name the model")
    chip = view.host_chip
    if chip is None:
        return Baseline(None, "the host chip of this guest is unknown (" + HOW_TO_NAME_THE_HOST
                        + "), and capscan never compares with another machine")
    mine = view.best()
    found = [p for p in (_real_speeds(p) for p in view.peers if matches(view, p))
             if like_pairs(mine, p.throughput)]
    if not found:
        return Baseline(None, f"no bare-metal run of {model_label(view)} on {chip} is stored")
    me = _when(view.created_at)

    def rank(p: Peer) -> tuple:
        same_build = bool(f.build_commit) and p.build == f.build_commit
        when = _when(p.created_at)
        distance = abs(when - me) if when is not None and me is not None else float("inf")
        return (not same_build, distance, -p.id)

    best = min(found, key=rank)
    why = [f"same model and quantization ({model_label(view)})",
           f"same hardware ({chip}, named by {view.host_chip_basis})"]
    if f.build_commit and best.build == f.build_commit:
        why.append(f"same build ({best.build})")
    if len(found) > 1:
        why.append(f"of {len(found)} matching runs the " + ("same build, then " if f.build_commit else "")
                   + "nearest in time")
    return Baseline(best, "; ".join(why), len(found))
