"""Browsing what is stored: ``runs`` (the list) and ``show`` (one run)."""

from __future__ import annotations

import sys

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.ingest import diagnose_runs
from analyzer.cli.options import Options, open_existing_db, shared_options
from analyzer.cli.output import echo_json
from analyzer.verdicts import VERDICTS


def resolve_run(database, ref: str) -> int:
    """A run reference on the command line: a number, or ``last``/``-1``."""
    from analyzer.store.queries import last_run_id

    if ref in ("last", "-1"):
        rid = last_run_id(database)
        if rid is None:
            raise CapscanError("no runs stored yet")
        return rid
    from analyzer.store.queries import storable_id

    try:
        rid = int(ref)
    except ValueError:
        raise CapscanError(f"{ref!r} is not a run id (a number, or 'last')") from None
    if not storable_id(rid):
        raise CapscanError(f"no run {rid} (run ids are at most {(1 << 63) - 1})")
    return rid


@click.command()
@click.option("--limit", "-n", default=50, show_default=True, help="How many runs (0 = all).")
@click.option("--verdict", default=None, type=click.Choice(VERDICTS), help="Only runs with this verdict.")
@click.option("--search", default=None, help="Only runs whose device, source, program or model contains this text.")
@shared_options()
def runs(opts: Options, limit: int, verdict: str | None, search: str | None) -> None:
    """List stored runs, newest first."""
    from analyzer.report import console, runs_table
    from analyzer.store.queries import list_runs

    database = open_existing_db(opts)
    rows = list_runs(database, limit=limit or None, verdict=verdict, text=search) if database else []
    if opts.as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo(empty_runs_notice(database, verdict, search), err=True)
        return
    console(sys.stdout).print(runs_table(rows))


def empty_runs_notice(database, verdict: str | None, search: str | None) -> str:
    """Why the list is empty: nothing stored at all, or nothing matching the filter."""
    stored = database.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] if database else 0
    if not stored:
        return "No runs stored yet. Pipe a log in: llama-bench ... 2>&1 | capscan"
    flt = " and ".join(x for x in (verdict and f"--verdict {verdict}", search and f"--search {search!r}") if x)
    return (f"No run matches {flt} ({stored:,} run{'s' if stored != 1 else ''} stored; "
            "`capscan runs` lists them all).")


@click.command()
@click.argument("run_ref", metavar="RUN")
@shared_options()
def show(opts: Options, run_ref: str) -> None:
    """One run: device, capabilities, throughput, findings, evidence lines."""
    from analyzer.report import console, render_run
    from analyzer.runjson import run_to_json

    database = open_existing_db(opts)
    if database is None:
        raise CapscanError("no runs stored yet")
    runs_ = diagnose_runs(database, [resolve_run(database, run_ref)])
    if not runs_:
        raise CapscanError(f"no run {run_ref}")
    if opts.as_json:
        echo_json(run_to_json(runs_[0]))
    else:
        render_run(console(sys.stdout), runs_[0], max_evidence=200)
