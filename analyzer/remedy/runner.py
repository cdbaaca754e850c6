"""The single way capscan's remedy layer runs other programs: argument lists
only (never a shell string, never ``shell=True``), captured output, a
timeout, and "not found" as a result rather than an exception.

Tests put executable stand-ins for csrutil, codesign, lipo, otool, defaults,
sysctl, lume, tart and anka first on PATH; everything goes through here, so
they see every call.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

NOT_FOUND = 127


def file_arg(path: str) -> str:
    """A file name as an argument of another program: one that starts with
    ``-`` (a program name taken from a log can) is given as ``./-name``, so
    codesign, otool or lipo never read it as an option."""
    return "./" + path if path.startswith("-") else path


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def found(self) -> bool:
        return self.returncode != NOT_FOUND

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Runner:
    def __init__(self, env: Mapping[str, str] | None = None, timeout: float = 60.0):
        self.env = dict(os.environ if env is None else env)
        self.timeout = timeout

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", os.defpath))

    def run(self, argv: Sequence[str], *, timeout: float | None = None, cwd: str | None = None) -> Completed:
        args = tuple(str(a) for a in argv)
        if not args:
            raise ValueError("empty argv")
        try:
            proc = subprocess.run(list(args), capture_output=True, text=True, encoding="utf-8", errors="replace",
                                  env=self.env, timeout=timeout or self.timeout, cwd=cwd, stdin=subprocess.DEVNULL,
                                  shell=False)
        except FileNotFoundError:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: command not found")
        except PermissionError:
            return Completed(args, 126, "", f"{args[0]}: permission denied")
        except subprocess.TimeoutExpired:
            return Completed(args, 124, "", f"{args[0]}: timed out")
        except OSError as exc:  # e.g. a Mach-O on Linux (exec format error): a result, never a traceback
            return Completed(args, 126, "", f"{args[0]}: cannot execute ({exc.strerror or exc})")
        return Completed(args, proc.returncode, proc.stdout, proc.stderr)

    def passthrough(self, argv: Sequence[str]) -> int:
        """Run with the terminal's stdin/stdout/stderr (for --via); returns the exit status."""
        args = [str(a) for a in argv]
        try:
            return subprocess.call(args, env=self.env, shell=False)
        except FileNotFoundError:
            return NOT_FOUND
        except PermissionError:
            return 126
