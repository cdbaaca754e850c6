"""The pipe-mode report and `remedy plan` suggest the same family cap, and it is
one that preflight accepts: with the host chip unknown, `--family auto` would
fail, so both say 1007 (Apple7, the lowest Apple-silicon family)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.remedy.family import resolve
from analyzer.remedy.plan import build_plan
from analyzer.store import open_db

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize("logs,family", [
    # an arm64 build line proves an Apple-silicon host without naming its chip
    (("tests/fixtures/metal/m3-2025-06-paravirtual-apple5.log",), "1007"),
    (("tests/fixtures/bench/host-m1-ultra.json", "tests/fixtures/baselines/guest-stock-block-and-json.log"),
     "1007"),  # M1 Ultra named
])
def test_plan_and_report_suggest_the_same_working_family(tmp_path, logs, family):
    db = open_db(tmp_path / "c.db")
    ids = []
    for log in logs:
        src = open_input(str(ROOT / log))
        ids += ingest(db, src).run_ids
        src.close()
    run = diagnose_runs(db, ids)[-1]
    report_step = next(s for s in run.diagnosis.next_steps if "remedy run" in s)
    plan = build_plan(db, run.id, command=["llama-bench"])
    plan_step = next(s["argv"] for s in plan["steps"] if "run" in s["argv"] and "remedy" in s["argv"])
    planned = plan_step[plan_step.index("--family") + 1]
    assert planned == family and f"--family {family} " in report_step
    value, check = resolve(planned, run.diagnosis.host_family, None)
    assert value == int(family) and check.status != "fail"
