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
    assert database.connect().execute("PRAGMA query_only").fetchone() is not None  # a live connection
    with pytest.raises(Exception):  # opened mode=ro: SQLite itself refuses a write
        database.connect(write=True).execute("DELETE FROM runs")

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
    # a canned query cannot be turned into a write, and arbitrary SQL writes fail on a read-only file
    response = await ds.client.get(f"/{name}.json?sql=DELETE+FROM+runs")
    assert response.status_code == 400
    runs = await _get(ds, f"/{name}.json?sql=select+count(*)+as+n+from+runs&_shape=array")
    assert runs == [{"n": 3}]



async def test_raw_logs_read_as_null_unless_with_raw(db_path):
    """The kept raw log (prompts and answers) is not served through any query, typed or canned."""
    import io

    from analyzer.ingest import ingest
    from analyzer.read.reader import Input
    from analyzer.store.db import open_db

    fleet_db(db_path)
    db = open_db(db_path)
    ingest(db, Input("secret.log", io.BytesIO(b"ggml_metal_init: GPU name:   Apple M2 Max\nmy secret prompt\n"),
                     keep_raw=True), force=True, keep_raw=True)
    db.conn.close()
    name = db_name_of(db_path)
    sql = f"/{name}.json?sql=select+hex(raw_gzip)+as+raw+from+sources+where+raw_gzip+is+not+null&_shape=array"
    hidden = make_datasette(db_path)
    await hidden.invoke_startup()
    assert await _get(hidden, sql) == []
    everything = await _get(hidden, f"/{name}/sources.json?_shape=array")
    assert everything and all(row.get("raw_gzip") is None for row in everything)
    shown = make_datasette(db_path, with_raw=True)
    await shown.invoke_startup()
    rows = await _get(shown, sql)
    assert len(rows) == 1 and rows[0]["raw"]


def test_only_localhost_names_are_answered(db_path):
    """A DNS-rebinding page sends its own name as Host: 421, nothing served."""
    import asyncio

    import httpx

    from analyzer.fleet.dbserve import app_for

    fleet_db(db_path)
    app = app_for(db_path)
    name = db_name_of(db_path)

    async def status_for(host: str) -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://placeholder") as c:
            return (await c.get(f"/{name}/verdicts.json?_shape=array", headers={"host": host})).status_code
    for host, status in (("localhost:8001", 200), ("127.0.0.1:8001", 200), ("[::1]:8001", 200),
                         ("evil.example:8001", 421), ("evil.example", 421), ("", 421)):
        assert asyncio.run(status_for(host)) == status, host


def test_serving_changes_nothing_in_the_file(db_path, tmp_path):
    """No checkpoint and no migration: the database and its write-ahead log are as they were."""
    import asyncio

    fleet_db(db_path)
    before = {p.name: p.read_bytes() for p in db_path.parent.glob(db_path.name + "*")}
    ds = make_datasette(db_path)
    asyncio.run(ds.invoke_startup())
    name = db_name_of(db_path)

    async def read():
        return (await ds.client.get(f"/{name}/verdicts.json?_shape=array")).status_code
    assert asyncio.run(read()) == 200
    after = {p.name: p.read_bytes() for p in db_path.parent.glob(db_path.name + "*")}
    assert after[db_path.name] == before[db_path.name]  # not a byte of the file changed
    wal = db_path.name + "-wal"
    assert after.get(wal, b"") == before.get(wal, b"")  # nothing checkpointed out of the log, nothing written


async def test_pointer_and_file_functions_are_refused_with_or_without_raw(db_path):
    """fts3_tokenizer() would hand any local user a library address (issue 37); load_extension() a library."""
    fleet_db(db_path)
    checkpoint(db_path)
    name = db_name_of(db_path)
    for with_raw in (False, True):
        ds = make_datasette(db_path, with_raw=with_raw)
        await ds.invoke_startup()
        for sql in ("select+hex(fts3_tokenizer('simple'))+as+p", "select+load_extension('x')+as+p"):
            response = await ds.client.get(f"/{name}.json?sql={sql}&_shape=array")
            assert response.status_code == 400 and "not authorized" in response.text, (with_raw, sql, response.text)
        assert await _get(ds, f"/{name}.json?sql=select+count(*)+as+n+from+runs&_shape=array") == [{"n": 3}]
