"""Where the database lives: --db, else CAPSCAN_DB, else the user data dir."""

from __future__ import annotations

import os
from pathlib import Path


def default_db_path() -> Path:
    env = os.environ.get("CAPSCAN_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs  # only for the default path (it imports tempfile and random: 5-10 ms)

    return platformdirs.user_data_path("capscan") / "capscan.db"


def resolve_db_path(option: str | None) -> Path:
    return Path(option).expanduser() if option else default_db_path()
