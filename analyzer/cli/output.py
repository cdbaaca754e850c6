"""Where output goes and how machine output is written.

stdout carries data (reports, JSON, run ids); notices, warnings and progress go
to stderr. With --tee, stdout carries the input, so the report goes to stderr.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence, TextIO

import click

from analyzer import __version__
from analyzer.cli.exits import CapscanError, FailOn
from analyzer.cli.options import Options, shared_options


def error_line(message: Any) -> None:
    """``capscan: <message>`` on stderr, inert (messages can quote paths and log text)."""
    from analyzer.output.tabular import safe_text

    click.echo(f"capscan: {safe_text(message)}", err=True)


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
    """One stderr line on what an ingest stored (the path made inert: a file name can hold a
    newline, which under GitHub Actions would start a workflow command)."""
    from analyzer.output.tabular import safe_text

    path = safe_text(result.path)
    if getattr(result, "piped", False):
        path = "stdin" if result.duplicate or result.source_id is None else f"stdin ({path})"
    if getattr(result, "export", None):
        click.echo(_import_notice(path, result), err=True)
        return
    if result.duplicate:
        click.echo(f"capscan: {path}: already ingested (source {result.duplicate_of}, "
                   f"{count_runs(result.run_ids)}); use --force to ingest it again", err=True)
        return
    msg = f"capscan: {path}: {count_runs(result.run_ids)}"
    msg += f", {result.lines:,} lines, {result.recognised:,} recognised"
    if result.overlong:
        msg += f", {result.overlong} overlong line(s) skipped"
    if getattr(result, "rejected", 0):
        msg += f", {result.rejected} record(s) skipped (wrong types, impossible values or past a budget)"
    if result.size == 0:
        msg = f"capscan: {path}: empty input, nothing recognised"
    click.echo(msg, err=True)


def _import_notice(path: str, result) -> str:
    """What an import of a capscan export stored (analyzer.ingest.exports)."""
    if result.duplicate:
        return (f"capscan: {path}: a capscan export ({result.export}) already imported (source "
                f"{result.duplicate_of}, {count_runs(result.run_ids)}); nothing added")
    new = count_runs(result.run_ids) if result.imported else "no runs"
    msg = f"capscan: {path}: a capscan export ({result.export}): {new} imported"
    if result.already:
        msg += f", {result.already:,} already stored by an earlier import"
    if result.rejected:
        msg += f", {result.rejected:,} record(s) skipped (not a run capscan can import)"
    if getattr(result, "claims_refused", 0):
        msg += f", {result.claims_refused:,} fixable claim(s) not accepted (their own facts contradict them)"
    if getattr(result, "conflicts", None):
        msg += (f", conflicting with run(s) {', '.join(map(str, result.conflicts[:10]))} (another report of the "
                "same run: both kept and flagged)")
    if getattr(result, "speeds_refused", 0):
        msg += f", {result.speeds_refused:,} implausible speed(s) skipped"
    if getattr(result, "trailing", 0):
        msg += f", {result.trailing:,} character(s) after the export's end ignored"
    return msg


@dataclass
class Result:
    """What a command shows, in every form; write() picks the one asked for.

    doc: the --json document (None: the records as a JSON array, streamed);
    records: --nl objects (default: rows); columns/rows: --csv, --tsv and the
    default --markdown table (rows may be a generator: it is read once);
    human: the default text; markdown: a richer --markdown than the table;
    verdicts: what --fail-on looks at (None: the command has no verdicts; it is
    read after the output is written, so a streaming command may fill it then);
    report_runs: diagnosed runs, for the GitHub Actions summary and annotations;
    exit_code: the status to exit with once everything is written.
    """

    human: Callable[[TextIO], None]
    doc: Any = None
    records: Iterable[Any] | None = None
    columns: Sequence[str] = ()
    rows: Iterable[dict[str, Any]] = ()
    right: Sequence[str] = ()
    markdown: Callable[[TextIO], None] | None = None
    verdicts: list[str] | None = None
    report_runs: list | None = None
    exit_code: int = 0  # after the output: a refusal (2) or an unverified remedy (1) still prints its result


def text(*lines: str) -> Callable[[TextIO], None]:
    """The human form of a Result that is a few lines of text."""
    def human(out: TextIO) -> None:
        for line in lines:
            out.write(line + "\n")

    return human


def write(opts: Options, result: Result) -> None:
    """The one output path: the chosen format on stdout (stderr under --tee), then
    GitHub Actions, then --fail-on."""
    out = data_out(opts)
    fmt = opts.fmt
    if fmt in ("json", "nl", "csv", "tsv", "markdown"):  # (a report for people needs no writer of these)
        from analyzer.output import tabular
    if fmt == "json":
        if result.doc is not None:
            out.write(tabular.dumps(result.doc) + "\n")
        else:
            tabular.write_json_array(out, result.records if result.records is not None else result.rows)
    elif fmt == "nl":
        tabular.write_nl(out, result.records if result.records is not None else result.rows)
    elif fmt in ("csv", "tsv"):
        tabular.write_delimited(out, result.columns, result.rows, tsv=fmt == "tsv")
    elif fmt == "markdown":
        if result.markdown is not None:
            result.markdown(out)
        else:
            tabular.write_markdown(out, result.columns, result.rows, right=result.right)
    else:
        result.human(out)
    out.flush()
    if result.report_runs is not None and opts.gha:
        from analyzer.cli import gha

        runs = result.report_runs
        gha.report(runs, lambda: markdown_report(runs))
    if result.verdicts is not None:
        check_fail_on(opts, result.verdicts)
    if result.exit_code:
        sys.exit(result.exit_code)


def check_fail_on(opts: Options, verdicts: list[str]) -> None:
    """Raise FailOn when a verdict is one of --fail-on's; no run at all counts as unknown."""
    if not opts.fail_on:
        return
    found = [v for v in (verdicts or ["unknown"]) if v in opts.fail_on]
    if found:
        raise FailOn(found)


