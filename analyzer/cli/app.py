"""The ``capscan`` click group, the pipe mode, and main(): exit codes and a
reader of stdout that goes away.

stdout carries data (reports, JSON, run ids); notices, warnings and progress
go to stderr. Exit codes: 0 ok, 1 a --fail-on verdict was found, 2 usage
error or unreadable input, 130 interrupted, 141 the reader of stdout went away
(also while an error or usage message is written: never 1).
"""

from __future__ import annotations

import errno
import os
import sys

import click

from analyzer import __version__
from analyzer.cli.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_FAIL_ON,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    FailOn,
)
from analyzer.cli.lazy import LazyGroup
from analyzer.cli.options import BY_NAME, GROUP_OPTIONS, Options, add_shared, given_values

# Each command's module is imported only when that command runs (or --help lists
# them): start-up is the interpreter, click, and the one command.
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("analyzer.cli.ingest", "ingest"), "runs": ("analyzer.cli.runs", "runs"),
    "show": ("analyzer.cli.runs", "show"), "diagnose": ("analyzer.cli.ingest", "diagnose"),
    "compare": ("analyzer.cli.compare", "compare"), "db": ("analyzer.cli.db", "db"),
    "formats": ("analyzer.cli.formats", "formats"), "tui": ("analyzer.cli.tui", "tui"),
    "remedy": ("analyzer.cli.remedy", "remedy"), "probe": ("analyzer.cli.probe", "probe"),
    "sources": ("analyzer.cli.fleet", "sources"), "watch": ("analyzer.cli.fleet", "watch"),
    "export": ("analyzer.cli.fleet", "export"), "schema": ("analyzer.cli.schema", "schema"),
    "report": ("analyzer.cli.report", "report"),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 ok, 1 a --fail-on verdict was found, 2 usage error or unreadable input, "
                    "130 interrupted.")
@add_shared(*GROUP_OPTIONS)
@click.version_option(__version__, prog_name="capscan")
@click.pass_context
def cli(ctx: click.Context, **kwargs) -> None:
    """capscan: why is LLM inference in this VM slow?

    Pipe a llama.cpp log in (``llama-bench ... 2>&1 | capscan``): every run is
    stored and diagnosed, with the evidence lines. With --tee the log passes
    through to stdout as it is read, and the report goes to stderr.

    Examples:

    \b
    $ llama-bench -m model.gguf -o json 2>&1 | capscan
    $ capscan runs
    $ capscan show 1
    $ capscan compare 1 2
    """
    ctx.obj = Options().merged(given_values(ctx, kwargs, GROUP_OPTIONS))
    if ctx.invoked_subcommand is not None:
        _group_flags_fit(ctx, ctx.obj, ctx.invoked_subcommand)
        return
    if sys.stdin is None or sys.stdin.isatty():  # a terminal, or no stdin at all (closed in a CI step)
        click.echo(ctx.get_help())
        return
    from analyzer.cli.ingest import pipe_mode

    pipe_mode(ctx.obj, force=ctx.obj.force, keep_raw=ctx.obj.keep_raw)

def _group_flags_fit(ctx: click.Context, opts: Options, name: str) -> None:
    """`capscan --fail-on X runs` is `capscan runs --fail-on X`; a flag the command has no use for
    is a usage error rather than silently ignored (a gate that cannot fire must not look armed)."""
    command = cli.get_command(ctx, name)
    if command is None:
        return
    takes = {p.name for p in command.params}
    if isinstance(command, click.Group):  # db, remedy: their commands take --json only
        takes = {"as_json", "db"}
    wrong = []
    # every option the group took that this command does not (the store is every command's; --no-gha only silences)
    for spec in (BY_NAME[n] for n in GROUP_OPTIONS if n not in ("db", "gha")):
        if spec.field == "fmt":
            if opts.fmt is not None and f"fmt_{opts.fmt}" not in takes and not (opts.fmt == "json" and "as_json" in takes):
                wrong.append(f"--{opts.fmt}")
        elif getattr(opts, spec.field) and spec.params[0] not in takes:
            wrong.append(spec.flag)
    if wrong:
        raise click.UsageError(f"{', '.join(wrong)} has no meaning for `capscan {name}`")


def main() -> None:
    # The output boundary: nothing capscan prints reaches the terminal with an escape sequence,
    # control or bidi character from a log (rich consoles clean their own output; --tee writes bytes).
    from analyzer.safe_text import SafeTextStream

    if not isinstance(sys.stdout, SafeTextStream):
        sys.stdout = SafeTextStream(sys.stdout)
    if not isinstance(sys.stderr, SafeTextStream):
        sys.stderr = SafeTextStream(sys.stderr)
    try:
        _run()
    except OSError as exc:
        # A reader gone while an error, a usage message or a notice is written
        # (`capscan --fail-on bogus 2>&1 | head -1`): 141 like any other write to it, never 1.
        if exc.errno != errno.EPIPE:
            raise
        _reader_gone()


def _run() -> None:
    """The command, and each way out of it as its exit code (the messages on the way out may
    meet a closed pipe: main() maps that)."""
    try:
        _invoke()
        sys.stdout.flush()  # a reader gone before the last buffered write shows up here, not at exit
    except FailOn:
        sys.exit(EXIT_FAIL_ON)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code if exc.exit_code else EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        # remedy run's interrupt carries its signal (Ctrl-C, SIGTERM, SIGHUP): 128 + its number
        signum = getattr(exc, "signum", None)
        if signum is not None:
            click.echo(f"capscan: interrupted by {exc}; the command was stopped and the record says so", err=True)
            sys.exit(128 + signum)
        click.echo("capscan: interrupted; the source being read was not stored", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except OSError:
        raise  # a reader gone (EPIPE) is main()'s to map to 141; any other OSError is no database error
    except Exception as exc:
        message = _database_error(exc)
        if message is None:
            raise
        _error_line(message)


def _database_error(exc: Exception) -> str | None:
    """The one line for a database that cannot be used (StoreError, or an sqlite3 error
    from a damaged file): looked up in sys.modules, so `--version` imports neither."""
    errors = sys.modules.get("analyzer.store.errors")
    if errors is not None and isinstance(exc, errors.StoreError):
        return str(exc)
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.Error):
        return f"database error ({exc})"
    return None


def _invoke() -> None:
    """Run the click group without click's own handling of EPIPE (which
    exits 1 and depends on click's private classes): a reader of stdout that
    goes away reaches main() as BrokenPipeError, whatever the click version."""
    if any(k.startswith("_CAPSCAN_COMPLETE") for k in os.environ):
        cli.main(prog_name="capscan")  # shell completion: click's own machinery
        return
    with cli.make_context("capscan", sys.argv[1:]) as ctx:
        cli.invoke(ctx)


def _error_line(message: str) -> None:
    click.echo(f"capscan: {' '.join(message.split())}", err=True)
    sys.exit(EXIT_USAGE)


def _reader_gone() -> None:
    """Exit 141 (128 + SIGPIPE), quietly: stdout, and stderr when its reader went away too
    (`2>&1 | head`), point at /dev/null so that the interpreter's final flush neither
    complains about the closed pipe nor turns the exit code into 120."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        try:
            sys.stderr.flush()
        except OSError:
            os.dup2(devnull, sys.stderr.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(EXIT_BROKEN_PIPE)
