"""A click group whose commands are imported only when one of them runs (or --help lists
them): start-up is the interpreter, click, and the one command."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from typing import Any, Sequence

import click


def first_phrase(text: str | None) -> str:
    """A command's summary for a --help list: its first sentence whole (up to '. ' or '; ' outside
    parentheses), where click cuts at 45 characters mid-phrase."""
    para = " ".join(inspect.cleandoc(text or "").split("\n\n", 1)[0].split())
    depth = 0
    for i, ch in enumerate(para):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        # (an ellipsis, `DYLD_INSERT_LIBRARIES=... CMD`, ends no sentence)
        if depth == 0 and ch in ".;" and para[i + 1:i + 2] in ("", " ") and para[i - 1:i] != ".":
            return para[:i]
    return para.rstrip(".")


def plain(text: str) -> str:
    """Help as a terminal shows it: the docstrings' code marks (``x``, `x`) are for the generated
    reference pages (scripts/gen-reference), not for a reader of --help."""
    return text.replace("``", "").replace("`", "")


class PlainFormatter(click.HelpFormatter):
    def write_text(self, text: str) -> None:
        super().write_text(plain(text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(plain(a), plain(b)) for a, b in rows], col_max, col_spacing)


class PlainContext(click.Context):
    formatter_class = PlainFormatter


class PhraseGroup(click.Group):
    """A group whose --help lists each command by its first whole sentence, shows no code marks, and
    answers a mistyped command with the commands it resembles (click says only "No such command")."""

    context_class = PlainContext

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and cmd.context_class is click.Context:
            cmd.context_class = PlainContext  # its own --help without code marks too
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.short_help or first_phrase(cmd.help)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                            list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            if not exc.message.startswith("No such command"):
                raise
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if close:
                hint = "Did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
            elif os.path.exists(name) and ctx.parent is None:
                hint = f"To read a log: capscan ingest {name} (or capscan < {name})."
            else:
                hint = f"'{ctx.command_path} --help' lists the commands."
            raise click.UsageError(f"{exc.message} {hint}", ctx) from None


class LazyGroup(PhraseGroup):
    """``lazy_commands``: name -> (module, attribute) of a command not imported yet."""

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            module, attr = self.lazy_commands[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)