def output_options(*names: str) -> Callable[[Callable], Callable]:
    """shared_options(*names) for a command that returns a Result: write() prints it."""
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(opts: Options, *args: Any, **kwargs: Any) -> None:
            result = func(opts, *args, **kwargs)
            if result is not None:
                write(opts, result)

        return shared_options(*names)(run)

    return decorate


def verdict_of(run) -> str:
    return run.diagnosis.verdict if run.diagnosis else "unknown"


def _fixable(run) -> bool:
    return bool(run.diagnosis and run.diagnosis.fixable)


REPORT_COLUMNS = ("run", "source", "program", "device", "environment", "host_chip", "verdict", "fixable",
                  "confidence", "test", "tok_s", "baseline_run", "baseline_tok_s", "ratio")


def report_rows(runs: list) -> Iterator[dict[str, Any]]:
    """One row per run and test (a run without throughput: one row, test empty)."""
    for run in runs:
        diag = run.diagnosis
        paired = diag and diag.paired
        base = {t.test: t for t in paired.tests} if paired else {}
        row = {"run": run.id, "source": run.source, "program": run.facts.program, "device": run.facts.device.name,
               "environment": diag and diag.environment, "host_chip": diag and diag.host_chip,
               "verdict": verdict_of(run), "fixable": _fixable(run), "confidence": diag and diag.confidence}
        tests = run.throughput or [None]
        for t in tests:
            b = base.get(t["test"]) if t else None
            yield {**row, "test": t["test"] if t else None, "tok_s": t["tok_s"] if t else None,
                   "baseline_run": paired.run if paired and b else None,
                   "baseline_tok_s": b.baseline_tok_s if b else None, "ratio": b.ratio if b else None}


def report_result(opts: Options, runs: list, *, max_evidence: int = 10, overall: bool = True,
                  doc: Any = None, gha: bool = True) -> Result:
    """A diagnosis report (pipe mode, diagnose, probe; show with doc= one run) in every form."""
    from analyzer.output.runjson import run_to_json
    from analyzer.verdicts import summary_verdict

    verdicts = [verdict_of(r) for r in runs]
    fixable = any(_fixable(r) for r in runs)
    if doc is None:
        doc = {"capscan_version": __version__,
               "summary": {"verdict": summary_verdict(verdicts), "runs": len(runs), "fixable": fixable},
               "runs": [run_to_json(r) for r in runs]}

    def human(out: TextIO) -> None:
        render_report(out, runs, max_evidence=max_evidence, overall=overall)

    def markdown(out: TextIO) -> None:
        out.write(markdown_report(runs))

    return Result(human=human, doc=doc, records=(run_to_json(r) for r in runs), columns=REPORT_COLUMNS,
                  rows=report_rows(runs), right=("run", "tok_s", "baseline_run", "baseline_tok_s", "ratio"),
                  markdown=markdown, verdicts=verdicts, report_runs=runs if gha else None)


