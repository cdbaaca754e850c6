"""The ``capscan`` click group, the pipe mode, and main(): exit codes and a
reader of stdout that goes away.

stdout carries data (reports, JSON, run ids); notices, warnings and progress
go to stderr. Exit codes: 0 ok, 1 a --fail-on verdict was found, 2 usage
error or unreadable input, 130 interrupted, 141 the reader of stdout went away.
"""

from __future__ import annotations

import os
import sys

import click

from analyzer import __version__
from analyzer.cli import compare, db, formats, ingest, probe, remedy, runs, tui
from analyzer.cli.exits import EXIT_BROKEN_PIPE, EXIT_FAIL_ON, EXIT_INTERRUPTED, EXIT_USAGE, FailOn
from analyzer.cli.options import Options, add_shared


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit codes: 0 ok, 1 a --fail-on verdict was found, 2 usage error or unreadable input, "
                    "130 interrupted.")
@add_shared
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
    ingest.pipe_mode(ctx.obj, force=force, keep_raw=keep_raw)


for _command in (ingest.ingest, runs.runs, runs.show, ingest.diagnose, compare.compare, db.db, formats.formats,
                 tui.tui, remedy.remedy, probe.probe):
    cli.add_command(_command)


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
