"""``--via``: run the same capscan command inside a guest, from the host
(lume ssh, tart exec, anka run or ssh), and exit with its status.

The guest's argv is built in one place, from the command's own click
parameters (guest_argv): every option the command was given is forwarded
(so a --fail-on gate still fires), options before arguments, and anything a
command runs (``remedy run -- CMD``) goes last after ``--``, untouched:
capscan never appends its own flags to the user's command.
"""

from __future__ import annotations

import functools
import shlex
import sys
from typing import Any, Callable

import click
from click.core import ParameterSource

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import ROOT_FORWARDED  # the group's options reach the guest's command too
from analyzer.remedy import transport  # small: the transports' names, no other import

VIA_PARAMS = ("via", "vm", "guest_capscan")


def via_options(func: Callable) -> Callable:
    """Add --via/--vm/--guest-capscan; with --via the command runs in the guest instead of here."""
    @functools.wraps(func)
    def wrapper(*args: Any, via: str | None = None, vm: str | None = None, guest_capscan: str = "capscan",
                **kwargs: Any) -> Any:
        if via is not None:
            forward(click.get_current_context(), via, vm, guest_capscan)
        return func(*args, **kwargs)

    wrapper = click.option("--guest-capscan", default="capscan", show_default=True,
                           help="With --via: the capscan command in the guest.")(wrapper)
    wrapper = click.option("--vm", default=None, help="With --via: the VM name (ssh: the destination).")(wrapper)
    wrapper = click.option("--via", type=click.Choice(transport.VIAS), default=None,
                           help="Run this command in the guest from the host, through lume ssh, tart exec, "
                                "anka run or ssh (every option is forwarded).")(wrapper)
    return wrapper


def _option_argv(param: click.Option, value: Any) -> list[str]:
    """How one option's value is written back on a command line ([] when it says nothing)."""
    flag = param.opts[0]
    if param.is_flag:
        if isinstance(param.flag_value, bool) or param.flag_value is None:
            if bool(value) == bool(param.default):
                return []
            return [flag] if value else [param.secondary_opts[0]] if param.secondary_opts else []
        return [flag] if value == param.flag_value else []
    if value is None or (param.multiple and not value):
        return []
    values = value if param.multiple else (value,)
    return [item for v in values for item in (flag, str(v))]


def _params_argv(ctx: click.Context, names: tuple[str, ...] | None = None, given_only: bool = False) -> list[str]:
    options: list[str] = []
    arguments: list[str] = []
    for param in ctx.command.params:
        name = param.name or ""
        if name in VIA_PARAMS or (names is not None and name not in names) or name not in ctx.params:
            continue
        if given_only and ctx.get_parameter_source(name) not in (ParameterSource.COMMANDLINE,
                                                                  ParameterSource.ENVIRONMENT):
            continue
        value = ctx.params[name]
        if isinstance(param, click.Option):
            options += _option_argv(param, value)
        elif param.nargs == -1:
            rest = [str(v) for v in value]
            if rest and rest[0] == "--":
                rest = rest[1:]
            if rest:
                arguments += ["--", *rest]
        elif value is not None:
            arguments.append(str(value))
    return options + arguments


def guest_argv(ctx: click.Context, guest_capscan: str = "capscan") -> list[str]:
    """The capscan command line that does in the guest what ctx does here."""
    chain = []
    c: click.Context | None = ctx
    while c is not None:
        chain.append(c)
        c = c.parent
    chain.reverse()
    argv = [guest_capscan]
    for level in chain:
        if level is not chain[0]:
            argv.append(level.info_name or level.command.name or "")
        if level is ctx:
            argv += _params_argv(level)
        elif level is chain[0]:
            argv += _params_argv(level, ROOT_FORWARDED, given_only=True)
    return argv


def forward(ctx: click.Context, via: str, vm: str | None, guest_capscan: str) -> None:
    """Run the command in the guest and exit with its status."""
    from analyzer.remedy.runner import Runner

    if not vm:
        raise CapscanError("--via needs --vm NAME (ssh: the destination)")
    try:
        wrapped = transport.wrap(via, vm, guest_argv(ctx, guest_capscan))
    except transport.TransportError as exc:
        raise CapscanError(str(exc)) from None
    click.echo(f"capscan: via {via}: {shlex.join(wrapped)}", err=True)
    code = Runner().passthrough(wrapped)
    if code == 127:
        raise CapscanError(f"{wrapped[0]} not found on this host (the {via} transport needs it)")
    sys.exit(code)
