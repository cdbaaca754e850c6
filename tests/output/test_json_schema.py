"""`capscan schema` prints the JSON Schema of `diagnose --json` / `show --json`, and what those
commands print obeys it: every bundled log (tests/fixtures/**, examples/*.log) is diagnosed through
the real CLI into its own temporary database, and its document is validated against the printed
schema (jsonschema, Draft 2020-12) and against the contract's pydantic models, strictly. The CLI
runs in-process (click's CliRunner): a process per fixture would cost seconds each."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from analyzer.cli import cli
from analyzer.output.contract import DiagnoseDocument, RunDocument
from tests.conftest import REPO, run_capscan
from tests.ingest_util import is_label

FIXTURES = REPO / "tests" / "fixtures"
LOGS = sorted([p for p in FIXTURES.rglob("*") if p.is_file() and p.name not in ("expected.json", "README.md")
               and not p.name.startswith("_") and p.suffix != ".py" and not is_label(p)] + list((REPO / "examples").glob("*.log")))


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args))
    if r.exception is not None and not isinstance(r.exception, (SystemExit, click.ClickException)):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def printed_schema(*args: str) -> Draft202012Validator:
    code, out, err = invoke("schema", *args)
    assert code == 0, err
    schema = json.loads(out)
    Draft202012Validator.check_schema(schema)  # a schema, by the meta-schema's own rules
    return Draft202012Validator(schema)


@pytest.fixture(scope="module")
def diagnose_schema() -> Draft202012Validator:
    return printed_schema()


@pytest.fixture(scope="module")
def show_schema() -> Draft202012Validator:
    return printed_schema("--for", "show")


def errors(validator: Draft202012Validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_every_bundled_log_is_covered():
    assert len(LOGS) > 80 and any(p.parent.name == "examples" for p in LOGS)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(REPO)))
def test_diagnose_and_show_json_of_every_bundled_log_obey_the_printed_schema(tmp_path, path, diagnose_schema,
                                                                             show_schema):
    db = str(tmp_path / "s.db")
    code, out, err = invoke("--db", db, "diagnose", "--json", str(path))
    if code == 2 and out == "":  # an input that cannot be read (bad/binary.bin): one line, no document
        assert len(err.splitlines()) == 1 and path.parent.name == "bad", err
        return
    # 2 with a document: the complete lines of a truncated input were stored and diagnosed
    assert code == 0 or path.parent.name == "bad", err
    doc = json.loads(out)
    assert errors(diagnose_schema, doc) == []
    DiagnoseDocument.model_validate_json(out, strict=True)
    assert doc["summary"]["runs"] == len(doc["runs"])
    for run in doc["runs"]:
        assert isinstance(run["proof"], list) and isinstance(run["reference"], list)
        if not run["fixable"]:
            assert run["proof"] == []
    for run in doc["runs"][:1] + doc["runs"][-1:]:
        code, shown, err = invoke("--db", db, "show", "--json", str(run["id"]))
        assert code == 0, err
        assert errors(show_schema, json.loads(shown)) == []
        RunDocument.model_validate_json(shown, strict=True)


@pytest.fixture(scope="module")
def guest_doc(tmp_path_factory) -> dict:
    db = str(tmp_path_factory.mktemp("g") / "g.db")
    code, out, err = invoke("--db", db, "diagnose", "--json", str(REPO / "examples/m1-ultra-guest-stock.log"))
    assert code == 0, err
    return json.loads(out)


def test_the_schema_refuses_what_the_contract_does_not_allow(guest_doc, diagnose_schema):
    assert errors(diagnose_schema, guest_doc) == []
    run = guest_doc["runs"][0]
    cases = {
        "proof missing": lambda r: r.pop("proof"),
        "reference missing": lambda r: r.pop("reference"),
        "a proof without its sign": lambda r: r.__setitem__("proof", [{"line": 6, "text": "x"}]),
        "a proof line that is text": lambda r: r.__setitem__("proof", [{"sign": "s", "line": "6", "text": "x"}]),
        "a reference without its basis": lambda r: r.__setitem__("reference", [{"test": "tg128",
                                                                                "ceiling_tok_s": 1199.3}]),
        "a verdict the contract does not name": lambda r: r.__setitem__("verdict", "slow"),
        "fixable as 1": lambda r: r.__setitem__("fixable", 1),
        "a key the contract does not declare": lambda r: r.__setitem__("fixed", True),
        "a device without its family": lambda r: r["device"].pop("apple_family"),
    }
    for what, change in cases.items():
        doc = copy.deepcopy(guest_doc)
        change(doc["runs"][0])
        assert errors(diagnose_schema, doc), what
    # what the rules will fill in: a fixable run's proof, a ceiling estimate
    doc = copy.deepcopy(guest_doc)
    doc["runs"][0]["proof"] = [{"sign": "paravirtual device reports Apple5", "line": 6, "text": run["findings"][0]
                                ["message"]}, {"sign": "arm64 macOS guest", "line": None, "text": ""}]
    doc["runs"][0]["reference"] = [{"test": "tg128", "ceiling_tok_s": 1199.3,
                                    "basis": "Apple M1 Ultra 800 GB/s / model 0.67 GB"}]
    assert errors(diagnose_schema, doc) == []


def test_schema_through_the_installed_entry_point(tmp_path):
    """`capscan schema` as a user runs it: both documents, nothing on stderr, no database touched."""
    db = tmp_path / "never.db"
    for args, title in ((["schema"], "DiagnoseDocument"), (["schema", "--for", "show"], "RunDocument")):
        proc = run_capscan("--db", str(db), *args)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
        schema = json.loads(proc.stdout)
        assert schema["title"] == title and schema["$schema"].endswith("/draft/2020-12/schema")
    assert {"proof", "reference", "fixable_reason"} <= set(schema["required"])
    assert not db.exists() and not Path(tmp_path / "home").exists()
    proc = run_capscan("schema", "--for", "compare")
    assert proc.returncode == 2 and b"compare" in proc.stderr and b"Traceback" not in proc.stderr
