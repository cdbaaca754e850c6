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


def count_runs(ids: list[int]) -> str:
    """'no runs', '1 run (id 7)', '3 runs (ids 7, 8, 9)', '20,000 runs (ids 1-20000)': a
    notice stays one line however many runs an input holds."""
    if not ids:
        return "no runs"
    if len(ids) == 1:
        return f"1 run (id {ids[0]})"
    if len(ids) <= 5:
        return f"{len(ids)} runs (ids {', '.join(str(i) for i in ids)})"
    lo, hi = min(ids), max(ids)
    span = f"{lo}-{hi}" if hi - lo + 1 == len(ids) else f"{lo} to {hi}"
    return f"{len(ids):,} runs (ids {span})"


def notice(result) -> None:
    """One stderr line on what an ingest stored."""
    if result.duplicate:
        click.echo(f"capscan: {result.path}: already ingested (source {result.duplicate_of}, "
                   f"{count_runs(result.run_ids)}); use --force to ingest it again", err=True)
        return
    msg = f"capscan: {result.path}: {count_runs(result.run_ids)}"
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
            overall = summary_verdict(verdicts)
            worst = next((r for r, v in zip(runs, verdicts) if v == overall), runs[-1])  # where the verdict comes from
            con.print()
            con.print(f"overall: {overall}" + ("  (fixable)" if fixable else "")
                      + f"   browse: capscan tui --run {worst.id}", style="dim")
    found = [v for v in verdicts if v in opts.fail_on]
    if found:
        raise FailOn(found)
