"""A self-test bundle (`capscan remedy selftest --bundle FILE`) read back: the committed one
(tests/fixtures/bundles/, made on the stand-in) valid against `capscan schema --for bundle` and
ingested as runs with their diagnoses; a damaged one refused in one line."""

from __future__ import annotations

import json
import sqlite3

import pytest
from jsonschema import Draft202012Validator

from conftest import FIXTURES


def _schema(env) -> Draft202012Validator:
    r = env.capscan("schema", "--for", "bundle")
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    Draft202012Validator.check_schema(schema)
    assert schema["title"] == "Bundle"
    return Draft202012Validator(schema)


BUNDLE_FIXTURE = FIXTURES / "bundles" / "stand-in-works.json"


def test_the_committed_bundle_is_read_back_as_runs(env):
    """A bundle as a user attaches it to an issue (this one made on the stand-in): `capscan ingest` stores
    the logs inside and diagnoses them; a second ingest adds nothing."""
    doc = json.loads(BUNDLE_FIXTURE.read_text())
    assert doc["redacted"] is True and doc["machine"]["stand_in"] is True
    assert _schema(env).is_valid(doc)
    from analyzer.output.bundle import Bundle

    Bundle.model_validate(doc)   # strictly: every key is the model's
    r = env.capscan("ingest", "--json", str(BUNDLE_FIXTURE))
    assert r.returncode == 0, r.stderr.decode()
    items = json.loads(r.stdout)
    ids = [rid for item in items for rid in item["run_ids"]]
    assert len(ids) == len(doc["logs"])   # one run per log (the probe runs and llama-bench's)
    rows = {json.loads(env.capscan("show", "--json", str(rid)).stdout)["source"].rsplit("[", 1)[-1].rstrip("]"):
            json.loads(env.capscan("show", "--json", str(rid)).stdout) for rid in ids}
    stock, fixed = rows["llama-bench stock"], rows["llama-bench capscan"]
    assert stock["verdict"] == "capability-downgrade" and stock["device"]["apple_family"] == 1005
    assert fixed["verdict"] == "healthy" and fixed["capabilities"]["simdgroup_mm"] is True
    assert rows["capscan probe"]["shim"]["name"] == "capscan-interposer"
    again = env.capscan("ingest", str(BUNDLE_FIXTURE))
    assert again.returncode == 0 and "already imported" in again.stderr.decode()


@pytest.mark.parametrize("damage, said", [
    (lambda t: t[: len(t) // 2], "cannot be read"),
    (lambda t: t.replace('"logs": [', '"logs": 7, "x": ['), "cannot be read"),
])
def test_a_damaged_bundle_is_one_line_and_stores_nothing(env, tmp_path, damage, said):
    bad = tmp_path / "bad.json"
    bad.write_text(damage(BUNDLE_FIXTURE.read_text()))
    r = env.capscan("ingest", str(bad))
    err = r.stderr.decode()
    assert r.returncode == 2 and said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    con = sqlite3.connect(env.db)
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
