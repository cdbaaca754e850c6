"""A stored run as the contract's JSON object (``diagnose --json``, ``show --json``). Its shape is
declared by ``analyzer.output.contract`` (`capscan schema`); a key added here is added there too."""

from __future__ import annotations

from typing import Any

from analyzer.diagnosis import Diagnosis
from analyzer.model import StoredRun


def run_to_json(run: StoredRun) -> dict[str, Any]:
    f = run.facts
    diag = run.diagnosis
    return {
        "id": run.id,
        "source": run.source,
        "first_line": f.first_line,
        "last_line": f.last_line,
        "program": f.program,
        "ollama_app": f.ollama_app,
        "backend": f.backend,
        "device": {
            "name": f.device.name,
            "apple_family": f.device.apple_family,
            "families": f.device.families,
            "unified_memory": f.device.unified_memory,
            "working_set_mb": f.device.working_set_mb,
            "threadgroup_memory": f.device.threadgroup_memory,
        },
        "host_chip": diag and diag.host_chip,
        "environment": diag and diag.environment,
        "capabilities": (diag and diag.capabilities) or f.capabilities.as_dict(),
        "shim": ({"name": f.shim.name, "apple_family_max": f.shim.apple_family_max} if f.shim else None),
        # one entry per printed row, with its ± and its line (a figure is never a mean): ``config`` as the
        # row states it (threads, batch, KV types, fa, ngl); a configuration printed past the budget is one
        # entry, ``reduced`` saying how (a summary stored before issue 38 gave one entry of n rows: its ``n``)
        "throughput": [{"test": t["test"], "tok_s": t["tok_s"], "stddev": t["stddev"], "model": t["model"],
                        "config": t.get("config"), "line": t.get("line"), "n": t.get("n") or 1,
                        "reduced": _reduced(t)}
                       for t in run.throughput],
        **(_diagnosed(diag) if diag else _UNDIAGNOSED),
        # imported from another capscan's export: where it was diagnosed (null for a run of a log stored here)
        "origin": _origin(run),
    }


# what a run not diagnosed (yet) shows
_UNDIAGNOSED: dict[str, Any] = {"verdict": "unknown", "fixable": False, "confidence": None, "fixable_reason": None,
                                "proof": [], "reference": [], "findings": [], "baseline": None, "next": [],
                                "pairing": None, "prediction": []}


def _diagnosed(diag: Diagnosis) -> dict[str, Any]:
    return {
        "verdict": diag.verdict,
        "fixable": diag.fixable,
        "confidence": diag.confidence,
        "fixable_reason": diag.fixable_reason,
        # the rules' proof of a fixable run (each sign with its line) and the estimated ceilings;
        # a diagnosis stored before they existed has neither: [] as for a run without them
        "proof": [p.as_dict() for p in diag.proof],
        "reference": [r.as_dict() for r in diag.reference],
        "findings": [f.as_dict() for f in diag.findings],
        # a guest's bare-metal baseline (same model and quantization, same host chip) and why, or why none;
        # null for runs that are not guests
        "baseline": diag.baseline and diag.baseline.as_dict(),
        # what the human report shows beside the verdict: the next commands, the pairing with the
        # baseline (per test: ratio and per-token cost) and the predicted speed after the remedy
        "next": diag.next_steps,
        "pairing": diag.paired and diag.paired.as_dict(),
        "prediction": [p.as_dict() for p in diag.prediction],
    }


def _reduced(entry: dict[str, Any]) -> dict[str, Any] | None:
    """How an entry stands for several rows; an older summary's entry of n > 1 rows was their median."""
    reduced = entry.get("reduced")
    if isinstance(reduced, dict):
        return {"by": reduced.get("by"), "of": reduced.get("of")}
    n = entry.get("n") or 1
    return {"by": "median", "of": n} if isinstance(n, int) and n > 1 else None


def _origin(run: StoredRun) -> dict[str, Any] | None:
    o = run.origin
    if o is None:
        return None
    # the origin's fixable claim, as reported: never this store's ``fixable`` (analyzer.rules.origin)
    reported = run.diagnosis and run.diagnosis.reported
    return {**{k: o.get(k) for k in ("instance", "source", "sha256", "run_id", "capscan_version", "diagnosed_at")},
            "reported_fixable": reported and reported.fixable, "claim_refused": reported and reported.claim_refused}
