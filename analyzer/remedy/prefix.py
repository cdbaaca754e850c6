"""`capscan remedy env`: the per-command prefix that injects the interposer into
one command, never an `export` into the user's shell.

`/usr/bin/env DYLD_INSERT_LIBRARIES=... CAPSCAN_METAL_APPLE_FAMILY_MAX=N CMD`
sets the variables at the last exec, only for CMD and what CMD starts: an
exported DYLD_INSERT_LIBRARIES would be inherited by every later command of the
shell (with guest SIP off, Apple's arm64e /bin/sh, env and tee included).
Quoting is per shell: sh, bash and zsh take POSIX single quotes; fish escapes
backslash and quote inside single quotes.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from analyzer.remedy.platform import FAMILY_VAR, Injection

SHELLS = ("sh", "zsh", "fish")
ENV_BIN = "/usr/bin/env"
SCRUB_VAR = "CAPSCAN_INTERPOSER_SCRUB"
SCRUB_AT_LOAD, SCRUB_AT_DEVICE = "1", "device"


def injection_vars(inj: Injection, library: str, family: int, *, inject_children: bool = False,
                   scrub: str = SCRUB_AT_LOAD) -> dict[str, str]:
    """The variables capscan sets for the one command. Children are scrubbed unless asked: once loaded, the
    interposer drops itself from the variable, so what the command starts (a shell, tee, an Apple arm64e
    helper that would halt on it with SIP off) never loads it; ollama's runner needs --inject-children.
    ``scrub`` is "device" for a launcher (preflight.find_launcher): the library is dropped only in the
    process that asks Metal for a device, so the launcher passes it on to the program it execs."""
    pairs = {inj.env_var: library, FAMILY_VAR: str(family)}
    if not inject_children:
        pairs[SCRUB_VAR] = scrub
    return pairs


def prefix_argv(inj: Injection, library: str, family: int, *, inject_children: bool = False,
                scrub: str = SCRUB_AT_LOAD) -> list[str]:
    pairs = injection_vars(inj, library, family, inject_children=inject_children, scrub=scrub)
    return [ENV_BIN, *(f"{k}={v}" for k, v in pairs.items())]


def _fish_quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "@%+=:,./-_" for c in arg):
        return arg
    return "'" + arg.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote(shell: str, argv: Sequence[str]) -> str:
    if shell not in SHELLS:
        raise ValueError(f"unknown shell {shell!r}")
    if shell == "fish":
        return " ".join(_fish_quote(a) for a in argv)
    return shlex.join(argv)     # POSIX quoting: sh, bash, zsh
