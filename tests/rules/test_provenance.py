"""Issue 37, "Provenance on every claim": each observation and proof item says whose lines it comes from
(model.Provenance), every provenance may veto, and only the guest process's own lines may prove a host or
make a run fixable (RunView.host_proof, RunView.remedy_decision). Unit tests of the view, the JSON
contract and the report; tests/adversarial/test_other_machines_lines.py has the pasted logs."""

from __future__ import annotations

import io
from pathlib import Path
from typing import get_args

import pytest
from click.testing import CliRunner

from analyzer.cli import cli
from analyzer.ingest import ingest
from analyzer.model import GUEST_PROCESS, Provenance, provenance_words
from analyzer.diagnosis import ProofItem
from analyzer.output.contract import RunDocument
from analyzer.read.reader import Input
from analyzer.rules.diagnose import view_of
from analyzer.store import open_db
from analyzer.store.queries import load_run

HERE = Path(__file__).resolve().parent / "fixable"
GUEST_JSON = (HERE / "guest-bench.json").read_text()
GUEST_M4 = (HERE / "guest-m4-stock.log").read_text()
ARM_BUILD = "build: 6500 (0320ac526) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0\n"


def stored(tmp_path: Path, text: str):
    db = open_db(tmp_path / "p.db")
    [rid, *_] = ingest(db, Input("guest.log", io.BytesIO(text.encode()))).run_ids
    run = load_run(db, rid)
    db.conn.close()
    assert run is not None
    return run


def test_the_contract_names_the_same_provenances_as_the_model():
    literal, none = get_args(ProofItem.model_fields["provenance"].annotation)  # Literal[...] | None
    assert none is type(None) and set(get_args(literal)) == set(get_args(Provenance))
    # one description: the document's proof items are the diagnosis's own
    assert RunDocument.model_fields["proof"].annotation == list[ProofItem]


@pytest.mark.parametrize("proof", ["cpu_info", "build target"])
def test_every_proof_item_of_a_guests_own_log_is_guest_process(tmp_path, proof):
    text = GUEST_M4 + GUEST_JSON if proof == "cpu_info" else ARM_BUILD + GUEST_M4
    view = view_of(stored(tmp_path, text))
    items, why, missing = view.remedy_decision
    assert items and why is None and missing == []
    assert {p["provenance"] for p in items} == {GUEST_PROCESS}
    assert all("instance" not in p for p in items)


@pytest.mark.parametrize("instance", ["guest-17", None])
def test_an_imported_record_never_proves_even_with_the_guests_own_facts(tmp_path, instance):
    """The same facts, read as a record imported from another capscan: every item is 'imported', and the
    decision refuses, naming where they come from."""
    run = stored(tmp_path, GUEST_M4 + GUEST_JSON)
    run.origin = {"instance": instance, "report": {}}
    view = view_of(run)
    assert view.provenance == "imported" and view.instance == instance
    items, why, missing = view.remedy_decision
    assert items == [] and missing == ["guest-process"]
    assert (f"imported from {instance}" if instance else "imported from another capscan") in why
    assert view.host_proof == []  # the imported facts name the host, but prove nothing
    assert all(p["provenance"] == "imported" for p in view.clamp_proof)
    if instance:
        assert all(p["instance"] == instance for p in view.clamp_proof)


def test_a_host_named_only_by_another_machines_line_is_no_host(tmp_path):
    """The guest's own cpu_info observation, re-labelled another machine's: the same value no longer
    names the guest's host, though the single-valued fact still holds it."""
    run = stored(tmp_path, GUEST_M4 + GUEST_JSON)
    assert view_of(run).host_chip == "Apple M1 Ultra"
    for o in run.facts.observations:
        if o.fact == "host.cpu":
            o.provenance = "other-machine"
    view = view_of(run)
    assert run.facts.cpu_info == "Accelerate, Apple M1 Ultra (Virtual)"
    assert view.host_chip is None and view.host_proof == []
    assert view.remedy_decision[2] == ["host"]


def test_an_arm64_build_line_of_another_machine_is_no_host(tmp_path):
    run = stored(tmp_path, ARM_BUILD + GUEST_M4)
    for o in run.facts.observations:
        if o.fact in ("build.target", "process.arm64_macos"):
            o.provenance = "other-machine"
    assert view_of(run).host_proof == []


def test_a_stored_observation_without_provenance_reads_as_the_guests(tmp_path):
    """Runs stored before provenance: every observation was read from the run's own lines here."""
    from analyzer.model import Observation
    o = Observation.model_validate({"fact": "host.cpu", "value": "Apple M1 (Virtual)", "line": 3})
    assert o.provenance == GUEST_PROCESS


@pytest.mark.parametrize("provenance,instance,words", [
    ("guest-process", None, "the guest's own lines"),
    ("other-machine", None, "another machine's lines in the same paste"),
    ("imported", "mac-mini-3", "imported from mac-mini-3"),
    ("database", None, "a record read from the database"),
])
def test_provenance_in_words(provenance, instance, words):
    assert provenance_words(provenance, instance) == words


def test_show_prints_and_json_carries_each_items_provenance(tmp_path):
    log = tmp_path / "guest.log"
    log.write_text(GUEST_M4 + GUEST_JSON)
    db = str(tmp_path / "c.db")
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", db, "ingest", str(log)]).exit_code == 0
    shown = runner.invoke(cli, ["--db", db, "show", "1"], env={"NO_COLOR": "1"})
    assert shown.exit_code == 0, shown.output
    assert "  proof: (each from the guest's own lines)" in shown.output
    doc = runner.invoke(cli, ["--db", db, "show", "1", "--json"])
    assert doc.exit_code == 0, doc.output
    run = RunDocument.model_validate_json(doc.output)
    assert run.fixable and run.proof and {p.provenance for p in run.proof} == {"guest-process"}
