"""Bounded resources on hostile input: decompression bombs, padded gzip,
inputs that are quadratic for a naive assembler, --keep-raw on a large log,
a file cut short while it is read, parallel ingests of one content.

Memory is measured on the real CLI in a subprocess (its own peak RSS from
``wait4`` in a small launcher, tests/peak_rss.py, under an address-space limit); growth in time is checked by ratios
of CPU time between a small and a four times larger input (linear gives 4,
quadratic 16), never by absolute timings (those are in bench/bounds.py).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.parsers import Dispatcher
from analyzer.parsers.scanner import Scanner
from analyzer.read.reader import InputError, open_input
from analyzer.runs.assembler import Assembler
from analyzer.runs.builder import MAX_UNSUPPORTED_OPS
from analyzer.store.db import open_db
from tests.bombs import write_gzip_bomb
from tests.peak_rss import run_with_peak_rss
from tests.work_count import counted

REPO = Path(__file__).resolve().parent.parent.parent
INGEST_BOUND_MB = 150  # the ingest memory bound (README: measured speed and memory)
AS_LIMIT = 2 << 30  # the address space a child may reserve: far below the 8 GB the bomb used to take


def run_measured(*args: str, db: Path, as_limit: int = AS_LIMIT, stdin=subprocess.DEVNULL,
                 timeout: float = 600) -> tuple[int, str, float]:
    """The CLI in a subprocess under RLIMIT_AS: (exit status, stderr, its own peak RSS in MB)."""
    err_path = db.with_suffix(".stderr")
    with open(err_path, "wb") as err:
        proc, rss_mb = run_with_peak_rss([sys.executable, "-m", "analyzer", "--db", str(db), *args],
                                         report=db.with_suffix(".rss"), as_limit=as_limit, timeout=timeout,
                                         stdin=stdin, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
    return proc.returncode, err_path.read_text(errors="replace"), rss_mb


def _one_line(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert "Traceback" not in stderr, stderr
    return lines[-1] if lines else ""


# -- decompression ---------------------------------------------------------------------------------


def test_gzip_bomb_of_4_gib_of_zeros_stays_under_the_ingest_bound(tmp_path):
    bomb = tmp_path / "bomb.log.gz"
    expanded = write_gzip_bomb(bomb, b"\0" * (1 << 20), 4096)
    assert expanded == 4 << 30 and bomb.stat().st_size < 5 << 20  # a 4 MB gzip of 4 GiB
    rc, err, rss = run_measured("ingest", str(bomb), db=tmp_path / "c.db")
    assert rc == 2, err
    assert "binary file (NUL bytes)" in _one_line(err)
    assert rss < INGEST_BOUND_MB, f"peak RSS {rss:.0f} MB"


def test_gzip_bomb_of_text_is_read_to_the_end_in_bounded_memory(tmp_path):
    line = b"srv  log_server_r: request: GET /health 127.0.0.1 200\n"
    block = line * ((1 << 20) // len(line))
    bomb = tmp_path / "text.log.gz"
    expanded = write_gzip_bomb(bomb, block, 96)  # 96 MiB of text from about 300 KB: ratio ~ 300
    assert expanded / bomb.stat().st_size > 250
    db = tmp_path / "c.db"
    rc, err, rss = run_measured("ingest", str(bomb), db=db)
    assert rc == 0, err
    assert rss < INGEST_BOUND_MB, f"peak RSS {rss:.0f} MB"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT lines, size FROM sources").fetchone() == (96 * len(block) // len(line), expanded)


def test_one_inflate_step_is_bounded():
    """The reader never asks zlib for more than one chunk at a time."""
    import io

    from analyzer.read import reader

    data = gzip.compress(b"x" * 1000 + b"\n" + b"y\n" * (3 << 20))
    stream = reader._GunzipStream(io.BytesIO(data))
    sizes = []
    while chunk := stream.read(1 << 16):
        sizes.append(len(chunk))
    assert sum(sizes) == 1001 + 2 * (3 << 20)
    assert max(sizes) <= 1 << 16
    assert stream.damage is None


@pytest.mark.parametrize("padding", [1, 512, 10240, 70000])
def test_gzip_with_zero_padding_is_accepted_and_stored(tmp_path, padding):
    """What tar-style tools write: gzip -t and zcat accept the zeros after the member."""
    text = b"".join(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M2 Max)\n" for _ in range(3)) + b"noise\n" * 500
    path = tmp_path / "padded.log.gz"
    path.write_bytes(gzip.compress(text) + b"\0" * padding)
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))
    try:
        result = ingest(db, source)
    finally:
        source.close()
    assert result.source_id is not None and result.lines == 503 and result.size == len(text)
    assert db.conn.execute("SELECT sha256 FROM sources").fetchone()[0] == hashlib.sha256(text).hexdigest()


def test_gzip_padding_accepted_by_the_system_gzip_too(tmp_path):
    import shutil

    if shutil.which("gzip") is None:
        pytest.skip("no gzip binary")
    path = tmp_path / "p.gz"
    path.write_bytes(gzip.compress(b"a\nb\n") + b"\0" * 4096)
    assert subprocess.run(["gzip", "-t", str(path)]).returncode == 0
    rc, err, _ = run_measured("ingest", str(path), db=tmp_path / "c.db")
    assert rc == 0, err


def test_two_members_then_padding(tmp_path):
    path = tmp_path / "two.gz"
    path.write_bytes(gzip.compress(b"one\n") + gzip.compress(b"two\nthree\n") + b"\0" * 100)
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))
    result = ingest(db, source)
    source.close()
    assert result.lines == 3 and source.damage is None


def test_non_zero_garbage_after_the_gzip_keeps_the_data_and_says_so(tmp_path):
    from analyzer.read.reader import PartialInputError

    path = tmp_path / "garbage.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\nlast line without newline") + b"garbage")
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))
    with pytest.raises(PartialInputError, match="trailing garbage after the gzip data"):
        ingest(db, source)
    source.close()
    assert db.conn.execute("SELECT lines FROM sources").fetchone()[0] == 3


def test_padding_followed_by_data_is_garbage(tmp_path):
    from analyzer.read.reader import PartialInputError

    path = tmp_path / "late.gz"
    path.write_bytes(gzip.compress(b"one\n") + b"\0" * 10 + gzip.compress(b"two\n"))
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))
    with pytest.raises(PartialInputError, match="trailing garbage"):
        ingest(db, source)
    source.close()


# -- linear time on many distinct things -----------------------------------------------------------


def _assemble_counted(data: bytes) -> tuple[int, Assembler]:
    """The functions called to scan and assemble ``data`` (tests/work_count.py: counted, not timed)."""
    runs = []
    assembler = Assembler(lambda run: runs.append(run.facts), lambda run, rows: None)
    scanner = Scanner(Dispatcher(), assembler.feed)

    def work() -> None:
        for i in range(0, len(data), 1 << 20):
            scanner.feed(data[i:i + (1 << 20)])
        scanner.close()
        assembler.finish()

    _, calls, _ = counted(work)
    return calls, assembler


def _unsupported_ops(n: int) -> bytes:
    head = b"ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n"
    return head + b"".join(b"ggml_metal_graph_compute_block_invoke: error: unsupported op 'OP_%d'\n" % i
                           for i in range(n))


def test_distinct_unsupported_ops_are_linear_and_capped():
    small, _ = _assemble_counted(_unsupported_ops(10_000))
    large, assembler = _assemble_counted(_unsupported_ops(40_000))
    # four times the lines: linear is ~4x the calls, a loop over the ops seen so far ~16x (the time is
    # bench/linearity.py's)
    assert large < 9 * small, (small, large)
    facts = assembler.run.facts
    assert len(facts.unsupported_ops) == MAX_UNSUPPORTED_OPS
    assert facts.unsupported_ops[:3] == ["OP_0", "OP_1", "OP_2"]


def test_a_repeated_unsupported_op_is_listed_once():
    data = _unsupported_ops(3) + b"ggml_metal_graph_compute_block_invoke: error: unsupported op 'OP_1'\n" * 50
    _, assembler = _assemble_counted(data)
    assert assembler.run.facts.unsupported_ops == ["OP_0", "OP_1", "OP_2"]


def _tiny_blocks(n: int) -> bytes:
    return b"".join(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M%d)\n"
                    b"ggml_metal_device_init: GPU family: MTLGPUFamilyApple7  (1007)\n" % i for i in range(n))


def test_many_tiny_device_blocks_ingest_in_linear_work(tmp_path):
    """Every block is a run of its own; writing and diagnosing them is linear, in calls and in SQLite's work
    (counted; the time is bench/linearity.py's)."""
    from analyzer.rules.diagnose import diagnose_runs

    def work(n: int) -> tuple[int, int]:
        """(functions called, SQLite VM instructions / 100) to ingest and diagnose n blocks."""
        path = tmp_path / f"blocks{n}.log"
        path.write_bytes(_tiny_blocks(n))
        db = open_db(tmp_path / f"c{n}.db")

        def both():
            source = open_input(str(path))
            result = ingest(db, source)
            source.close()
            diagnose_runs(db, result.run_ids, refresh_peers=True, keep=False)
            return result

        result, calls, steps = counted(both, db.conn)
        assert len(result.run_ids) == n and result.run_ids == sorted(result.run_ids)
        return calls, steps

    small, large = work(500), work(2000)
    # four times the runs: linear is ~4x the calls and the SQL work, a query over every run per run ~16x
    assert large[0] < 9 * small[0] and large[1] < 9 * small[1], (small, large)


def test_many_tiny_device_blocks_in_bounded_memory(tmp_path):
    """The CLI's peak memory hardly grows from 1,000 to 5,000 runs (it grew by ~12 KB a run)."""
    rss = {}
    for n in (1000, 5000):
        path = tmp_path / f"blocks{n}.log"
        path.write_bytes(_tiny_blocks(n))
        rc, err, rss[n] = run_measured("ingest", str(path), db=tmp_path / f"c{n}.db")
        assert rc == 0, err
    assert rss[5000] - rss[1000] < 25, rss
    assert rss[5000] < INGEST_BOUND_MB


# -- --keep-raw ------------------------------------------------------------------------------------


def test_keep_raw_of_a_large_incompressible_log_is_bounded(tmp_path):
    """Random text barely compresses: the raw gzip is about as large as the log,
    and is spooled to disk and written to SQLite in pieces."""
    path = tmp_path / "big.log"
    sha = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(96):
            piece = base64.encodebytes(os.urandom(3 << 18))  # ~1 MiB of lines of 76 random characters
            f.write(piece)
            sha.update(piece)
    db = tmp_path / "c.db"
    rc, err, rss = run_measured("ingest", "--keep-raw", str(path), db=db)
    assert rc == 0, err
    assert rss < INGEST_BOUND_MB, f"peak RSS {rss:.0f} MB"
    conn = sqlite3.connect(db)
    (raw,) = conn.execute("SELECT raw_gzip FROM sources").fetchone()
    assert len(raw) > 70 << 20
    assert hashlib.sha256(gzip.decompress(raw)).hexdigest() == sha.hexdigest()


# -- inputs that change under capscan --------------------------------------------------------------


def test_a_file_truncated_while_being_read_is_refused_not_stored(tmp_path, monkeypatch):
    from analyzer.read import reader

    monkeypatch.setattr(reader, "CHUNK", 4096)
    path = tmp_path / "rotating.log"
    path.write_bytes(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M2 Max)\n" + b"noise line\n" * 5000)
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))
    chunks = source.chunks()
    next(chunks)
    os.truncate(path, 10000)  # logrotate's copytruncate, or `> log` while capscan reads it
    with pytest.raises(InputError, match="truncated while being read"):
        for _ in chunks:
            pass
    source.close()
    assert db.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0


