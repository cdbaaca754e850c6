"""Reading logs in: the pipe mode (bare ``capscan`` on a pipe), ``ingest`` and ``diagnose``."""

from __future__ import annotations

import os
import sys
from functools import partial

import click

from analyzer.cli.exits import EXIT_USAGE, CapscanError
from analyzer.cli.options import Options, no_runs_stored, open_db, open_existing_db
from analyzer.cli.output import (
    Result,
    error_line,
    notice,
    output_options,
    report_result,
    verdict_of,
    write,
)
from analyzer.pipeline import diagnose_and_store


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
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    # The finished bar stays on screen (size and speed are worth seeing); stdout is untouched.
    from analyzer.output.safe_console import SafeConsole
    from analyzer.safe_text import unfiltered

    # The description is a file name: never markup (SafeConsole), and its cursor codes must survive (unfiltered).
    progress = Progress("{task.description}", BarColumn(), DownloadColumn(),
                        TransferSpeedColumn(), console=SafeConsole(file=unfiltered(sys.stderr)))
    return progress, size


class StdinStatus:
    """One line on a terminal's stderr while stdin is read (`llama-bench ... 2>&1 | capscan` can take minutes):
    the lines and runs so far and the first run's verdict, redrawn in place and erased before any output."""

    def __init__(self, db, stream):
        self.db, self.stream = db, stream
        self.shown = ""
        self.first: str | None = None  # the first run's verdict, decided once when it is complete

    def __call__(self, lines: int, runs: dict[int, None]) -> None:
        import shutil

        if runs and self.first is None:
            self.first = self._verdict(next(iter(runs)))
        text = (f"capscan: reading stdin: {lines:,} line{'s' if lines != 1 else ''}, "
                f"{len(runs):,} run{'s' if len(runs) != 1 else ''}" + (f", first {self.first}" if self.first else ""))
        text = text[:max(shutil.get_terminal_size().columns - 1, 20)]  # one row: \r and erase cannot reach a wrap
        if text != self.shown:
            self.stream.write("\r\x1b[K" + text)
            self.stream.flush()
            self.shown = text

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = ""

    def _verdict(self, run_id: int) -> str:
        """The first run's verdict as `show` would decide it now (in memory: nothing is written)."""
        from analyzer.pipeline import diagnose_to_read
        from analyzer.store.queries import load_run

        try:
            run = load_run(self.db, run_id)
            diag = diagnose_to_read(self.db, run).diagnosis if run is not None else None
        except Exception:  # noqa: BLE001 - a courtesy line: never the reason an ingest fails
            return ""
        if diag is None:
            return ""
        return diag.verdict + (" (fixable)" if diag.fixable else "")


def _stdin_status(db, path: str, tee: bool) -> StdinStatus | None:
    """Only for stdin, only on a terminal, and not under --tee (the log itself is on screen then)."""
    if path != "-" or tee or not sys.stderr.isatty():
        return None
    from analyzer.safe_text import unfiltered

    return StdinStatus(db, unfiltered(sys.stderr))  # (its erase code must reach the terminal)


def start_tee(opts: Options, paths: list[str] | tuple[str, ...], *, keep_raw: bool) -> dict:
    """--tee with stdin: start passing it through now, before anything slow (imports, opening
    the store, waiting for its lock) happens; ingest_paths reads it later."""
    if not opts.tee or "-" not in paths:
        return {}
    from analyzer.read.reader import open_input

    return {"-": open_input("-", keep_raw=keep_raw, tee=sys.stdout.buffer, name=opts.name)}


def name_fits(opts: Options, paths: list[str] | tuple[str, ...]) -> None:
    """--name names piped input; files are stored under their own paths."""
    if opts.name is not None and "-" not in paths:
        raise click.UsageError("--name names piped input (stdin, -); files are stored under their paths")
    if opts.name is not None and not opts.name.strip():
        raise click.UsageError("--name is empty")


