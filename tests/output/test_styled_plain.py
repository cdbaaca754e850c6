"""The per-run report written plain (a pipe, a file, NO_COLOR) is exactly what rich
prints for the same lines without styles: on every fixture's runs, on hostile text,
and through the real CLI. On a terminal (or when rich is told to style) the report
still goes through the SafeConsole, with its colours and without a log's escapes."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.diagnosis import Diagnosis
from analyzer.model import Evidence, RunFacts, StoredRun
from analyzer.output.report import console
from analyzer.output.run_report import run_lines
from analyzer.output.styled import StyledLines, plain_text, styles_shown, write_rich
from tests.ingest_util import FIXTURES, diagnosed, is_label

LOGS = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*")
              if p.is_file() and p.suffix in (".log", ".jsonl", ".txt", ".json", ".csv", ".md")
              and "bad" not in p.parts and p.name not in ("expected.json", "README.md") and not is_label(p))


def through_rich(lines: StyledLines) -> str:
    buf = io.StringIO()  # not a terminal: rich prints no style codes
    write_rich(lines, console(buf))
    return buf.getvalue()


def test_there_are_fixtures_to_compare():
    assert len(LOGS) > 50


@pytest.mark.parametrize("name", LOGS)
def test_plain_report_is_what_rich_prints(tmp_path, name):
    runs = diagnosed(tmp_path, name)
    for run in runs:
        for limit in (10, 200):
            lines = run_lines(run, max_evidence=limit)
            assert plain_text(lines) == through_rich(lines), (name, run.id)


HOSTILE = ["\x1b]52;c;aGVsbG8=\x07clip", "\x1b[2Kerased", "a\rb\x08c", "[/]", "[link=http://x]y[/link]",
           "\u202eevil\u202c", "tab\there", ":smile: emoji", "wide 全角 text", "line\nbreak", "\x9b31mC1",
           "\ud800 lone", "trailing   ", "", "long " * 40 + "  ", "FP16_VA = " * 20]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_the_same_both_ways(text):
    run = StoredRun(id=7, source_id=1, source=f"src{text}.log", created_at="",
                    facts=RunFacts(first_line=1, last_line=9, program=text or None, backend="Metal"),
                    evidence=[Evidence(line=3, kind="metal.family", text=text)],
                    diagnosis=Diagnosis.load({
                        "verdict": "unknown", "summary": text, "fixable": False,
                        "findings": [{"rule": "x", "severity": "info", "message": text, "evidence": []},
                                     {"rule": "y", "severity": "warning", "message": text,
                                      "evidence": [{"line": 3, "text": text}]}],
                        "next_steps": [text]}))
    lines = run_lines(run, max_evidence=5)
    plain = plain_text(lines)
    assert plain == through_rich(lines)
    assert "\x1b" not in plain and "\x9b" not in plain and "\u202e" not in plain and "\r" not in plain
    assert "\ud800" not in plain
    # no line ends in whitespace (rich before 15 drops it from lines wider than the console only)
    assert all(line == line.rstrip() for line in plain.split("\n"))


def test_styles_shown_only_where_rich_would_style(monkeypatch):
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS",
                 "JUPYTER_LINES"):
        monkeypatch.delenv(name, raising=False)
    assert not styles_shown(io.StringIO())
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert styles_shown(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not styles_shown(io.StringIO())  # the report's console turns colour off under NO_COLOR
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.delenv("FORCE_COLOR")
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            assert styles_shown(tty)
    finally:
        os.close(master)
        os.close(slave)


def _show(db: Path, *args: str, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), "show", "1", *args],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_show_piped_is_plain_and_on_a_terminal_styled(tmp_path):
    db = tmp_path / "c.db"
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), "ingest",
                    str(FIXTURES / "metal/m4-2026-08-guest-stock.log")], capture_output=True, check=True, env=env)
    piped = _show(db, env=env)
    assert "\x1b" not in piped and "CAPABILITY-DOWNGRADE" in piped
    # what rich would have printed (no terminal): the same characters
    code = ("import io, sys\n"
            "from analyzer.store.db import open_db\nfrom analyzer.store.queries import load_run\n"
            "from analyzer.output.report import console\nfrom analyzer.output.styled import write_rich\n"
            "from analyzer.cli.output import render_report\nimport analyzer.output.styled as s\n"
            "s.styles_shown = lambda f: True\n"
            "db = open_db(sys.argv[1])\nrun = load_run(db, 1)\n"
            "render_report(sys.stdout, [run], max_evidence=200, overall=False)\n")
    via_rich = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, env=env,
                              check=True).stdout
    assert piped == via_rich
    styled = _show(db, env={**env, "FORCE_COLOR": "1"})
    assert "\x1b[" in styled  # rich's colours
    assert styled.replace("\x1b[0m", "") != piped