def render_report(out: TextIO, runs: list, *, max_evidence: int = 10, overall: bool = True) -> None:
    """The runs' report: plain text where no style would show, else through rich
    (``analyzer.output.styled``)."""
    from analyzer.output import styled
    from analyzer.output.run_report import run_lines
    from analyzer.verdicts import summary_verdict

    lines = styled.StyledLines()
    if not runs:
        lines.add("No runs recognised in this input: verdict unknown. "
                  "(`capscan formats` lists what capscan reads.)")
    for i, run in enumerate(runs):
        if i:
            lines.blank()
        lines.extend(run_lines(run, max_evidence=max_evidence))
    if runs and overall:
        verdicts = [verdict_of(r) for r in runs]
        fixable = any(_fixable(r) for r in runs)
        worst_verdict = summary_verdict(verdicts)
        # where the verdict comes from
        worst = next((r for r, v in zip(runs, verdicts, strict=True) if v == worst_verdict), runs[-1])
        lines.blank()
        lines.add(f"overall: {worst_verdict}" + ("  (fixable)" if fixable else "")
                  + f"   browse: capscan tui --run {worst.id}", style="dim")
    styled.write(lines, out, _report_console)


def _report_console(out: TextIO):
    from analyzer.output.report import console

    return console(out)


def markdown_report(runs: list) -> str:
    """The report as GitHub markdown: a heading, a table of runs and speeds, each run's why and next steps."""
    import io

    from analyzer.output import tabular
    from analyzer.verdicts import summary_verdict

    md = tabular.markdown_cell
    buf = io.StringIO()
    verdict = summary_verdict([verdict_of(r) for r in runs])
    fixable = any(_fixable(r) for r in runs)
    buf.write(f"### capscan: {verdict}{' (fixable)' if fixable else ''}\n\n")
    if not runs:
        buf.write("No runs recognised in this input: verdict unknown.\n")
        return buf.getvalue()
    columns = ("run", "source", "device", "environment", "verdict", "test", "tok_s", "baseline_tok_s", "ratio")
    rows = []
    for r in report_rows(runs):
        r = dict(r)
        if r["ratio"] is not None:
            r["ratio"] = f"{r['ratio']:.1%}"
        rows.append(r)
    tabular.write_markdown(buf, columns, rows, right=("run", "tok_s", "baseline_tok_s", "ratio"))
    for run in runs:
        diag = run.diagnosis
        if diag is None:
            buf.write(f"\n**run {run.id}: {verdict_of(run)}**\n")
            continue
        notes = [n for n in ("fixable" if diag.fixable else None,
                             f"{diag.confidence} confidence" if diag.confidence else None) if n]
        buf.write(f"\n**run {run.id}: {verdict_of(run)}**" + (f" ({', '.join(notes)})" if notes else "")
                  + (f": {md(diag.summary)}" if diag.summary else "") + "\n")
        for step in diag.next_steps:
            buf.write(f"- next: {md(step)}\n")
        for p in diag.prediction:
            buf.write(f"- expected after the remedy: {md(p.test)} ~{p.predicted_tok_s or 0:,.2f} tok/s\n")
    return buf.getvalue()


def emit_report(opts: Options, runs: list) -> None:
    """The diagnosis report of diagnosed runs in the chosen format; raises FailOn for a --fail-on verdict."""
    write(opts, report_result(opts, runs))


def write_atomically(path: str, write_to: Callable[[TextIO], Any], *, prefix: str, suffix: str = "",
                     what: str = "") -> Any:
    """Write a file whole or not at all (analyzer.output.atomic: a temporary file beside it that no planted
    symlink can be, renamed over it, with the mode the user's umask or the replaced file gives); returns what
    ``write_to`` returned. An OS error is a one-line CapscanError ("PATH: cannot write WHAT (why)")."""
    from analyzer.output import atomic

    try:
        return atomic.write_atomically(path, write_to, prefix=prefix, suffix=suffix)
    except OSError as exc:
        raise CapscanError(f"{path}: cannot write{' ' + what if what else ''} ({exc.strerror or exc})") from None
