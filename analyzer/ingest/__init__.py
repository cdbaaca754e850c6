"""reader -> scanner/parsers -> assembly -> store, for one source at a time."""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, Callable

from analyzer.model import RunFacts, Throughput
from analyzer.parsers import Dispatcher
from analyzer.parsers.exports import sniff
from analyzer.parsers.scanner import Scanner
from analyzer.read.reader import Input, PartialInputError
from analyzer.runs.assembler import Assembler
from analyzer.runs.builder import RunBuilder
from analyzer.runs.naming import explicit_name, piped_source_name
from analyzer.store.db import StoreError
from analyzer.store.writer import SourceWriter

if TYPE_CHECKING:
    from analyzer.store.db import Database


@dataclass
class IngestResult:
    path: str
    source_id: int | None = None
    run_ids: list[int] = field(default_factory=list)
    duplicate_of: int | None = None  # source id already holding this content
    lines: int = 0
    recognised: int = 0
    unrecognised: int = 0
    overlong: int = 0
    rejected: int = 0  # records skipped at the parser boundary (wrong types, impossible values)
    size: int = 0
    piped: bool = False  # stdin: ``path`` is the name it was stored under (or <stdin> when it was not stored)
    export: str | None = None  # a capscan export read back (analyzer.parsers.exports): its shape's name
    imported: int = 0  # its runs stored now
    already: int = 0  # its runs an earlier import had stored
    conflicts: list[int] = field(default_factory=list)  # runs stored before that this export contradicts
    claims_refused: int = 0  # imported runs whose fixable claim their own facts contradict
    speeds_refused: int = 0  # imported speeds no machine can have
    trailing: int = 0  # characters after the export's end, ignored

    @property
    def duplicate(self) -> bool:
        return self.duplicate_of is not None


def ingest(db: Database, source: Input, *, force: bool = False, keep_raw: bool = False,
           tee: BinaryIO | None = None, progress: Callable[[int], None] | None = None,
           first_line: int = 1, before_commit: Callable[[], None] | None = None,
           status: Callable[[int, dict[int, None]], None] | None = None) -> IngestResult:
    """Store every run found in ``source``, all or nothing.

    Raises ``InputError`` (nothing stored for this source) when the input
    cannot be read; KeyboardInterrupt also rolls the source back. An input
    damaged part-way (a truncated gzip) keeps its complete lines before the
    damage: they are stored, then ``PartialInputError`` says so (exit 2).

    ``first_line`` numbers the input's first line (``capscan watch`` stores a
    followed file piece by piece, numbered as in the file); ``before_commit``
    runs inside the source's transaction, just before it commits (the watch
    cursor moves with the runs it stored, or neither does). ``status`` is told,
    after each chunk, the lines read so far and the ids of the runs written (in
    order; read-only), for a terminal's status line while a pipe is read.
    """
    writer = SourceWriter(db, source.path)
    result = IngestResult(path=source.path, piped=source.piped)
    order: dict[int, None] = {}  # run ids in order of appearance (a dict: membership in O(1))
    first: dict[int, RunFacts] = {}  # the first run's facts, by its seq (a pipe is named after it)

    def on_run(run: RunBuilder) -> None:
        order[writer.write_run(run.seq, run.facts, run.evidence)] = None
        if not first or run.seq in first:
            first[run.seq] = run.facts

    def on_throughput(run: RunBuilder, rows: list[Throughput]) -> None:
        writer.write_throughput(run.seq, run.facts, rows)

    assembler = Assembler(on_run, on_throughput)
    dispatcher = Dispatcher()
    scanner = Scanner(dispatcher, assembler.feed)
    scanner.stats.lines = first_line - 1
    chunks = source.chunks(tee=tee)
    first_chunk = next(chunks, b"") if first_line == 1 else b""
    shape = sniff(first_chunk) if first_chunk else None
    if shape is not None and shape.name == "capscan-bundle":  # a self-test bundle: the logs inside, each a log
        from analyzer.ingest.bundle import import_bundle

        result.export = shape.name
        return import_bundle(db, source, itertools.chain([first_chunk], chunks), result, force=force, ingest=ingest)
    if shape is not None:  # capscan's own export: its runs are reports, not a log (analyzer.ingest.exports)
        from analyzer.ingest.exports import import_export

        result.export = shape.name
        return import_export(db, source, itertools.chain([first_chunk], chunks), shape, result, force=force)
    try:
        for chunk in itertools.chain([first_chunk] if first_chunk else [], chunks):
            scanner.feed(chunk)
            if progress is not None:
                progress(len(chunk))
            if status is not None:
                status(scanner.stats.lines - (first_line - 1), order)
        scanner.close()
        assembler.finish()
        result.lines = scanner.stats.lines - (first_line - 1)
        result.recognised, result.unrecognised = dispatcher.recognised, dispatcher.unrecognised
        result.overlong, result.size = scanner.stats.overlong, source.size
        result.rejected = dispatcher.rejected
        writer.begin()  # the write lock first: parallel ingests of one content then see each other's commit
        dup = writer.duplicate_of(source.sha256)
        if dup is not None and not force:
            writer.rollback()
            result.duplicate_of, result.run_ids = dup
            if source.damage:
                raise PartialInputError(f"{source.path}: {source.damage}; its complete lines were already stored as "
                                        f"source {result.duplicate_of}", result)
            return result
        name = _piped_name(source, next(iter(first.values()), None), len(order)) if source.piped else None
        result.source_id = writer.commit(
            size=source.size, sha256=source.sha256, lines=result.lines, recognised=result.recognised,
            unrecognised=result.unrecognised, overlong=result.overlong, rejected=result.rejected,
            raw_gzip=source.raw_gzip() if keep_raw else None, before_commit=before_commit, path=name)
        if name is not None:
            result.path = name
        result.run_ids = list(order)
        if source.damage:
            ids = ", ".join(str(i) for i in order)
            raise PartialInputError(
                f"{result.path}: {source.damage}; the {result.lines:,} complete lines before it were stored as source "
                f"{result.source_id} ({'runs ' + ids if ids else 'no runs'})", result)
        return result
    except PartialInputError:
        raise  # committed: what was readable is stored
    except sqlite3.Error as exc:
        writer.rollback_quietly()
        raise StoreError(f"cannot store {source.path} ({exc}); nothing of it was stored, and what the database "
                         "held before is unchanged") from None
    except BaseException:
        writer.rollback_quietly()
        raise


def _piped_name(source: Input, first: RunFacts | None, runs: int) -> str:
    """A pipe's stored name: --name's, else its first run's program, model and the time."""
    given = explicit_name(source.name) if source.name else None
    return given or piped_source_name(first, runs)

