"""Where the database lives: --db, else CAPSCAN_DB, else the user data dir."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pathlib costs 5 ms of start-up (urllib.parse, ipaddress): the read-only commands use strings
    from pathlib import Path


def default_db_file() -> str:
    env = os.environ.get("CAPSCAN_DB")
    if env:
        return normal_path(os.path.expanduser(env))
    import platformdirs  # only for the default path (it imports tempfile and random: 5-10 ms)

    return os.path.join(platformdirs.user_data_dir("capscan"), "capscan.db")


def resolve_db_path(option: str | None) -> Path:
    from pathlib import Path

    return Path(resolve_db_file(option))


def resolve_db_file(option: str | None) -> str:
    """resolve_db_path as a string, without importing pathlib (``runs``, ``show``, ``db stats``)."""
    return normal_path(os.path.expanduser(option)) if option else default_db_file()


def normal_path(path: str) -> str:
    """The path as ``str(pathlib.PurePath(path))`` spells it: no empty or ``.`` components and no
    trailing separator (``..`` is kept: it is not the same file once a component is a symlink)."""
    if os.sep != "/" or not path:
        from pathlib import PurePath

        return str(PurePath(path))
    lead = "//" if path.startswith("//") and not path.startswith("///") else "/" if path.startswith("/") else ""
    parts = [part for part in path.split("/") if part and part != "."]
    return lead + "/".join(parts) if parts or lead else "."
