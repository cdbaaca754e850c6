"""capscan's own exports -> stored runs with their origin (``capscan ingest guest-a.json``).

A run in an export is a report, not a log: it keeps the diagnosis its origin made from the
log's own lines, and this store never diagnoses it again (analyzer.rules.origin). Anyone who can
write into a shared folder can write such a report, so nothing here may make a run look better
than its origin said, and nothing it claims acts here: a run that claims ``fixable`` without the
verdict and the proof that go with it is refused, as is anything that is not a run; a fixable
claim its own facts contradict is kept as a report whose claim was not accepted (``claim_refusal``);
times, integers and speeds are bounded as a log's are; two different reports of one run are both
kept and flagged (``conflicts``), neither trusted over the other."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any, Iterator, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analyzer import chips
from analyzer.model import Capabilities, Device, Evidence, RunFacts, Shim, Throughput, facts_json
from analyzer.parsers import plausible
from analyzer.parsers.base import Rejected
from analyzer.parsers.exports import (
    OUT_OF_RANGE,
    Exported,
    ExportError,
    Shape,
    Trailing,
    read_document,
    read_events,
    read_object,
)
from analyzer.plausible import stored_ceiling
from analyzer.read.reader import InputError, PartialInputError
from analyzer.safe_text import clean
from analyzer.store.origins import conflict_key, content_digest, origin_key
from analyzer.store.writer import OriginWriter, now

if TYPE_CHECKING:
    from analyzer.ingest import IngestResult
    from analyzer.read.reader import Input
    from analyzer.store.db import Database

# Budgets: what one imported run may bring (an export is hostile input like any log).
MAX_THROUGHPUT = 2_000
MAX_FINDINGS = 100
MAX_EVIDENCE = 200
MAX_TEXT = 2_000


class _Lax(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Line(_Lax):
    line: int | None = None
    text: str = Field(max_length=100_000)


class _Proof(_Line):
    sign: str = ""


class _Finding(_Lax):
    rule: str
    severity: Literal["error", "warning", "info"]
    message: str
    evidence: list[_Line] = Field(default_factory=list)


class _Speed(_Lax):
    test: str
    tok_s: float | None
    stddev: float | None = None
    model: str | None = None
    config: str | None = None
    line: int | None = None
    reduced: Any = None  # {"by": "median"|"best", "of": n}: one figure for many rows (read by _reduced)


def _reduced(s: _Speed) -> dict[str, Any] | None:
    """The origin's label of a figure standing for several rows, if well formed (else none is trusted)."""
    r = s.reduced
    if isinstance(r, dict) and r.get("by") in ("median", "best") and type(r.get("of")) is int and 1 < r["of"] < 2**62:
        return {"by": r["by"], "of": r["of"]}
    return None


class _Origin(_Lax):
    instance: str | None = None
    source: str | None = None
    sha256: str | None = None
    run_id: int | None = None
    capscan_version: str | None = None
    diagnosed_at: str | None = None
    reported_fixable: bool | None = None  # an aggregator's export of a report: the first origin's claim


class ExportedRun(_Lax):
    """A run object of the ``diagnose --json`` contract as any capscan version wrote it: what an
    import needs is checked, the rest (newer keys) is ignored."""

    id: int | None = None
    source: str | None = None
    first_line: int = Field(ge=0)
    last_line: int = Field(ge=0)
    program: str | None = None
    backend: str | None = None
    device: Device = Field(default_factory=Device)
    host_chip: str | None = None
    environment: str | None = None
    capabilities: Capabilities = Field(default_factory=Capabilities)
    shim: Shim | None = None
    throughput: list[_Speed] = Field(default_factory=list)
    verdict: Literal["capability-downgrade", "hardware-limit", "no-gpu-offload", "virtualization-overhead",
                     "healthy", "unknown"]
    fixable: bool = False
    confidence: Literal["high", "medium", "low"] | None = None
    fixable_reason: str | None = None
    proof: list[_Proof] = Field(default_factory=list)
    findings: list[_Finding] = Field(default_factory=list)
    next: list[str] = Field(default_factory=list)
    origin: _Origin | None = None
    # an NL event's own keys
    time: str | None = None
    host_name: str | None = None
    instance: str | None = None
    sha256: str | None = None
    capscan_version: str | None = None


