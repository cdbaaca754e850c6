"""Log text in --csv/--tsv cannot become a spreadsheet formula (issue 24 item 4): a text cell that starts with
= + - @ gets a leading apostrophe (OWASP's CSV-injection advice); numbers and ordinary text are unchanged."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.conftest import REPO, run_capscan

GUEST = REPO / "examples" / "m1-ultra-guest-stock-json.log"


def _with_model(tmp_path, model: str) -> object:
    text = GUEST.read_text().replace('"model_type": "llama 1B Q4_K - Medium"',
                                     f'"model_type": {json.dumps(model)}')
    log = tmp_path / "guest.log"
    log.write_text(text)
    db = tmp_path / "c.db"
    run_capscan("ingest", str(log), db=db, check=True)
    return db


@pytest.mark.parametrize("model", ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0",
                                   "-2+3+cmd|' /C calc'!A0", "@SUM(1+9)*cmd|' /C calc'!A0"])
def test_a_formula_from_a_log_is_inert_in_csv_and_tsv(tmp_path, model):
    db = _with_model(tmp_path, model)
    rows = list(csv.DictReader(io.StringIO(run_capscan("runs", "--csv", db=db, check=True).stdout.decode())))
    assert rows[0]["model"] == "'" + model
    assert rows[0]["best_pp"] == "431.86" and rows[0]["apple_family"] == "1005"  # numbers stay numbers
    tsv = run_capscan("runs", "--tsv", db=db, check=True).stdout.decode().splitlines()
    cells = dict(zip(tsv[0].split("\t"), tsv[1].split("\t")))
    assert cells["model"] == "'" + model


def test_ordinary_text_is_unchanged(tmp_path):
    db = _with_model(tmp_path, "llama 1B Q4_K - Medium")
    rows = list(csv.DictReader(io.StringIO(run_capscan("runs", "--csv", db=db, check=True).stdout.decode())))
    assert rows[0]["model"] == "llama 1B Q4_K - Medium" and rows[0]["device"] == "Apple Paravirtual device"
