"""The ``capscan`` command line (click): one module per command group.

app (the group, pipe mode, main and exit codes), exits (exit codes and the
errors that carry them), options (the shared options, declared once), output
(where output goes, JSON, the report), ingest (pipe mode, ingest, diagnose),
runs (runs, show), compare, db, formats, tui, remedy, probe, via (running the
same command inside a guest).

Nothing below the CLI imports this package. ``capscan --version`` alone is
answered here, before click is imported (start-up: the interpreter and
``analyzer.__version__``); everything else goes through the click group.
"""

from __future__ import annotations

import os
import sys

__all__ = ["cli", "main"]

# What click's version_option prints for the group (tests/cli/test_import_hygiene.py compares the two).
VERSION_LINE = "capscan, version {version}\n"


def main() -> None:
    if sys.argv[1:] == ["--version"] and not any(k.startswith("_CAPSCAN_COMPLETE") for k in os.environ):
        _print_version()
        return
    from analyzer.cli.app import main as run

    run()


def _print_version() -> None:
    from analyzer import __version__

    try:
        sys.stdout.write(VERSION_LINE.format(version=__version__))
        sys.stdout.flush()
    except BrokenPipeError:
        from analyzer.cli.app import _reader_gone

        _reader_gone()


def __getattr__(name: str) -> object:  # not typing.Any: importing typing costs 5 ms
    # the click group on first use (tests and shell completion), not at import
    if name == "cli":
        from analyzer.cli.app import cli

        return cli
    raise AttributeError(name)
