"""``report``: one self-contained HTML page for the runs given (verdict, proof, evidence, chart)."""

from __future__ import annotations

from typing import Any

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options, no_runs_stored, open_existing_db, shared_options
from analyzer.cli.output import write_atomically
from analyzer.cli.runs import resolve_run


@click.command()
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="The page to write: inline CSS and SVG, no script, nothing it loads (attach it to an issue). "
                   "Default: capscan-report-RUNS.html in the current folder (capscan-report-1-2-3.html).")
@shared_options("db")
def report(opts: Options, run_refs: tuple[str, ...], html_path: str | None) -> None:
    """Write one HTML page for the runs: per run the verdict, its proof and evidence lines; for two runs
    (or stock guest, remedied guest and host) the chart `capscan compare` draws.

    Examples:

    \b
    $ capscan report 1 2 3                       # writes capscan-report-1-2-3.html
    $ capscan report 1 2 --html issue-41.html"""
    from analyzer import __version__
    from analyzer.output.html_report import html_page
    from analyzer.pipeline import diagnose_to_read
    from analyzer.rules.compare import assign_roles, compare_runs, decompose
    from analyzer.store.queries import load_run

    database = open_existing_db(opts)
    if database is None:
        raise no_runs_stored(opts)
    ids = list(dict.fromkeys(resolve_run(database, r) for r in run_refs))
    loaded = {rid: load_run(database, rid) for rid in ids}
    missing = [str(rid) for rid, run in loaded.items() if run is None]
    if missing:
        raise CapscanError("no run " + ", ".join(missing))
    # diagnosed in memory with their peers, as `show` does: writing a page changes nothing stored
    runs_ = [diagnose_to_read(database, run) for run in loaded.values() if run is not None]
    doc: dict[str, Any] | None = None
    if len(runs_) == 2:
        doc = {"pairs": [compare_runs(runs_[0], runs_[1])]}
    elif len(runs_) == 3 and (roles := assign_roles(runs_)) is not None:
        doc = {"pairs": [], "decomposition": decompose(*roles)}
    page = html_page(runs_, doc, version=__version__)
    if html_path is None:  # a page is what the command is for: a name from its runs rather than an error
        html_path = "capscan-report-" + "-".join(str(r.id) for r in runs_) + ".html"
    write_atomically(html_path, lambda fh: fh.write(page), prefix=".capscan-report-", suffix=".html", what="the page")
    click.echo(f"capscan: wrote {html_path} ({len(runs_)} run(s), {len(page):,} bytes)", err=True)
