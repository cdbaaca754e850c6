"""A piped source is stored under what it is, not as `<stdin>` (issue 25 item 4a): its first run's
program, model and time, or the name given with --name. Dedupe of piped input by content hash is
unchanged, and `capscan runs` shows the model column. Through the real CLI, real SQLite files."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from tests.cli.test_cli_output import _on_a_terminal
from tests.conftest import run_capscan
from tests.ingest_util import FIXTURES

GUEST = FIXTURES / "metal/m4-2026-08-guest-stock.log"           # llama-bench, llama 1B Q4_K - Medium, Paravirtual
RADXA = FIXTURES / "field/086-llama-bench-radxa-dragon-cpu-2026.log"  # llama-bench, CPU only, two models
OLLAMA = FIXTURES / "field/004-ollama-intel-mac-cpu-2024.log"   # ollama, no model name printed
STAMP = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"


def _sources(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT path FROM sources ORDER BY id")]


def test_piped_sources_are_named_by_program_model_and_time(db_path):
    for log in (GUEST, RADXA, OLLAMA):
        run_capscan(input=log.read_bytes(), db=db_path, check=True)
    guest, radxa, ollama = _sources(db_path)
    assert re.fullmatch(rf"llama-bench · llama 1B Q4_K_M · {STAMP}", guest), guest
    assert re.fullmatch(rf"llama-bench · llama 1B Q4_K_M · {STAMP} \(2 runs\)", radxa), radxa
    assert re.fullmatch(rf"ollama · {STAMP}", ollama), ollama  # the log names no model: left out, not guessed
    listed = run_capscan("runs", db=db_path, check=True).stdout.decode().splitlines()
    assert "<stdin>" not in "\n".join(listed)
    assert {row.split("\t")[2] for row in listed[1:]} == {guest, radxa, ollama}


def test_the_same_content_piped_again_is_still_a_duplicate(db_path):
    first = run_capscan(input=GUEST.read_bytes(), db=db_path, check=True)
    again = run_capscan(input=GUEST.read_bytes(), db=db_path, check=True)
    assert "already ingested (source 1" in again.stderr.decode()
    assert again.stderr.decode().startswith("capscan: stdin: already ingested")
    assert len(_sources(db_path)) == 1
    forced = run_capscan("--force", "--name", "again", input=GUEST.read_bytes(), db=db_path, check=True)
    assert _sources(db_path)[1] == "again" and b"stdin (again): 1 run (id 2)" in forced.stderr
    assert b"stdin (llama-bench" in first.stderr


def test_name_option_names_a_pipe_on_the_group_and_on_ingest_and_diagnose(db_path):
    run_capscan("--name", "nightly guest bench", input=GUEST.read_bytes(), db=db_path, check=True)
    run_capscan("ingest", "-", "--name", "radxa cpu", input=RADXA.read_bytes(), db=db_path, check=True)
    shown = run_capscan("diagnose", "-", "--name", "ollama on the iMac", input=OLLAMA.read_bytes(), db=db_path,
                        check=True)
    assert _sources(db_path) == ["nightly guest bench", "radxa cpu", "ollama on the iMac"]
    assert "ollama on the iMac" in shown.stdout.decode()  # the report's run header names it


def test_a_hostile_name_is_stored_as_one_clean_line(db_path):
    run_capscan("--name", "ci\n  HEALTHY\x1b[2K\u202e run", input=GUEST.read_bytes(), db=db_path, check=True)
    assert _sources(db_path) == ["ci HEALTHY run"]


def test_name_without_piped_input_is_a_one_line_usage_error(db_path):
    for args in (("ingest", "--name", "x", str(GUEST)), ("--name", "x", "runs"), ("diagnose", "--name", "x", "--last"),
                 ("--name", " ")):
        proc = run_capscan(*args, input=GUEST.read_bytes() if args[-1] == " " else None, db=db_path)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and "Traceback" not in err, (args, err)
        assert "--name" in err, (args, err)
    assert not db_path.exists() or _sources(db_path) == []


def test_runs_shows_the_model_column_at_160_columns(db_path):
    for log in (GUEST, RADXA):
        run_capscan(input=log.read_bytes(), db=db_path, check=True)
    out = _on_a_terminal(["runs"], db_path, 160)
    head, *rows = out.splitlines()
    assert head.split()[:2] == ["id", "when"] and "model" in head.split()
    assert all(len(line) <= 160 for line in rows)
    assert len(rows) == 3 and all("llama 1B Q4_K - Medium" in r or "llama 3B Q4_K - Medium" in r for r in rows)
    assert all("llama-bench · llama 1B" in r for r in rows)  # a piped source's name keeps its start
