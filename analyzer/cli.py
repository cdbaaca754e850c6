"""The ``capscan`` command line (click).

stdout carries data (reports, JSON, run ids); notices, warnings and progress
go to stderr. Exit codes: 0 ok, 1 a --fail-on verdict was found, 2 usage
error or unreadable input, 130 interrupted.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import click

from analyzer import __version__

EXIT_FAIL_ON = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CapscanError(click.ClickException):
    """A one-line error, exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file=None) -> None:
        click.echo(f"capscan: {self.format_message()}", err=True)


class FailOn(Exception):
    def __init__(self, verdicts: list[str]):
        self.verdicts = verdicts


@dataclass
class Options:
    db: str | None = None
    as_json: bool = False
    tee: bool = False
    fail_on: list[str] = field(default_factory=list)

    def merged(self, **kw: Any) -> "Options":
        return Options(
            db=kw.get("db") or self.db,
            as_json=bool(kw.get("as_json")) or self.as_json,
            tee=bool(kw.get("tee")) or self.tee,
            fail_on=_parse_fail_on(kw.get("fail_on")) or self.fail_on,
        )


def _parse_fail_on(value: str | None) -> list[str]:
    if not value:
        return []
    from analyzer.verdicts import VERDICTS

    out = []
    for v in value.split(","):
        v = v.strip()
        if v not in VERDICTS:
            raise click.BadParameter(f"unknown verdict {v!r}; choose from {', '.join(VERDICTS)}", param_hint="--fail-on")
        out.append(v)
    return out


def common_options(func: Callable) -> Callable:
    """--db/--json/--tee/--fail-on on every command, as well as on the group."""

    @click.option("--db", "db", type=click.Path(dir_okay=False), default=None,
                  help="Database file (else $CAPSCAN_DB, else the user data dir).")
    @click.option("--json", "as_json", is_flag=True, default=False, help="Machine-readable output on stdout.")
    @click.option("--tee", is_flag=True, default=False, help="Pass the input through to stdout; report on stderr.")
    @click.option("--fail-on", "fail_on", default=None, metavar="VERDICT[,VERDICT...]",
                  help="Exit 1 when any run has one of these verdicts.")
    @click.pass_context
    @functools.wraps(func)
    def wrapper(ctx: click.Context, db, as_json, tee, fail_on, **kwargs):
        base: Options = ctx.obj or Options()
        ctx.obj = base.merged(db=db, as_json=as_json, tee=tee, fail_on=fail_on)
        return func(ctx.obj, **kwargs)

    return wrapper


def _open_db(opts: Options):
    from analyzer.paths import resolve_db_path
    from analyzer.store.db import StoreError, open_db

    try:
        return open_db(resolve_db_path(opts.db))
    except StoreError as exc:
        raise CapscanError(str(exc)) from None


def _dump_json(obj: Any) -> str:
    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(obj), indent=2, ensure_ascii=False)


def _data_out(opts: Options):
    """Where reports and JSON go: stdout, or stderr when stdout carries --tee'd input."""
    return sys.stderr if opts.tee else sys.stdout


# ---------------------------------------------------------------------------
# ingestion shared by the pipe mode, ``ingest`` and ``diagnose``
# ---------------------------------------------------------------------------


def _progress_for(path: str):
    """A rich progress bar on stderr for large files, only on a terminal."""
    if path == "-" or not sys.stderr.isatty():
        return None
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    if size < (64 << 20):
        return None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    # The finished bar stays on screen (size and speed are worth seeing); stdout is untouched.
    progress = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                        TransferSpeedColumn(), console=Console(file=sys.stderr))
    return progress, size


