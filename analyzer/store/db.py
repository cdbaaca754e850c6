"""Open (and create) the database: owner-only file, WAL, migrations."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (paths are handled as strings: importing pathlib costs the read-only commands 5 ms)
    from pathlib import Path

from analyzer.store.errors import StoreError  # noqa: F401 - re-exported: callers import it from here
from analyzer.store.migrations import MIGRATIONS
from analyzer.store.stored_text import install as clean_reads

BUSY_TIMEOUT_MS = 120_000


class Database:
    """The open database: ``conn`` is the sqlite3 connection, which is all the
    core uses. Anything else (``db["table"]``, ``db.executescript`` ...) is
    sqlite-utils' ``Database`` on the same connection, imported and built on
    first use: reading an up-to-date database never imports sqlite-utils."""

    def __init__(self, conn: sqlite3.Connection, path: str = ""):
        self.conn = conn
        self.path = path  # the file it was opened from, for messages that name it ("" when unknown)
        self._sqlite_utils: Any = None

    @property
    def sqlite_utils(self) -> Any:
        if self._sqlite_utils is None:
            from sqlite_utils import Database as SqliteUtilsDatabase

            self._sqlite_utils = SqliteUtilsDatabase(self.conn)
        return self._sqlite_utils

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("_real", "_registered", "_sqlite_utils"):
            raise AttributeError(attr)
        return getattr(self.sqlite_utils, attr)

    def __getitem__(self, table: str) -> Any:
        return self.sqlite_utils[table]


def _create_private(path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    if not os.path.exists(path):
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)


def open_db(path: str | os.PathLike[str]) -> Database:
    """The database at ``path``, created and migrated as needed.

    A file capscan may not write (a read-only file or mount) is opened
    read-only: reading commands work, writes fail with a one-line
    ``StoreError``. A database from a newer capscan (migrations this version
    does not know) is refused rather than written with an older schema."""
    path = _as_str(path)
    if path == ":memory:":  # SQLite's name for a database that vanishes on close: "stored" would be false
        raise StoreError(":memory: is SQLite's in-memory database, which keeps nothing once capscan exits; "
                         "give --db a file path")
    if os.path.isdir(path):
        raise StoreError(f"{path}: is a directory, not a database file")
    if _read_only(path):
        return _open_read_only(path)
    try:
        _create_private(path)
        conn = clean_reads(sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None))
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"{path}: cannot open database ({exc})") from None
    db = Database(conn, path)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _retry(lambda: _enable_wal(conn))
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _refuse_newer(db, path)  # (first: a newer capscan's schema may hold objects this one does not know)
        guard(conn, path)
        conn.execute("PRAGMA recursive_triggers = ON")  # as sqlite-utils' Database sets it
        _retry(lambda: _migrate(db, path))
    except sqlite3.OperationalError as exc:
        raise StoreError(f"{path}: cannot use the database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a capscan database or corrupt ({exc})") from None
    return db


def is_read_only(db: Database) -> bool:
    """Opened read-only (see ``open_db``): results are computed, not stored."""
    return bool(db.conn.execute("PRAGMA query_only").fetchone()[0])


def _as_str(path: str | os.PathLike[str]) -> str:
    """The path as ``str(Path(path))`` spells it (messages name it so), without pathlib."""
    from analyzer.store.paths import normal_path

    return normal_path(os.fspath(path))


def _read_only(path: str) -> bool:
    """An existing database this process cannot write: the file, or the
    directory that must hold its -wal and -shm files, is not writable."""
    if not os.path.exists(path):
        return False
    return not os.access(path, os.W_OK) or not os.access(os.path.dirname(path) or ".", os.W_OK | os.X_OK)


def _open_read_only(path: str) -> Database:
    """Read-only: ``mode=ro``; where SQLite cannot create the -shm file a WAL
    database needs (a read-only directory or mount), ``immutable=1``."""
    from pathlib import Path

    last: Exception | None = None
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = clean_reads(sqlite3.connect(f"{Path(path).resolve().as_uri()}?{flags}", uri=True,
                                               isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000))
            conn.execute("PRAGMA query_only = 1")
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            last = exc
            continue
        db = Database(conn, path)
        try:
            _refuse_newer(db, path)
            guard(conn, path)
            if MIGRATIONS.pending_names(conn):
                raise StoreError(f"{path}: read-only, and written by an older capscan: it needs an upgrade that "
                                 "cannot be written here (open it once where it is writable)")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a capscan database or corrupt ({exc})") from None
        return db
    raise StoreError(f"{path}: cannot open the read-only database ({last})")


def guard(conn: sqlite3.Connection, path: str) -> None:
    """The database supplies data, never code: the schema's own SQL is not trusted with functions that
    have side effects (``trusted_schema``), and a trigger or view capscan's migrations did not create
    is refused before anything reads or writes (a handed-over file's trigger rewrote a run's verdict).
    Refused rather than dropped: capscan never changes a file it was only asked to read, and the user
    decides, on a copy, whether to keep what the objects guarded."""
    conn.execute("PRAGMA trusted_schema = OFF")
    own = _migration_triggers() if MIGRATIONS.pending_names(conn) else {}
    for kind, name, table, sql in conn.execute(  # the SQL exactly as stored (reads of TEXT are cleaned)
            "SELECT type, name, tbl_name, CAST(sql AS BLOB) FROM sqlite_master WHERE type IN ('trigger', 'view') "
            "ORDER BY rowid"):
        if kind == "trigger" and name in own and own[name].encode() == sql:
            continue  # m007's own, until m010 drops them in the migrations about to run
        from analyzer.safe_text import clean

        shown = clean(str(name))[:80]
        on = f" on {clean(str(table))[:80]}" if kind == "trigger" else ""
        quoted = '"' + shown.replace('"', '""') + '"'
        raise StoreError(f"{path}: holds the {kind} {shown!r}{on}, which capscan did not create: a database "
                         f"supplies data, never code, so capscan refuses it. To keep its runs, drop it from a copy "
                         f"(sqlite3 COPY.db 'DROP {kind.upper()} {quoted}') and use --db COPY.db")


def guard_file(path: str) -> None:
    """``guard`` for a file another program will open (``db serve``: Datasette), read-only."""
    from pathlib import Path

    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open the database ({exc})") from None
    try:
        guard(conn, path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a capscan database or corrupt ({exc})") from None
    finally:
        conn.close()


def _migration_triggers() -> dict[str, str]:
    """The triggers capscan's migrations create (m007's, which m010 drops), as sqlite_master holds their SQL."""
    global _OWN_TRIGGERS
    if _OWN_TRIGGERS is None:
        from analyzer.store.migrations import m007_diagnosis_inputs

        conn = sqlite3.connect(":memory:")
        try:
            conn.executescript("CREATE TABLE runs (id); CREATE TABLE throughput (run_id); CREATE TABLE evidence "
                               "(run_id); CREATE TABLE diagnoses (run_id, report, verdict, fixable, confidence, "
                               "environment, host_chip); CREATE TABLE sources (id, raw_gzip);")
            m007_diagnosis_inputs(conn)  # its script runs on a plain connection too
            _OWN_TRIGGERS = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        finally:
            conn.close()
    return _OWN_TRIGGERS


_OWN_TRIGGERS: dict[str, str] | None = None


def _refuse_newer(db: Database, path: str) -> None:
    """Migrations recorded in the database that this capscan does not have
    mean a newer capscan wrote it: its schema may differ in ways this version
    would misread or damage."""
    known = set(MIGRATIONS.names)
    unknown = [name for name in MIGRATIONS.applied_names(db.conn) if name not in known]
    if unknown:
        raise StoreError(f"{path}: written by a newer capscan (schema {', '.join(unknown[:3])}"
                         f"{'...' if len(unknown) > 3 else ''} unknown to capscan {_version()}); refusing to use it: "
                         "upgrade capscan, or use another --db")


def _version() -> str:
    from analyzer import __version__

    return __version__


def _enable_wal(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def _retry(step, attempts: int = 40) -> None:
    """Several capscan processes may open a new database at once: a step that
    loses a race (a lock, "already exists", a migration record's UNIQUE
    constraint) is rolled back, waits, and runs again."""
    for attempt in range(attempts):
        try:
            step()
            return
        except (sqlite3.OperationalError, sqlite3.IntegrityError) as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) and not isinstance(exc, sqlite3.IntegrityError) \
                    and "already exists" not in str(exc):
                raise
            if attempt == attempts - 1:
                raise
            time.sleep(0.02 * (attempt + 1))


def _migrate(db: Database, path: str) -> None:
    """Apply pending migrations. Each migration and its record are one
    transaction, so a lost race leaves nothing half done; and the processes that
    open a new database at once take turns (sqlite-utils reads what is pending
    once, then applies each: two at once applied and recorded each twice)."""
    try:
        if not MIGRATIONS.pending_names(db.conn):  # one query; sqlite-utils only when there is work
            return
        with _directory_lock(os.path.dirname(path) or "."):
            if MIGRATIONS.pending_names(db.conn):  # another process may have applied them meanwhile
                MIGRATIONS.apply(db.sqlite_utils)
    except BaseException:
        if db.conn.in_transaction:
            db.conn.execute("ROLLBACK")
        raise


class _directory_lock:
    """An exclusive flock on the database's directory while migrations run: no
    file of its own to leave behind, and never a lock on the database file, whose
    POSIX locks SQLite holds (closing any other descriptor of it would drop them).
    Where the file system has no flock, migrations run unserialised, as before."""

    def __init__(self, directory: str):
        self.directory, self.fd = directory, -1

    def __enter__(self) -> None:
        import fcntl

        try:
            self.fd = os.open(self.directory, os.O_RDONLY)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:
            if self.fd >= 0:
                os.close(self.fd)
            self.fd = -1

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing releases the flock


def checkpoint(path: Path) -> str | None:
    """Move the write-ahead log into the file (an immutable reader ignores it).
    Returns a one-line notice when that was not possible."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5)
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"could not checkpoint the write-ahead log ({exc}); the newest runs may not show"
    return "a writer is busy; the newest runs may not show until a restart" if busy else None