def ingest_paths(db, paths: list[str], *, force: bool, keep_raw: bool, tee: bool,
                 opened: dict | None = None, name: str | None = None) -> tuple[list, list[str]]:
    """Ingest each path in its own transaction. Returns (results, errors);
    a bad input does not stop the others or undo what they stored.
    ``opened``: inputs already open (stdin under --tee, already passing through); ``name``: what stdin
    is stored as (--name)."""
    from analyzer.pipeline import store_input
    from analyzer.read.reader import InputError, open_input

    opened = dict(opened or {})
    results, errors = [], []
    for path in paths:
        try:
            source = opened.pop(path) if path in opened else open_input(
                path, keep_raw=keep_raw, name=name)
        except InputError as exc:
            errors.append(str(exc))
            error_line(exc)
            continue
        bar = _progress_for(path)
        status = _stdin_status(db, path, tee)
        try:
            tee_stream = sys.stdout.buffer if tee and path != "-" else None  # stdin: tee'd as it arrives
            if bar:
                progress, size = bar
                with progress:
                    task = progress.add_task(os.path.basename(path), total=size)
                    result = store_input(db, source, force=force, keep_raw=keep_raw, tee=tee_stream,
                                         progress=partial(progress.advance, task))
            else:
                try:
                    result = store_input(db, source, force=force, keep_raw=keep_raw, tee=tee_stream, status=status)
                finally:  # erased before anything else is written: the notice, an error, the report
                    if status is not None:
                        status.clear()
        except InputError as exc:
            errors.append(str(exc))
            error_line(exc)
            salvaged = getattr(exc, "result", None)  # a truncated gzip: the lines before the damage were stored
            if salvaged is not None:
                results.append(salvaged)
                notice(salvaged)
            continue
        finally:
            source.close()
        results.append(result)
        notice(result)
    return results, errors


