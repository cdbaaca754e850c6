"""The store's one error (no imports: the CLI catches it without loading SQLite helpers)."""


class StoreError(Exception):
    """The database cannot be opened or written; the message is one line."""
