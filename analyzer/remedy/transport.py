"""From the host into a guest: the argv that runs a guest-side command through
`lume ssh`, `tart exec`, `anka run` or ssh, quoted correctly for each.

- tart exec and anka run hand the argument list to the guest agent as a list:
  each argument arrives unchanged, so nothing is quoted (quoting would arrive
  as literal quote characters).
- lume ssh joins its trailing arguments with spaces and gives the string to the
  guest's login shell; ssh does the same. So the guest argv is shell-quoted
  (POSIX single quotes, which zsh, bash and sh parse back to the same list),
  and passed as one argument.
"""

from __future__ import annotations

import re
import shlex

VIAS = ("lume", "tart", "anka", "ssh")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")


class TransportError(ValueError):
    pass


def check_vm_name(via: str, vm: str) -> None:
    if not vm or not _NAME.match(vm):
        raise TransportError(f"{vm!r} is not a usable {'ssh destination' if via == 'ssh' else 'VM name'} "
                             "(letters, digits and ._:@/+- only, not starting with '-')")


def wrap(via: str, vm: str, argv: list[str]) -> list[str]:
    if via not in VIAS:
        raise TransportError(f"unknown transport {via!r}; choose from {', '.join(VIAS)}")
    check_vm_name(via, vm)
    argv = [str(a) for a in argv]
    if not argv:
        raise TransportError("nothing to run in the guest")
    if via == "tart":
        return ["tart", "exec", vm, *argv]
    if via == "anka":
        return ["anka", "run", vm, *argv]
    remote = shlex.join(argv)
    if via == "lume":
        # lume ssh's own timeout defaults to 60 s; benchmarks run longer.
        return ["lume", "ssh", "--timeout", "0", vm, remote]
    return ["ssh", "-o", "BatchMode=yes", "--", vm, remote]


def guest_argv_of(via: str, wrapped: list[str]) -> list[str]:
    """What the guest ends up running (for tests and dry runs): the inverse of wrap."""
    if via in ("tart", "anka"):
        return wrapped[3:]
    return shlex.split(wrapped[-1])
