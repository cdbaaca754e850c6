"""The options every command shares, declared once, and the Options they fill.

A command takes the shared options it means with ``@shared_options("db",
"json", ...)``; values given on the group (``capscan --db X runs``) and on the
command (``capscan runs --db X``) are merged into one Options passed first.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import click

from analyzer.cli.exits import CapscanError


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
            fail_on=parse_fail_on(kw.get("fail_on")) or self.fail_on,
        )


def parse_fail_on(value: str | None) -> list[str]:
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


# name -> the click option (the one declaration of each shared option)
SHARED: dict[str, Callable[[Callable], Callable]] = {
    "db": click.option("--db", "db", type=click.Path(dir_okay=False), default=None,
                       help="Database file (else $CAPSCAN_DB, else the user data dir)."),
    "json": click.option("--json", "as_json", is_flag=True, default=False, help="Machine-readable output on stdout."),
    "tee": click.option("--tee", is_flag=True, default=False,
                        help="Pass the input through to stdout; report on stderr."),
    "fail_on": click.option("--fail-on", "fail_on", default=None, metavar="VERDICT[,VERDICT...]",
                            help="Exit 1 when any run has one of these verdicts."),
}
_PARAM = {"db": "db", "json": "as_json", "tee": "tee", "fail_on": "fail_on"}
ALL = ("db", "json", "tee", "fail_on")


def add_shared(func: Callable, names: tuple[str, ...] = ALL) -> Callable:
    """Only declare the options (the group uses this: it builds its Options itself)."""
    for name in reversed(names):
        func = SHARED[name](func)
    return func


def shared_options(*names: str) -> Callable[[Callable], Callable]:
    """Add the named shared options; the command receives the merged Options first."""
    names = names or ALL

    def decorate(func: Callable) -> Callable:
        @click.pass_context
        @functools.wraps(func)
        def wrapper(ctx: click.Context, **kwargs):
            given = {_PARAM[n]: kwargs.pop(_PARAM[n]) for n in names}
            base: Options = ctx.obj if ctx.obj is not None else Options()
            ctx.obj = base.merged(**given)
            return func(ctx.obj, **kwargs)

        return add_shared(wrapper, names)

    return decorate


def open_db(opts: Options):
    """The store at --db (else $CAPSCAN_DB, else the default), or a one-line error."""
    from analyzer.paths import resolve_db_path
    from analyzer.store.db import StoreError, open_db as _open

    try:
        return _open(resolve_db_path(opts.db))
    except StoreError as exc:
        raise CapscanError(str(exc)) from None


def open_existing_db(opts: Options):
    """For commands that only read (runs, show, compare, db stats, tui): never create a
    database or its folders. A missing file named by --db or $CAPSCAN_DB (a typo, most
    likely) is a one-line error, exit 2; a missing default database means nothing is
    stored yet, and gives None."""
    import os

    from analyzer.paths import resolve_db_path

    path = resolve_db_path(opts.db)
    if not path.exists():
        if opts.db or os.environ.get("CAPSCAN_DB"):
            named = "--db" if opts.db else "$CAPSCAN_DB"
            raise CapscanError(f"no database at {path} (from {named}; nothing was created); "
                               "`capscan db path` shows where capscan stores runs")
        return None
    return open_db(opts)
