"""``compare``: two runs side by side, or the gap decomposition of three."""

from __future__ import annotations

import sys

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.ingest import diagnose_runs
from analyzer.cli.options import Options, open_existing_db, shared_options
from analyzer.cli.output import echo_json
from analyzer.cli.runs import resolve_run


@click.command()
@click.argument("run_refs", metavar="RUN_A RUN_B [RUN_C]", nargs=-1, required=True)
@shared_options()
def compare(opts: Options, run_refs: tuple[str, ...]) -> None:
    """Capability diff, throughput ratios (B/A) and per-token cost of two runs;
    with three runs of one model (stock guest, remedied guest, host), the gap
    decomposition."""
    from analyzer.compare import assign_roles, compare_runs, decompose
    from analyzer.report import console, render_compare

    if len(run_refs) not in (2, 3):
        raise click.UsageError("compare takes two runs (or three: stock guest, remedied guest, host)")
    database = open_existing_db(opts)
    if database is None:
        raise CapscanError("no runs stored yet")
    ids = [resolve_run(database, r) for r in run_refs]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise click.UsageError(f"run {twice} is given twice; compare takes different runs")
    runs_ = diagnose_runs(database, ids)
    if len(runs_) != len(ids):
        found = {r.id for r in runs_}
        raise CapscanError("no run " + ", ".join(str(i) for i in ids if i not in found))
    doc: dict = {"pairs": []}
    if len(runs_) == 2:
        doc["pairs"].append(compare_runs(runs_[0], runs_[1]))
    else:
        roles = assign_roles(runs_)
        if roles is None:
            raise CapscanError("three runs need one bare-metal host and two guests of the same model "
                               "(see their environments with `capscan show`)")
        stock, remedied, host = roles
        doc["pairs"] = [compare_runs(host, stock), compare_runs(host, remedied)]
        doc["decomposition"] = decompose(stock, remedied, host)
    if opts.as_json:
        echo_json(doc)
    else:
        render_compare(console(sys.stdout), doc)
