"""A file name is hostile text too: a name holding newlines (`guest.log\\n  HEALTHY  (nothing to fix)\\nx`),
an escape sequence or a carriage return must never print a line of its own, nor reach the terminal raw,
in any command that prints the source (the run header of `show`, `diagnose` and the pipe report, `runs`,
the ingest notice, `watch`, the tabular forms). JSON keeps the exact name, escaped. Through the real
CLI, in real processes, with real files of such names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_capscan

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
FORGED = "  HEALTHY  (nothing to fix)"
NAMES = {
    "newlines": "guest.log\n" + FORGED + "\nx",
    "crlf-and-escape": "guest.log\r\n" + FORGED + "\x1b[2K\x1b]0;title\x07\rx",
    "line-separator": "guest.log\u2028" + FORGED + "\u2029x",
}


def _no_raw_controls(data: bytes, what: str) -> None:
    text = data.decode("utf-8")
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text, what
    assert "\u2028" not in text and "\u2029" not in text, what


def _never_a_line_of_its_own(data: bytes, what: str) -> None:
    for line in data.decode("utf-8").splitlines():
        assert not line.startswith(FORGED.rstrip()), f"{what}: a forged line: {line!r}"
        assert not line.startswith("x"), f"{what}: {line!r}"


@pytest.fixture(params=sorted(NAMES))
def stored(request, tmp_path):
    """A real guest log (capability-downgrade) and its host (healthy), under hostile names, ingested."""
    d = tmp_path / "logs"
    d.mkdir()
    guest = d / NAMES[request.param]
    host = d / ("host-" + NAMES[request.param])
    shutil.copy(EXAMPLES / "m1-ultra-guest-stock.log", guest)
    shutil.copy(EXAMPLES / "m1-ultra-host.log", host)
    db = tmp_path / "names.db"
    proc = run_capscan("ingest", str(guest), str(host), db=db, check=True)
    _never_a_line_of_its_own(proc.stderr, "ingest notice")
    _no_raw_controls(proc.stderr, "ingest notice")
    return db, guest, host


def _one_line_name(path: Path) -> str:
    """The name as a report prints it: one line, separators as spaces, sequences gone."""
    from analyzer.safe_text import clean

    return clean(str(path))


def test_the_run_header_keeps_the_name_on_one_line(stored):
    db, guest, host = stored
    for args in (("show", "1"), ("show", "2"), ("diagnose", "--run", "1", "--run", "2"), ("diagnose", "--last"),
                 ("runs",), ("compare", "1", "2"), ("remedy", "plan", "--run", "1"),
                 ("--csv", "diagnose", "--run", "1"), ("--tsv", "diagnose", "--run", "1"),
                 ("--markdown", "diagnose", "--run", "1"), ("--csv", "runs"), ("--tsv", "runs"),
                 ("--markdown", "runs")):
        proc = run_capscan(*args, db=db)
        assert proc.returncode == 0, (args, proc.stderr)
        what = " ".join(args)
        _never_a_line_of_its_own(proc.stdout, what)
        _never_a_line_of_its_own(proc.stderr, what)
        _no_raw_controls(proc.stdout, what)
        _no_raw_controls(proc.stderr, what)
    shown = run_capscan("show", "1", db=db, check=True).stdout.decode()
    assert f"run 1  {_one_line_name(guest)}:1-" in shown
    both = run_capscan("diagnose", "--run", "1", "--run", "2", db=db, check=True).stdout.decode()
    assert f"run 1  {_one_line_name(guest)}:1-" in both and f"run 2  {_one_line_name(host)}:1-" in both


def test_a_file_diagnosed_as_it_is_ingested(tmp_path):
    """`capscan diagnose FILE`: ingest and report in one go."""
    path = tmp_path / NAMES["newlines"]
    shutil.copy(EXAMPLES / "m1-ultra-guest-stock.log", path)
    proc = run_capscan("diagnose", str(path), db=tmp_path / "d.db", check=True)
    _never_a_line_of_its_own(proc.stdout, "diagnose FILE")
    _never_a_line_of_its_own(proc.stderr, "diagnose FILE (stderr)")
    assert f"run 1  {_one_line_name(path)}:1-" in proc.stdout.decode()


def test_watch_prints_the_name_on_one_line(tmp_path):
    path = tmp_path / NAMES["crlf-and-escape"]
    shutil.copy(EXAMPLES / "m1-ultra-guest-stock.log", path)
    proc = run_capscan("watch", "--once", str(path), db=tmp_path / "w.db", check=True)
    for stream in (proc.stdout, proc.stderr):
        _never_a_line_of_its_own(stream, "watch --once")
        _no_raw_controls(stream, "watch --once")
    assert _one_line_name(path) in proc.stdout.decode() + proc.stderr.decode()


def test_json_keeps_the_exact_name(stored):
    db, guest, host = stored
    shown = json.loads(run_capscan("show", "1", "--json", db=db, check=True).stdout)
    assert shown["source"] == str(guest)
    diagnosed = json.loads(run_capscan("diagnose", "--run", "1", "--run", "2", "--json", db=db, check=True).stdout)
    assert [r["source"] for r in diagnosed["runs"]] == [str(guest), str(host)]
    listed = json.loads(run_capscan("runs", "--json", db=db, check=True).stdout)
    assert sorted(r["source"] for r in listed) == sorted([str(guest), str(host)])
    for args in (("show", "1", "--json"), ("runs", "--json"), ("--nl", "diagnose", "--run", "1")):
        out = run_capscan(*args, db=db, check=True).stdout
        _no_raw_controls(out, " ".join(args))  # escaped inside the JSON strings
        _never_a_line_of_its_own(out, " ".join(args))