def _objects(shape: Shape, chunks: Iterator[bytes]) -> Iterator[Exported | int | Trailing]:
    if shape.name == "capscan-run":
        return read_object(chunks)
    return read_events(chunks) if shape.name in ("capscan-events", "capscan-runs") else read_document(chunks)


def _refusal(run: ExportedRun) -> str | None:
    """Why a run cannot be imported as it claims to be, or None."""
    if run.fixable and (run.verdict != "capability-downgrade" or not run.proof):
        return "it claims fixable without a capability-downgrade verdict and its proof"
    if run.last_line < run.first_line:
        return "its last line is before its first"
    return None


def claimed(run: ExportedRun) -> bool:
    """The run claims fixable: its own ``fixable``, or, exported again by an aggregator (whose
    ``fixable`` is never true for a report), the claim its first origin made."""
    return run.fixable or bool(run.origin and run.origin.reported_fixable)


_X86 = regex.compile(r"x86[_-]64|\bamd64\b|\bi[3-6]86\b", regex.IGNORECASE)
# a clamp item: the paravirtual GPU's family below Apple7, or its simdgroup flags off
_CLAMP = regex.compile(r"MTLGPUFamilyApple[1-6]\b|\(100[1-6]\)|simdgroup[\w .]*?=\s*false", regex.IGNORECASE)


def claim_refusal(run: ExportedRun) -> str | None:
    """Why a fixable claim is not accepted, from the run's own facts; None when nothing in them
    contradicts it (which makes it a report worth showing, never a remedy here). The clamp capscan
    fixes is a paravirtual Apple GPU in a VM on an Apple-silicon host reporting a family below
    Apple7: any fact that says otherwise wins over the claim."""
    d = run.device
    name = clean(d.name or "")[:80]
    if chips.vendor(d.name) != "paravirtual":
        return f"its GPU ({name}) is not the paravirtual Apple GPU of a VM" if name else "it names no GPU"
    apple = [f for f in [*(d.families or []), *([d.apple_family] if d.apple_family else [])] if 1000 < f < 2000]
    if not apple:
        metal3 = any(3000 < f < 4000 for f in d.families or [])
        return "its GPU reports Metal3 without an Apple family" if metal3 else "its GPU reports no Apple family"
    if min(apple) >= chips.APPLE7:
        return "its GPU reports Apple7 or above: nothing is clamped"
    if d.unified_memory is False:
        return "its GPU reports no unified memory, as a discrete GPU does"
    host = clean(run.host_chip or "")[:80]
    if chips.is_intel_cpu(run.host_chip) or "intel" in host.lower():
        return f"its host is an Intel Mac ({host})"
    texts = [run.host_chip, d.name, run.program, run.backend, run.environment, run.fixable_reason,
             *(t for p in run.proof for t in (p.sign, p.text))]
    if any(t and _X86.search(t) for t in texts):
        return "its facts name an x86_64 host or build"
    if run.environment != "vm":
        return f"its environment is {clean(run.environment or 'not shown')[:40]}, not a VM guest"
    if not any(_CLAMP.search(p.text) for p in run.proof):
        return "its proof has no clamp item (an Apple family below 7, or simdgroup = false)"
    return None