def ingest_paths(db, paths: list[str], *, force: bool, keep_raw: bool, tee: bool) -> tuple[list, list[str]]:
    """Ingest each path in its own transaction. Returns (results, errors);
    a bad input does not stop the others or undo what they stored."""
    from analyzer.ingest import ingest
    from analyzer.reader import InputError, open_input

    results, errors = [], []
    for path in paths:
        try:
            source = open_input(path, keep_raw=keep_raw)
        except InputError as exc:
            errors.append(str(exc))
            click.echo(f"capscan: {exc}", err=True)
            continue
        bar = _progress_for(path)
        try:
            tee_stream = sys.stdout.buffer if tee else None
            if bar:
                progress, size = bar
                with progress:
                    task = progress.add_task(os.path.basename(path), total=size)
                    result = ingest(db, source, force=force, keep_raw=keep_raw, tee=tee_stream,
                                    progress=lambda n: progress.advance(task, n))
            else:
                result = ingest(db, source, force=force, keep_raw=keep_raw, tee=tee_stream)
        except InputError as exc:
            errors.append(str(exc))
            click.echo(f"capscan: {exc}", err=True)
            salvaged = getattr(exc, "result", None)  # a truncated gzip: the lines before the damage were stored
            if salvaged is not None:
                results.append(salvaged)
                _notice(salvaged)
            continue
        finally:
            source.close()
        results.append(result)
        _notice(result)
    return results, errors


def _notice(result) -> None:
    ids = ", ".join(str(i) for i in result.run_ids)
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


def diagnose_runs(db, run_ids: list[int]) -> list:
    """Diagnose the runs (rules) and keep the diagnosis in the store."""
    from analyzer.diagnose import diagnose_runs as run_rules

    return run_rules(db, run_ids, refresh_peers=True)


def emit_report(opts: Options, runs: list, *, header: str | None = None) -> None:
    from analyzer.report import console, render_run
    from analyzer.runjson import run_to_json
    from analyzer.verdicts import summary_verdict

    out = _data_out(opts)
    verdicts = [(r.diagnosis or {}).get("verdict", "unknown") for r in runs]
    fixable = any((r.diagnosis or {}).get("fixable") for r in runs)
    if opts.as_json:
        doc = {"capscan_version": __version__,
               "summary": {"verdict": summary_verdict(verdicts), "runs": len(runs), "fixable": fixable},
               "runs": [run_to_json(r) for r in runs]}
        out.write(_dump_json(doc) + "\n")
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


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 ok, 1 a --fail-on verdict was found, 2 usage error or unreadable input, "
                    "130 interrupted.")
