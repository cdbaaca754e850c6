"""A child's own peak RSS, whatever the size of the test process that starts it.

``wait4``'s ``ru_maxrss`` for a child of pytest counts the pages it shared with pytest between the
fork and the exec: a suite that has grown its own process past a bound fails every memory test
started after that, however small capscan stays. So the command is started by a small launcher
(a fresh interpreter), which forks it from its own few MB and reports the child's figure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_LAUNCHER = """
import os, resource, sys
out, limit, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.execvp(cmd[0], cmd)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def run_with_peak_rss(cmd: list[str], *, report: Path, as_limit: int = 0, timeout: float = 600,
                      **popen) -> tuple[subprocess.Popen, float]:
    """Run ``cmd`` (under RLIMIT_AS ``as_limit`` when given) to its end: (the finished process, the
    command's own peak RSS in MB). ``popen`` goes to Popen (stdin, stdout, stderr, cwd, env)."""
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(report), str(as_limit), *cmd],
                            start_new_session=True, **popen)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"{cmd} did not finish in {timeout} s") from None
    deadline = time.monotonic() + 5
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    kib = int(report.read_text()) if report.exists() else 0
    return proc, kib / 1024  # Linux: KiB
