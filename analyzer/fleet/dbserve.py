"""``capscan db serve``: the database in Datasette (optional extra
``capscan[datasette]``), read-only, as it promises:

- opened ``mode=ro`` (SQLite refuses every write, the write-ahead log is read
  but never checkpointed; no migration runs), so serving changes nothing;
- the kept raw logs (``sources.raw_gzip``: prompts and answers) read as NULL
  through any query, canned or typed, unless ``--with-raw`` (an SQLite
  authorizer on each connection);
- the same authorizer refuses the SQL functions that leak an address or reach
  a file (``fts3_tokenizer``, ``load_extension``, the shell's ``readfile``...),
  and each connection sets ``trusted_schema=OFF``;
- answering only requests whose Host is a localhost name (or the address it
  was told to listen on), which DNS rebinding cannot forge; bound to 127.0.0.1
  by default.

``metadata()`` gives every table a description and the canned queries below;
chart plugins (datasette-vega, datasette-plot), when installed, chart any
query's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analyzer.store.described import CANNED_QUERIES, TABLES


def metadata(db_name: str) -> dict[str, Any]:
    return {
        "title": "capscan",
        "description": "Runs, verdicts and evidence stored by capscan (read-only).",
        "databases": {db_name: {"tables": TABLES, "queries": CANNED_QUERIES}},
    }


def db_name_of(path: Path) -> str:
    return path.stem


RAW = ("sources", "raw_gzip")

# SQL functions no served query may call, typed or in a view: fts3_tokenizer() returns a library pointer
# (an address for any local user), load_extension() runs a shared library, and the shell's file functions,
# when a build has them, read or write files. Everything a person browsing runs needs stays callable.
DENIED_FUNCTIONS = frozenset({
    "fts3_tokenizer", "load_extension", "readfile", "writefile", "edit", "fsdir", "lsmode", "zipfile",
    "zipfile_cds", "sqlar_compress", "sqlar_uncompress", "fts5", "sqlite_dbpage", "sqlite_dbdata",
    "sqlite_dbptr", "sqlite_offset",
})


def authorizer(with_raw: bool):
    """The SQLite authorizer of every served connection: the denied functions refused (the query fails
    with "not authorized"), and the raw logs read as NULL unless ``with_raw``."""
    import sqlite3

    def check(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        if not with_raw and action == sqlite3.SQLITE_READ and (arg1, arg2) == RAW:
            return sqlite3.SQLITE_IGNORE  # the column reads as NULL, whatever the query
        return sqlite3.SQLITE_OK
    return check


def make_datasette(path: Path, *, with_raw: bool = False):
    """A Datasette over ``path``, read-only (mode=ro), with capscan's metadata; the raw logs hidden unless
    ``with_raw``, the denied functions refused either way (raises ImportError without the extra)."""
    from datasette.app import Datasette

    from analyzer.store.db import guard

    ds = Datasette(files=[str(path)], metadata=metadata(db_name_of(path)),
                   settings={"default_page_size": 50, "sql_time_limit_ms": 3000, "allow_download": False})
    check = authorizer(with_raw)
    for database in ds.databases.values():
        if database.is_memory:
            continue
        connect = database.connect

        def guarded(write: bool = False, _connect=connect):
            conn = _connect(write=False)  # never a writable connection, whatever asks
            guard(conn, str(path))  # trusted_schema off; a trigger or view added since start is refused too
            conn.set_authorizer(check)
            return conn

        database.connect = guarded
    return ds


LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def host_name(header: str) -> str:
    """The name of a Host header: 'localhost:8001' -> 'localhost', '[::1]:8001' -> '[::1]'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostCheck:
    """ASGI: a request whose Host is not an allowed name gets 421 (a page of another origin that resolves its
    own name to 127.0.0.1, DNS rebinding, sends its own name)."""

    def __init__(self, app: Any, allowed: frozenset[str]):
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = dict(scope.get("headers") or [])
            name = host_name(headers.get(b"host", b"").decode("latin-1"))
            if name not in self.allowed:
                body = b"capscan db serve answers only to localhost names\n"
                await send({"type": "http.response.start", "status": 421,
                            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def allowed_hosts(host: str) -> frozenset[str]:
    extra = set() if host in ("0.0.0.0", "::", "") else {host_name(host), host.lower()}
    return LOCAL_HOSTS | extra


def app_for(path: Path, *, host: str = "127.0.0.1", with_raw: bool = False) -> Any:
    import asyncio

    ds = make_datasette(path, with_raw=with_raw)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(ds.invoke_startup())
    finally:
        loop.close()
    return HostCheck(ds.app(), allowed_hosts(host))


def serve(path: Path, *, host: str = "127.0.0.1", port: int = 8001, with_raw: bool = False) -> None:
    import uvicorn

    uvicorn.run(app_for(path, host=host, with_raw=with_raw), host=host, port=port, log_level="warning",
                lifespan="on", workers=1)