def stdin_is_empty() -> bool:
    """True when stdin is closed or at its end; waits for the first byte of a pipe
    (the bytes peeked stay in the buffer for the reader)."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return True
    try:
        return not buffer.peek(1)
    except (AttributeError, OSError, ValueError):
        return False


def pipe_mode(opts: Options, *, force: bool, keep_raw: bool) -> None:
    """Bare ``capscan`` with stdin not a terminal: ingest stdin, store it, print the report."""
    name_fits(opts, ["-"])
    if not opts.tee and stdin_is_empty():
        # `capscan < /dev/null`, a benchmark that printed nothing: not an input, so no empty source is stored;
        # one line says so, and the machine formats and --fail-on (unknown) still answer. (Not under --tee:
        # its passthrough reads the descriptor itself, and a peeked byte would sit in Python's buffer.)
        import dataclasses

        click.echo("capscan: stdin is empty: nothing stored (pipe a log in: llama-bench ... 2>&1 | capscan)",
                   err=True)
        result = report_result(opts, [])
        write(opts, result if opts.fmt else dataclasses.replace(result, human=lambda out: None))
        return
    opened = start_tee(opts, ["-"], keep_raw=keep_raw)
    database = open_db(opts)
    results, errors = ingest_paths(database, ["-"], force=force, keep_raw=keep_raw, tee=opts.tee, opened=opened,
                                   name=opts.name)
    if errors and not results:
        sys.exit(EXIT_USAGE)  # the one-line reason was printed by ingest_paths
    run_ids = [rid for r in results for rid in r.run_ids]
    write(opts, report_result(opts, diagnose_and_store(database, run_ids, refresh_peers=True)))
    if errors:
        sys.exit(EXIT_USAGE)  # what could be read was stored and reported


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--discover", is_flag=True,
              help="Also store the runtime logs found on this machine (see `capscan sources`), through "
                   "watch's cursors: only what is new.")
@output_options("db", "json", "tee", "fail_on", "force", "keep_raw", "name")
def ingest(opts: Options, paths: tuple[str, ...], discover: bool) -> Result | None:
    """Store the runs found in files (or - for stdin); prints the new run ids.

    Each new run's verdict goes to stderr (one line per run, up to 20). With
    --tee, stdin passes through to stdout line by line as it is read, and the
    run ids go to stderr.

    Examples:

    \b
    $ capscan ingest guest.log host.log
    $ capscan ingest ~/.ollama/logs/server.log
    $ llama-bench -m model.gguf -o json 2>&1 | capscan ingest -"""
    if not paths and not discover:
        raise click.UsageError("give files (or - for stdin), or --discover")
    if discover and not paths and opts.fail_on:
        raise click.UsageError("--fail-on gates the files given here; --discover alone has none (use `capscan "
                               "runs --fail-on` after it)")
    name_fits(opts, paths)
    force, keep_raw = opts.force, opts.keep_raw
    opened = start_tee(opts, paths, keep_raw=keep_raw)
    if discover:
        from analyzer.cli.fleet import ingest_discovered

        ingest_discovered(opts)  # through watch's cursors: a growing log is never stored twice
        if not paths:
            return None
    database = open_db(opts)
    results, errors = ingest_paths(database, list(paths), force=force, keep_raw=keep_raw, tee=opts.tee,
                                   opened=opened, name=opts.name)
    # the runs are kept for a --fail-on gate and for the verdict lines of a few runs: 60,000 runs are
    # diagnosed in bounded memory otherwise
    new = [rid for r in results if not r.duplicate for rid in r.run_ids]
    runs_ = diagnose_and_store(database, new, refresh_peers=True,
                               keep=bool(opts.fail_on) or len(new) <= VERDICT_LINES)
    verdict_lines(new, runs_)
    # an import that contradicts a report stored before flags that one too (analyzer.rules.origin)
    diagnose_and_store(database, [rid for r in results for rid in getattr(r, "conflicts", [])], refresh_peers=True,
                       keep=False)
    if opts.fail_on:  # the gate also sees runs stored by an earlier ingest of the same content
        runs_ += diagnose_and_store(database, [rid for r in results if r.duplicate for rid in r.run_ids],
                                    refresh_peers=True)

    def human(out) -> None:
        for r in results:
            if not r.duplicate:
                for rid in r.run_ids:
                    out.write(f"{rid}\n")

    if errors:
        write(opts, Result(human=human, doc=_ingest_doc(results)))
        sys.exit(EXIT_USAGE)
    return Result(human=human, doc=_ingest_doc(results), verdicts=[verdict_of(r) for r in runs_])


# at most this many runs get a verdict line on stderr (more: the notice's count, and `capscan runs`)
VERDICT_LINES = 20


def verdict_lines(new: list[int], runs_: list) -> None:
    """Each new run's verdict on stderr, beside its id on stdout (which scripts read): what the ingest found
    without a second command (issue 41)."""
    if len(new) > VERDICT_LINES:
        return  # the notice already counts them; `capscan runs` lists their verdicts
    by_id = {r.id: r for r in runs_}
    for rid in new:
        run = by_id.get(rid)
        if run is not None:
            fixable = " (fixable)" if run.diagnosis and run.diagnosis.fixable else ""
            click.echo(f"capscan: run {rid}: {verdict_of(run)}{fixable}; `capscan show {rid}` says why", err=True)


def _ingest_doc(results: list) -> list[dict]:
    return [{"path": r.path, "source_id": r.source_id, "run_ids": r.run_ids, "duplicate_of": r.duplicate_of,
             "lines": r.lines, "recognised_lines": r.recognised, "overlong_lines": r.overlong, "size": r.size,
             "malformed_records": r.rejected}
            for r in results]


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--run", "run_ids", type=int, multiple=True, help="Diagnose this stored run (repeatable).")
@click.option("--last", is_flag=True, help="Diagnose the runs of the most recently stored source.")
@output_options("db", "formats", "tee", "fail_on", "gha", "force", "keep_raw", "name")
def diagnose(opts: Options, paths: tuple[str, ...], run_ids: tuple[int, ...], last: bool) -> None:
    """Diagnose stored runs, or ingest the inputs first and diagnose them."""
    from analyzer.store.queries import run_exists, runs_of_last_source

    if not paths and not run_ids and not last:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give files, -, --run ID or --last (or pipe a log in)")
        if stdin_is_empty():  # a CI step, `< /dev/null`: not an input, so no empty <stdin> source is stored
            raise click.UsageError("stdin is empty: give files, -, --run ID or --last (or pipe a log in)")
        paths = ("-",)
    if paths or opts.name is not None:
        name_fits(opts, paths)
    force, keep_raw = opts.force, opts.keep_raw
    # only stored runs to diagnose (--run, --last): a missing database is not created (a mistyped --db is an error)
    database = open_db(opts) if paths else open_existing_db(opts)
    if database is None:
        raise no_runs_stored(opts, database)
    ids: list[int] = list(run_ids)
    if last:
        last_ids = runs_of_last_source(database)
        if last_ids is None:
            raise no_runs_stored(opts, database)
        ids += last_ids
    if paths:
        opened = start_tee(opts, paths, keep_raw=keep_raw)
        results, errors = ingest_paths(database, list(paths), force=force, keep_raw=keep_raw, tee=opts.tee,
                                       opened=opened, name=opts.name)
        if errors and not results and not ids:
            sys.exit(EXIT_USAGE)
        ids += [rid for r in results for rid in r.run_ids]
    else:
        errors = []
        missing = [i for i in ids if not run_exists(database, i)]
        if missing:
            raise CapscanError("no run " + ", ".join(str(i) for i in missing))
    write(opts, report_result(opts, diagnose_and_store(database, list(dict.fromkeys(ids)), refresh_peers=True)))
    if errors:
        sys.exit(EXIT_USAGE)
