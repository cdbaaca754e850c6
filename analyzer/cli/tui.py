"""``tui``: the Textual browser (textual is imported only when it starts)."""

from __future__ import annotations

import sys

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options, open_db, shared_options


@click.command()
@click.option("--run", "run_id", type=int, default=None, help="Open this run's detail directly.")
@shared_options()
def tui(opts: Options, run_id: int | None) -> None:
    """The Textual browser: runs, why, guest against host."""
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise CapscanError("the TUI needs a terminal (stdin and stdout); use `capscan runs` or `capscan show` in pipes")
    from analyzer.paths import resolve_db_path

    open_db(opts)  # create/migrate, and fail with a one-line error before the app starts
    from analyzer.tui.app import run_app  # textual is imported only here

    run_app(resolve_db_path(opts.db), run_id=run_id)
