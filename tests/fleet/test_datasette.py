"""capscan db serve: Datasette over the database, immutable, with table
descriptions and canned queries; exercised through Datasette's own client."""

from __future__ import annotations

import pytest

pytest.importorskip("datasette")

from analyzer.fleet.dbserve import db_name_of, make_datasette  # noqa: E402
from analyzer.store.db import checkpoint  # noqa: E402
from analyzer.store.described import CANNED_QUERIES, TABLES  # noqa: E402
from tests.fleet.dbutil import fleet_db  # noqa: E402


async def _get(ds, path):
    response = await ds.client.get(path)
    assert response.status_code == 200, (path, response.text[:300])
    return response.json()


async def test_canned_queries_return_the_expected_rows(db_path):
    ids = fleet_db(db_path)
    assert checkpoint(db_path) is None
    ds = make_datasette(db_path)
    await ds.invoke_startup()
    name = db_name_of(db_path)
    database = ds.databases[name]
    assert database.is_mutable is False  # opened immutable: no writes, no locks

    downgraded = await _get(ds, f"/{name}/downgraded_by_host_chip.json?_shape=array")
    assert downgraded == [{"host_chip": "Apple M1 Ultra", "runs": 1, "fixable_runs": 1, "sources": 1, "devices": 1,
                           "latest": downgraded[0]["latest"]}]

    speedups = await _get(ds, f"/{name}/remedy_speedups.json?_shape=array")
    assert [(r["stock_run"], r["remedied_run"], r["test"]) for r in speedups] == [
        (ids["stock"], ids["shim"], "tg128"), (ids["stock"], ids["shim"], "pp512")]
    tg = speedups[0]
    assert tg["stock_tok_s"] == 12.63 and tg["remedied_tok_s"] == 206.6 and tg["speedup"] == round(206.6 / 12.63, 2)

    no_baseline = await _get(ds, f"/{name}/runs_without_baseline.json?_shape=array")
    paired = {r["run"] for r in no_baseline}
    assert ids["host"] not in paired  # bare metal is never a VM run without a baseline
    assert ids["stock"] not in paired  # paired with the host run of its model

    verdicts = await _get(ds, f"/{name}/verdicts.json?_shape=array")
    assert sum(r["runs"] for r in verdicts) == 3


async def test_tables_are_described_and_writes_refused(db_path):
    fleet_db(db_path)
    checkpoint(db_path)
    ds = make_datasette(db_path)
    await ds.invoke_startup()
    name = db_name_of(db_path)
    meta = await _get(ds, "/-/metadata.json")
    tables = meta["databases"][name]["tables"]
    for table in ("sources", "runs", "diagnoses", "throughput", "evidence", "watch_cursors"):
        assert tables[table]["description"] == TABLES[table]["description"]
    assert set(meta["databases"][name]["queries"]) == set(CANNED_QUERIES)
    # a canned query cannot be turned into a write, and arbitrary SQL writes fail on an immutable file
    response = await ds.client.get(f"/{name}.json?sql=DELETE+FROM+runs")
    assert response.status_code == 400
    runs = await _get(ds, f"/{name}.json?sql=select+count(*)+as+n+from+runs&_shape=array")
    assert runs == [{"n": 3}]