@click.option("--db", "db", type=click.Path(dir_okay=False), default=None,
              help="Database file (else $CAPSCAN_DB, else the user data dir).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.option("--tee", is_flag=True, help="Pipe mode: pass the input through to stdout, report on stderr.")
@click.option("--fail-on", "fail_on", default=None, metavar="VERDICT[,VERDICT...]",
              help="Exit 1 when any run has one of these verdicts.")
@click.option("--force", is_flag=True, help="Pipe mode: store the input even if the same content was stored before.")
@click.option("--keep-raw", is_flag=True, help="Also store the raw log (gzip) with the facts.")
@click.version_option(__version__, prog_name="capscan")
@click.pass_context
def cli(ctx: click.Context, db, as_json, tee, fail_on, force, keep_raw) -> None:
    """capscan: why is LLM inference in this VM slow?

    Pipe a llama.cpp log in (``llama-bench ... 2>&1 | capscan``): every run is
    stored and diagnosed, with the evidence lines.
    """
    ctx.obj = Options().merged(db=db, as_json=as_json, tee=tee, fail_on=fail_on)
    if ctx.invoked_subcommand is not None:
        return
    if sys.stdin.isatty():
        click.echo(ctx.get_help())
        return
    opts: Options = ctx.obj
    database = _open_db(opts)
    results, errors = ingest_paths(database, ["-"], force=force, keep_raw=keep_raw, tee=opts.tee)
    if errors and not results:
        sys.exit(EXIT_USAGE)  # the one-line reason was printed by ingest_paths
    run_ids = [rid for r in results for rid in r.run_ids]
    emit_report(opts, diagnose_runs(database, run_ids))
    if errors:
        sys.exit(EXIT_USAGE)  # what could be read was stored and reported


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--force", is_flag=True, help="Store again even if the same content was stored before.")
@click.option("--keep-raw", is_flag=True, help="Also store the raw log (gzip); logs can hold prompts and answers.")
@common_options
def ingest(opts: Options, paths: tuple[str, ...], force: bool, keep_raw: bool) -> None:
    """Store the runs found in files (or - for stdin); prints the new run ids."""
    database = _open_db(opts)
    results, errors = ingest_paths(database, list(paths), force=force, keep_raw=keep_raw, tee=False)
    diagnose_runs(database, [rid for r in results if not r.duplicate for rid in r.run_ids])
    if opts.as_json:
        click.echo(_dump_json([{
            "path": r.path, "source_id": r.source_id, "run_ids": r.run_ids, "duplicate_of": r.duplicate_of,
            "lines": r.lines, "recognised_lines": r.recognised, "overlong_lines": r.overlong, "size": r.size,
        } for r in results]))
    else:
        for r in results:
            if not r.duplicate:
                for rid in r.run_ids:
                    click.echo(rid)
    if errors:
        sys.exit(EXIT_USAGE)


@cli.command()
@click.option("--limit", "-n", default=50, show_default=True, help="How many runs (0 = all).")
@click.option("--verdict", default=None, help="Only runs with this verdict.")
@click.option("--search", default=None, help="Only runs whose device, source, program or model contains this text.")
@common_options
def runs(opts: Options, limit: int, verdict: str | None, search: str | None) -> None:
    """List stored runs, newest first."""
    from analyzer.report import console, runs_table
    from analyzer.store.queries import list_runs

    database = _open_db(opts)
    rows = list_runs(database, limit=limit or None, verdict=verdict, text=search)
    if opts.as_json:
        click.echo(_dump_json(rows))
        return
    if not rows:
        click.echo("No runs stored yet. Pipe a log in: llama-bench ... 2>&1 | capscan", err=True)
        return
    console(sys.stdout).print(runs_table(rows))


def _resolve_run(database, ref: str) -> int:
    from analyzer.store.queries import last_run_id

    if ref in ("last", "-1"):
        rid = last_run_id(database)
        if rid is None:
            raise CapscanError("no runs stored yet")
        return rid
    try:
        return int(ref)
    except ValueError:
        raise CapscanError(f"{ref!r} is not a run id (a number, or 'last')") from None


@cli.command()
@click.argument("run_ref", metavar="RUN")
@common_options
def show(opts: Options, run_ref: str) -> None:
    """One run: device, capabilities, throughput, findings, evidence lines."""
    from analyzer.report import console, render_run
    from analyzer.runjson import run_to_json

    database = _open_db(opts)
    runs_ = diagnose_runs(database, [_resolve_run(database, run_ref)])
    if not runs_:
        raise CapscanError(f"no run {run_ref}")
    if opts.as_json:
        click.echo(_dump_json(run_to_json(runs_[0])))
    else:
        render_run(console(sys.stdout), runs_[0], max_evidence=200)


@cli.command()
@click.argument("paths", nargs=-1)
@click.option("--run", "run_ids", type=int, multiple=True, help="Diagnose this stored run (repeatable).")
@click.option("--last", is_flag=True, help="Diagnose the runs of the most recently stored source.")
@click.option("--force", is_flag=True, help="Store the inputs again even if their content was stored before.")
@click.option("--keep-raw", is_flag=True, help="Also store the raw logs (gzip).")
@common_options
def diagnose(opts: Options, paths: tuple[str, ...], run_ids: tuple[int, ...], last: bool, force: bool,
             keep_raw: bool) -> None:
    """Diagnose stored runs, or ingest the inputs first and diagnose them."""
    database = _open_db(opts)
    ids: list[int] = list(run_ids)
    if last:
        row = database.conn.execute(
            "SELECT source_id FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            raise CapscanError("no runs stored yet")
        ids += [r[0] for r in database.conn.execute("SELECT id FROM runs WHERE source_id = ? ORDER BY id", row)]
    if not paths and not ids:
        if sys.stdin.isatty():
            raise click.UsageError("give files, -, --run ID or --last (or pipe a log in)")
        paths = ("-",)
    if paths:
        results, errors = ingest_paths(database, list(paths), force=force, keep_raw=keep_raw, tee=opts.tee)
        if errors and not results and not ids:
            sys.exit(EXIT_USAGE)
        ids += [rid for r in results for rid in r.run_ids]
    else:
        errors = []
        missing = [i for i in ids if database.conn.execute("SELECT 1 FROM runs WHERE id = ?", (i,)).fetchone() is None]
        if missing:
            raise CapscanError("no run " + ", ".join(str(i) for i in missing))
    emit_report(opts, diagnose_runs(database, list(dict.fromkeys(ids))))
    if errors:
        sys.exit(EXIT_USAGE)


@cli.command()
@click.argument("run_refs", metavar="RUN_A RUN_B [RUN_C]", nargs=-1, required=True)
@common_options
def compare(opts: Options, run_refs: tuple[str, ...]) -> None:
    """Capability diff, throughput ratios (B/A) and per-token cost of two runs;
    with three runs of one model (stock guest, remedied guest, host), the gap
    decomposition."""
    from analyzer.compare import assign_roles, compare_runs, decompose
    from analyzer.report import console, render_compare

    if len(run_refs) not in (2, 3):
        raise click.UsageError("compare takes two runs (or three: stock guest, remedied guest, host)")
    database = _open_db(opts)
    ids = [_resolve_run(database, r) for r in run_refs]
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
        click.echo(_dump_json(doc))
    else:
        render_compare(console(sys.stdout), doc)


@cli.group()
def db() -> None:
    """Where the database is, and what it holds."""


@db.command("path")
@common_options
def db_path(opts: Options) -> None:
    """Print the database path."""
    from analyzer.paths import resolve_db_path

    click.echo(str(resolve_db_path(opts.db)))


@db.command("stats")
@common_options
def db_stats(opts: Options) -> None:
    """Sources, runs, rows and verdicts stored."""
    from analyzer.paths import resolve_db_path
    from analyzer.store.queries import stats

    database = _open_db(opts)
    s = stats(database, resolve_db_path(opts.db))
    if opts.as_json:
        click.echo(_dump_json(s))
        return
    for key, value in s.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        elif isinstance(value, list):
            value = ", ".join(value)
        click.echo(f"{key:<18} {value}")


@cli.command()
@common_options
def formats(opts: Options) -> None:
    """Every input format recognised, with a sample line each."""
    from analyzer.parsers import FORMATS

    if opts.as_json:
        click.echo(_dump_json([{"name": f.name, "description": f.description, "literals": list(f.literals),
                                "samples": [s.line for s in f.samples]} for f in FORMATS]))
        return
    for f in FORMATS:
        click.echo(f"{f.name}: {f.description}")
        click.echo(f"  prefilter: {', '.join(repr(l) for l in f.literals)}")
        for s in f.samples:
            click.echo(f"  {s.kind:<22} {s.line[:150]}")
        click.echo()


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away (`capscan ... | head`)


def main() -> None:
    try:
        try:
            cli.main(standalone_mode=False, prog_name="capscan")
        except SystemExit as exc:
            # click turns EPIPE into exit 1, which would read as "a --fail-on verdict was found"
            if exc.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
                sys.exit(EXIT_BROKEN_PIPE)
            raise
    except FailOn:
        sys.exit(EXIT_FAIL_ON)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code if exc.exit_code else EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("capscan: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("capscan: interrupted; the source being read was not stored", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        sys.exit(EXIT_BROKEN_PIPE)


@cli.command()
@click.option("--run", "run_id", type=int, default=None, help="Open this run's detail directly.")
@common_options
def tui(opts: Options, run_id: int | None) -> None:
    """The Textual browser: runs, why, guest against host."""
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        raise CapscanError("the TUI needs a terminal (stdin and stdout); use `capscan runs` or `capscan show` in pipes")
    from analyzer.paths import resolve_db_path

    _open_db(opts)  # create/migrate, and fail with a one-line error before the app starts
    from analyzer.tui.app import run_app  # textual is imported only here

    run_app(resolve_db_path(opts.db), run_id=run_id)


from analyzer.remedy.commands import probe as _probe, remedy as _remedy  # noqa: E402

cli.add_command(_remedy)
cli.add_command(_probe)
