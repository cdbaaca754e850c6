"""Schema, as sqlite-utils migrations applied every time the database opens.

``MIGRATIONS`` registers them like ``sqlite_utils.Migrations`` (``@MIGRATIONS()``
above each function, applied in the order written) and says which are pending
with one query, without importing sqlite-utils: a database that is up to date
(every open but the first after an upgrade) is used through plain sqlite3,
so read-only commands never pay for importing sqlite-utils.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from sqlite_utils import Database, Migrations


class MigrationSet:
    """The registry; sqlite-utils' ``Migrations`` is built from it on demand
    (``apply``, ``pending``, ``applied`` and anything else delegate to it)."""

    TABLE = "_sqlite_migrations"

    def __init__(self, name: str):
        self.name = name
        self._registered: list[tuple[str, Callable, bool]] = []
        self._real: Migrations | None = None

    def __call__(self, *, name: str | None = None, transactional: bool = True) -> Callable[[Callable], Callable]:
        def inner(fn: Callable) -> Callable:
            migration_name = name or fn.__name__
            if migration_name in self.names:
                raise ValueError(f"Migration '{migration_name}' is already registered in set '{self.name}'")
            self._registered.append((migration_name, fn, transactional))
            self._real = None
            return fn
        return inner

    @property
    def names(self) -> list[str]:
        return [n for n, _, _ in self._registered]

    def applied_names(self, conn: sqlite3.Connection) -> list[str]:
        """The names recorded as applied, in order (a read; no sqlite-utils)."""
        try:
            return [r[0] for r in conn.execute(
                f"SELECT name FROM {self.TABLE} WHERE migration_set = ? ORDER BY rowid", (self.name,))]
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise

    def pending_names(self, conn: sqlite3.Connection) -> list[str]:
        applied = set(self.applied_names(conn))
        return [n for n in self.names if n not in applied]

    @property
    def real(self) -> Migrations:
        if self._real is None:
            from sqlite_utils import Migrations

            real = Migrations(self.name)
            for name, fn, transactional in self._registered:
                real(name=name, transactional=transactional)(fn)
            self._real = real
        return self._real

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("_real", "_registered", "_sqlite_utils"):
            raise AttributeError(attr)
        return getattr(self.real, attr)


MIGRATIONS = MigrationSet("capscan")


def _script(db: Database | sqlite3.Connection, sql: str) -> None:
    """``db.executescript(sql)`` inside the migration's transaction, split where a statement ends.

    sqlite-utils splits a script in a transaction by asking ``sqlite3.complete_statement`` of every
    prefix, character by character: quadratic, and half the time a new database took to create.
    Asking only at each ``;`` gives the same statements (a statement can only end at one). (``db`` may
    be a plain connection: ``store.db`` runs m007 on one to learn its triggers' SQL.)"""
    conn = db if isinstance(db, sqlite3.Connection) else db.conn
    if not conn.in_transaction:
        conn.executescript(sql)
        return
    start = 0
    for end in (i + 1 for i, char in enumerate(sql) if char == ";"):
        if sqlite3.complete_statement(sql[start:end]):
            conn.execute(sql[start:end])
            start = end
    if sql[start:].strip():
        conn.execute(sql[start:])


@MIGRATIONS()
def m001_sources_runs(db: Database) -> None:
    _script(db,
        """
        CREATE TABLE IF NOT EXISTS sources (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL,
            size INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            ingested_at TEXT NOT NULL,
            lines INTEGER NOT NULL,
            recognised_lines INTEGER NOT NULL,
            unrecognised_lines INTEGER NOT NULL,
            overlong_lines INTEGER NOT NULL,
            raw_gzip BLOB
        );
        CREATE INDEX IF NOT EXISTS sources_sha256 ON sources(sha256);
        CREATE TABLE IF NOT EXISTS runs (
            id INTEGER PRIMARY KEY,
            source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            first_line INTEGER NOT NULL,
            last_line INTEGER NOT NULL,
            program TEXT,
            backend TEXT,
            device_name TEXT,
            apple_family INTEGER,
            model TEXT,
            created_at TEXT NOT NULL,
            facts TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS runs_source ON runs(source_id);
        CREATE TABLE IF NOT EXISTS throughput (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            line INTEGER,
            test TEXT NOT NULL,
            tok_s REAL NOT NULL,
            stddev REAL,
            model TEXT,
            kind TEXT NOT NULL,
            n_prompt INTEGER,
            n_gen INTEGER,
            n_depth INTEGER
        );
        CREATE INDEX IF NOT EXISTS throughput_run ON throughput(run_id, test);
        CREATE TABLE IF NOT EXISTS evidence (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            line INTEGER NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS evidence_run ON evidence(run_id, line);
        """
    )


@MIGRATIONS()
def m002_diagnoses(db: Database) -> None:
    _script(db,
        """
        CREATE TABLE IF NOT EXISTS diagnoses (
            run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
            verdict TEXT NOT NULL,
            fixable INTEGER NOT NULL,
            confidence TEXT,
            environment TEXT,
            host_chip TEXT,
            report TEXT NOT NULL,
            rules_version TEXT NOT NULL,
            diagnosed_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS diagnoses_verdict ON diagnoses(verdict);
        """
    )


@MIGRATIONS()
def m003_remedy(db: Database) -> None:
    """What `capscan remedy` did (and how to put it back), and which runs it produced."""
    _script(db,
        """
        CREATE TABLE IF NOT EXISTS remedy_actions (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            action TEXT NOT NULL,
            args TEXT NOT NULL,
            result TEXT NOT NULL,
            undo TEXT,
            undone_at TEXT
        );
        CREATE TABLE IF NOT EXISTS run_links (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            stock_run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            relation TEXT NOT NULL,
            action_id INTEGER REFERENCES remedy_actions(id) ON DELETE SET NULL,
            PRIMARY KEY (run_id, stock_run_id)
        );
        CREATE INDEX IF NOT EXISTS run_links_stock ON run_links(stock_run_id);
        """
    )


@MIGRATIONS()
def m004_tui_indexes(db: Database) -> None:
    """Indexes for `capscan tui` over 10^5 runs. Runs and diagnoses rows carry
    large JSON (facts, report), so any scan of those tables reads most of the
    file: these covering indexes let the list, its filters and its counts read
    only the small columns (and let diagnose's peer lookup find a model fast)."""
    _script(db,
        """
        CREATE INDEX IF NOT EXISTS runs_list ON runs(id, source_id, created_at, program, device_name, model);
        CREATE INDEX IF NOT EXISTS runs_device ON runs(device_name);
        CREATE INDEX IF NOT EXISTS runs_model ON runs(model);
        CREATE INDEX IF NOT EXISTS diagnoses_list ON diagnoses(run_id, verdict, environment, fixable);
        CREATE INDEX IF NOT EXISTS diagnoses_environment ON diagnoses(environment);
        """
    )


@MIGRATIONS()
def m005_watch_cursors(db: Database) -> None:
    """Where `capscan watch` stopped in each followed file: everything before
    ``offset`` (line ``line``) is stored. A file is recognised by a sha256 of
    its first ``head_len`` bytes (up to 1 KiB), so a cursor follows its content
    when a runtime renames server.log to server-1.log; ``path`` is where it was
    last seen."""
    _script(db,
        """
        CREATE TABLE IF NOT EXISTS watch_cursors (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL,
            head_len INTEGER NOT NULL,
            head_sha256 TEXT NOT NULL,
            offset INTEGER NOT NULL,
            line INTEGER NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS watch_cursors_path ON watch_cursors(path);
        CREATE INDEX IF NOT EXISTS watch_cursors_head ON watch_cursors(head_sha256);
        """
    )


@MIGRATIONS()
def m006_listing_indexes(db: Database) -> None:
    """`capscan runs -n 0` over 10^5 runs reads only indexes: every listed column
    of runs in one covering index (it supersedes m004's runs_list, which lacked
    backend and apple_family), and source paths for the text filters."""
    _script(db,
        """
        CREATE INDEX IF NOT EXISTS runs_listing ON runs(id, source_id, created_at, program, backend, device_name,
                                                        apple_family, model);
        DROP INDEX IF EXISTS runs_list;
        CREATE INDEX IF NOT EXISTS sources_path ON sources(path);
        """
    )


@MIGRATIONS()
def m007_diagnosis_inputs(db: Database) -> None:
    """When a stored diagnosis may be shown without running the rules again (`capscan show`).

    ``store_generation.n`` counts every change to what diagnoses are made of: a run written,
    changed or deleted (with its rows: a run's throughput and evidence are inserted in the
    transaction that inserts the run), a throughput or evidence row changed or deleted, a
    diagnosis added, deleted or changed in content. ``diagnosis_inputs.inputs`` records the
    generation (with the rules and code, and a digest of the run itself) at which a run's stored
    diagnosis was known to be current (``analyzer.store.freshness``); any change since makes it
    stale, and the run is diagnosed again. (A table of its own: ``diagnoses`` keeps its columns.)
    And a partial index of the sources that keep their raw log: ``db stats`` counts them without
    reading every source row."""
    bump = "BEGIN UPDATE store_generation SET n = n + 1 WHERE id = 1; END"
    _script(db,
        f"""
        CREATE TABLE IF NOT EXISTS store_generation (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
        INSERT OR IGNORE INTO store_generation (id, n) VALUES (1, 0);
        CREATE INDEX IF NOT EXISTS sources_raw_kept ON sources(id) WHERE raw_gzip IS NOT NULL;
        CREATE TABLE IF NOT EXISTS diagnosis_inputs (
            run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
            inputs TEXT NOT NULL
        );
        CREATE TRIGGER IF NOT EXISTS generation_runs_insert AFTER INSERT ON runs {bump};
        CREATE TRIGGER IF NOT EXISTS generation_runs_update AFTER UPDATE ON runs {bump};
        CREATE TRIGGER IF NOT EXISTS generation_runs_delete AFTER DELETE ON runs {bump};
        CREATE TRIGGER IF NOT EXISTS generation_throughput_update AFTER UPDATE ON throughput {bump};
        CREATE TRIGGER IF NOT EXISTS generation_throughput_delete AFTER DELETE ON throughput {bump};
        CREATE TRIGGER IF NOT EXISTS generation_evidence_update AFTER UPDATE ON evidence {bump};
        CREATE TRIGGER IF NOT EXISTS generation_evidence_delete AFTER DELETE ON evidence {bump};
        CREATE TRIGGER IF NOT EXISTS generation_diagnoses_insert AFTER INSERT ON diagnoses {bump};
        CREATE TRIGGER IF NOT EXISTS generation_diagnoses_delete AFTER DELETE ON diagnoses {bump};
        CREATE TRIGGER IF NOT EXISTS generation_diagnoses_update AFTER UPDATE ON diagnoses
            WHEN old.report IS NOT new.report OR old.verdict IS NOT new.verdict OR old.fixable IS NOT new.fixable
              OR old.confidence IS NOT new.confidence OR old.environment IS NOT new.environment
              OR old.host_chip IS NOT new.host_chip OR old.run_id IS NOT new.run_id {bump};
        """
    )


@MIGRATIONS()
def m008_sources_rejected(db: Database) -> None:
    """How many records of a source were refused at the parser boundary (wrong types, impossible values,
    speeds no machine can have: analyzer.parsers.plausible), beside its other line counts. Sources
    stored before are 0: what was refused then is unknown."""
    if "rejected_records" not in {r[1] for r in db.execute("PRAGMA table_info(sources)").fetchall()}:
        db.execute("ALTER TABLE sources ADD COLUMN rejected_records INTEGER NOT NULL DEFAULT 0")


@MIGRATIONS()
def m009_run_origins(db: Database) -> None:
    """Runs imported from another capscan's export (`capscan ingest guest-a.json`): where each was
    diagnosed. ``report`` is the origin's diagnosis, shown as diagnosed there: this store holds the
    report, not the log, so the rules never diagnose such a run again. ``key`` makes an import
    idempotent: the same run of the same guest's log, exported twice, is stored once."""
    _script(db,
        """
        CREATE TABLE IF NOT EXISTS run_origins (
            run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
            key TEXT NOT NULL UNIQUE,
            instance TEXT,
            source TEXT,
            sha256 TEXT,
            origin_run_id INTEGER,
            capscan_version TEXT,
            diagnosed_at TEXT,
            report TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS run_origins_instance ON run_origins(instance, run_id);
        """
    )


@MIGRATIONS()
def m010_drop_diagnosis_stamps(db: Database) -> None:
    """`show` diagnoses its run in memory and writes nothing (issue 28), so the machinery that decided
    whether a stored diagnosis could be shown without the rules goes: m007's ten triggers, the
    store_generation counter and the diagnosis_inputs stamps. m007's sources_raw_kept index stays."""
    names = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'generation_%'").fetchall()]
    for name in names:
        db.execute(f'DROP TRIGGER IF EXISTS "{name}"')
    _script(db, "DROP TABLE IF EXISTS diagnosis_inputs; DROP TABLE IF EXISTS store_generation;")


@MIGRATIONS()
def m011_diagnoses_claims(db: Database) -> None:
    """A stored verdict is a claim that today's rules decide again before a command shows or acts on it
    (analyzer.rules.today.todays_verdicts). ``stamp``: this installation's HMAC over what a diagnosis
    says and its run's facts (analyzer.store.stamp); rows stored before have none, and their claims are
    decided again. The covering index finds the claims (fixable, a verdict that is not settled, older
    rules) with what their stamps cover, without reading the diagnoses' reports."""
    if "stamp" not in {r[1] for r in db.execute("PRAGMA table_info(diagnoses)").fetchall()}:
        db.execute("ALTER TABLE diagnoses ADD COLUMN stamp TEXT")
    _script(db, "CREATE INDEX IF NOT EXISTS diagnoses_claims ON diagnoses(rules_version, fixable, verdict, "
                     "environment, stamp);")


@MIGRATIONS()
def m012_diagnoses_peer_chip(db: Database) -> None:
    """A guest's peers are the newest runs of its model with no diagnosis or one on its host chip
    (analyzer.store.diagnoses.peer_candidate_ids). Each run of the model was checked in the diagnoses
    table, whose rows carry the whole report: this narrow covering index answers that check from a few
    pages (a guest on a chip with no stored peer checks every run of its model)."""
    _script(db, "CREATE INDEX IF NOT EXISTS diagnoses_peer_chip ON diagnoses(run_id, host_chip);")


@MIGRATIONS()
def m013_evidence_inner(db: Database) -> None:
    """A log held in one JSON string (a CI artifact's stderr_tail) puts many lines on one physical line:
    ``inner`` is an evidence line's number inside that string, shown as line:inner (20:5). Null for a
    line of the log itself and for evidence stored before (its inner number is unknown)."""
    if "inner" not in {r[1] for r in db.execute("PRAGMA table_info(evidence)").fetchall()}:
        db.execute("ALTER TABLE evidence ADD COLUMN inner INTEGER")
