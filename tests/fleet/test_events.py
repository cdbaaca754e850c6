"""--nl events: one JSON object per diagnosed run, stable field names."""

from __future__ import annotations

import hashlib
import json

from analyzer.fleet.events import EVENT_FIELDS, EVENT_NAME, event_line
from analyzer.store.db import open_db
from analyzer.store.queries import load_run
from tests.fleet.dbutil import EXAMPLES, GUEST_NAMING_HOST, fleet_db


def test_event_fields_are_the_documented_ones(db_path):
    ids = fleet_db(db_path)
    db = open_db(db_path)
    line = event_line(db, load_run(db, ids["stock"]))
    assert "\n" not in line
    event = json.loads(line)
    assert tuple(event) == EVENT_FIELDS
    assert event["event"] == EVENT_NAME and event["id"] == ids["stock"]
    assert event["verdict"] == "capability-downgrade" and event["fixable"] is True
    assert event["sha256"] == hashlib.sha256(GUEST_NAMING_HOST.read_bytes()).hexdigest()
    assert event["first_line"] == 1 and event["last_line"] == 105  # to the JSON array's closing `]`
    assert event["device"]["name"] == "Apple Paravirtual device" and event["device"]["apple_family"] == 1005
    assert {t["test"]: t["tok_s"] for t in event["throughput"]} == {"pp512": 431.86, "tg128": 12.63}
    assert event["summary"] and event["time"] and event["host_name"]
    assert event["findings"] and all("rule" in f for f in event["findings"])


def test_hostile_log_text_stays_on_one_ascii_line(tmp_path, db_path):
    from tests.fleet.dbutil import ingest_file
    from analyzer.rules.diagnose import diagnose_runs

    log = (EXAMPLES / "m1-ultra-guest-stock.log").read_text().replace(
        "MTL0 (Apple Paravirtual device)", "MTL0 (Apple Paravirtual device\u2028\x1b[2J\u202e)")
    path = tmp_path / "evil.log"
    path.write_text(log)
    db = open_db(db_path)
    (rid,) = ingest_file(db, path)
    (run,) = diagnose_runs(db, [rid])
    line = event_line(db, run)
    assert line.isascii() and "\n" not in line and "\x1b" not in line and "\u2028" not in line
    assert json.loads(line)["id"] == rid
