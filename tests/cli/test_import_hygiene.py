"""The core never imports textual: piping a log through capscan must not pay for the TUI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import run_capscan

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_core_modules_do_not_import_textual():
    code = ("import sys, pkgutil, importlib, analyzer\n"
            "for m in pkgutil.walk_packages(analyzer.__path__, 'analyzer.'):\n"
            "    if not m.name.startswith('analyzer.tui'):\n"
            "        importlib.import_module(m.name)\n"
            "bad = sorted(n for n in sys.modules if n == 'textual' or n.startswith('textual.'))\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pipe_mode_does_not_load_textual(tmp_path):
    code = ("import sys, runpy\n"
            "sys.argv = ['capscan', '--db', sys.argv[1]]\n"
            "try:\n"
            "    runpy.run_module('analyzer', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "sys.stderr.write('TEXTUAL=%d' % any(n.startswith('textual') for n in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "h.db")],
                          input=(FIX / "metal/m4-2026-08-guest-stock.log").read_bytes(), capture_output=True)
    assert b"CAPABILITY-DOWNGRADE" in proc.stdout
    assert proc.stderr.endswith(b"TEXTUAL=0"), proc.stderr


# What a command may not import: start-up is most of what `--version`, `runs`,
# `show` and `db stats` cost (bench/run.py measures it), so each imports only
# what it uses. pydantic (the facts model) and sqlite-utils stay off the read-only listing.
_IMPORTS = ("import sys, runpy, io, contextlib\n"
            "sys.argv = ['capscan'] + sys.argv[1:]\n"
            "out = io.StringIO()\n"
            "try:\n"
            "    with contextlib.redirect_stdout(out):\n"
            "        runpy.run_module('analyzer', run_name='__main__')\n"
            "except SystemExit as exc:\n"
            "    assert not exc.code, (exc.code, out.getvalue())\n"
            "sys.stderr.write(out.getvalue()[:200])\n"
            "print(' '.join(sorted(sys.modules)))\n")
_HEAVY = ("pydantic", "sqlite_utils", "textual", "hyperscan", "orjson", "regex", "numpy", "analyzer.model",
          "analyzer.parsers", "analyzer.rules", "analyzer.remedy", "analyzer.rules.diagnose", "analyzer.ingest")


def _imported(*argv: str) -> set[str]:
    """The modules loaded once `capscan ARGV` has run, in an interpreter started as an installed
    capscan's is: without `site` (-S), so that a development venv's editable-install hook (which
    imports pathlib, importlib.util, fnmatch...) does not hide what capscan itself imports; the
    tree and the interpreter's site-packages on PYTHONPATH instead."""
    import os
    import site

    path = os.pathsep.join([str(Path(__file__).resolve().parents[2]), *site.getsitepackages()])
    proc = subprocess.run([sys.executable, "-S", "-c", _IMPORTS, *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


# The rules' light entry for listings (a stored claim is decided by importing the rest only when there is one)
_LIGHT = ("analyzer.rules", "analyzer.rules.today", "analyzer.rules.version")


def _offenders(mods: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m not in _LIGHT and any(m == b or m.startswith(b + ".") for b in banned))


def test_version_imports_neither_click_nor_any_command():
    mods = _imported("--version")
    assert _offenders(mods, _HEAVY + ("click", "sqlite3", "rich", "analyzer.store", "analyzer.output.report", "json",
                                      "analyzer.safe_text", "typing")) == []
    assert sorted(m for m in mods if m.startswith("analyzer.")) == ["analyzer.cli"]


def test_version_fast_path_prints_what_the_click_group_prints():
    from click.testing import CliRunner

    from analyzer.cli import cli

    through_click = CliRunner().invoke(cli, ["--version"])
    assert through_click.exit_code == 0
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == through_click.output == "capscan, version 0.1.0\n"
    # anything beside --version is click's: a usage error stays one
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--version", "--bogus"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--bogus" in proc.stderr


# The listings below hold a settled run (healthy bare metal): a stored downgrade or fixable verdict is a
# claim that today's rules decide again (analyzer.rules.today), which needs the facts model.
SETTLED_LOG = "metal/m2-2024-03-m2max.log"


def test_runs_and_db_stats_import_neither_the_facts_model_nor_sqlite_utils(tmp_path):
    db = tmp_path / "c.db"
    run_capscan("ingest", str(FIX / SETTLED_LOG), db=db, check=True)
    for argv in (["runs"], ["runs", "--json"], ["db", "stats"]):
        mods = _imported("--db", str(db), *argv)
        assert "analyzer.store.queries" in mods  # it did read the database
        assert _offenders(mods, _HEAVY) == [], argv  # (orjson: only for listings of 512 rows and more)


def test_commands_that_read_no_facts_never_import_pydantic(tmp_path):
    """pydantic (and the facts model built on it) is for commands that read a run's facts: the ones
    that list, count or describe what capscan knows never pay for it, in any output form."""
    db = tmp_path / "c.db"
    run_capscan("ingest", str(FIX / SETTLED_LOG), db=db, check=True)
    for argv in (["--version"], ["runs"], ["runs", "--json"], ["db", "stats"], ["db", "stats", "--json"],
                 ["formats"], ["formats", "--json"], ["sources"], ["sources", "--all", "--json"]):
        mods = _imported("--db", str(db), *argv) if argv != ["--version"] else _imported(*argv)
        assert _offenders(mods, ("pydantic", "pydantic_core", "analyzer.model")) == [], argv
    # and the check can see it: the commands that do read facts import it
    for argv in (["show", "1"], ["schema"]):
        assert "pydantic" in _imported("--db", str(db), *argv), argv


def test_show_of_a_run_that_is_no_guest_reads_no_label_and_predicts_nothing(tmp_path):
    """`show` is held to 1.3x its import floor (bench/run.py): it diagnoses in memory, so it imports the
    rules, but not the `regex` module (the parsers' and the speed ceilings' label patterns, compiled on
    first use in analyzer.plausible: only a guest's stored peers are held to them) nor `statistics` (a
    fixable run's predicted speed), the runs list's fields or the machine formats' writers. A guest's
    `show` reads its peers' labels, so it does import regex."""
    db = tmp_path / "c.db"
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), "ingest", str(FIX / SETTLED_LOG)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    mods = _imported("--db", str(db), "show", "last")
    assert {"analyzer.rules.diagnose", "analyzer.rules.catalog", "analyzer.plausible"} <= mods  # it did diagnose
    assert _offenders(mods, ("regex", "statistics", "analyzer.parsers", "analyzer.ingest", "sqlite_utils",
                             "textual", "analyzer.store.run_list", "analyzer.output.tabular")) == []
    # and the check can see it: a guest with its host's run stored holds that baseline to the ceilings
    guest = tmp_path / "g.db"
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(guest), "ingest",
                           str(FIX / "metal/m4-2026-08-host-m1-ultra.log"), str(FIX / "shims/lume-shim-apple9-on-m1.log")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "regex" in _imported("--db", str(guest), "show", "last")


# What the read-only listing commands import of capscan, exactly, and stdlib modules they have no
# use for (each costs milliseconds of the 120 ms that issue 13 allows on 100,000 runs): pathlib
# (urllib.parse, ipaddress: 5 ms; paths are strings there), json except for --json, csv, and the
# fleet commands beside `db serve`. The list's fields (store.run_list) are for a listing, and the
# machine formats' writers (output.tabular) for those formats: `db stats` for people needs neither.
_RUNS_MODULES = {"analyzer", "analyzer.cli", "analyzer.cli.app", "analyzer.cli.exits", "analyzer.cli.lazy",
                 "analyzer.cli.options", "analyzer.cli.output",
                 "analyzer.safe_text", "analyzer.store", "analyzer.store.db", "analyzer.store.errors",
                 "analyzer.store.migrations", "analyzer.store.paths", "analyzer.store.queries",
                 "analyzer.store.stored_text"}  # the output boundary for text read back (issue 24)
_WRITERS = {"analyzer.output", "analyzer.output.tabular"}
_UNUSED = ("pathlib", "urllib", "csv", "platformdirs", "tempfile", "unicodedata", "analyzer.cli.fleet")


def test_runs_and_db_stats_import_only_what_they_use(tmp_path):
    db = tmp_path / "c.db"
    run_capscan("ingest", str(FIX / SETTLED_LOG), db=db, check=True)
    listing = _RUNS_MODULES | _WRITERS | {"analyzer.cli.runs", "analyzer.output.display",
                                          "analyzer.output.run_columns", "analyzer.store.run_list",
                                          "analyzer.verdicts", "analyzer.pipeline", "analyzer.rules",
                                          "analyzer.rules.today", "analyzer.rules.version"}
    for argv, ours, unused in ((["runs"], listing, _UNUSED + ("json",)),
                               (["runs", "--json"], listing, _UNUSED),
                               (["db", "stats"], _RUNS_MODULES | {"analyzer.cli.db"}, _UNUSED + ("json",)),
                               (["db", "stats", "--json"], _RUNS_MODULES | _WRITERS | {"analyzer.cli.db"}, _UNUSED)):
        mods = _imported("--db", str(db), *argv)
        assert {m for m in mods if m == "analyzer" or m.startswith("analyzer.")} == ours, argv
        assert _offenders(mods, unused + _HEAVY) == [], argv


def test_runs_decides_a_stored_downgrade_with_the_rules_unless_this_capscan_stamped_it(tmp_path):
    """The other side of the listings above: a stored downgrade is a claim. One this installation stored
    (its stamp verifies) is listed as stored, without the rules; the same row without its stamp (a
    database from elsewhere, or an older capscan's) is decided again with today's rules, which read the
    facts."""
    import sqlite3

    db = tmp_path / "c.db"
    run_capscan("ingest", str(FIX / "metal/m4-2026-08-guest-stock.log"), db=db, check=True)
    mods = _imported("--db", str(db), "runs")
    assert "analyzer.store.stamp" in mods and _offenders(mods, _HEAVY) == []
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE diagnoses SET stamp = NULL")
    conn.close()
    assert {"analyzer.rules.diagnose", "analyzer.model"} <= _imported("--db", str(db), "runs")
