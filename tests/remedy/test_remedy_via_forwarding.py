"""--via: the guest runs the same command with every option it was given (built in one place
from the command's own click parameters), and the user's command after -- is never extended
with capscan's own flags."""

from __future__ import annotations

import click
import pytest

from analyzer.cli import cli
from analyzer.cli.via import VIA_PARAMS, guest_argv

USER_CMD = ["llama-bench", "-m", "a b.gguf", "--json"]


def _commands_with_via(group: click.Group, path: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands_with_via(command, (*path, name))
        elif any(p.name == "via" for p in command.params):
            yield (*path, name), command


VIA_COMMANDS = list(_commands_with_via(cli))


def _sample_value(param: click.Option) -> str:
    if isinstance(param.type, click.Choice):
        return next(c for c in param.type.choices if c != param.default)
    if param.name == "fail_on":
        return "capability-downgrade,hardware-limit"
    if param.name == "family_spec":
        return "1007"
    if isinstance(param.type, click.types.IntParamType):
        return "7"
    return "/tmp/some where/x"


def _every_option(command: click.Command) -> tuple[list[str], list[list[str]]]:
    """argv giving every option of the command (but one format flag), and what each must forward as."""
    argv, expected = [], []
    formats_seen = False
    for p in command.params:
        if not isinstance(p, click.Option) or p.name in VIA_PARAMS:
            continue
        if p.name.startswith("fmt_"):
            if formats_seen:
                continue
            formats_seen = True
        if p.is_flag and p.secondary_opts:  # --gha/--no-gha: the non-default side
            given = [p.secondary_opts[0] if p.default else p.opts[0]]
        elif p.is_flag:
            given = [p.opts[0]]
        else:
            given = [p.opts[0], _sample_value(p)]
        argv += given
        expected.append(given)
    return argv, expected


def _context(path: tuple[str, ...], command: click.Command, args: list[str]) -> click.Context:
    ctx = click.Context(cli, info_name="capscan")
    for name in path[:-1]:
        ctx = click.Context(cli.get_command(ctx, name), info_name=name, parent=ctx)
    return command.make_context(path[-1], args, parent=ctx)


def test_there_are_commands_with_via():
    assert {p for p, _ in VIA_COMMANDS} >= {("probe",), ("remedy", "plan"), ("remedy", "run"), ("remedy", "env")}


@pytest.mark.parametrize("path,command", VIA_COMMANDS, ids=[" ".join(p) for p, _ in VIA_COMMANDS])
def test_via_forwards_every_option_of_the_command(path, command):
    argv, expected = _every_option(command)
    takes_command = any(isinstance(p, click.Argument) and p.nargs == -1 for p in command.params)
    tail = ["--", *USER_CMD] if takes_command else []
    ctx = _context(path, command, [*argv, "--via", "tart", "--vm", "vm1", "--guest-capscan", "/opt/capscan", *tail])
    guest = guest_argv(ctx, "/opt/capscan")
    assert guest[:1 + len(path)] == ["/opt/capscan", *path]
    options = guest[1 + len(path):len(guest) - len(tail)]
    for given in expected:
        i = next((i for i in range(len(options)) if options[i:i + len(given)] == given), None)
        assert i is not None, f"{' '.join(path)}: {given} not forwarded in {guest}"
    assert not {"--via", "--vm", "--guest-capscan"} & set(guest)
    if tail:
        assert guest[-len(tail):] == tail  # the user's command last, exactly as given: nothing appended


def test_group_level_flags_are_forwarded_too_and_never_after_the_users_command():
    root = cli.make_context("capscan", ["--json", "--fail-on", "healthy", "remedy"])
    group = cli.get_command(root, "remedy")
    remedy = click.Context(group, info_name="remedy", parent=root)
    ctx = group.get_command(remedy, "plan").make_context("plan", ["--via", "ssh", "--vm", "h", "--", *USER_CMD],
                                                              parent=remedy)
    guest = guest_argv(ctx)
    assert guest == ["capscan", "--json", "--fail-on", "healthy", "remedy", "plan", "--", *USER_CMD]


def test_probe_via_forwards_the_gate(env):
    r = env.capscan("probe", "--via", "tart", "--vm", "X", "--fail-on", "capability-downgrade", "--json")
    assert r.returncode == 0, r.stderr.decode()
    (call,) = env.calls()
    assert call == ["tart", "exec", "X", "capscan", "probe", "--json", "--fail-on", "capability-downgrade"]
