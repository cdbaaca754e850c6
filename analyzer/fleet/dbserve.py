"""``capscan db serve``: the database in Datasette (optional extra
``capscan[datasette]``), read-only.

The file is opened immutable (Datasette's ``-i``: SQLite's ``immutable=1``,
no writes, no locks). Since an immutable reader ignores the write-ahead log,
the log is checkpointed into the file first; runs stored after the server
started appear after a restart. ``metadata()`` gives every table a
description and the canned queries below; chart plugins (datasette-vega,
datasette-plot), when installed, chart any query's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analyzer.store.described import CANNED_QUERIES, TABLES

INSTALL_HINT = "pip install 'capscan[datasette]'"


def metadata(db_name: str) -> dict[str, Any]:
    return {
        "title": "capscan",
        "description": "Runs, verdicts and evidence stored by capscan (read-only).",
        "databases": {db_name: {"tables": TABLES, "queries": CANNED_QUERIES}},
    }


def db_name_of(path: Path) -> str:
    return path.stem


def make_datasette(path: Path):
    """A Datasette over ``path``, immutable, with capscan's metadata (raises ImportError without the extra)."""
    from datasette.app import Datasette

    return Datasette(immutables=[str(path)], metadata=metadata(db_name_of(path)),
                     settings={"default_page_size": 50, "sql_time_limit_ms": 3000, "allow_download": False})


def serve(path: Path, *, host: str = "127.0.0.1", port: int = 8001) -> None:
    import asyncio

    import uvicorn

    ds = make_datasette(path)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(ds.invoke_startup())
    finally:
        loop.close()
    uvicorn.run(ds.app(), host=host, port=port, log_level="warning", lifespan="on", workers=1)
