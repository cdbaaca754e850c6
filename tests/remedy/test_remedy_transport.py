"""--via lume|tart|anka|ssh: hostile arguments reach the guest unchanged.
The stand-ins log the exact argv each transport receives; for lume and ssh,
whose command is parsed by the guest's shell, a real sh parses it back."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from analyzer.remedy import transport

HOSTILE = ["-m", "my model.gguf", "it's \"quoted\"", "$(touch /tmp/pwned)", "`id`", "a;b", "x && y | z", "new\nline",
           "*", "~", "$HOME", "-p", "", "back\\slash", "tab\there", "\u00e9\u00e8 utf-8"]
GUEST = ["capscan", "remedy", "run", "--family", "1007", "--", "llama-bench", *HOSTILE]


def _sh_parse(command: str) -> list[str]:
    """What a POSIX shell in the guest makes of the command string."""
    r = subprocess.run(["sh", "-c", "set -- " + command + "; for a in \"$@\"; do printf '%s\\0' \"$a\"; done"],
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    return [x.decode() for x in r.stdout.split(b"\0")[:-1]]


@pytest.mark.parametrize("via", transport.VIAS)
def test_cli_via_passes_hostile_arguments_exactly(env, via):
    # a process: --via hands the guest command capscan's own descriptors, which only a process has
    r = env.capscan("remedy", "run", "--via", via, "--vm", "macos-tahoe", "--family", "1007", "--", "llama-bench",
                    *HOSTILE, process=True)
    assert r.returncode == 0, r.stderr.decode()
    assert f"{via} stand-in: ran" in r.stdout.decode()
    (call,) = env.calls()
    if via == "tart":
        assert call == ["tart", "exec", "macos-tahoe", *GUEST]
    elif via == "anka":
        assert call == ["anka", "run", "macos-tahoe", *GUEST]
    elif via == "lume":
        assert call[:5] == ["lume", "ssh", "--timeout", "0", "macos-tahoe"] and len(call) == 6
        assert shlex.split(call[5]) == GUEST
        assert _sh_parse(call[5]) == GUEST
    else:
        assert call[:5] == ["ssh", "-o", "BatchMode=yes", "--", "macos-tahoe"] and len(call) == 6
        assert shlex.split(call[5]) == GUEST
        assert _sh_parse(call[5]) == GUEST
    assert not (env.tmp / "pwned").exists()


def test_via_other_commands(env):
    env.capscan("remedy", "env", "--via", "tart", "--vm", "vm1", "--shell", "fish")
    env.capscan("probe", "--via", "anka", "--vm", "vm1", "--json")
    env.capscan("remedy", "plan", "--via", "lume", "--vm", "vm1", "--run", "3", "--", "llama-bench", "-m", "a b")
    calls = env.calls()
    assert calls[0] == ["tart", "exec", "vm1", "capscan", "remedy", "env", "--shell", "fish", "--family", "auto"]
    assert calls[1] == ["anka", "run", "vm1", "capscan", "probe", "--json"]
    assert shlex.split(calls[2][-1]) == ["capscan", "remedy", "plan", "--run", "3", "--", "llama-bench", "-m", "a b"]


@pytest.mark.parametrize("vm", ["-oProxyCommand=sh", "", "a b", "vm;rm", "$(x)"])
def test_vm_names_that_could_be_options_or_shell_are_refused(env, vm):
    r = env.capscan("remedy", "run", "--via", "ssh", "--vm", vm, "--", "true")
    assert r.returncode == 2 and env.calls() == []
    with pytest.raises(transport.TransportError):
        transport.wrap("ssh", vm, ["true"])


def test_guest_argv_round_trip():
    for via in transport.VIAS:
        assert transport.guest_argv_of(via, transport.wrap(via, "vm", GUEST)) == GUEST
