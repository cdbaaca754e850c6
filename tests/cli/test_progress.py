"""A progress bar on stderr for large files, only when stderr is a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _big_log(tmp_path: Path) -> Path:
    path = tmp_path / "big.log"
    noise = b"srv  log_server_r: request: GET /health 127.0.0.1 200 (0.1 ms)\n" * 1100_000  # ~70 MB, unread
    path.write_bytes((FIX / "metal/m4-2026-08-guest-stock.log").read_bytes() + noise)
    return path


def _ingest(path: Path, db: Path, stderr_tty: bool) -> tuple[int, bytes, bytes]:
    cmd = [sys.executable, "-m", "analyzer", "--db", str(db), "ingest", str(path)]
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100")
    if not stderr_tty:
        proc = subprocess.run(cmd, capture_output=True, env=env, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read()
    os.close(master)
    return proc.wait(timeout=300), out, err


def test_progress_bar_on_a_terminal_only(tmp_path):
    big = _big_log(tmp_path)
    rc, out, err = _ingest(big, tmp_path / "tty.db", stderr_tty=True)
    assert rc == 0 and out.split() == [b"1"]
    assert b"big.log" in err and b"MB" in err and b"\x1b[" in err  # a live bar, redrawn in place
    rc, out, err = _ingest(big, tmp_path / "pipe.db", stderr_tty=False)
    assert rc == 0 and out.split() == [b"1"]
    assert b"\x1b[" not in err and b"\r" not in err  # plain notices only
