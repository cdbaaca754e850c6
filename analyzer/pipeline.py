"""The front door: the only caller of ingest (read -> parsers -> runs -> store) and of the rules'
diagnosing entry points (``analyzer.rules.diagnose``, ``analyzer.rules.today``).

The CLI, the TUI, the remedy and the fleet call one function here per thing they do; the flags
that differ between callers are explicit keyword arguments, so a reader sees at the call which
kind of diagnosis a command gets. The import contract (pyproject.toml) makes this its own layer
and forbids every layer above it to import ingest or the diagnosing modules directly.

Imports of the pipeline's stages stay inside the functions: ``capscan runs`` on 10^5 settled runs
must not pay for the parsers, and ``show`` is measured against its import floor (bench/run.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Iterator, Sequence, TypeVar

if TYPE_CHECKING:
    from analyzer.diagnosis import Diagnosis
    from analyzer.ingest import IngestResult
    from analyzer.ingest.pieces import Piece
    from analyzer.model import StoredRun
    from analyzer.read.reader import Input
    from analyzer.store.db import Database

R = TypeVar("R")


# -- reading an input in --------------------------------------------------------------------------


def store_input(db: Database, source: Input, *, force: bool = False, keep_raw: bool = False,
                tee: BinaryIO | None = None, progress: Callable[[int], None] | None = None,
                first_line: int = 1, before_commit: Callable[[], None] | None = None,
                status: Callable[[int, dict[int, None]], None] | None = None) -> IngestResult:
    """Parse one opened input and store its runs, all or nothing (``analyzer.ingest.ingest``: its
    errors, InputError and PartialInputError, are the caller's to report). Nothing is diagnosed:
    the runs of several inputs are diagnosed together (``diagnose_and_store``)."""
    from analyzer.ingest import ingest

    return ingest(db, source, force=force, keep_raw=keep_raw, tee=tee, progress=progress, first_line=first_line,
                  before_commit=before_commit, status=status)


def read_piece(path: str, data: bytes, *, first_line: int) -> Piece:
    """A piece of a followed log (``capscan watch``: whole lines, its first numbered ``first_line``)
    scanned once, nothing stored: its runs' spans (``Piece.spans``) decide what is complete, and
    ``store_piece`` stores it from the same scan (analyzer.ingest.pieces)."""
    from analyzer.ingest.pieces import scan_piece

    return scan_piece(path, data, first_line=first_line)


def store_piece(db: Database, piece: Piece, *, nbytes: int, before_commit: Callable[[], None]) -> IngestResult:
    """Store the first ``nbytes`` of a piece ``read_piece`` scanned (all of it, or its complete runs) as
    one source, as ``store_input(..., force=True)`` would; ``before_commit`` runs in its transaction."""
    from analyzer.ingest.pieces import write_piece

    return write_piece(db, piece, nbytes=nbytes, before_commit=before_commit)


def piece_after(piece: Piece, nbytes: int) -> Piece | None:
    """What is left of a piece once its first ``nbytes`` are stored, from the same scan, when scanning
    it alone would give the same; None when it must be scanned again (``read_piece``)."""
    from analyzer.ingest.pieces import rest_of_piece

    return rest_of_piece(piece, nbytes)


# -- diagnosing stored runs -----------------------------------------------------------------------


def diagnose_and_store(db: Database, run_ids: Iterable[int], *, refresh_peers: bool,
                       keep: bool = True) -> list[StoredRun]:
    """Diagnose the runs with today's rules and keep each diagnosis in the store; returns the runs
    with their diagnosis (none with ``keep=False``: any count in bounded memory).

    ``refresh_peers``: the runs are new to the store (an input just read), so stored runs of the
    same model and hardware are diagnosed again too (a host log is yesterday's guest's baseline).
    Without it only the runs named are diagnosed (a remedy or export acting on known runs)."""
    from analyzer.rules.diagnose import diagnose_runs

    return diagnose_runs(db, run_ids, refresh_peers=refresh_peers, keep=keep)


def diagnose_to_read(db: Database, run: StoredRun) -> StoredRun:
    """One loaded run diagnosed in memory with its stored peers and its predicted speed, as
    ``diagnose`` would show it; nothing written (``show``, ``compare``, ``report``, the TUI)."""
    from analyzer.rules.diagnose import diagnose_for_reading

    return diagnose_for_reading(db, run)


# -- deciding stored claims (a stored verdict is a claim: analyzer.rules.today) -------------------


def decide_run(db: Database, run: StoredRun, *, keep_settled: bool) -> Diagnosis:
    """The diagnosis a command may act on or show for one loaded run, decided with today's rules in
    memory (the remedy plan). ``keep_settled``: a stored diagnosis that claims nothing stands (a
    reader of every run: export json)."""
    from analyzer.rules.today import todays_diagnosis

    return todays_diagnosis(db, run, keep_settled=keep_settled)


def decide_reports(db: Database, runs: list[StoredRun]) -> None:
    """A batch of loaded runs, each one's whole report set to today's (export json)."""
    from analyzer.rules.today import todays_reports

    todays_reports(db, runs)


def decide_listing(db: Database, rows: Iterable[R], run_id: Callable[[R], int], *,
                   among: Sequence[int] | None) -> Iterator[tuple[R, Diagnosis | None]]:
    """Each listed row with today's diagnosis where its stored one is a claim, else None (``runs``,
    the TUI's list, metrics). ``among``: the ids of a bounded listing, else None (the whole store)."""
    from analyzer.rules.today import todays_verdicts

    return todays_verdicts(db, rows, run_id, among=among)
