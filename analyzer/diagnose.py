"""store -> rules: diagnose stored runs and keep each diagnosis with its run.

Baselines for a run (a bare-metal run of the same model, the same guest on
its CPU) are looked up among all stored runs, so a host log ingested last
week still serves as the baseline for today's guest log."""

from __future__ import annotations

import json
from typing import Iterable

from sqlite_utils import Database

from analyzer.rules.engine import RULES_VERSION, diagnose
from analyzer.rules.view import Peer, RunView
from analyzer.store.queries import StoredRun, load_run
from analyzer.store.writer import now

MAX_PEERS = 200


def view_of(run: StoredRun, peers: list[Peer] | None = None) -> RunView:
    return RunView(id=run.id, facts=run.facts, throughput=run.throughput, evidence=run.evidence, peers=peers or [])


def _peers(db: Database, run: StoredRun, cache: dict[int, Peer]) -> list[Peer]:
    if not run.facts.model:
        return []
    ids = [r[0] for r in db.conn.execute(
        "SELECT id FROM runs WHERE model = ? AND id != ? ORDER BY id DESC LIMIT ?",
        (run.facts.model, run.id, MAX_PEERS))]
    out = []
    for rid in ids:
        if rid not in cache:
            other = load_run(db, rid)
            if other is None:
                continue
            cache[rid] = view_of(other).peer()
        out.append(cache[rid])
    return out


def diagnose_runs(db: Database, run_ids: Iterable[int]) -> list[StoredRun]:
    """Diagnose (again) and store; returns the runs with their diagnosis attached."""
    cache: dict[int, Peer] = {}
    out = []
    rows = []
    for rid in run_ids:
        run = load_run(db, rid)
        if run is None:
            continue
        diag = diagnose(view_of(run, _peers(db, run, cache)))
        run.diagnosis = diag
        out.append(run)
        rows.append((run.id, diag["verdict"], int(diag["fixable"]), diag["confidence"], diag["environment"],
                     diag["host_chip"], json.dumps(diag), RULES_VERSION, now()))
    if rows:
        with db.conn:  # one short write transaction
            db.conn.executemany(
                "INSERT OR REPLACE INTO diagnoses (run_id, verdict, fixable, confidence, environment, host_chip, report, "
                "rules_version, diagnosed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return out
