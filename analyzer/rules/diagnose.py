"""store -> rules: diagnose stored runs and keep each diagnosis with its run.

Baselines for a run (a bare-metal run of the same model, the same guest on
its CPU) are looked up among all stored runs, so a host log ingested last
week still serves as the baseline for today's guest log."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable

from analyzer.diagnosis import Diagnosis, Finding, Prediction
from analyzer.model import StoredRun
from analyzer.rules.compare import per_token_cost, predict_tok_s
from analyzer.rules.engine import RULES_VERSION, diagnose
from analyzer.rules.origin import origin_diagnosis
from analyzer.rules.view import Peer, RunView
from analyzer.store import diagnoses
from analyzer.store.db import is_read_only
from analyzer.store.queries import load_peer_runs, load_run
from analyzer.store.writer import now

if TYPE_CHECKING:
    from analyzer.store.db import Database

MAX_PEERS = 200


def view_of(run: StoredRun, peers: list[Peer] | None = None) -> RunView:
    # an imported run's facts are another capscan's record, never the guest's own lines here: they may
    # veto, never prove (RunView.remedy_decision)
    instance = (run.origin or {}).get("instance")
    return RunView(id=run.id, facts=run.facts, throughput=run.throughput, evidence=run.evidence, peers=peers or [],
                   created_at=run.created_at, provenance="imported" if run.origin is not None else "guest-process",
                   instance=str(instance) if instance is not None else None)


@dataclass
class _Pass:
    """What one pass over a batch shares: the batch's loaded runs (by model too), the peers made
    so far, and the stored candidates per (model, host chip). Nothing is written until the pass
    ends (``_store``), so a candidate list read once holds for every run of the pass."""

    loaded: dict[int, StoredRun] = field(default_factory=dict)
    peers: dict[int, Peer | None] = field(default_factory=dict)
    candidates: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    by_model: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for rid, run in self.loaded.items():
            if run.facts.model:
                self.by_model.setdefault(run.facts.model, []).append(rid)

    def stored_candidates(self, db: Database, model: str, chip: str, run_id: int) -> list[int]:
        key = (model, chip)
        if key not in self.candidates:  # one more than needed: the run itself may be among them
            self.candidates[key] = diagnoses.peer_candidate_ids(db, model, None, chip, MAX_PEERS + 1)
        return [rid for rid in self.candidates[key] if rid != run_id][:MAX_PEERS]


def _peers(db: Database, run: StoredRun, shared: _Pass) -> list[Peer]:
    """Possible baselines: runs of the same model on the same hardware (the host chip). Runs of
    other hardware are never candidates, so however many are stored they cannot crowd out or
    replace the right one. Only a guest has baselines: every rule that reads peers (baseline.choose,
    the guest slower than its CPU) asks for a VM first, so a run that is not one reads none (`show` of
    a bare-metal run read 200)."""
    view = view_of(run)
    chip = view.host_chip
    if not run.facts.model or chip is None or view.environment != "vm":
        return []
    ids = shared.stored_candidates(db, run.facts.model, chip, run.id)
    # the runs diagnosed together may carry no stored diagnosis yet, or one from older rules
    ids += [rid for rid in shared.by_model.get(run.facts.model, ()) if rid != run.id]
    cache, loaded = shared.peers, shared.loaded
    ids = list(dict.fromkeys(ids))
    fetched = load_peer_runs(db, [rid for rid in ids if rid not in cache and rid not in loaded])
    out = []
    for rid in ids:
        if rid not in cache:
            other = loaded.get(rid) or fetched.get(rid)
            # gone, imported or not loading whole: no baseline (load_peer_runs leaves those out)
            cache[rid] = _peer_of(other) if other is not None else None
        peer = cache[rid]
        if peer is not None and peer.host_chip == chip:
            out.append(peer)
    return out


def _peer_of(run: StoredRun) -> Peer | None:
    """A run as another run's baseline; None when it cannot serve as one (it did not load whole)."""
    if run.load_error or run.origin is not None:  # an imported run's facts are a summary: no baseline
        return None
    try:
        return view_of(run).peer()
    except Exception:  # noqa: BLE001 - a broken peer is left out, it never blocks the run being diagnosed
        return None


