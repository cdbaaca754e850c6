"""Database and process edges: a full disk, a malformed file, a database from
a newer capscan, a read-only database, ids SQLite cannot hold, a reader of
stdout that goes away. Each ends in one line on stderr and a documented exit
status, never a traceback, and never loses what was stored before."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.store.db import StoreError, open_db
from tests.conftest import FIXTURES, REPO, run_capscan

LOG = FIXTURES / "metal" / "m4-2026-08-guest-stock.log"
HOST = FIXTURES / "metal" / "m4-2026-08-host-m1-ultra.log"


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, (proc.returncode, err)
    assert "Traceback" not in err, err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("capscan: "), err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _tiny_blocks(n: int) -> bytes:
    return b"".join(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M%d)\n" % i for i in range(n))


# -- disk full -------------------------------------------------------------------------------------


def test_disk_full_in_process_rolls_back_and_keeps_earlier_data(tmp_path):
    db_path = tmp_path / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    db = open_db(db_path)
    pages = db.conn.execute("PRAGMA page_count").fetchone()[0]
    db.conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite's own "disk full"
    big = tmp_path / "big.log"
    big.write_bytes(_tiny_blocks(3000))
    source = open_input(str(big))
    with pytest.raises(StoreError, match="database or disk is full") as info:
        ingest(db, source)
    source.close()
    assert "\n" not in str(info.value) and "nothing of it was stored" in str(info.value)
    db.conn.close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 1


def test_disk_full_through_the_cli_is_one_line_exit_2(tmp_path):
    """A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes every write past it fail like a full disk."""
    db_path = tmp_path / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    big = tmp_path / "big.log"
    big.write_bytes(_tiny_blocks(3000))
    limit = 256 << 10

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db_path), "ingest", str(big)],
                          capture_output=True, cwd=REPO, preexec_fn=small_disk, timeout=300)
    _one_line_error(proc, str(big))
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 1
    assert run_capscan("runs", "--json", db=db_path).returncode == 0


# -- malformed and foreign files -------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"this is not a database\n" * 200, b"\0" * 4096, b"SQLite format 3\0" + b"\xff" * 5000])
def test_malformed_database_file_is_one_line(tmp_path, content):
    db_path = tmp_path / "c.db"
    db_path.write_bytes(content)
    for args in (("runs",), ("show", "1"), ("ingest", str(LOG)), ("db", "stats")):
        _one_line_error(run_capscan(*args, db=db_path), str(db_path))
    assert db_path.read_bytes() == content  # left as it was


def test_database_damaged_inside_is_one_line(tmp_path):
    db_path = tmp_path / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    data = bytearray(db_path.read_bytes())
    page = 4096
    for i in range(2 * page, len(data)):  # the pages after the schema: tables and indexes overwritten
        data[i] = 0xA5
    db_path.write_bytes(bytes(data))
    for args in (("runs",), ("show", "1"), ("diagnose", "--run", "1")):
        proc = run_capscan(*args, db=db_path)
        if proc.returncode != 0:
            _one_line_error(proc)


# -- a newer schema --------------------------------------------------------------------------------


def test_database_from_a_newer_capscan_is_refused(tmp_path):
    db_path = tmp_path / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                 "VALUES ('capscan', 'm042_renamed_columns', '2027-01-01')")
    conn.commit()
    conn.close()
    before = db_path.read_bytes()
    for args in (("runs",), ("ingest", "--force", str(LOG)), ("show", "1")):
        _one_line_error(run_capscan(*args, db=db_path), "newer capscan", "m042_renamed_columns")
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 1  # nothing written
    conn.close()
    assert len(db_path.read_bytes()) == len(before)


# -- read-only -------------------------------------------------------------------------------------


def _make_read_only(paths: list[Path]) -> callable:
    """chmod for ordinary users; root ignores modes, so the immutable flag
    (chattr +i) there. Returns the undo; skips when neither is possible."""
    if os.geteuid() != 0:
        modes = [(p, p.stat().st_mode) for p in paths]
        for p, m in modes:
            p.chmod(m & ~0o222)
        return lambda: [p.chmod(m) for p, m in modes]
    if shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: cannot make a file read-only")
    done = []
    for p in paths:
        if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode != 0:
            for q in done:
                subprocess.run(["chattr", "-i", str(q)])
            pytest.skip("chattr +i not supported on this file system")
        done.append(p)
    return lambda: [subprocess.run(["chattr", "-i", str(p)]) for p in reversed(done)]


@pytest.mark.parametrize("whole_directory", [False, True])
def test_read_only_database_serves_reading_commands(tmp_path, whole_directory):
    home = tmp_path / "ro"
    home.mkdir()
    db_path = home / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    run_capscan("ingest", str(HOST), db=db_path, check=True)
    assert not (home / "c.db-wal").exists()  # checkpointed and closed
    undo = _make_read_only([db_path] + ([home] if whole_directory else []))
    try:
        for args in (("runs",), ("runs", "--json"), ("show", "1"), ("show", "--json", "2"), ("diagnose", "--run", "1"),
                     ("compare", "1", "2"), ("db", "stats")):
            proc = run_capscan(*args, db=db_path)
            assert proc.returncode == 0, (args, proc.stderr.decode())
            assert proc.stdout.strip()
        _one_line_error(run_capscan("ingest", "--force", str(LOG), db=db_path), "read")
    finally:
        undo()
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2


# -- ids SQLite cannot hold ------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("show", "99999999999999999999"),
    ("show", "--", "-99999999999999999999"),
    ("diagnose", "--run", "99999999999999999999"),
    ("compare", "1", "99999999999999999999"),
    ("remedy", "plan", "--run", "99999999999999999999"),
    ("remedy", "undo", "--id", "99999999999999999999"),
])
def test_ids_too_big_for_sqlite_are_no_run(tmp_path, args):
    db_path = tmp_path / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    line = _one_line_error(run_capscan(*args, db=db_path))
    assert "99999999999999999999" in line or "no run" in line or "does not exist" in line


# -- a reader that goes away -----------------------------------------------------------------------


def _reader_gone(args: list[str], db_path: Path, read_first: bool) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db_path), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)
    if read_first:
        proc.stdout.readline()  # `| head -1`
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=300)
    return subprocess.CompletedProcess(args, proc.returncode, b"", err)


@pytest.mark.parametrize("args", [["formats"], ["runs"], ["runs", "--json"], ["show", "1"], ["show", "--json", "1"],
                                  ["db", "stats"], ["diagnose", "--run", "1"]])
def test_reader_that_goes_away_gives_141(tmp_path, args):
    """`capscan ... | head` where head is gone before capscan writes (the reader's end is closed first:
    how much a pipe holds differs between kernels, so the case is made certain)."""
    db_path = tmp_path / "c.db"
    run_capscan("ingest", str(LOG), db=db_path, check=True)
    proc = _reader_gone(args, db_path, read_first=False)
    assert proc.returncode == 141, proc.stderr.decode()
    assert proc.stderr.decode().strip() == "", proc.stderr.decode()


@pytest.mark.parametrize("line,kind,text,loads", [
    ("12", "metal.family", "GPU family: MTLGPUFamilyApple5", True),  # SQLite's INTEGER affinity stores it as 12
    ("line twelve", "metal.family", "x", False),
    (12, "metal.family", b"\x1b]52;c;blob", False),
    (12.5, "metal.family", "x", False),
])
def test_a_damaged_evidence_row_is_a_load_error_never_a_traceback(tmp_path, line, kind, text, loads):
    from analyzer.store.queries import load_run

    db = open_db(tmp_path / "e.db")
    src = open_input(str(FIXTURES / "metal/m4-2026-08-guest-stock.log"))
    try:
        run_id = ingest(db, src).run_ids[0]
    finally:
        src.close()
    with db.conn:
        db.conn.execute("INSERT INTO evidence (run_id, line, kind, text) VALUES (?, ?, ?, ?)", (run_id, line, kind, text))
    run = load_run(db, run_id)
    if loads:
        assert run.load_error is None and any(e.line == 12 and e.kind == "metal.family" for e in run.evidence)
    else:
        assert run.load_error == "its evidence lines do not load (ValidationError)" and run.evidence == []
    db.conn.close()


def test_memory_database_is_refused_in_one_line_and_leaves_no_file(tmp_path):
    """`--db :memory:` would say "1 run stored" and keep nothing (and SQLite's name made a file of that name)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    log = REPO / "examples" / "m1-ultra-guest-stock.log"
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", ":memory:", "ingest", str(log)],
                          capture_output=True, cwd=tmp_path, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "in-memory database" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / ":memory:").exists()