def _out_of_range(raw: Any) -> bool:
    """Any integer no store column can hold, anywhere in the run (iterative: lists are capped)."""
    stack = [raw]
    while stack:
        v = stack.pop()
        if v is OUT_OF_RANGE:
            return True
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _origin(run: ExportedRun, header: dict[str, Any], shape: Shape, imported: str) -> dict[str, Any]:
    """Where the run was diagnosed: an export's own origin block (a run imported there keeps its
    first origin), an event's host and hash, or for a report only its source's name. ``imported``:
    now, the latest time a stored run may carry."""
    version = header.get("capscan_version") if isinstance(header.get("capscan_version"), str) else None
    out: dict[str, Any]
    if run.origin is not None:
        o = run.origin
        out = {"instance": o.instance, "source": o.source, "sha256": o.sha256, "run_id": o.run_id,
               "capscan_version": o.capscan_version or version, "diagnosed_at": o.diagnosed_at}
    elif shape.name == "capscan-events":
        out = {"instance": run.instance or run.host_name, "source": run.source, "sha256": run.sha256,
               "run_id": run.id, "capscan_version": run.capscan_version, "diagnosed_at": run.time}
    else:
        instance = header.get("instance") if isinstance(header.get("instance"), str) else None
        out = {"instance": instance, "source": run.source, "sha256": None, "run_id": run.id,
               "capscan_version": version, "diagnosed_at": None}
    out = {k: (clean(v)[:MAX_TEXT] if isinstance(v, str) else v) for k, v in out.items()}
    # an origin's clock is its own: a run dated in the future (2099) would stay the newest forever
    out["stored_at"] = min(_utc(out["diagnosed_at"]) or imported, imported)
    if out["diagnosed_at"] is not None and out["stored_at"] == imported:
        out["diagnosed_at"] = imported
    out["key"] = origin_key(out["instance"], out["sha256"], out["source"], run.first_line, run.last_line,
                            run.program)
    return out


