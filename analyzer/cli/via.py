"""``--via``: run the same capscan command inside a guest, from the host
(lume ssh, tart exec, anka run or ssh), and exit with its status."""

from __future__ import annotations

import shlex
import sys
from typing import Callable

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options
from analyzer.remedy import transport  # small: the transports' names, no other import


def via_options(func: Callable) -> Callable:
    func = click.option("--guest-capscan", default="capscan", show_default=True,
                        help="With --via: the capscan command in the guest.")(func)
    func = click.option("--vm", default=None, help="With --via: the VM name (ssh: the destination).")(func)
    func = click.option("--via", type=click.Choice(transport.VIAS), default=None,
                        help="Run the guest side from the host through lume ssh, tart exec, anka run or ssh.")(func)
    return func


def forward(opts: Options, via: str | None, vm: str | None, guest_capscan: str, guest_args: list[str]) -> None:
    """With --via: run `capscan <guest_args>` in the guest and exit with its status; else return."""
    if via is None:
        return
    from analyzer.remedy.runner import Runner

    if not vm:
        raise CapscanError("--via needs --vm NAME (ssh: the destination)")
    argv = [guest_capscan, *guest_args] + (["--json"] if opts.as_json and "--json" not in guest_args else [])
    try:
        wrapped = transport.wrap(via, vm, argv)
    except transport.TransportError as exc:
        raise CapscanError(str(exc)) from None
    click.echo(f"capscan: via {via}: {shlex.join(wrapped)}", err=True)
    code = Runner().passthrough(wrapped)
    if code == 127:
        raise CapscanError(f"{wrapped[0]} not found on this host (the {via} transport needs it)")
    sys.exit(code)
