"""Fuzz targets, one per input kind (issue 24 item 7): random bytes, random byte-level mutations of every
fixture capscan has (logs, llama-bench JSON/CSV/JSONL, probe output, markdown tables, compressed files),
and the gzip of each, whole or cut short. Each goes the whole way: the real reader on a real file, ingest
into a real SQLite file, then every stored run is loaded, diagnosed and printed.

The property: bad input gets a one-line error (``InputError``) or is skipped and counted, never an
exception; what is stored loads, diagnoses and prints terminal-safe. Examples are bounded so CI stays
fast; the memory and time bounds on the same mutations are measured in bench/bounds.py (a benchmark,
not a timed test)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.ingest import ingest
from analyzer.read.reader import InputError, open_input
from analyzer.store.db import open_db
from tests.test_hostile_input import assert_every_run_loads_and_diagnoses

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# every fixture of every kind, smallest first so hypothesis shrinks towards small files
ALL = sorted((p for p in FIXTURES.rglob("*") if p.is_file() and p.stat().st_size < (2 << 20)),
             key=lambda p: (p.stat().st_size, str(p)))
KINDS = sorted({p.suffix for p in ALL})
# CAPSCAN_FUZZ_EXAMPLES=800 for a longer hunt (45 s here: nothing found at commit time)
SETTINGS = settings(max_examples=int(os.environ.get("CAPSCAN_FUZZ_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """Byte-level damage: flips, inserted junk, deleted or repeated stretches, a cut end."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 6))):
        if not buf:
            buf += draw(st.binary(min_size=1, max_size=64))
            continue
        i = draw(st.integers(0, len(buf) - 1))
        op = draw(st.sampled_from(["flip", "insert", "delete", "repeat", "cut"]))
        if op == "flip":
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=64))
        elif op == "delete":
            del buf[i:i + draw(st.integers(1, 256))]
        elif op == "repeat":
            piece = bytes(buf[i:i + draw(st.integers(1, 512))])
            buf[i:i] = piece * draw(st.integers(1, 8))
        else:
            del buf[i:]
    return bytes(buf)


@st.composite
def wrapped(draw, data: bytes) -> bytes:
    """As it is, or gzipped (whole, or cut short as a copy that was interrupted)."""
    how = draw(st.sampled_from(["plain", "gzip", "gzip-cut"]))
    if how == "plain":
        return data
    packed = gzip.compress(data, mtime=0)
    return packed if how == "gzip" else packed[:draw(st.integers(1, max(1, len(packed) - 1)))]


def _ingest_file(tmp: Path, data: bytes) -> None:
    path = tmp / "input.log"
    path.write_bytes(data)
    db_path = tmp / "f.db"
    db = open_db(db_path)
    try:
        source = open_input(str(path))
        try:
            result = ingest(db, source, force=True)
        finally:
            source.close()
        assert result.rejected >= 0 and result.lines >= 0
    except InputError as exc:  # the one-line error: say what is wrong, in one line
        assert "\n" not in str(exc) and str(exc)
    finally:
        db.conn.close()
    assert_every_run_loads_and_diagnoses(db_path)


def test_every_kind_of_fixture_is_fuzzed():
    """The fixtures hold every input kind the fuzz is meant to reach (a kind lost is a target lost)."""
    assert {".log", ".json", ".jsonl", ".csv", ".txt", ".md", ".gz"} <= set(KINDS), KINDS
    assert len(ALL) > 600


@SETTINGS
@given(data=st.data())
def test_mutated_fixtures_plain_or_gzipped(tmp_path_factory, data):
    original = data.draw(st.sampled_from(ALL)).read_bytes()
    _ingest_file(tmp_path_factory.mktemp("fuzz"), data.draw(wrapped(data.draw(mutated(original)))))


@SETTINGS
@given(data=st.data())
def test_random_bytes_plain_or_gzipped(tmp_path_factory, data):
    raw = data.draw(st.binary(max_size=4096))
    _ingest_file(tmp_path_factory.mktemp("fuzz"), data.draw(wrapped(raw)))