def _utc(value: Any) -> str | None:
    """An origin's time as the store keeps times (UTC ISO-8601), or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def _report(run: ExportedRun) -> dict[str, Any]:
    """The origin's diagnosis as kept (bounded): what `show` and the lists print for the run, with
    its fixable claim and, when its own facts contradict that claim, why it was not accepted."""
    claim = claimed(run)
    return {
        "verdict": run.verdict, "fixable": claim, "claim_refused": claim_refusal(run) if claim else None,
        "confidence": run.confidence,
        "fixable_reason": run.fixable_reason, "environment": run.environment, "host_chip": run.host_chip,
        "capabilities": run.capabilities.as_dict(),
        "proof": [p.model_dump() for p in run.proof[:MAX_EVIDENCE]],
        "findings": [{**f.model_dump(), "evidence": [e.model_dump() for e in f.evidence[:20]]}
                     for f in run.findings[:MAX_FINDINGS]],
        "next": run.next[:20],
    }


def _plausible(run: ExportedRun) -> tuple[list[_Speed], int]:
    """The run's speeds that pass the check a log's pass (analyzer.parsers.plausible, with the
    ceiling of a stored row: an export carries no model size), and how many did not."""
    kept, refused = [], 0
    for s in run.throughput[:MAX_THROUGHPUT]:
        if s.tok_s is None:
            continue
        try:
            if plausible.check(s.tok_s, None, stored_ceiling(s.test, run.host_chip, s.model), s.test):
                kept.append(s)
        except Rejected:
            refused += 1
    return kept, refused


def _facts(run: ExportedRun, speeds: list[_Speed]) -> tuple[RunFacts, list[Throughput]]:
    model = next((s.model for s in speeds if s.model), None)
    device = run.device.model_copy(update={"families": sorted(set(run.device.families))[:64],
                                           "name": run.device.name and clean(run.device.name)[:MAX_TEXT]})
    facts = RunFacts(first_line=run.first_line, last_line=run.last_line, program=run.program, backend=run.backend,
                     device=device, capabilities=run.capabilities, shim=run.shim, model=model)
    # a figure the origin labelled as standing for many rows keeps its label (issue 38)
    facts.throughput_summary = [{"test": s.test, "tok_s": s.tok_s, "stddev": s.stddev, "model": s.model,
                                 "kind": "bench", "n": (r or {}).get("of", 1), "line": s.line, "config": s.config,
                                 "reduced": r} for s in speeds for r in (_reduced(s),)]
    rows = [Throughput(s.test, s.tok_s, s.stddev, s.model, s.line) for s in speeds]  # type: ignore[arg-type]
    return facts, rows


def _evidence(run: ExportedRun) -> list[Evidence]:
    """The lines the origin showed as proof and evidence, numbered as in its log."""
    seen: dict[tuple[int, str], None] = {}
    for item in [*run.proof, *(e for f in run.findings for e in f.evidence)]:
        if item.line is not None and len(seen) < MAX_EVIDENCE:
            seen[(item.line, clean(item.text)[:MAX_TEXT])] = None
    return [Evidence(line=line, kind="origin", text=text) for line, text in seen]


def import_export(db: Database, source: Input, chunks: Iterator[bytes], shape: Shape, result: IngestResult, *,
                  force: bool) -> IngestResult:
    """Store the runs of one export, all or nothing; a run already stored (the same run of the
    same guest's log) is not stored again, whichever export brought it."""
    writer = OriginWriter(db, source.path)
    new: list[int] = []
    known: dict[int, None] = {}
    seq = 0
    imported = now()
    conflicts: dict[int, None] = {}  # earlier runs a report here contradicts (a dict: in order, O(1))
    try:
        writer.begin()
        for item in _objects(shape, chunks):
            if isinstance(item, Trailing):
                result.trailing = item.chars
                continue
            result.lines = max(result.lines, item if isinstance(item, int) else item.line)
            if isinstance(item, int) or not isinstance(item.run, dict) or _out_of_range(item.run):
                result.rejected += 1
                continue
            try:
                run = ExportedRun.model_validate(item.run)
            except ValidationError:
                result.rejected += 1
                continue
            if _refusal(run) is not None:
                result.rejected += 1
                continue
            origin = _origin(run, item.header, shape, imported)
            origin["report"] = _report(run)
            speeds, refused = _plausible(run)
            facts, rows = _facts(run, speeds)
            report_text = json.dumps(origin["report"], allow_nan=False)
            digest = content_digest(report_text, facts_json(facts).decode())
            same = writer.same_key(origin["key"])
            if digest in same.values():  # the same report again, whichever export brought it
                known[next(rid for rid, d in same.items() if d == digest)] = None
                continue
            if same:  # another report of the same run: both are kept, neither trusted (analyzer.rules.origin)
                origin["key"] = conflict_key(origin["key"], digest)
                conflicts.update(dict.fromkeys(same))
            result.speeds_refused += refused
            result.claims_refused += bool(origin["report"]["claim_refused"])
            seq += 1
            new.append(writer.write_imported(seq, facts, _evidence(run), rows, origin, report_text))
        result.recognised = len(new) + len(known)
        result.conflicts = list(conflicts)
        result.size = source.size
        dup = writer.duplicate_of(source.sha256)
        if (dup is not None and not force) or not new:
            writer.rollback()
            if dup is not None:
                result.duplicate_of, result.run_ids = dup[0], dup[1] or list(known)
            elif known:  # every run came with an earlier export: nothing is added, as for a log stored before
                result.duplicate_of, result.run_ids = writer.source_of(next(iter(known))), list(known)
                result.already = len(known)
            return result
        result.source_id = writer.commit(size=source.size, sha256=source.sha256, lines=result.lines,
                                         recognised=result.recognised, unrecognised=0, overlong=0,
                                         rejected=result.rejected, raw_gzip=None)
        result.run_ids = new
        result.imported, result.already = len(new), len(known)
        if source.damage:
            raise PartialInputError(f"{source.path}: {source.damage}; the {len(new):,} whole runs before it were "
                                    f"stored as source {result.source_id}", result)
        return result
    except PartialInputError:
        raise  # committed: what was readable is stored
    except ExportError as exc:
        writer.rollback_quietly()
        raise InputError(f"{source.path}: a capscan export ({shape.name}) that cannot be read: {exc}; "
                         "nothing of it was stored") from None
    except BaseException:
        writer.rollback_quietly()
        raise

