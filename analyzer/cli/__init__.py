"""The ``capscan`` command line (click): one module per command group.

app (the group, pipe mode, main and exit codes), exits (exit codes and the
errors that carry them), options (the shared options, declared once), output
(where output goes, JSON, the report), ingest (pipe mode, ingest, diagnose),
runs (runs, show), compare, db, formats, tui, remedy, probe, via (running the
same command inside a guest).

Nothing below the CLI imports this package.
"""

from analyzer.cli.app import cli, main

__all__ = ["cli", "main"]
