"""What a new user meets first: empty states that say what happened, usage
errors for impossible values, read-only commands that never create a database,
one-line notices, and loose ends of the report. The CLI in-process (tests.conftest.run_capscan), and
in a real process where a terminal, a closed stdin or shell completion is the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.cli.output import count_runs
from tests.conftest import REPO, run_capscan

FIX = Path(__file__).resolve().parent.parent / "fixtures"
STOCK = FIX / "metal/m4-2026-08-guest-stock.log"
HOST = FIX / "metal/m4-2026-08-host-m1-ultra.log"
AMD = FIX / "metal/m2-2024-10-amd-egpu-intel-mac.log"


def stored(tmp_path: Path, *logs: Path) -> Path:
    db = tmp_path / "s.db"
    run_capscan("ingest", *map(str, logs), db=db, check=True)
    return db


@pytest.mark.parametrize("args", [("runs",), ("show", "1"), ("show", "last"), ("compare", "1", "2"), ("db", "stats"),
                                  ("runs", "--json"), ("db", "stats", "--json"),
                                  # they only read what is stored (undo: nothing recorded, nothing to put back)
                                  ("diagnose", "--run", "1"), ("diagnose", "--last", "--json"),
                                  ("remedy", "status"), ("remedy", "status", "--json"), ("remedy", "plan"),
                                  ("remedy", "plan", "--run", "1", "--json"), ("remedy", "undo"),
                                  ("remedy", "undo", "--apply"), ("remedy", "host-default"),
                                  ("remedy", "host-default", "--undo", "--apply")])
def test_read_only_commands_never_create_a_mistyped_db(tmp_path, args):
    missing = tmp_path / "typo" / "nested" / "capscn.db"
    r = run_capscan(*args, db=missing)
    assert r.returncode == 2
    err = r.stderr.decode().strip()
    assert err == (f"capscan: no database at {missing} (from --db; nothing was created); "
                   "`capscan db path` shows where capscan stores runs")
    assert not (tmp_path / "typo").exists() and r.stdout == b""


def test_read_only_commands_never_create_a_mistyped_env_db(tmp_path):
    missing = tmp_path / "nope" / "x.db"
    r = run_capscan("runs", env={"CAPSCAN_DB": str(missing)})
    assert r.returncode == 2 and b"(from $CAPSCAN_DB; nothing was created)" in r.stderr
    assert not missing.parent.exists()


def test_tui_never_creates_a_mistyped_db(tmp_path):
    missing = tmp_path / "typo" / "x.db"
    # under a pseudo-terminal the TUI would start; the database check comes first
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # child: stdin and stdout are the terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "analyzer", "--db", str(missing), "tui"],
                   {**os.environ, "PYTHONPATH": str(REPO)})
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2
    assert b"no database at" in out and not (tmp_path / "typo").exists()


def test_default_db_missing_means_nothing_stored_yet(tmp_path):
    env = {"CAPSCAN_DB": None, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}

    def capscan(*args):
        return run_capscan(*args, env=env)

    # each names the database it read: the default one here, under XDG_DATA_HOME
    default = str(tmp_path / "data" / "capscan" / "capscan.db")
    r = capscan("runs")
    assert r.returncode == 0 and r.stderr.decode().startswith(f"No runs stored yet in {default}. Pipe a log in")
    r = capscan("show", "1")
    assert r.returncode == 2 and r.stderr.decode().strip() == f"capscan: no runs stored yet in {default}"
    r = capscan("db", "stats")
    assert r.returncode == 0 and "nothing stored" in r.stdout.decode()
    for args in (("diagnose", "--run", "1"), ("diagnose", "--last")):
        r = capscan(*args)
        assert r.returncode == 2 and r.stderr.decode().strip() == f"capscan: no runs stored yet in {default}"
    r = capscan("remedy", "status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["actions"] == []
    r = capscan("remedy", "undo", "--apply")
    assert r.returncode == 0 and r.stdout.decode().startswith("nothing to undo")
    r = capscan("remedy", "plan")
    assert r.returncode == 2 and r.stderr.decode().startswith("capscan: no stock run stored yet")
    assert not (tmp_path / "data" / "capscan").exists()  # no folders either


def test_a_filter_with_no_match_is_not_an_empty_database(tmp_path):
    db = stored(tmp_path, STOCK, HOST)
    r = run_capscan("runs", "--verdict", "hardware-limit", db=db)
    assert r.returncode == 0
    assert r.stderr.decode().strip() == ("No run matches --verdict hardware-limit (2 runs stored; "
                                         "`capscan runs` lists them all).")
    r = run_capscan("runs", "--search", "radeon", "--verdict", "healthy", db=db)
    assert "No run matches --verdict healthy and --search 'radeon' (2 runs stored" in r.stderr.decode()
    empty = tmp_path / "empty.db"
    from analyzer.store import open_db

    open_db(empty).conn.close()  # exists, holds nothing (`diagnose --last` no longer creates it)
    assert run_capscan("runs", db=empty).stderr.decode().startswith(f"No runs stored yet in {empty}.")
    r = run_capscan("show", "last", db=empty)  # the file exists and holds nothing: still named
    assert r.returncode == 2 and r.stderr.decode().strip() == f"capscan: no runs stored yet in {empty}"


def test_unknown_verdict_is_a_usage_error(tmp_path):
    db = stored(tmp_path, STOCK)
    r = run_capscan("runs", "--verdict", "bogus", db=db)
    assert r.returncode == 2 and b"'bogus' is not one of 'capability-downgrade'" in r.stderr


def test_compare_a_run_with_itself_says_so(tmp_path):
    db = stored(tmp_path, STOCK, HOST)
    r = run_capscan("compare", "2", "2", db=db)
    assert r.returncode == 2 and b"run 2 is given twice; compare takes different runs" in r.stderr
    r = run_capscan("compare", "1", "9", db=db)
    assert r.returncode == 2 and r.stderr.decode().strip() == "capscan: no run 9"


def test_db_path_json(tmp_path):
    db = tmp_path / "p.db"
    doc = json.loads(run_capscan("db", "path", "--json", db=db, check=True).stdout)
    assert doc == {"path": str(db), "exists": False} and not db.exists()


def test_diagnose_with_empty_stdin_stores_nothing(tmp_path):
    db = stored(tmp_path, STOCK)
    before = run_capscan("db", "stats", "--json", db=db, check=True).stdout
    for stdin in (b"", None):
        r = run_capscan("diagnose", input=stdin, db=db)
        assert r.returncode == 2 and b"give files, -, --run ID or --last" in r.stderr
    assert run_capscan("db", "stats", "--json", db=db, check=True).stdout == before


def test_count_runs_stays_one_line():
    assert count_runs([]) == "no runs"
    assert count_runs([7]) == "1 run (id 7)"
    assert count_runs([7, 8, 9]) == "3 runs (ids 7, 8, 9)"
    assert count_runs(list(range(1, 20001))) == "20,000 runs (ids 1-20000)"
    assert count_runs([3, 5] + list(range(10, 20))) == "12 runs (ids 3 to 19)"


def test_ingest_notice_summarises_many_runs(tmp_path):
    # 2,000 llama-bench JSONL rows of different models: one run each
    row = json.loads((FIX / "bench/gemma-12b-stock.jsonl").read_text().splitlines()[0])
    lines = []
    for i in range(2000):
        lines.append(json.dumps({**row, "model_type": f"model {i}", "gpu_info": f"GPU {i}"}))
    log = tmp_path / "many.jsonl"
    log.write_text("\n".join(lines) + "\n")
    r = run_capscan("ingest", str(log), db=tmp_path / "m.db", check=True)
    notice = r.stderr.decode().strip().splitlines()
    assert len(notice) == 1 and len(notice[0]) < 200, notice
    n = len(r.stdout.split())
    assert n > 5 and f"{n:,} runs (ids 1-{n})" in notice[0]


def test_browse_hint_points_at_the_most_severe_run(tmp_path):
    db = tmp_path / "b.db"
    both = tmp_path / "both.log"
    both.write_bytes(STOCK.read_bytes() + HOST.read_bytes())  # downgrade first, healthy last
    out = run_capscan(input=both.read_bytes(), db=db, check=True).stdout.decode()
    last = out.strip().splitlines()[-1]
    assert last.startswith("overall: capability-downgrade") and last.endswith("browse: capscan tui --run 1")


def test_shell_completion_as_documented(tmp_path):
    """README: eval "$(_CAPSCAN_COMPLETE=zsh_source capscan)"; completion knows commands and verdicts."""
    env = {**os.environ, "_CAPSCAN_COMPLETE": "zsh_source", "PYTHONPATH": str(REPO)}
    script = subprocess.run([sys.executable, "-m", "analyzer"], env=env, capture_output=True, cwd=tmp_path)
    assert script.returncode == 0 and script.stdout.startswith(b"#compdef capscan")
    env.update({"_CAPSCAN_COMPLETE": "bash_complete", "COMP_WORDS": "capscan runs --verdict ca", "COMP_CWORD": "3"})
    words = subprocess.run([sys.executable, "-m", "analyzer"], env=env, capture_output=True, cwd=tmp_path)
    assert words.stdout.decode().split() == ["plain,capability-downgrade"]


def test_closed_stdin_is_no_traceback(tmp_path):
    """A CI step may run capscan with stdin closed: help (bare) or a usage error (diagnose), never a traceback."""
    db = tmp_path / "closed.db"
    for args, code in (((), 0), (("diagnose",), 2)):
        r = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), *args], capture_output=True,
                           stdin=None, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                           preexec_fn=lambda: os.close(0))
        assert r.returncode == code and b"Traceback" not in r.stderr, r.stderr
    assert not db.exists()