def internal_error(run: StoredRun, exc: BaseException | str) -> Diagnosis:
    """The diagnosis of a run that cannot be diagnosed: unknown, with an
    "internal error" finding saying why. It never blocks the other runs."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    why = " ".join(why.split())[:300]
    message = (f"internal error: capscan could not diagnose this run ({why}), so its verdict is unknown. "
               "The other runs are not affected; please report this with the log.")
    return Diagnosis.of(
        verdict="unknown", fixable=False, fixable_reason=None, confidence=None, environment=None,
        host_chip=None, host_family=None, capabilities={}, capabilities_inferred=[],
        summary=message,
        findings=[Finding.model_construct(rule="internal-error", severity="error", message=message, evidence=[])],
        next_steps=[f"Ingest the log again with the current capscan (`capscan ingest --force PATH`); "
                    f"`capscan show {run.id} --json` shows what is stored."],
        paired=None, rules_version=RULES_VERSION,
    )


def _diagnose_one(db: Database, run: StoredRun, peers: Callable[[], list[Peer]]) -> Diagnosis:
    """The rules' diagnosis of one run, or ``internal_error`` when the run
    cannot be diagnosed (it did not load whole, or a rule failed on it)."""
    if run.load_error:
        return internal_error(run, run.load_error)
    if run.origin is not None:
        return origin_diagnosis(run)  # diagnosed where its log is (analyzer.rules.origin)
    try:
        diag = diagnose(view_of(run, peers()))
        json.dumps(diag.stored())  # what is stored must serialise
        return diag
    except Exception as exc:  # noqa: BLE001 - one run's failure must not stop the others
        return internal_error(run, exc)


def diagnose_stored_run(db: Database, run: StoredRun) -> Diagnosis:
    """Diagnose one loaded run in memory, with its stored peers; writes nothing
    (for readers such as the remedy plan)."""
    return _diagnose_one(db, run, lambda: _peers(db, run, _Pass()))


def diagnose_in_memory(db: Database, ids: list[int]) -> dict[int, Diagnosis]:
    """The runs diagnosed again, sharing one pass's peers (as ``_diagnose_and_store``), nothing written
    (analyzer.rules.today decides stored claims with it). A run that is gone meanwhile is unknown, never
    its stored claim."""
    loaded = {rid: run for rid in ids if (run := load_run(db, rid)) is not None}
    shared = _Pass(loaded)
    out = {}
    for rid in ids:
        run = loaded.get(rid)
        out[rid] = (_diagnose_one(db, run, partial(_peers, db, run, shared)) if run is not None else
                    Diagnosis.of(verdict="unknown", fixable=False, environment=None, host_chip=None))
    return out


def diagnose_for_reading(db: Database, run: StoredRun) -> StoredRun:
    """The run diagnosed in memory with its peers and its predicted speed, as `diagnose` would show
    it; writes nothing (`show` is a reading command: the database file stays byte-identical)."""
    run.diagnosis = diagnose_stored_run(db, run)
    try:
        _attach_prediction(db, run)
    except Exception:  # noqa: BLE001 - a prediction is an extra; without it the diagnosis stands
        run.diagnosis.drop_prediction()
    return run


def diagnose_runs(db: Database, run_ids: Iterable[int], *, refresh_peers: bool = False,
                  keep: bool = True) -> list[StoredRun]:
    """Diagnose (again) and store; returns the runs with their diagnosis attached.

    With ``refresh_peers``, stored runs of the same models are diagnosed again
    too: a host log arriving today is the baseline of yesterday's guest log.
    Runs are loaded BATCH at a time; with ``keep=False`` none is returned, so
    an input of 60,000 runs is diagnosed in bounded memory."""
    ids = list(dict.fromkeys(run_ids))
    out: list[StoredRun] = []
    keys: set[tuple[str, str]] = set()
    for batch in _batches(ids):
        for run in _diagnose_and_store(db, batch):
            d = run.diagnosis
            if run.facts.model and d and d.host_chip:
                keys.add((run.facts.model, d.host_chip))
            if keep:
                out.append(run)
    if refresh_peers:
        # only runs of the same model on the same hardware can have a new run as their baseline
        wanted = set(ids)
        others: dict[int, None] = {}
        for model, chip in keys:
            for rid in diagnoses.same_hardware_run_ids(db, model, chip, MAX_PEERS):
                if rid not in wanted:
                    others[rid] = None
        for batch in _batches(list(others)):
            _diagnose_and_store(db, batch)
        # predictions read the other runs' diagnoses, so they come after the refresh (read once per chip)
        speeds_of: dict[str, Speeds] = {}
        for run in out:
            try:
                _attach_prediction(db, run, speeds_of)
            except Exception:  # noqa: BLE001 - a prediction is an extra; without it the diagnosis stands
                if run.diagnosis is not None:
                    run.diagnosis.drop_prediction()
        _store(db, [_row(run) for run in out])  # what was shown is what is kept (with its prediction)
    return out


BATCH = 500


def _batches(ids: list[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), BATCH):
        yield ids[i:i + BATCH]


def _diagnose_and_store(db: Database, ids: list[int]) -> list[StoredRun]:
    out, rows = [], []
    # Load each run once: the runs of one input are usually each other's peers.
    loaded = {rid: run for rid in ids if (run := load_run(db, rid)) is not None}
    shared = _Pass(loaded)
    speeds_of: dict[str, Speeds] = {}  # nothing is stored until the batch ends: one read per chip holds
    for rid in ids:
        run = loaded.get(rid)
        if run is None:
            continue
        run.diagnosis = _diagnose_one(db, run, partial(_peers, db, run, shared))
        try:
            _attach_prediction(db, run, speeds_of)
        except Exception:  # noqa: BLE001 - a prediction is an extra; without it the diagnosis stands
            run.diagnosis.drop_prediction()
        out.append(run)
        rows.append(_row(run))
    _store(db, rows)
    return out


def _row(run: StoredRun) -> tuple:
    d = run.diagnosis
    assert d is not None  # (every run of a pass was diagnosed before its row is made)
    return (run.id, d.verdict, int(d.fixable), d.confidence, d.environment, d.host_chip, json.dumps(d.stored()),
            RULES_VERSION, now())


def _store(db: Database, rows: list[tuple]) -> None:
    if not is_read_only(db):  # a read-only database: diagnosed in memory, not kept
        diagnoses.save_diagnoses(db, rows)


# ---------------------------------------------------------------------------
# prediction of a remedied guest's speed
# ---------------------------------------------------------------------------


Speeds = dict[str, dict[str, dict[str, float]]]


def _speeds_by_model(db: Database, host_chip: str) -> Speeds:
    """model -> {"guest"|"host": {test: best tok/s}} over local runs with full capabilities on this host chip
    (the capability flags are read in SQL: diagnoses.full_caps_speeds_on)."""
    out: Speeds = {}
    for model, env, test, tok_s in diagnoses.full_caps_speeds_on(db, host_chip):
        out.setdefault(model, {}).setdefault("guest" if env == "vm" else "host", {})[test] = tok_s
    return out


def _attach_prediction(db: Database, run: StoredRun, speeds_of: dict[str, Speeds] | None = None) -> None:
    """The remedied speed of a fixable local run, from the stored speeds of its host chip.
    ``speeds_of`` (host chip -> speeds) is shared by the runs of one batch: the stored runs are read
    once per chip and batch, not once per run (4,000 fixable runs were quadratic)."""
    d = run.diagnosis
    if d is None or not d.fixable or not run.facts.model or not d.host_chip:
        return
    if run.origin is not None:  # another guest's report: no remedy here, so no remedied speed
        return
    import statistics  # (here: only a fixable run is predicted, and `show` of any other skips the import)

    chip = d.host_chip
    if speeds_of is None:
        speeds_of = {}
    if chip not in speeds_of:
        speeds_of[chip] = _speeds_by_model(db, chip)
    speeds = speeds_of[chip]
    host = speeds.get(run.facts.model, {}).get("host", {})
    preds = []
    for test, host_tok_s in host.items():
        costs = [(model, per_token_cost(s["guest"][test], s["host"][test])) for model, s in speeds.items()
                 if model != run.facts.model and test in s.get("guest", {}) and test in s.get("host", {})]
        if not costs:
            continue
        cost = statistics.median(c for _, c in costs)
        if 1.0 / host_tok_s + cost <= 0:
            continue  # a guest measured faster than its host: no sensible prediction
        preds.append(Prediction.model_construct(test=test, host_tok_s=host_tok_s, per_token_s=cost,
                                                predicted_tok_s=predict_tok_s(host_tok_s, cost),
                                                from_models=[m for m, _ in costs]))
    if preds:
        d.prediction = sorted(preds, key=lambda p: p.test)  # stored after every key the rules set
