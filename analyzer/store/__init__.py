"""SQLite storage: schema migrations, transactional writes per source, reads."""

from analyzer.store.db import open_db

__all__ = ["open_db"]
