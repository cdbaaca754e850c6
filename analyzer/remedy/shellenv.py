"""The environment lines `remedy env` prints, quoted for the shell that evals them."""

from __future__ import annotations

import shlex


def _sh_quote(value: str) -> str:
    return shlex.quote(value)


def _fish_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def env_lines(shell: str, pairs: list[tuple[str, str]]) -> list[str]:
    if shell == "fish":
        return [f"set -gx {k} {_fish_quote(v)}" for k, v in pairs]
    return [f"export {k}={_sh_quote(v)}" for k, v in pairs]
