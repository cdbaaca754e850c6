"""``db path`` and ``db stats``: where the database is, and what it holds."""

from __future__ import annotations

import click

from analyzer.cli.options import Options, open_existing_db, shared_options
from analyzer.cli.output import echo_json


@click.group()
def db() -> None:
    """Where the database is, and what it holds."""


@db.command("path")
@shared_options("db", "json")
def db_path(opts: Options) -> None:
    """Print the database path."""
    from analyzer.store.paths import resolve_db_path

    path = resolve_db_path(opts.db)
    if opts.as_json:
        echo_json({"path": str(path), "exists": path.exists()})
        return
    click.echo(str(path))


@db.command("stats")
@shared_options("db", "json")
def db_stats(opts: Options) -> None:
    """Sources, runs, rows and verdicts stored."""
    from analyzer.store.paths import resolve_db_path
    from analyzer.store.queries import stats

    database = open_existing_db(opts)
    if database is None:
        path = resolve_db_path(opts.db)
        if opts.as_json:
            echo_json({"path": str(path), "exists": False, "runs": 0})
        else:
            click.echo(f"No database yet at {path}: nothing stored. Pipe a log in: llama-bench ... 2>&1 | capscan")
        return
    s = stats(database, resolve_db_path(opts.db))
    if opts.as_json:
        echo_json(s)
        return
    for key, value in s.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        elif isinstance(value, list):
            value = ", ".join(value)
        click.echo(f"{key:<18} {value}")


from analyzer.cli.fleet import db_serve  # noqa: E402 - `db serve` lives with the other fleet commands

db.add_command(db_serve)
