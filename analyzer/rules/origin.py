"""The diagnosis of an imported run: its origin's, as diagnosed there, and a report, not evidence.

This store holds the run's report, not its log, so the rules cannot read the lines a verdict
rests on; diagnosing the summary again could only lose what the origin proved, or, worse,
infer from a summary what only the log's own lines may prove. The origin's verdict and findings
are kept as they were, with a finding saying where they come from. Whoever wrote the report, it
never acts here: ``fixable`` is always false (the remedy runs where the log is, and a shared
folder's file is anyone's), its fixable claim is shown as ``reported`` (accepted only when its own
facts do not contradict it and no other report of the same run differs), and its ``next`` text is
quoted as its origin's words, never listed as capscan's steps."""

from __future__ import annotations

from typing import Any

from analyzer.diagnosis import Diagnosis, EvidenceLine, Finding, ProofItem, Reported
from analyzer.model import StoredRun, claim
from analyzer.rules.engine import RULES_VERSION
from analyzer.safe_text import clean

RULE = "imported"
CLAIM_REFUSED = "imported-claim-refused"
CONFLICT = "imported-conflict"
QUOTED_NEXT = "imported-next"
MAX_QUOTED = 5


def where(origin: dict[str, Any]) -> str:
    instance = origin.get("instance") or "an unnamed instance"
    version = f"capscan {origin['capscan_version']}" if origin.get("capscan_version") else "capscan"
    when = f" at {origin['diagnosed_at']}" if origin.get("diagnosed_at") else ""
    source = f" from {origin['source']}" if origin.get("source") else ""
    return f"{instance}{source} ({version}{when})"


def _quoted(instance: str, steps: Any) -> str | None:
    """The origin's next steps as its words, attributed and cleaned (never run, never copied)."""
    texts = [clean(s)[:200] for s in steps if isinstance(s, str) and s.strip()] if isinstance(steps, list) else []
    if not texts:
        return None
    more = f" (and {len(texts) - MAX_QUOTED} more)" if len(texts) > MAX_QUOTED else ""
    quoted = "; ".join(f"\u201c{t}\u201d" for t in texts[:MAX_QUOTED])
    return f"{instance} listed these next steps (its words, not capscan's, not checked here): {quoted}{more}"


def _finding(f: dict[str, Any]) -> Finding:
    """A finding as the origin's report keeps it (checked when it was imported: analyzer.ingest.exports),
    not validated again: an older capscan's evidence line may lack its number."""
    return Finding.model_construct(**{**f, "evidence": [EvidenceLine.model_construct(**e) for e in f.get("evidence", [])]})


def origin_diagnosis(run: StoredRun) -> Diagnosis:
    origin = run.origin or {}
    report = origin.get("report") or {}
    instance = clean(str(origin.get("instance") or "an unnamed instance"))
    verdict = report.get("verdict", "unknown")
    claimed = bool(report.get("fixable")) and verdict == "capability-downgrade"
    conflicts = [c for c in origin.get("conflicts") or [] if isinstance(c, int)]
    refused = report.get("claim_refused") if claimed else None
    if claimed and not refused and conflicts:
        refused = "another report of the same run differs"
    accepted = claimed and not refused
    message = (f"Imported: diagnosed on {where(origin)}. This store holds that report, not the log, so it is "
               "shown as diagnosed there, not diagnosed again here, and never acted on here.")
    findings = [*report.get("findings", []), {"rule": RULE, "severity": "info", "message": message, "evidence": []}]
    if refused and claimed:
        findings.append({"rule": CLAIM_REFUSED, "severity": "warning", "evidence": [],
                         "message": f"{instance} reported this run fixable; the claim is not accepted: {refused}."})
    if conflicts:
        others = ", ".join(str(c) for c in conflicts)
        findings.append({"rule": CONFLICT, "severity": "warning", "evidence": [],
                         "message": f"conflicting imports: run(s) {others} came as a different report of the same "
                                    "run (same instance, log and lines); neither is trusted over the other."})
    quoted = _quoted(instance, report.get("next"))
    if quoted:
        findings.append({"rule": QUOTED_NEXT, "severity": "info", "message": quoted, "evidence": []})
    steps = []
    if accepted:
        steps.append(f"The remedy runs where the workload runs: on {instance}, `capscan remedy plan`.")
    if verdict == "capability-downgrade":
        why = (f"reported by {instance} as fixable; a report imported here, not a log capscan read, so the "
               "remedy runs there" if accepted else
               f"reported by {instance}, its fixable claim not accepted: {refused}" if refused else
               f"reported by {instance}: {clean(str(report.get('fixable_reason') or 'not fixable there'))[:300]}")
    else:
        why = None
    summary = (f"{verdict}{' (reported fixable)' if accepted else ''}, reported by {where(origin)}"
               f"{'; conflicting imports' if conflicts else ''}")
    return Diagnosis.of(
        verdict=verdict, fixable=False, fixable_reason=why,
        reported=Reported.model_construct(by=instance, fixable=accepted, claim_refused=refused),
        basis="reported",  # the confidence is the origin's (analyzer.output.headline)
        # an accepted claim keeps its origin's proof (chained exports pass it on); never for a refused one
        proof=[ProofItem.model_construct(**{**p, **claim("imported", origin.get("instance"))})
               for p in report.get("proof", [])] if accepted else [], proof_missing=[],
        confidence=report.get("confidence"), environment=report.get("environment"),
        host_chip=report.get("host_chip"), host_family=None,
        capabilities=report.get("capabilities") or run.facts.capabilities.as_dict(),
        capabilities_inferred=[],
        summary=summary,
        findings=[_finding(f) for f in findings], next_steps=steps, baseline=None, paired=None, reference=[],
        origin={k: origin.get(k) for k in ("instance", "source", "sha256", "run_id", "capscan_version",
                                           "diagnosed_at")},
        rules_version=RULES_VERSION,
    )
