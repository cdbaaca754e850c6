"""The SQLite store as the ingest issue asks: migrations on open, WAL, an
owner-only file, dedupe by sha256, one transaction per source (also under
SIGKILL and injected errors), concurrent writers, --keep-raw."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input, InputError
from analyzer.store.db import open_db
from analyzer.store.migrations import MIGRATIONS
from tests.conftest import REPO, run_capscan
from tests.ingest_util import FIXTURES, count, db_bytes, ingest_bytes, ingest_path

GUEST = FIXTURES / "metal/m4-2026-08-guest-stock.log"
HOST = FIXTURES / "metal/m4-2026-08-host-m1-ultra.log"
PROMPT_LOG = FIXTURES / "timings/llama-print-timings-2023.log"
PROMPT_TEXT = b"The weather today is sunny with a light breeze"


def _bench_rows(n: int, devices: int = 1) -> bytes:
    """n llama-bench JSONL rows; the device changes every n/devices rows (one run each)."""
    out = io.StringIO()
    per = max(1, n // devices)
    for i in range(n):
        dev = f"Apple Test GPU {i // per}"
        out.write(json.dumps({"build_commit": "ee3d1b54c", "build_number": 10167, "cpu_info": "Accelerate",
                              "gpu_info": dev, "backends": "MTL,BLAS", "model_type": "llama 1B Q4_K - Medium",
                              "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ts": 1000 + i % 977 + 0.5,
                              "stddev_ts": 1.0}) + "\n")
    return out.getvalue().encode()


def _schema(path: Path) -> list[tuple]:
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# opening the database
# ---------------------------------------------------------------------------

def test_migrations_applied_on_open_and_second_open_is_a_noop(db_path):
    db = open_db(db_path)
    assert not MIGRATIONS.pending(db)
    tables = set(db.table_names())
    assert {"sources", "runs", "throughput", "evidence", "diagnoses"} <= tables
    applied = db.conn.execute("SELECT name, applied_at FROM _sqlite_migrations ORDER BY rowid").fetchall()
    assert [n for n, _ in applied] == [m.name for m in MIGRATIONS._migrations]
    db.conn.close()
    schema = _schema(db_path)
    db = open_db(db_path)
    assert db.conn.execute("SELECT name, applied_at FROM _sqlite_migrations ORDER BY rowid").fetchall() == applied
    db.conn.close()
    assert _schema(db_path) == schema


def test_wal_mode_and_owner_only_files(db_path):
    ingest_path(db_path, GUEST)
    conn = sqlite3.connect(str(db_path))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert stat.S_IMODE(os.stat(db_path).st_mode) == 0o600
    for extra in (Path(str(db_path) + "-wal"), Path(str(db_path) + "-shm")):
        if extra.exists():
            assert stat.S_IMODE(os.stat(extra).st_mode) & 0o077 == 0, extra


def test_db_created_by_the_cli_is_owner_only_even_with_a_lax_umask(tmp_path):
    db = tmp_path / "sub" / "dir" / "capscan.db"
    proc = subprocess.run(f"umask 000 && {sys.executable} -m analyzer --db {db} ingest {GUEST}", shell=True,
                          capture_output=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(db.parent).st_mode) & 0o077 == 0


def test_database_that_is_not_sqlite_is_a_one_line_error(tmp_path):
    bad = tmp_path / "not.db"
    bad.write_bytes(b"this is not a database" * 100)
    proc = run_capscan("ingest", str(GUEST), db=bad)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.startswith("capscan: ") and "Traceback" not in err and err.count("\n") == 1


# ---------------------------------------------------------------------------
# dedupe
# ---------------------------------------------------------------------------

def test_same_content_twice_stores_nothing_new_and_names_the_runs(db_path, tmp_path):
    first = run_capscan("ingest", str(FIXTURES / "wrapped/two-runs-host-and-guest.log"), db=db_path, check=True)
    ids = first.stdout.decode().split()
    assert len(ids) == 2
    before = (count(db_path, "SELECT COUNT(*) FROM sources"), count(db_path, "SELECT COUNT(*) FROM runs"),
              count(db_path, "SELECT COUNT(*) FROM throughput"), count(db_path, "SELECT COUNT(*) FROM evidence"))
    # same bytes under another name: still the same content
    copy = tmp_path / "renamed.log"
    copy.write_bytes((FIXTURES / "wrapped/two-runs-host-and-guest.log").read_bytes())
    again = run_capscan("ingest", str(copy), db=db_path)
    assert again.returncode == 0
    assert again.stdout == b""
    err = again.stderr.decode()
    assert "already ingested" in err and all(i in err for i in ids) and "--force" in err
    after = (count(db_path, "SELECT COUNT(*) FROM sources"), count(db_path, "SELECT COUNT(*) FROM runs"),
             count(db_path, "SELECT COUNT(*) FROM throughput"), count(db_path, "SELECT COUNT(*) FROM evidence"))
    assert after == before
    forced = run_capscan("ingest", "--force", str(copy), db=db_path, check=True)
    new_ids = forced.stdout.decode().split()
    assert len(new_ids) == 2 and not set(new_ids) & set(ids)
    assert count(db_path, "SELECT COUNT(*) FROM runs") == 4
    assert count(db_path, "SELECT COUNT(DISTINCT sha256) FROM sources") == 1


def test_dedupe_of_a_source_without_runs(db_path, tmp_path):
    empty = FIXTURES / "bad/nothing-recognised.log"
    run_capscan("ingest", str(empty), db=db_path, check=True)
    run_capscan("ingest", str(empty), db=db_path, check=True)
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 1


def test_gzip_and_plain_of_the_same_log_are_the_same_content(db_path):
    r1, _ = ingest_path(db_path, GUEST)
    r2, _ = ingest_path(db_path, FIXTURES / "bad/good.log.gz")
    assert r2.duplicate and r2.duplicate_of == r1.source_id and r2.run_ids == r1.run_ids


# ---------------------------------------------------------------------------
# one transaction per source
# ---------------------------------------------------------------------------

class _FailingStream(io.RawIOBase):
    """A file whose read fails after ``ok_reads`` reads (a disk error mid-source)."""

    def __init__(self, data: bytes, ok_reads: int, exc: BaseException):
        self._buf = io.BytesIO(data)
        self._left = ok_reads
        self._exc = exc

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._left == 0:
            raise self._exc
        self._left -= 1
        return self._buf.read(n)


def _state(db_path: Path) -> tuple:
    conn = sqlite3.connect(str(db_path))
    try:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("sources", "runs", "throughput", "evidence"))
    finally:
        conn.close()


@pytest.mark.parametrize("exc", [OSError(5, "Input/output error"), KeyboardInterrupt()],
                         ids=["read-error", "interrupt"])
def test_error_mid_source_stores_nothing_of_it(db_path, exc):
    ingest_path(db_path, HOST)
    before = _state(db_path)
    assert before[1] == 1
    data = _bench_rows(40_000, devices=4)  # ~11 MB: several runs and throughput spills written before the error
    db = open_db(db_path)
    source = Input("big.jsonl", _FailingStream(data, ok_reads=2, exc=exc))
    with pytest.raises(InputError if isinstance(exc, OSError) else KeyboardInterrupt):
        ingest(db, source)
    assert not db.conn.in_transaction
    db.conn.close()
    assert _state(db_path) == before
    # the earlier source is intact and the database still takes writes
    r, _ = ingest_path(db_path, GUEST)
    assert len(r.run_ids) == 1
    assert count(db_path, "SELECT COUNT(*) FROM runs WHERE device_name = 'Apple M1 Ultra'") == 1


def test_error_mid_source_with_many_rows_really_wrote_before_failing(db_path):
    """Guard for the test above: without the failure, the same input does produce runs and spilled rows."""
    result = ingest_bytes(db_path, _bench_rows(40_000, devices=4))
    assert len(result.run_ids) == 4
    assert count(db_path, "SELECT COUNT(*) FROM throughput") == 40_000


def test_sigkill_mid_source_leaves_all_or_nothing(db_path, tmp_path):
    run_capscan("ingest", str(HOST), db=db_path, check=True)
    before = _state(db_path)
    big = tmp_path / "big.jsonl"
    big.write_bytes(_bench_rows(150_000, devices=3))
    wal = Path(str(db_path) + "-wal")
    base = wal.stat().st_size if wal.exists() else 0
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), "ingest", str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            if wal.exists() and wal.stat().st_size > base + (1 << 20):
                break  # uncommitted writes of this source are in the WAL
            time.sleep(0.01)
        assert proc.poll() is None, "ingest finished before it could be killed; make the input larger"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    conn = sqlite3.connect(str(db_path))
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert _state(db_path) == before  # nothing of the killed source
    assert count(db_path, "SELECT COUNT(*) FROM runs WHERE device_name = 'Apple M1 Ultra'") == 1
    # the lock died with the process: the database takes writes again
    again = run_capscan("ingest", str(GUEST), db=db_path, check=True)
    assert len(again.stdout.split()) == 1


def test_concurrent_writers_all_succeed(db_path, tmp_path):
    inputs = []
    for i in range(4):
        p = tmp_path / f"rows{i}.jsonl"
        p.write_bytes(_bench_rows(20_000 + i, devices=2).replace(b"Apple Test GPU", f"GPU{i}-".encode()))
        inputs.append(p)
    procs = [subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), "ingest", str(p),
                               str(FIXTURES / ("metal", "backends", "bench", "timings")[i]
                                   / sorted(os.listdir(FIXTURES / ("metal", "backends", "bench", "timings")[i]))[0])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO) for i, p in enumerate(inputs)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
        assert b"Traceback" not in err
    ids = [int(x) for out, _ in outs for x in out.split()]
    assert len(ids) == len(set(ids)) >= 4 * 2
    assert count(db_path, "SELECT COUNT(*) FROM sources") == 8
    assert count(db_path, "SELECT COUNT(*) FROM runs") == len(ids)
    assert count(db_path, "SELECT COUNT(*) FROM throughput WHERE run_id IN (SELECT id FROM runs WHERE "
                          "device_name LIKE 'GPU%')") == sum(20_000 + i for i in range(4))


# ---------------------------------------------------------------------------
# --keep-raw
# ---------------------------------------------------------------------------

def test_without_keep_raw_no_log_text_is_stored(db_path):
    assert PROMPT_TEXT in PROMPT_LOG.read_bytes()
    run_capscan("ingest", str(PROMPT_LOG), db=db_path, check=True)
    assert count(db_path, "SELECT COUNT(*) FROM sources WHERE raw_gzip IS NOT NULL") == 0
    data = db_bytes(db_path)
    assert b"llama_print_timings" in data  # evidence lines are stored...
    assert PROMPT_TEXT not in data  # ...the prompt and answer are not


def test_keep_raw_stores_the_gzip_of_the_exact_input(db_path):
    proc = run_capscan("ingest", "--keep-raw", str(PROMPT_LOG), db=db_path, check=True)
    assert proc.stdout.split()
    conn = sqlite3.connect(str(db_path))
    (raw,), = conn.execute("SELECT raw_gzip FROM sources").fetchall()
    conn.close()
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw) == PROMPT_LOG.read_bytes()


def test_keep_raw_in_pipe_mode(db_path):
    data = GUEST.read_bytes()
    proc = run_capscan("--keep-raw", input=data, db=db_path)
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(str(db_path))
    (raw,), = conn.execute("SELECT raw_gzip FROM sources").fetchall()
    conn.close()
    assert gzip.decompress(raw) == data
