"""The diagnosis of an imported run: its origin's, as diagnosed there.

This store holds the run's report, not its log, so the rules cannot read the lines a verdict
rests on; diagnosing the summary again could only lose what the origin proved, or, worse,
infer from a summary what only the log's own lines may prove. The origin's verdict, proof and
findings are kept as they were, with a finding saying where they come from."""

from __future__ import annotations

from typing import Any

from analyzer.model import StoredRun, claim
from analyzer.rules.engine import RULES_VERSION

RULE = "imported"


def where(origin: dict[str, Any]) -> str:
    instance = origin.get("instance") or "an unnamed instance"
    version = f"capscan {origin['capscan_version']}" if origin.get("capscan_version") else "capscan"
    when = f" at {origin['diagnosed_at']}" if origin.get("diagnosed_at") else ""
    source = f" from {origin['source']}" if origin.get("source") else ""
    return f"{instance}{source} ({version}{when})"


def origin_diagnosis(run: StoredRun) -> dict[str, Any]:
    origin = run.origin or {}
    report = origin.get("report") or {}
    fixable = bool(report.get("fixable")) and report.get("verdict") == "capability-downgrade"
    message = (f"Imported: diagnosed on {where(origin)}. This store holds that report, not the log, so it is "
               "shown as diagnosed there and not diagnosed again here.")
    findings = [*report.get("findings", []), {"rule": RULE, "severity": "info", "message": message, "evidence": []}]
    steps = list(report.get("next", []))
    if fixable:
        steps.append(f"The remedy runs where the workload runs: on {origin.get('instance') or 'the origin'}, "
                     "`capscan remedy plan`.")
    verdict = report.get("verdict", "unknown")
    return {
        "verdict": verdict, "fixable": fixable, "fixable_reason": report.get("fixable_reason"),
        # the origin's proof, as a report: each item imported from its instance, never this store's own
        "proof": [{**p, **claim("imported", origin.get("instance"))} for p in report.get("proof", [])] if fixable
        else [], "proof_missing": [],
        "confidence": report.get("confidence"), "environment": report.get("environment"),
        "host_chip": report.get("host_chip"), "host_family": None,
        "capabilities": report.get("capabilities") or run.facts.capabilities.as_dict(),
        "capabilities_inferred": [],
        "summary": f"{verdict}{' (fixable)' if fixable else ''}, as diagnosed on {where(origin)}",
        "findings": findings, "next_steps": steps, "baseline": None, "paired": None, "reference": [],
        "origin": {k: origin.get(k) for k in ("instance", "source", "sha256", "run_id", "capscan_version",
                                               "diagnosed_at")},
        "rules_version": RULES_VERSION,
    }
