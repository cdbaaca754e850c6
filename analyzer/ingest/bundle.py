"""A self-test bundle (`capscan remedy selftest --bundle FILE`, analyzer.output.bundle) read back:
each log inside (the probe stock and remedied, llama-bench before and after) is stored as a log of
its own and diagnosed here, so a bundle a user attaches to an issue becomes a fixture.

A bundle is hostile input like any log: it is read whole only up to MAX_BUNDLE, decoded with the
exports' bounded decoder, and only its logs are used (the verdicts and hypotheses it states are the
user's machine's words, shown to a reader, never trusted here). A log that is itself a capscan
export or bundle is refused: a bundle never nests."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Callable, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analyzer.parsers.exports import decode, sniff
from analyzer.read.reader import Input, InputError

if TYPE_CHECKING:
    from analyzer.ingest import IngestResult
    from analyzer.store.db import Database

MAX_BUNDLE = 64 << 20
MAX_LOGS = 64


class _Lax(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Log(_Lax):
    label: str = Field(max_length=200)
    text: str = Field(max_length=8 << 20)


class _Bundle(_Lax):
    """What reading back needs of any bundle version: its logs (newer keys are ignored)."""

    bundle: str
    logs: list[_Log] = Field(max_length=MAX_LOGS)


def import_bundle(db: Database, source: Input, chunks: Iterator[bytes], result: IngestResult, *,
                  force: bool, ingest: Callable[..., IngestResult]) -> IngestResult:
    """Store each log of the bundle as its own source (named FILE [label]) with ``ingest`` (analyzer.ingest's,
    passed in: the two modules do not import each other); the result lists every run."""
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) > MAX_BUNDLE:
            raise InputError(f"{source.path}: a self-test bundle over {MAX_BUNDLE >> 20} MB; nothing of it was stored")
    try:
        bundle = _Bundle.model_validate(decode(data.decode("utf-8", "replace").lstrip("\ufeff")))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:200]
        raise InputError(f"{source.path}: a capscan self-test bundle that cannot be read ({first}); nothing of it "
                         "was stored") from None
    result.size = len(data)
    dups: list[int] = []
    for log in bundle.logs:
        text = log.text.encode()
        if sniff(text[:4096]) is not None:   # a bundle's log is a program's output, never capscan's own document
            result.rejected += 1
            continue
        label = "".join(c if c.isprintable() else "?" for c in log.label)
        one = ingest(db, Input(f"{source.path} [{label}]", io.BytesIO(text)), force=force)
        result.lines += one.lines
        result.recognised += one.recognised
        result.unrecognised += one.unrecognised
        result.run_ids += one.run_ids
        if one.duplicate_of is not None:
            dups.append(one.duplicate_of)
        else:
            result.source_id = one.source_id
            result.imported += len(one.run_ids)
    if dups and result.source_id is None:   # every log was stored before: the bundle is a duplicate
        result.duplicate_of = dups[0]
    return result
