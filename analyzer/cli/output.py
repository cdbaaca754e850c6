"""Where output goes and how machine output is written.

stdout carries data (reports, JSON, run ids); notices, warnings and progress go
to stderr. With --tee, stdout carries the input, so the report goes to stderr.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from analyzer import __version__
from analyzer.cli.exits import FailOn
from analyzer.cli.options import Options


def dump_json(obj: Any) -> str:
    """Indented JSON; NaN and infinities (which JSON has not) become null."""
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(obj), indent=2, ensure_ascii=False)


def echo_json(obj: Any) -> None:
    click.echo(dump_json(obj))


def data_out(opts: Options):
    """Where reports and JSON go: stdout, or stderr when stdout carries --tee'd input."""
    return sys.stderr if opts.tee else sys.stdout


def id_list(ids: list[int], most: int = 20) -> str:
    """Run ids for a notice line; an input of 60,000 runs is not one line of 60,000 numbers."""
    if len(ids) <= most:
        return ", ".join(str(i) for i in ids)
    return ", ".join(str(i) for i in ids[: most - 2]) + f", ... ({len(ids) - most + 1:,} more), {ids[-1]}"


def notice(result) -> None:
    """One stderr line on what an ingest stored."""
    ids = id_list(result.run_ids)
    if result.duplicate:
        click.echo(f"capscan: {result.path}: already ingested (source {result.duplicate_of}"
                   f"{', runs ' + ids if ids else ', no runs'}); use --force to ingest it again", err=True)
        return
    msg = f"capscan: {result.path}: {len(result.run_ids)} run(s)" + (f" ({ids})" if ids else "")
    msg += f", {result.lines:,} lines, {result.recognised:,} recognised"
    if result.overlong:
        msg += f", {result.overlong} overlong line(s) skipped"
    if result.size == 0:
        msg = f"capscan: {result.path}: empty input, nothing recognised"
    click.echo(msg, err=True)


def emit_report(opts: Options, runs: list, *, header: str | None = None) -> None:
    """The diagnosis report (or its JSON) of diagnosed runs; raises FailOn for a --fail-on verdict."""
    from analyzer.report import console, render_run
    from analyzer.runjson import run_to_json
    from analyzer.verdicts import summary_verdict

    out = data_out(opts)
    verdicts = [(r.diagnosis or {}).get("verdict", "unknown") for r in runs]
    fixable = any((r.diagnosis or {}).get("fixable") for r in runs)
    if opts.as_json:
        doc = {"capscan_version": __version__,
               "summary": {"verdict": summary_verdict(verdicts), "runs": len(runs), "fixable": fixable},
               "runs": [run_to_json(r) for r in runs]}
        out.write(dump_json(doc) + "\n")
    else:
        con = console(out)
        if not runs:
            con.print("No runs recognised in this input: verdict unknown. "
                      "(`capscan formats` lists what capscan reads.)")
        for i, run in enumerate(runs):
            if i:
                con.print()
            render_run(con, run)
        if runs:
            con.print()
            con.print(f"overall: {summary_verdict(verdicts)}" + ("  (fixable)" if fixable else "")
                      + f"   browse: capscan tui --run {runs[-1].id}", style="dim")
    found = [v for v in verdicts if v in opts.fail_on]
    if found:
        raise FailOn(found)