def test_a_file_truncated_while_being_read_through_ingest_stores_nothing(tmp_path, monkeypatch):
    from analyzer.read import reader

    monkeypatch.setattr(reader, "CHUNK", 4096)
    path = tmp_path / "rotating.log"
    path.write_bytes(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M2 Max)\n" + b"noise line\n" * 5000)
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))
    calls = []

    def progress(n: int) -> None:
        if not calls:
            os.truncate(path, 100)
        calls.append(n)

    with pytest.raises(InputError, match="truncated while being read"):
        ingest(db, source, progress=progress)
    source.close()
    assert db.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0
    assert db.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_a_growing_file_is_fine(tmp_path, monkeypatch):
    from analyzer.read import reader

    monkeypatch.setattr(reader, "CHUNK", 4096)
    path = tmp_path / "growing.log"
    path.write_bytes(b"noise line\n" * 2000)
    db = open_db(tmp_path / "c.db")
    source = open_input(str(path))

    calls = []

    def progress(n: int) -> None:
        calls.append(n)
        if len(calls) <= 3:  # a log still being written while capscan reads it
            with open(path, "ab") as f:
                f.write(b"more\n")

    result = ingest(db, source, progress=progress)
    source.close()
    assert result.source_id is not None and result.lines >= 2000


@pytest.mark.parametrize("trial", range(2))
def test_parallel_ingests_of_one_empty_file_store_it_once(tmp_path, trial):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    db = tmp_path / "c.db"
    open_db(db).conn.close()  # migrated first: this is about the duplicate check, not the migration race
    procs = [subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db), "ingest", str(empty)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO) for _ in range(8)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 1
