"""A status line while stdin is read, on a terminal only (issue 41 item 3): `llama-bench ... 2>&1 | capscan`
showed nothing for minutes. A real process with stderr on a pseudo-terminal is the point here: the line is
drawn only when stderr is a terminal, and it must be seen while stdin is still open."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys

from tests.conftest import REPO, run_capscan

EXAMPLES = REPO / "examples"
ERASE = b"\r\x1b[K"


def _read_until(fd: int, want: bytes, got: bytes = b"") -> bytes:
    """The terminal's bytes until ``want`` shows (or the child closes it); bounded by the test run, not timed."""
    while want not in got:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return got


def test_status_line_while_stdin_is_read_then_erased_before_output(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm-256color", COLUMNS="120")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "c.db")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    try:
        # the stock guest, then the host's log (past the 4 KiB the input's encoding is judged on): the host's
        # block starts a second run, so the first is complete
        proc.stdin.write((EXAMPLES / "m1-ultra-guest-stock-json.log").read_bytes())
        proc.stdin.write((EXAMPLES / "m1-ultra-host.log").read_bytes())
        proc.stdin.flush()
        # stdin still open: the line shows the lines read, the runs and the first one's verdict
        seen = _read_until(master, b"first capability-downgrade (fixable)")
        assert b"capscan: reading stdin: " in seen and b" lines, 1 run, first capability-downgrade (fixable)" in seen
        assert proc.poll() is None  # it was drawn while reading, not at the end
        proc.stdin.close()
        err = _read_until(master, b"\nNEVER", seen)
        out = proc.stdout.read()
        assert proc.wait(timeout=300) == 0
    finally:
        os.close(master)
    # erased before the notice: the last status is followed by the erase, then the notice on a clean line
    last = err.rindex(b"capscan: reading stdin: ")
    tail = err[last:]
    assert ERASE + b"capscan: stdin (llama-bench" in tail and b"2 runs" in tail
    assert b"CAPABILITY-DOWNGRADE" in out and b"reading stdin" not in out  # stdout carries only the report


def test_no_status_line_when_stderr_is_not_a_terminal(tmp_path):
    r = run_capscan(db=tmp_path / "c.db", input=(EXAMPLES / "m1-ultra-guest-stock-json.log").read_bytes(),
                    check=True)
    assert b"reading stdin" not in r.stderr and b"\x1b[" not in r.stderr and b"\r" not in r.stderr
    # a real process with stderr a pipe says the same
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "p.db")],
                          input=(EXAMPLES / "m1-ultra-guest-stock-json.log").read_bytes(), capture_output=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)
    assert proc.returncode == 0 and b"reading stdin" not in proc.stderr and b"\r" not in proc.stderr
