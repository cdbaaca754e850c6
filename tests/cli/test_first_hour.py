"""The small things a new user meets in the first hour (issue 41, item 7): what `ingest` says, `report`
without --html, --help that reads whole, a mistyped command, an empty pipe. In-process (run_capscan) on the
bundled examples."""

from __future__ import annotations

import sqlite3

from analyzer.cli.lazy import first_phrase
from tests.conftest import REPO, run_capscan

GUEST = REPO / "examples/m1-ultra-guest-stock-json.log"  # capability-downgrade, fixable
HOST = REPO / "examples/m1-ultra-host.log"               # healthy


def test_ingest_prints_each_runs_id_and_verdict(tmp_path):
    db = tmp_path / "i.db"
    proc = run_capscan("ingest", str(GUEST), str(HOST), db=db, check=True)
    assert proc.stdout.decode().split() == ["1", "2"]  # the ids scripts read stay alone on stdout
    err = proc.stderr.decode().splitlines()
    assert "capscan: run 1: capability-downgrade (fixable); `capscan show 1` says why" in err
    assert "capscan: run 2: healthy; `capscan show 2` says why" in err
    again = run_capscan("ingest", str(GUEST), db=db, check=True)  # nothing new: no verdict line
    assert "capscan: run" not in again.stderr.decode()


def test_report_without_html_writes_a_page_named_by_its_runs(tmp_path):
    db = tmp_path / "r.db"
    run_capscan("ingest", str(GUEST), str(HOST), db=db, check=True)
    proc = run_capscan("report", "1", "2", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "capscan-report-1-2.html"
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert "wrote capscan-report-1-2.html" in proc.stderr.decode()


def test_help_lists_commands_by_whole_phrases_without_code_marks(tmp_path):
    text = run_capscan("--help", check=True).stdout.decode()
    commands = text[text.index("Commands:"):]
    assert "..." not in commands  # click's 45-character cut
    assert "`" not in text  # the docstrings' code marks are for the reference pages
    # each summary is its command's first sentence whole, wrapped but not cut
    flat = " ".join(commands.split())
    assert "ingest Store the runs found in files (or - for stdin)" in flat
    assert "compare Capability diff, throughput ratios (B/A) and per-token cost of two runs" in flat
    assert "Examples:" in text and "$ llama-bench -m model.gguf -o json 2>&1 | capscan" in text
    remedy = run_capscan("remedy", "--help", check=True).stdout.decode()
    assert "`" not in remedy and "env           The prefix for launching one command yourself" in remedy
    assert "Examples:" in run_capscan("compare", "--help", check=True).stdout.decode()


def test_first_phrase_keeps_a_sentence_whole():
    assert first_phrase("Store the runs (or - for stdin; or files); prints ids.\n\nMore.") == \
        "Store the runs (or - for stdin; or files)"
    assert first_phrase("The prefix: env X=... CMD.\n") == "The prefix: env X=... CMD"
    assert first_phrase(None) == ""


def test_a_mistyped_command_gets_did_you_mean(tmp_path):
    proc = run_capscan("comapre", "1", "2")
    assert proc.returncode == 2
    assert "No such command 'comapre'. Did you mean 'compare'?" in proc.stderr.decode()
    sub = run_capscan("remedy", "pln")
    assert sub.returncode == 2 and "Did you mean 'plan'?" in sub.stderr.decode()
    # a log given where a command goes: how to read it
    log = run_capscan(str(HOST.relative_to(REPO)))
    assert log.returncode == 2
    assert "To read a log: capscan ingest examples/m1-ultra-host.log" in log.stderr.decode()
    assert "Traceback" not in log.stderr.decode()


def test_an_empty_pipe_stores_nothing_and_says_so_in_one_line(tmp_path):
    db = tmp_path / "e.db"
    proc = run_capscan(input=b"", db=db)
    assert proc.returncode == 0 and proc.stdout == b""
    assert proc.stderr.decode().splitlines() == [
        "capscan: stdin is empty: nothing stored (pipe a log in: llama-bench ... 2>&1 | capscan)"]
    if db.exists():  # nothing stored: no source, no run
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM sources").fetchone() == (0,)
    # the machine formats and the gate still answer: no run is verdict unknown
    assert run_capscan("--fail-on", "unknown", input=b"", db=db).returncode == 1
    assert b'"runs": []' in run_capscan("--json", input=b"", db=db).stdout
