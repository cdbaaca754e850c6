"""Exit codes and the two exceptions that carry them out of a command.

0 ok; 1 a --fail-on verdict was found (remedy run: launched but not verified);
2 usage error, unreadable input or a refusal; 130 interrupted; 141 the reader
of stdout went away.
"""

from __future__ import annotations

import click

EXIT_OK = 0
EXIT_FAIL_ON = 1
EXIT_UNVERIFIED = 1
EXIT_USAGE = 2
EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away (`capscan ... | head`)


class CapscanError(click.ClickException):
    """A one-line error, exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file=None) -> None:
        click.echo(f"capscan: {self.format_message()}", err=True)


class FailOn(Exception):
    """A --fail-on verdict was found; main() turns it into exit 1."""

    def __init__(self, verdicts: list[str]):
        super().__init__(", ".join(verdicts))
        self.verdicts = verdicts
