"""Exit codes when the reader of capscan's output went away before an error message was written
(`capscan --fail-on bogus < log 2>&1 | head -1`): 141, as for any write to a reader that went away,
never 1 (which would pass for a --fail-on hit). With the reader there, the same errors are 2.

Real processes with a real pipe whose read end is closed (the reader has gone before capscan writes:
no race), mirroring test_diagnose_cli's reader that goes away in the middle of a report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

EXAMPLES = REPO / "examples"
LOG = EXAMPLES / "m1-ultra-guest-stock.log"


def _not_a_database(tmp_path: Path) -> Path:
    bad = tmp_path / "notadb.db"
    bad.write_bytes(b"this is not a SQLite database\n" * 200)
    return bad


# name -> (argv after `python -m analyzer`, given the tmp dir)
ERRORS = {
    "usage error on the group (--fail-on bogus)": lambda t: ["--db", str(t / "u.db"), "--fail-on", "bogus"],
    "usage error on a command (runs --nope)": lambda t: ["--db", str(t / "u.db"), "runs", "--nope"],
    "flag the command has no use for (--tee runs)": lambda t: ["--db", str(t / "u.db"), "--tee", "runs"],
    "one-line error (show of no run)": lambda t: ["--db", str(t / "u.db"), "show", "99"],
    "database error (not a SQLite file)": lambda t: ["--db", str(_not_a_database(t)), "runs"],
}


def _run(argv: list[str], stdout: int, stderr: int) -> int:
    with LOG.open("rb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "analyzer", *argv], stdin=log, stdout=stdout, stderr=stderr,
                                cwd=REPO)
        return proc.wait(timeout=120)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_an_error_written_to_a_reader_that_has_gone_is_141(tmp_path, name):
    argv = ERRORS[name](tmp_path)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone: `2>&1 | head -1` after head exited
    try:
        code = _run(argv, stdout=write_end, stderr=write_end)
    finally:
        os.close(write_end)
    assert code == 141, name


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_the_same_error_with_its_reader_there_is_2(tmp_path, name):
    argv = ERRORS[name](tmp_path)
    proc = subprocess.run([sys.executable, "-m", "analyzer", *argv], stdin=LOG.open("rb"), capture_output=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() and b"Traceback" not in proc.stderr


def test_head_of_a_usage_error_is_never_1(tmp_path):
    """`capscan --fail-on bogus < log 2>&1 | head -1`, as the shell runs it: the reader takes one
    line and goes; the message is either written whole before (2) or meets the closed pipe (141)."""
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "h.db"), "--fail-on",
                                 "bogus"], stdin=LOG.open("rb"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                cwd=REPO)
        assert proc.stdout.readline().startswith(b"Usage: capscan")
        proc.stdout.close()
        assert proc.wait(timeout=120) in (2, 141)
