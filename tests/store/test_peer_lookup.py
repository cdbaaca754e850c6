"""A guest's peers (its possible baselines) are read in a few statements, and are the runs and the
peers the per-run reads made (issue 39, item 6): same ids, same order, the same runs left out."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from analyzer.rules import diagnose as D
from analyzer.store import diagnoses
from analyzer.store.db import open_db
from analyzer.store.queries import load_peer_runs, load_run
from tests.cli.test_cli_output import invoke
from tests.conftest import REPO

FIX = REPO / "tests" / "fixtures"
# the guest names its host chip (an M1 Ultra), the hosts are bare-metal M1 Ultra runs of its model
GUEST = FIX / "shims/lume-shim-apple9-on-m1.log"
HOSTS = [FIX / "bench/host-m1-ultra.json", FIX / "metal/m4-2026-08-host-m1-ultra.log",
         FIX / "metal/m4-2026-09-m5-max.log", FIX / "baselines/guest-stock-block-and-json.log",
         FIX / "bench/gemma-12b-host.jsonl"]


def _store(tmp_path: Path) -> Path:
    """A store of the hosts (three times), an imported copy of them (another guest's export), a run whose
    stored facts are damaged, then the guest."""
    other, export = tmp_path / "other.db", tmp_path / "other.json"
    code, _, err = invoke("--db", str(other), "ingest", *map(str, HOSTS))
    assert code == 0, err
    code, _, err = invoke("--db", str(other), "export", "json", "--instance", "other", "--out", str(export))
    assert code == 0, err
    db = tmp_path / "peers.db"
    for _ in range(3):
        code, _, err = invoke("--db", str(db), "ingest", "--force", *map(str, HOSTS))
        assert code == 0, err
    code, _, err = invoke("--db", str(db), "ingest", str(export))
    assert code == 0, err
    code, _, err = invoke("--db", str(db), "ingest", str(GUEST))
    assert code == 0, err
    return db


def _damage_one_host(db) -> int:
    rid = db.conn.execute("SELECT MIN(id) FROM runs WHERE model IS NOT NULL").fetchone()[0]
    with db.conn:
        db.conn.execute("UPDATE runs SET facts = ? WHERE id = ?", ('{"first_line": "many"}', rid))
    return rid


def test_peer_runs_are_the_runs_load_run_reads_without_their_diagnosis(tmp_path):
    db = open_db(_store(tmp_path))
    broken = _damage_one_host(db)
    ids = [r[0] for r in db.conn.execute("SELECT id FROM runs ORDER BY id")]
    imported = {r[0] for r in db.conn.execute("SELECT run_id FROM run_origins")}
    assert len(ids) >= 15 and imported and broken not in imported
    got = load_peer_runs(db, [*reversed(ids), 10**9, ids[0]])  # newest first, a gone id, a repeat
    for rid in ids:
        whole = load_run(db, rid)
        if rid in imported or rid == broken:
            assert whole.origin is not None or whole.load_error, rid
            assert rid not in got, rid
            continue
        assert whole.load_error is None and whole.origin is None
        assert got[rid] == replace(whole, diagnosis=None), rid
    assert set(got) == set(ids) - imported - {broken}


def test_a_guest_reads_its_peers_in_a_few_statements_and_gets_the_same_ones(tmp_path):
    db = open_db(_store(tmp_path))
    _damage_one_host(db)
    guest = db.conn.execute("SELECT MAX(id) FROM runs").fetchone()[0]
    run = load_run(db, guest)
    view = D.view_of(run)
    assert view.environment == "vm" and view.host_chip == "Apple M1 Ultra"
    # what the per-run reads gave: each candidate loaded whole, then made a peer
    candidates = diagnoses.peer_candidate_ids(db, run.facts.model, None, view.host_chip, D.MAX_PEERS + 1)
    expected = [p for rid in candidates if rid != guest and (other := load_run(db, rid)) is not None
                and (p := D._peer_of(other)) is not None and p.host_chip == view.host_chip][:D.MAX_PEERS]
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    try:
        peers = D._peers(db, run, D._Pass())
    finally:
        db.conn.set_trace_callback(None)
    assert [p.id for p in peers] == [p.id for p in expected] and len(peers) >= 6
    assert peers == expected
    assert len(statements) <= 5, statements  # candidates, origins, runs, evidence (was 4 a candidate)
    diag = D.diagnose_stored_run(db, run)
    assert diag.baseline is not None and diag.baseline.run in {p.id for p in expected
                                                                if p.environment == "bare-metal"}, \
        json.dumps(diag.stored().get("baseline"))


def test_only_a_guest_reads_peers_and_no_rule_reads_them_for_another_run(tmp_path):
    """A run that is not a VM guest reads no peers: no statement, and (what makes that safe) its
    diagnosis with every peer the guest path would find is the same as with none."""
    db = open_db(_store(tmp_path))
    ids = [r[0] for r in db.conn.execute("SELECT id FROM runs ORDER BY id")]
    others = 0
    for rid in ids:
        run = load_run(db, rid)
        view = D.view_of(run)
        if view.environment == "vm" or run.origin is not None or not run.facts.model or view.host_chip is None:
            continue
        statements: list[str] = []
        db.conn.set_trace_callback(statements.append)
        try:
            assert D._peers(db, run, D._Pass()) == []
        finally:
            db.conn.set_trace_callback(None)
        assert statements == []
        candidates = diagnoses.peer_candidate_ids(db, run.facts.model, rid, view.host_chip, D.MAX_PEERS)
        peers = [p for c in candidates if (p := D._peer_of(load_run(db, c))) is not None]
        assert peers, rid
        assert D.diagnose(D.view_of(run, peers)) == D.diagnose(D.view_of(run, [])), rid
        others += 1
    assert others >= 6


_PLAIN = ("SELECT r.id FROM runs r LEFT JOIN diagnoses d ON d.run_id = r.id WHERE r.model = ? AND r.id IS NOT ? "
          "AND (d.run_id IS NULL OR d.host_chip = ?) ORDER BY r.id DESC LIMIT ?")


def test_candidates_come_from_the_indexes_and_are_what_the_plain_join_finds(tmp_path):
    """m012's covering index answers each candidate's chip (the plan says so); the ids are the plain
    join's, for every model, chip, run and limit, with a run left undiagnosed; a store from before m012
    gets the index when it opens, and one without it (dropped by hand) the same answer."""
    path = _store(tmp_path)
    db = open_db(path)
    undiagnosed = db.conn.execute("SELECT MAX(id) FROM runs WHERE model IS NOT NULL AND id NOT IN "
                                  "(SELECT run_id FROM run_origins)").fetchone()[0]
    with db.conn:
        db.conn.execute("DELETE FROM diagnoses WHERE run_id = ?", (undiagnosed,))
    plan = " ".join(r[3] for r in db.conn.execute(
        "EXPLAIN QUERY PLAN " + diagnoses._PEER_CANDIDATES.format(indexed=" INDEXED BY diagnoses_peer_chip"),
        ("m", None, "c", 3)))
    assert "COVERING INDEX runs_model" in plan and "COVERING INDEX diagnoses_peer_chip" in plan, plan
    models = [r[0] for r in db.conn.execute("SELECT DISTINCT model FROM runs WHERE model IS NOT NULL")]
    chips = [r[0] for r in db.conn.execute("SELECT DISTINCT host_chip FROM diagnoses WHERE host_chip IS NOT NULL")]
    ids = [None, *(r[0] for r in db.conn.execute("SELECT id FROM runs"))]
    assert len(models) >= 2 and len(chips) >= 2

    def every_answer() -> list:
        return [diagnoses.peer_candidate_ids(db, m, rid, c, n) for m in models for c in [*chips, "Apple M9"]
                for rid in ids for n in (1, 3, 201)]

    expected = [[r[0] for r in db.conn.execute(_PLAIN, (m, rid, c, n))] for m in models for c in [*chips, "Apple M9"]
                for rid in ids for n in (1, 3, 201)]
    assert every_answer() == expected and any(undiagnosed in got for got in expected)
    with db.conn:  # as a store of the version before: the index and its migration's record gone
        db.conn.execute("DROP INDEX diagnoses_peer_chip")
    assert every_answer() == expected
    with db.conn:
        db.conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm012_diagnoses_peer_chip'")
    db.conn.close()
    db = open_db(path)
    assert db.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'diagnoses_peer_chip'").fetchone()
    assert every_answer() == expected
