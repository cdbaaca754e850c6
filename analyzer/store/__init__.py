"""SQLite storage: schema migrations, transactional writes per source, reads."""

from __future__ import annotations

from typing import Any

__all__ = ["open_db"]


def __getattr__(name: str) -> Any:
    # open_db on first use: importing analyzer.store.errors (the CLI's main does) loads no SQLite helpers
    if name == "open_db":
        from analyzer.store.db import open_db

        return open_db
    raise AttributeError(name)
