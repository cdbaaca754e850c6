"""``tui``: the Textual browser (textual is imported only when it starts)."""

from __future__ import annotations

import sys

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options, open_existing_db, shared_options


@click.command()
@click.option("--run", "run_id", type=int, default=None, help="Open this run's detail directly.")
@shared_options("db")
def tui(opts: Options, run_id: int | None) -> None:
    """The Textual browser: runs, why, guest against host."""
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise CapscanError("the TUI needs a terminal (stdin and stdout); use `capscan runs` or `capscan show` in pipes")
    from analyzer.store.paths import resolve_db_path

    # migrate, and fail with a one-line error before the app starts; never create a database
    if open_existing_db(opts) is None:
        raise CapscanError(f"nothing stored yet at {resolve_db_path(opts.db)}; pipe a log in first: "
                           "llama-bench ... 2>&1 | capscan")
    from analyzer.tui.app import run_app  # textual is imported only here

    run_app(resolve_db_path(opts.db), run_id=run_id)
