"""``db path`` and ``db stats``: where the database is, and what it holds."""

from __future__ import annotations

import click

from analyzer.cli.lazy import LazyGroup
from analyzer.cli.options import Options, open_existing_db
from analyzer.cli.output import Result, output_options, text


@click.group(cls=LazyGroup, lazy_commands={"serve": ("analyzer.cli.fleet", "db_serve")})  # with the fleet commands
def db() -> None:
    """Where the database is, and what it holds."""


@db.command("path")
@output_options("db", "json")
def db_path(opts: Options) -> Result:
    """Print the database path."""
    from analyzer.store.paths import resolve_db_path

    path = resolve_db_path(opts.db)
    return Result(human=text(str(path)), doc={"path": str(path), "exists": path.exists()})


@db.command("stats")
@output_options("db", "json")
def db_stats(opts: Options) -> Result:
    """Sources, runs, rows and verdicts stored."""
    from analyzer.store.paths import resolve_db_file
    from analyzer.store.queries import stats

    database = open_existing_db(opts)
    if database is None:
        path = resolve_db_file(opts.db)
        return Result(human=text(f"No database yet at {path}: nothing stored. Pipe a log in: llama-bench ... 2>&1 "
                                 "| capscan"), doc={"path": path, "exists": False, "runs": 0})
    s = stats(database, resolve_db_file(opts.db))
    lines = []
    for key, value in s.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        elif isinstance(value, list):
            value = ", ".join(value)
        lines.append(f"{key:<18} {value}")
    return Result(human=text(*lines), doc=s)

