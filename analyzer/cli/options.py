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
    fmt: str | None = None          # json, nl, csv, tsv, markdown; None: for people
    tee: bool = False
    fail_on: list[str] = field(default_factory=list)
    gha: bool = True                # GitHub Actions summary and annotations when GITHUB_ACTIONS=true
    force: bool = False             # store an input again even if its content was stored before
    keep_raw: bool = False          # also store the raw log (gzip)
    name: str | None = None         # --name: what piped input (stdin, -) is stored as

    @property
    def as_json(self) -> bool:
        return self.fmt == "json"

    def merged(self, **kw: Any) -> "Options":
        fmt = kw.get("fmt") or ("json" if kw.get("as_json") else None)
        return Options(
            db=kw.get("db") or self.db,
            fmt=fmt or self.fmt,
            tee=bool(kw.get("tee")) or self.tee,
            fail_on=parse_fail_on(kw.get("fail_on")) or self.fail_on,
            gha=self.gha and kw.get("gha", True) is not False,
            force=bool(kw.get("force")) or self.force,
            keep_raw=bool(kw.get("keep_raw")) or self.keep_raw,
            name=kw.get("name") or self.name,
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
                            help="Exit 1 when any run has one of these verdicts (unknown: also when nothing "
                                 "was recognised)."),
    "gha": click.option("--gha/--no-gha", "gha", default=True, show_default=True,
                        help="Under GitHub Actions (GITHUB_ACTIONS=true): add the report to the job summary and "
                             "annotate downgrade and hardware-limit runs."),
    "force": click.option("--force", is_flag=True, default=False,
                          help="Store the input again even if the same content was stored before."),
    "keep_raw": click.option("--keep-raw", "keep_raw", is_flag=True, default=False,
                             help="Also store the raw log (gzip); logs can hold prompts and answers."),
    "name": click.option("--name", "name", default=None, metavar="NAME",
                         help="Store piped input (stdin, -) under this name; without it a pipe is named by its "
                              "first run: program, model and time."),
}
# --json and the table formats: one flag each, read together as Options.fmt (one at a time)
FORMAT_FLAGS = (
    ("--json", "json", "JSON on stdout."),
    ("--nl", "nl", "One JSON object per line."),
    ("--csv", "csv", "CSV with a header row."),
    ("--tsv", "tsv", "Tab-separated with a header row."),
    ("--markdown", "markdown", "A GitHub markdown table (PR comments, job summaries)."),
)


def _formats_option(func: Callable) -> Callable:
    for flag, value, text in reversed(FORMAT_FLAGS):
        func = click.option(flag, f"fmt_{value}", is_flag=True, default=False, help=text)(func)
    return func


def chosen_format(kwargs: dict[str, Any]) -> str | None:
    """Pop the format flags from a command's kwargs: the one given, None, or a usage error for two."""
    given = [value for _, value, _ in FORMAT_FLAGS if kwargs.pop(f"fmt_{value}", False)]
    if len(given) > 1:
        raise click.UsageError("choose one output format: " + ", ".join("--" + g for g in given))
    return given[0] if given else None


SHARED["formats"] = _formats_option
_PARAM = {"db": "db", "json": "as_json", "formats": "fmt", "tee": "tee", "fail_on": "fail_on", "gha": "gha",
          "force": "force", "keep_raw": "keep_raw", "name": "name"}
ALL = ("db", "json", "tee", "fail_on")


def add_shared(*names: str) -> Callable[[Callable], Callable]:
    """Only declare the options (the group uses this: it builds its Options itself)."""
    def decorate(func: Callable) -> Callable:
        for name in reversed(names or ALL):
            func = SHARED[name](func)
        return func

    return decorate


def shared_options(*names: str) -> Callable[[Callable], Callable]:
    """Add the named shared options; the command receives the merged Options first."""
    names = names or ALL

    def decorate(func: Callable) -> Callable:
        @click.pass_context
        @functools.wraps(func)
        def wrapper(ctx: click.Context, **kwargs):
            given = {_PARAM[n]: chosen_format(kwargs) if n == "formats" else kwargs.pop(_PARAM[n]) for n in names}
            base: Options = ctx.obj if ctx.obj is not None else Options()
            ctx.obj = base.merged(**given)
            return func(ctx.obj, **kwargs)

        return add_shared(*names)(wrapper)

    return decorate


def open_db(opts: Options):
    """The store at --db (else $CAPSCAN_DB, else the default), or a one-line error."""
    from analyzer.store.db import StoreError
    from analyzer.store.db import open_db as _open
    from analyzer.store.paths import resolve_db_file

    try:
        return _open(resolve_db_file(opts.db))
    except StoreError as exc:
        raise CapscanError(str(exc)) from None


def open_existing_db(opts: Options):
    """For commands that only read (runs, show, compare, db stats, tui): never create a
    database or its folders. A missing file named by --db or $CAPSCAN_DB (a typo, most
    likely) is a one-line error, exit 2; a missing default database means nothing is
    stored yet, and gives None."""
    import os

    from analyzer.store.paths import resolve_db_file

    path = resolve_db_file(opts.db)
    if not os.path.exists(path):
        if opts.db or os.environ.get("CAPSCAN_DB"):
            named = "--db" if opts.db else "$CAPSCAN_DB"
            raise CapscanError(f"no database at {path} (from {named}; nothing was created); "
                               "`capscan db path` shows where capscan stores runs")
        return None
    return open_db(opts)
