"""Where a run is, in `show`'s header and the TUI's: a piped input's name ends in a time, so its span is
"lines A-B of N" (never "03:33:1-62", which reads as a time), N the lines the input had."""

from __future__ import annotations

from tests.conftest import REPO, run_capscan


def test_a_piped_runs_header_says_lines_a_to_b_of_n(tmp_path):
    db = tmp_path / "c.db"
    log = (REPO / "examples" / "m1-ultra-guest-stock-json.log").read_bytes()
    # the log with another program's 40 lines after it: the run is lines 1-105 of 145
    tail = b"".join(b"unrelated output %d\n" % i for i in range(40))
    printed = run_capscan(db=db, input=log + tail, check=True).stdout.decode().splitlines()[1]
    assert printed.startswith("run 1  llama-bench · llama 1B Q4_K_M · 2026-08-09 18:13, lines 1-105 of 145  ")
    shown = run_capscan("show", "1", db=db, check=True).stdout.decode().splitlines()[1]
    assert shown == printed
    # a file keeps grep's path:first-last
    run_capscan("ingest", str(REPO / "examples" / "m1-ultra-host.log"), db=db, check=True)
    host = run_capscan("show", "2", db=db, check=True).stdout.decode().splitlines()[1]
    assert host.startswith(f"run 2  {REPO / 'examples' / 'm1-ultra-host.log'}:1-22  ")
