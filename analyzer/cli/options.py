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
from click.core import ParameterSource

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

    def merged(self, given: dict[str, Any]) -> "Options":
        """These options with the values a command was given (field -> value; only those the user
        typed: ``given_values``) taking their place."""
        out = Options(**self.__dict__)
        for name, value in given.items():
            setattr(out, name, parse_fail_on(value) if name == "fail_on" else value)
        return out


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


@dataclass(frozen=True)
class Shared:
    """One shared option: its name in ``shared_options``, the click parameters it declares, the
    Options field it fills, and its flag as a user types it (for the group's check)."""

    name: str
    params: tuple[str, ...]
    field: str
    flag: str


# The one list of shared options: the merge, --via's forwarding of group options (ROOT_FORWARDED)
# and the group's "has no meaning here" check all derive from it.
SHARED_OPTIONS = (
    Shared("db", ("db",), "db", "--db"),
    Shared("json", ("as_json",), "fmt", "--json"),
    Shared("formats", tuple(f"fmt_{v}" for _, v, _ in FORMAT_FLAGS), "fmt", "--json"),
    Shared("tee", ("tee",), "tee", "--tee"),
    Shared("fail_on", ("fail_on",), "fail_on", "--fail-on"),
    Shared("gha", ("gha",), "gha", "--no-gha"),
    Shared("force", ("force",), "force", "--force"),
    Shared("keep_raw", ("keep_raw",), "keep_raw", "--keep-raw"),
    Shared("name", ("name",), "name", "--name"),
)
BY_NAME = {o.name: o for o in SHARED_OPTIONS}
GROUP_OPTIONS = ("db", "formats", "tee", "fail_on", "gha", "force", "keep_raw", "name")  # what `capscan` itself takes
ROOT_FORWARDED = tuple(p for n in GROUP_OPTIONS for p in BY_NAME[n].params)
ALL = ("db", "json", "tee", "fail_on")


def given_values(ctx: click.Context, kwargs: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """Pop the shared options' parameters from kwargs; return field -> value for those the user gave
    (click's ParameterSource: typed or from the environment, not a default)."""
    out: dict[str, Any] = {}
    for name in names:
        spec = BY_NAME[name]
        if spec.field == "fmt":  # flags: given when set
            value = chosen_format(kwargs) if name == "formats" else ("json" if kwargs.pop("as_json") else None)
            if value:
                out["fmt"] = value
            continue
        value = kwargs.pop(spec.params[0])
        if ctx.get_parameter_source(spec.params[0]) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
            out[spec.field] = value
    return out


def add_shared(*names: str) -> Callable[[Callable], Callable]:
    """Only declare the options (the group uses this: it builds its Options itself)."""
    def decorate(func: Callable) -> Callable:
        for name in reversed(names or ALL):
            func = SHARED[name](func)
        return func

    return decorate


def shared_options(*names: str) -> Callable[[Callable], Callable]:
    """Add the named shared options; the command receives the merged Options first (the group's values,
    and over them the ones given to the command)."""
    names = names or ALL

    def decorate(func: Callable) -> Callable:
        @click.pass_context
        @functools.wraps(func)
        def wrapper(ctx: click.Context, **kwargs):
            given = given_values(ctx, kwargs, names)
            base: Options = ctx.obj if ctx.obj is not None else Options()
            ctx.obj = base.merged(given)
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


def no_runs_stored(opts: Options | None = None, database: Any = None) -> CapscanError:
    """The empty store's one-line error, naming the database it read: the demo's own, $CAPSCAN_DB's
    and the default are three places, and "nothing stored" alone sends people to the wrong one."""
    from analyzer.store.paths import resolve_db_file

    where = getattr(database, "path", "") or resolve_db_file(opts.db if opts else None)
    return CapscanError(f"no runs stored yet in {where}")


def extra_install(extra: str, packages: str) -> str:
    """How to add an extra to this capscan: a pipx install (the README's) takes `pipx inject`, where
    `pip install 'capscan[extra]'` would install a second capscan beside it."""
    return f"pipx inject capscan {packages} (installed with pipx), or pip install 'capscan[{extra}]'"


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
